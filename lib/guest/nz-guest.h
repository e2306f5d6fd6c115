/* nz-guest.h: the guest execution engine's shared state: limits, workspace jail, execution
 * registry, boot id and the retirement (fencing) latch. Wire-neutral: namzu-agent maps it to
 * frames, a future HTTP worker to NDJSON. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-exec-registry.h"
#include "nz-jail.h"

G_BEGIN_DECLS

/* Engine limits, named after the reference knobs that set them (spec B.2). */
typedef struct
{
  gint64 execution_lease_ttl_ms;    /* NAMZU_AGENT_EXECUTION_LEASE_TTL_MS, 30000 */
  gint64 execution_terminal_ttl_ms; /* NAMZU_AGENT_EXECUTION_TERMINAL_TTL_MS, 60000 */
  gint64 execution_retained_ttl_ms; /* NAMZU_AGENT_EXECUTION_RETAINED_TTL_MS, 600000 */
  gint64 max_tracked_executions;    /* NAMZU_AGENT_MAX_TRACKED_EXECUTIONS, 1024 */
  gint64 cancel_grace_ms;           /* NAMZU_AGENT_CANCEL_GRACE_MS, 250, 0 allowed */
  gint64 cancel_confirm_timeout_ms; /* NAMZU_AGENT_CANCEL_CONFIRM_TIMEOUT_MS, 5000 */
  gint64 execution_log_bytes;       /* NAMZU_AGENT_EXECUTION_LOG_BYTES, 1 MiB */
  gint64 max_retained_output_logs;  /* NAMZU_AGENT_MAX_RETAINED_OUTPUT_LOGS, 32 */
  gint64 max_timeout_ms;            /* NAMZU_SANDBOX_MAX_TIMEOUT_MS, 1800000 */
} NzGuestLimits;

#define NZ_GUEST_DEFAULT_TIMEOUT_MS 300000
#define NZ_GUEST_DEFAULT_MAX_OUTPUT_BYTES G_GINT64_CONSTANT (104857600)
#define NZ_GUEST_PROTOCOL_VERSION 2
/* Poll interval for "is the process group gone?" (spec B.2 "Poll intervals"). */
#define NZ_GUEST_GROUP_POLL_MS 25

typedef struct _NzGuest NzGuest;

/* Called once, when the engine fences itself; @message says why. */
typedef void (*NzGuestRetireFunc) (NzGuest *guest, const char *message, gpointer user_data);

struct _NzGuest
{
  NzGuestLimits limits;
  NzJail *jail;
  NzExecRegistry *registry;
  char *boot_id; /* guestBootId: minted once per process (spec C.16) */
  gboolean retiring;
  char *retire_reason;
  NzGuestRetireFunc retire_func;
  gpointer retire_data;
};

NzGuest *nz_guest_new (const NzGuestLimits *limits, const char *workspace, const char *read_roots,
                       const char *write_roots);
void nz_guest_free (NzGuest *guest);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzGuest, nz_guest_free)

void nz_guest_set_retire_func (NzGuest *guest, NzGuestRetireFunc func, gpointer user_data);

/* Fences the engine (spec C.4 retireAgent): set once and never lowered. */
void nz_guest_retire (NzGuest *guest, const char *message);
gboolean nz_guest_is_retiring (NzGuest *guest);

/* Wall-clock epoch milliseconds, the reference's Date.now(). */
gint64 nz_guest_now_ms (void);

/* The child environment (spec B.3): the agent's environment without NAMZU_AGENT_* and
 * NAMZU_SANDBOX_*, then @overlay's members rendered like JS String(). Returns a new strv. */
char **nz_guest_child_environ (JsonObject *overlay);

G_END_DECLS
