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
/* The worker's own uid/gid and the workload's (the reference image's `namzu`, spec C.7). */
#define NZ_DOCKER_WORKER_UID 1002
#define NZ_DOCKER_WORKLOAD_UID 1001
#define NZ_DOCKER_TMPFS_OPTIONS "nosuid,nodev,exec,mode=1777"
#define NZ_DOCKER_DEFAULT_NETWORK "none"
#define NZ_DOCKER_READY_POLL_MS_DEFAULT 100
#define NZ_DOCKER_RETIRE_DEADLINE_MS 5000
/* Spec B.1/B.3: the egress proxy sibling container. */
#define NZ_DOCKER_PROXY_NAME_PREFIX "namzu-egress-"
#define NZ_DOCKER_PROXY_ALIAS "namzu-egress"
#define NZ_DOCKER_PROXY_URL "http://namzu-egress:2025"
#define NZ_DOCKER_NO_PROXY "localhost,127.0.0.1"
#define NZ_DOCKER_DEFAULT_UPSTREAM_NETWORK "bridge"
#define NZ_DOCKER_PROXY_REMOVE_TIMEOUT_MS 5000

typedef struct
{
  const NzCreateOptions *opts;
  const char *name;        /* namzu-sandbox-<id> */
  const char *network;     /* the sandbox's only network */
  const char *runtime;     /* NULL (the daemon's default) or "runsc" */
  const char *run_as_user; /* NULL: the image's USER */
  gboolean host_port;      /* hostReachability == host-port: publish 127.0.0.1::2024 */
  gboolean proxy_env;      /* an egress proxy runs: HTTP(S)_PROXY, lower case, NO_PROXY */
  gint64 expires_at_ms;    /* > 0: NAMZU_SANDBOX_EXPIRES_AT_MS */
  gint64 idle_timeout_ms;  /* > 0: NAMZU_SANDBOX_IDLE_TIMEOUT_MS (else the worker's 300000) */
} NzDockerPlan;

typedef struct
{
  const char *name;             /* namzu-egress-<id> */
  const char *image;            /* egressProxyImage */
  const char *upstream_network; /* its route out (egressProxyUpstreamNetwork, "bridge") */
  const char *internal_network; /* the sandbox's network, attached second */
  const char *config_env;       /* NAMZU_EGRESS_PROXY_CONFIG or ..._V2, named without a value */
  GPtrArray *labels;            /* alternating key, value; the sandbox's labels */
} NzDockerProxyPlan;

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

/* Spec B.3 renderEgressProxyRunArgs: `run --detach --rm --name N --hostname namzu-egress
 * --network <upstream> <baseline> --read-only --tmpfs /tmp:... [--label k=v]... --env <CONFIG>
 * <image>`. Refuses no image, an upstream of 'none' or the internal network itself, a bad label
 * key. Returns a new array of char *. */
GPtrArray *nz_docker_build_proxy_argv (const NzDockerProxyPlan *plan, GError **error);

/* The second leg: `network connect --alias namzu-egress <internal> <proxy>`. */
GPtrArray *nz_docker_build_proxy_attach_argv (const char *internal_network,
                                              const char *proxy_name);

/* A sandbox on an --internal network loses its default route before its workload runs:
 * `run --rm --network container:<sandbox> --user 0:0 --cap-drop=ALL --cap-add=NET_ADMIN
 * --security-opt=no-new-privileges --read-only --entrypoint namzu-egress <image> isolate`
 * (docker 20.10 still routes an internal network's traffic to a gateway that drops it; the
 * sandbox, without NET_ADMIN, cannot put the route back). */
GPtrArray *nz_docker_build_isolate_argv (const char *sandbox_name, const char *image);

/* The image's ai.namzu.egress-proxy.config label as `docker image inspect` printed it (NULL:
 * inspect failed, e.g. no such image) must be an integer >= 2 for a V2 configuration. */
gboolean nz_docker_check_proxy_label (const char *image, const char *label_output,
                                      GError **error);

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
