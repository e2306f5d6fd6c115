/* nz-agent-config.h: namzu-agent configuration, read once from the environment at startup
 * (spec B.1, B.2). No live reload: every knob is fixed for the life of the process. */
#pragma once

#include <glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_AGENT_LISTEN_UNIX,     /* NAMZU_AGENT_UNIX_PATH */
  NZ_AGENT_LISTEN_VSOCK_FD, /* NAMZU_AGENT_VSOCK_PORT: listen on inherited fd 3 */
  NZ_AGENT_LISTEN_TCP,      /* NAMZU_AGENT_TCP_PORT on 0.0.0.0 */
  NZ_AGENT_LISTEN_FD,       /* NAMZU_AGENT_LISTEN_FD: an inherited listening socket (additive) */
  NZ_AGENT_LISTEN_EMBEDDED, /* never listens: its embedder (namzu-worker) hands it calls */
} NzAgentListenMode;

/* The fd a vsock bridge hands over (spec B.2). */
#define NZ_AGENT_VSOCK_FD 3

typedef struct
{
  NzAgentListenMode listen_mode;
  char *unix_path;
  char *vsock_port; /* documentation only: the agent listens on fd 3 */
  guint16 tcp_port; /* 0 = ephemeral */
  int listen_fd;    /* NAMZU_AGENT_LISTEN_FD */

  char *bind_token;       /* preset token; NULL when unset (set-but-empty is refused) */
  gboolean require_token; /* trust-on-first-use */

  gint64 max_frame_bytes;
  gint64 max_preauth_frame_bytes; /* clamped to <= max_frame_bytes */
  /* Pre-auth pool knobs (spec A.4.2), enforced by nz-preauth in gated modes only. */
  gint64 max_preauth_connections;
  gint64 max_preauth_buffer_bytes; /* effective max(value, max_preauth_frame_bytes) */
  gint64 preauth_idle_timeout_ms;
  gint64 preauth_deadline_ms;
  gint64 refusal_flush_grace_ms;

  NzGuestLimits limits;
  char *workspace;
  char *read_roots;  /* raw NAMZU_SANDBOX_READ_ROOTS or NULL */
  char *write_roots; /* raw NAMZU_SANDBOX_WRITE_ROOTS or NULL */
  gboolean quiesce_owned_only; /* NAMZU_AGENT_QUIESCE_SCOPE === "owned-sessions" */
  char *flush_command;         /* NAMZU_AGENT_FLUSH_COMMAND or NULL */
  char *reseed_hook;           /* NAMZU_AGENT_RESEED_HOOK or NULL */
  /* NAMZU_AGENT_SANDBOX_ENV (a namzu extension): the sandbox's environment, "NAME=VALUE"
   * entries every child gets under its request's env (nz_guest_set_sandbox_environ); NULL
   * when unset. */
  char **sandbox_env;
  /* Lifetime (namzu additions, nz-lifetime.h): 0 = none. */
  gint64 expires_at_ms;   /* NAMZU_AGENT_EXPIRES_AT_MS, wall-clock ms since the epoch */
  gint64 idle_timeout_ms; /* NAMZU_AGENT_IDLE_TIMEOUT_MS */
} NzAgentConfig;

/* Reads and validates every variable. The error message is the reference's exact text, e.g.
 * "agent: none of NAMZU_AGENT_UNIX_PATH, NAMZU_AGENT_VSOCK_PORT or NAMZU_AGENT_TCP_PORT set". */
NzAgentConfig *nz_agent_config_new_from_env (GError **error);
/* The knobs alone, for an agent server embedded in another server that authenticated the
 * caller already (namzu-worker's /v1/agent): no listen mode, no credential. */
NzAgentConfig *nz_agent_config_new_embedded (GError **error);
void nz_agent_config_free (NzAgentConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentConfig, nz_agent_config_free)

/* The credential gate is active iff a preset or trust-on-first-use token is configured. */
gboolean nz_agent_config_is_gated (const NzAgentConfig *config);

G_END_DECLS
