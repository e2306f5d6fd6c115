/* nz-docker.h: the container:docker and container:runsc backends (spec B): namzu-worker in a
 * container started by the docker CLI with the hardening baseline (nz-docker-argv.h), reached
 * over HTTP on a loopback-published port (or on its docker network), with a per-instance
 * token that never appears in an argv. container:runsc is the same with `--runtime runsc`. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* $NAMZU_DOCKER, else `docker` on PATH. */
char *nz_docker_find_binary (GError **error);

/* Runs `<docker> <args...>` (stdin /dev/null), with NAMZU_SANDBOX_TOKEN=@token added to its
 * environment when @token is set, killed after @timeout_ms (0 = no bound). Returns its stdout,
 * trimmed. A non-zero exit is "<docker> <argv, --env values redacted> exited <n>: <stderr>". */
char *nz_docker_run (const char *docker, const char *const *args, gsize n_args,
                     const char *token, guint timeout_ms, GError **error);

/* The same with @env_name=@env_value (if @env_value is set) in docker's environment: the
 * token, or the egress proxy's configuration, which holds credentials. */
char *nz_docker_run_env (const char *docker, const char *const *args, gsize n_args,
                         const char *env_name, const char *env_value, guint timeout_ms,
                         GError **error);

/* The runtimes the daemon has registered (`docker info --format '{{json .Runtimes}}'`).
 * Returns a new NULL-terminated array. */
char **nz_docker_list_runtimes (const char *docker, GError **error);

/* Reads the docker fields of the reference config's `backend` object into @opts; each refusal
 * is appended to @reasons as "backend.<field>: ...". No I/O. */
/* The NzBackend layout hook: the outputs bind is collected (the worker's workspace), read from
 * the recorded mounts ({label:"outputs", containerPath}), else rootDir (the worker's root is
 * the outputs path, spec A.4), else the spec default /mnt/user-data/outputs. */
void nz_docker_layout (NzHandle *h, NzLayout *out);

extern const char *const nz_docker_config_keys[];
void nz_docker_parse_config (JsonObject *backend, NzCreateOptions *opts, GPtrArray *reasons);

/* Tears the sandbox down within the spec's 5 s retirement deadline (after a cancellation the
 * worker could not confirm): the container is removed, checked, and the state dropped. */
gboolean nz_docker_retire (NzHandle *h, GError **error);

/* The NzBackend hooks. */
gboolean nz_docker_check (const NzCreateOptions *opts, GError **error);
NzHandle *nz_docker_create (const NzCreateOptions *opts, GError **error);
gboolean nz_docker_destroy (NzHandle *h, GError **error);
NzSandboxStatus nz_docker_status (NzHandle *h, guint timeout_ms);
void nz_docker_describe (NzHandle *h, JsonObject *public_handle);

G_END_DECLS
