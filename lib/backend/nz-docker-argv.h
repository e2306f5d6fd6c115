/* nz-docker-argv.h: the pure half of container:docker / container:runsc (spec B.2-B.5): the
 * `docker run` argv of the hardening baseline, the writable-rootfs set, the network refusal
 * matrix and argv redaction. No I/O, so a unit test pins every byte of it. */
#pragma once

#include <glib.h>

#include "nz-backend.h"

G_BEGIN_DECLS

/* Spec B.1 constants. */
#define NZ_DOCKER_WORKER_PORT 2024
#define NZ_DOCKER_NAME_PREFIX "namzu-sandbox-"
#define NZ_DOCKER_TOKEN_ENV "NAMZU_SANDBOX_TOKEN"
#define NZ_DOCKER_TMPFS_OPTIONS "nosuid,nodev,exec,mode=1777"
#define NZ_DOCKER_DEFAULT_NETWORK "none"
#define NZ_DOCKER_READY_POLL_MS_DEFAULT 100
#define NZ_DOCKER_RETIRE_DEADLINE_MS 5000

typedef struct
{
  const NzCreateOptions *opts;
  const char *name;        /* namzu-sandbox-<id> */
  const char *network;     /* the sandbox's only network */
  const char *runtime;     /* NULL (the daemon's default) or "runsc" */
  const char *run_as_user; /* NULL: the image's USER */
  gboolean host_port;      /* hostReachability == host-port: publish 127.0.0.1::2024 */
} NzDockerPlan;

/* `run --detach --rm --name ... <image>` in the spec's exact order, without the docker binary.
 * The token is never in it: the last --env is the valueless NAMZU_SANDBOX_TOKEN, which docker
 * fills from its own environment. Returns a new array of char * (not NULL-terminated), or NULL
 * with INVALID_ARGS for a label key, writable path or CPU bound the daemon would misread. */
GPtrArray *nz_docker_build_run_argv (const NzDockerPlan *plan, GError **error);

/* The --tmpfs set (spec B.2 renderWritableRootfsArgs): the four defaults the layout does not
 * mount, then the requested paths, de-duplicated; empty when the root filesystem is writable.
 * Returns a new array of char *, or NULL with INVALID_ARGS. */
GPtrArray *nz_docker_writable_paths (const NzCreateOptions *opts, GError **error);

/* cpuLimit as docker reads it: finite and > 0; rendered like JS String(n) ("1.5", "2"). */
gboolean nz_docker_check_cpus (double cpus, GError **error);
char *nz_docker_format_cpus (double cpus);

/* The daemon's answer to `docker network inspect --format {{.Internal}}`: only "true" (with
 * the CLI's trailing newline) is a boundary; anything unreadable is not. */
gboolean nz_docker_network_is_internal (const char *inspect_output);

/* Spec B.3 assertNetworkCarriesThePolicy, in its order, before anything starts. @internal is
 * the daemon's answer, never the network's name. */
gboolean nz_docker_check_network (const char *network, gboolean host_port, NzNetwork egress,
                                  gboolean internal, GError **error);

/* A copy of @argv (@n entries) with every --env value replaced by "<redacted>" in all four
 * spellings (`--env K=V`, `-e K=V`, `--env=K=V`, `-e=K=V`, `-eK=V`); valueless entries and
 * every other argument are kept. Returns the entries joined by spaces. */
char *nz_docker_redact_argv (const char *const *argv, gsize n);

/* 32 random bytes, base64url without padding (43 characters), as the reference mints. */
char *nz_docker_mint_token (GError **error);

G_END_DECLS
