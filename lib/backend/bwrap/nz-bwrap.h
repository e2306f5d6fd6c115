/* nz-bwrap.h: the container:bwrap backend: a bubblewrap namespace sandbox with no daemon and
 * no image, running namzu-agent on a unix socket in the sandbox's state directory. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* Inside the sandbox. */
#define NZ_BWRAP_UID 1001 /* the reference image's `namzu` user */
#define NZ_BWRAP_HOSTNAME "namzu"
#define NZ_BWRAP_HOME "/home/namzu"
#define NZ_BWRAP_WORKSPACE "/workspace"
/* Read-only: only the egress proxy's socket lives there. The agent's socket is never in the
 * sandbox's view: the host binds it and hands bwrap the listening fd. */
#define NZ_BWRAP_SOCK_DIR "/run/namzu"
/* The agent's own uid inside the user namespace (privsep, when namzu-create is root) and the
 * host uid it maps to: an id no account has, so nothing on the host shares it. */
#define NZ_BWRAP_AGENT_UID 0
#define NZ_BWRAP_AGENT_HOST_UID 2000000000
#define NZ_BWRAP_INSTALLED_AGENT "/usr/libexec/namzu/namzu-agent"
#define NZ_BWRAP_BOUND_AGENT "/opt/namzu/bin/namzu-agent"
/* Fixed descriptor numbers bwrap is told about. */
#define NZ_BWRAP_SECCOMP_FD 3
#define NZ_BWRAP_STATUS_FD 4
/* ... and the agent: its listening socket, the token pipe, and the user namespace to join. */
#define NZ_BWRAP_LISTEN_FD 5
#define NZ_BWRAP_TOKEN_FD 6
#define NZ_BWRAP_USERNS_FD 7

/* What the argv builder needs; no I/O happens in the builder except reading the host's
 * top-level directories (is /lib a symlink?) and /etc permissions under @host_root. */
typedef struct
{
  const char *bwrap;            /* path of the bwrap binary */
  const NzCreateOptions *opts;
  const char *agent_host_path;  /* namzu-agent on the host */
  const char *sock_dir;         /* host dir bound read-only at /run/namzu */
  const char *host_root;        /* "/" (tests may point elsewhere) */
  gboolean privsep;             /* join the two-uid namespace at NZ_BWRAP_USERNS_FD */
} NzBwrapPlan;

/* The full bwrap argv (NULL-terminated GPtrArray of char *). The token is NOT in it, nor in
 * the environment: it travels in a pipe (NZ_BWRAP_TOKEN_FD) the agent reads once. */
GPtrArray *nz_bwrap_build_argv (const NzBwrapPlan *plan);
/* The sandbox's whole environment (bwrap passes its own environment to the agent); with
 * @privsep the agent's and the workload's ids. */
char **nz_bwrap_build_envp (const NzCreateOptions *opts, gboolean privsep);
/* The agent's workspace: the outputs mount when the layout has one (spec B.4), else /workspace. */
const char *nz_bwrap_workspace (const NzCreateOptions *opts);
/* Adds the agent's lifetime knobs (NAMZU_AGENT_EXPIRES_AT_MS, _IDLE_TIMEOUT_MS) for @h. */
char **nz_bwrap_lifetime_envp (char **envp, const NzHandle *h);

/* $NAMZU_BWRAP, else `bwrap` on PATH. A missing one is a one-line error with the way out. */
char *nz_bwrap_find_binary (GError **error);
/* $NAMZU_AGENT_BIN, else next to the running executable (build tree), else installed. */
char *nz_bwrap_find_agent (GError **error);

/* The NzBackend hooks. */
gboolean nz_bwrap_check (const NzCreateOptions *opts, GError **error);

/* The reference config's backend.* keys container:bwrap reads, and its parser of them
 * (nz-bwrap-config.c; the NzBackend config_keys / parse_config). */
extern const char *const nz_bwrap_config_keys[];
void nz_bwrap_parse_config (JsonObject *backend, NzCreateOptions *opts, GPtrArray *reasons);
NzHandle *nz_bwrap_create (const NzCreateOptions *opts, GError **error);
gboolean nz_bwrap_destroy (NzHandle *h, GError **error);
NzSandboxStatus nz_bwrap_status (NzHandle *h, guint timeout_ms);
void nz_bwrap_describe (NzHandle *h, JsonObject *public_handle);

G_END_DECLS
