/* nz-worker-config.h: namzu-worker configuration, read once from the environment at startup
 * exactly like the reference worker (spec C.1), and the startup decision (spec C.2). */
#pragma once

#include <glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

/* Every refusal and fatal line starts with this, so host log scrapers keep working. */
#define NZ_WORKER_LOG_PREFIX "[namzu-sandbox-worker] "
#define NZ_WORKER_REFUSAL_PREFIX NZ_WORKER_LOG_PREFIX "refusing to start: "

typedef struct
{
  char *bind;       /* NAMZU_SANDBOX_BIND, default "0.0.0.0" */
  guint16 port;     /* NAMZU_SANDBOX_PORT, default 2024; 0 = ephemeral */
  char *token;      /* the credential as the bytes a header carries (latin-1), or NULL */
  gboolean auth;    /* a bearer token is required on every route but GET /healthz */
  char *workspace;  /* NAMZU_SANDBOX_WORKSPACE, default /workspace */
  char *read_roots; /* raw NAMZU_SANDBOX_READ_ROOTS or NULL */
  char *write_roots;
  gint64 max_body_bytes;  /* NAMZU_SANDBOX_MAX_BODY_BYTES, 8 MiB */
  gint64 idle_timeout_ms; /* NAMZU_SANDBOX_IDLE_TIMEOUT_MS, 300000; <= 0 disables */
  /* NAMZU_SANDBOX_EXPIRES_AT_MS (namzu addition): wall-clock ms since the epoch after which
   * the worker exits with NZ_LIFETIME_EXIT_STATUS; unset or empty = none. */
  gint64 expires_at_ms;
  gint64 poison_exit_delay_ms; /* NAMZU_SANDBOX_POISON_EXIT_DELAY_MS (namzu addition), 50 */
  /* Pre-authentication bounds (namzu additions, the agent's defaults, spec A.4): connections
   * that have not yet sent an authorised request's headers, the oldest evicted past the
   * limit; each must do so within the deadline from accept, and may not fall silent for the
   * idle timeout in between (nz-worker-preauth.h). */
  gint64 max_preauth_connections; /* NAMZU_SANDBOX_MAX_PREAUTH_CONNECTIONS, 64 */
  gint64 preauth_deadline_ms;     /* NAMZU_SANDBOX_PREAUTH_DEADLINE_MS, 10000 */
  gint64 preauth_idle_timeout_ms; /* NAMZU_SANDBOX_PREAUTH_IDLE_TIMEOUT_MS, 10000 */
  NzGuestLimits limits;
} NzWorkerConfig;

/* Reads every variable and applies the startup table. On refusal returns NULL and sets
 * @error to the reason (without the prefix); the caller prints it after
 * NZ_WORKER_REFUSAL_PREFIX and exits 1 before any socket exists. */
NzWorkerConfig *nz_worker_config_new_from_env (GError **error);
void nz_worker_config_free (NzWorkerConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzWorkerConfig, nz_worker_config_free)

/* isLoopbackBind: trimmed, one '[' / ']' stripped, lowercased; localhost, ::1 or 127.*. */
gboolean nz_worker_bind_is_loopback (const char *bind);

/* NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED: only 1|true|yes|on, any case, untrimmed. */
gboolean nz_worker_escape_is_on (const char *value);

/* The credential from the presented Authorization header value (spec C.3): trimmed, then
 * `Bearer` (any case), one or more spaces, the rest. NULL when it does not match. New string. */
char *nz_worker_presented_token (const char *header);

G_END_DECLS
