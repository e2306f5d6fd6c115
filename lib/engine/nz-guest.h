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
  /* Sessions (spec C.10). */
  gint64 max_sessions;                    /* NAMZU_AGENT_MAX_SESSIONS, 16 */
  gint64 session_log_bytes;               /* NAMZU_AGENT_SESSION_LOG_BYTES, 1 MiB */
  gint64 session_terminal_ttl_ms;         /* NAMZU_AGENT_SESSION_TERMINAL_TTL_MS, 600000 */
  gint64 session_kill_confirm_timeout_ms; /* NAMZU_AGENT_SESSION_KILL_CONFIRM_TIMEOUT_MS, 5000 */
  /* Files, quiesce, flush and shutdown (spec B.2). */
  gint64 read_file_range_bytes;        /* NAMZU_AGENT_READ_FILE_RANGE_BYTES, 1 MiB */
  gint64 read_file_stream_chunk_bytes; /* NAMZU_AGENT_READ_FILE_STREAM_CHUNK_BYTES, 256 KiB */
  gint64 quiesce_grace_ms;    /* NAMZU_AGENT_QUIESCE_GRACE_MS, 1000; min(v, CANCEL_CONFIRM-1) */
  gint64 quiesce_deadline_ms; /* NAMZU_AGENT_QUIESCE_DEADLINE_MS, 20000 */
  gint64 quiesce_max_rounds;  /* NAMZU_AGENT_QUIESCE_MAX_ROUNDS, 8 */
  gint64 quiesce_settle_ms;   /* NAMZU_AGENT_QUIESCE_SETTLE_MS, 1000 */
  gint64 flush_timeout_ms;    /* NAMZU_AGENT_FLUSH_TIMEOUT_MS, 10000 */
  gint64 shutdown_deadline_ms; /* NAMZU_AGENT_SHUTDOWN_DEADLINE_MS, 15000 */
} NzGuestLimits;

#define NZ_GUEST_DEFAULT_TIMEOUT_MS 300000
#define NZ_GUEST_DEFAULT_MAX_OUTPUT_BYTES G_GINT64_CONSTANT (104857600)
#define NZ_GUEST_PROTOCOL_VERSION 2
/* Poll interval for "is the process group gone?" (spec B.2 "Poll intervals"). */
#define NZ_GUEST_GROUP_POLL_MS 25

typedef struct _NzGuest NzGuest;

/* Something that owns workload processes: the execution registry (built in) and the session
 * registry register one each. Quiesce asks every provider, so a narrowed (`owned-sessions`)
 * scan reaches exactly what the agent started (spec C.13). */
typedef struct
{
  /* Appends the kernel session / process-group ids (pid_t as gint) this provider owns. */
  void (*collect_owned) (NzGuest *guest, GArray *ids, gpointer user_data);
  /* Marks its running work as being quiesced, before any signal (may be NULL). */
  void (*mark_quiesced) (NzGuest *guest, gpointer user_data);
  /* TRUE while a process it tracks has not been recorded as closed yet (may be NULL). */
  gboolean (*unsettled) (NzGuest *guest, gpointer user_data);
} NzGuestProcessProvider;

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
  struct _NzSessionRegistry *sessions; /* nz-sessions.h; created on first use */
  /* The quiesce_in_progress gate (spec A.5): up while an explicit quiesce runs, and forever
   * once the SIGTERM handler started. */
  guint quiesce_in_flight;
  gboolean terminating;
  gboolean quiesce_owned_only; /* NAMZU_AGENT_QUIESCE_SCOPE=owned-sessions */
  char *flush_command;         /* NAMZU_AGENT_FLUSH_COMMAND or NULL */
  GArray *providers;           /* ProviderEntry, see nz-guest.c */
  GHashTable *parts_in_flight; /* write-file parts: real temp path -> TRUE (nz-fileparts) */
};

NzGuest *nz_guest_new (const NzGuestLimits *limits, const char *workspace, const char *read_roots,
                       const char *write_roots);
void nz_guest_free (NzGuest *guest);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzGuest, nz_guest_free)

void nz_guest_set_retire_func (NzGuest *guest, NzGuestRetireFunc func, gpointer user_data);

/* Fences the engine (spec C.4 retireAgent): set once and never lowered. */
void nz_guest_retire (NzGuest *guest, const char *message);
gboolean nz_guest_is_retiring (NzGuest *guest);

/* TRUE while process-starting ops must be refused quiesce_in_progress. */
gboolean nz_guest_is_quiescing (NzGuest *guest);

/* Registers a process provider (see NzGuestProcessProvider); @provider must outlive @guest.
 * The session registry registers itself here. */
void nz_guest_add_process_provider (NzGuest *guest, const NzGuestProcessProvider *provider,
                                    gpointer user_data);
/* Every owned kernel session id, from every provider. Returns a new GArray of gint. */
GArray *nz_guest_collect_owned_sessions (NzGuest *guest);
void nz_guest_mark_quiesced (NzGuest *guest);
gboolean nz_guest_is_unsettled (NzGuest *guest);

/* Wall-clock epoch milliseconds, the reference's Date.now(). */
gint64 nz_guest_now_ms (void);

/* The child environment (spec B.3): the agent's environment without NAMZU_AGENT_* and
 * NAMZU_SANDBOX_*, then the sandbox's environment (nz_guest_set_sandbox_environ, its
 * NAMZU_AGENT_* and NAMZU_SANDBOX_* entries skipped), then @overlay's members rendered like JS
 * String(), which win. Returns a new strv. */
char **nz_guest_child_environ (JsonObject *overlay);
/* The sandbox's environment ("NAME=VALUE" entries, copied; NULL clears it), applied to every
 * child from then on. Process-wide: call it at startup, before any child is spawned. */
void nz_guest_set_sandbox_environ (const char *const *env);

G_END_DECLS
