/* nz-exec-registry.h: execution records, leases, reservation and idempotency (spec C.2).
 * Pure bookkeeping: no processes, no I/O, time passed in, so it is unit-tested directly. */
#pragma once

#include <glib.h>

#include "nz-output-log.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_EXEC_STATE_RESERVED,
  NZ_EXEC_STATE_STARTING,
  NZ_EXEC_STATE_RUNNING,
  NZ_EXEC_STATE_EXITED,
  NZ_EXEC_STATE_TERMINAL,
} NzExecState;

typedef enum
{
  NZ_EXEC_OUTCOME_NONE,
  NZ_EXEC_OUTCOME_COMPLETED,
  NZ_EXEC_OUTCOME_FAILED,
  NZ_EXEC_OUTCOME_CANCELLED,
} NzExecOutcome;

typedef enum
{
  NZ_EXEC_CAUSE_NONE,
  NZ_EXEC_CAUSE_CANCELLED,
  NZ_EXEC_CAUSE_TIMEOUT,
  NZ_EXEC_CAUSE_QUIESCED,
} NzExecCause;

typedef struct
{
  int exit_code; /* -1 when a signal ended the leader */
  int signal;    /* 0 when none */
  gboolean timed_out;
  gint64 duration_ms;
  gboolean stdout_truncated;
  gboolean stderr_truncated;
} NzExecResult;

typedef struct _NzExecProc NzExecProc; /* process state, owned by nz-exec */

typedef struct
{
  gint ref_count;
  char *id; /* NULL for an untracked execution (execute without executionId) */
  NzExecState state;
  gint64 expires_at; /* epoch ms; 0 = no expiry */
  gint64 started_at; /* epoch ms; 0 = not started */
  gboolean started;
  NzExecOutcome outcome;
  gboolean has_result;
  NzExecResult result;
  char *error;
  NzExecCause cause;
  gboolean has_log;   /* a retained output log exists (retainOutput) */
  NzOutputLog *log;   /* the retained ring, or NULL; kept (emptied) when discarded */
  GPtrArray *observers; /* NzExecObserver*: live attachments, told of output and the end */
  NzExecProc *proc;   /* live process state, owned by nz-exec; NULL before spawn and after */
  gpointer terminate; /* the in-flight termination attempt, owned by nz-exec */
} NzExecRecord;

NzExecRecord *nz_exec_record_new (const char *id);

/* A live attachment (spec A.6.5): told of each retained chunk and, once, of the end. */
typedef struct
{
  void (*output) (NzExecRecord *rec, int stream, guint64 offset, const guint8 *data, gsize len,
                  gpointer user_data);
  /* The record became terminal; the observer is removed right after. */
  void (*finished) (NzExecRecord *rec, gpointer user_data);
} NzExecObserverFuncs;

void nz_exec_record_add_observer (NzExecRecord *rec, const NzExecObserverFuncs *funcs,
                                  gpointer user_data);
/* Removes the observer added with @user_data (no-op when absent). */
void nz_exec_record_remove_observer (NzExecRecord *rec, gpointer user_data);
/* Appends a chunk to the retained log (if any) and tells every observer. */
void nz_exec_record_retain_output (NzExecRecord *rec, int stream, const guint8 *data, gsize len);
NzExecRecord *nz_exec_record_ref (NzExecRecord *rec);
void nz_exec_record_unref (NzExecRecord *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzExecRecord, nz_exec_record_unref)

const char *nz_exec_state_to_string (NzExecState state);
const char *nz_exec_outcome_to_string (NzExecOutcome outcome);
gboolean nz_exec_state_is_terminal (NzExecState state);

/* ^exec_<RFC-4122 uuid>$: 8-4-4-4-12 hex, version 1-5, variant 8/9/a/b, any case. */
gboolean nz_exec_id_is_valid (const char *id);
/* namzu-worker's own id pattern, looser than the client's: ^exec_[0-9a-f-]{36}$ (spec C). */
gboolean nz_exec_worker_id_is_valid (const char *id);

typedef struct _NzExecRegistry NzExecRegistry;

NzExecRegistry *nz_exec_registry_new (gint64 max_tracked, gint64 lease_ttl_ms,
                                      gint64 terminal_ttl_ms, gint64 retained_ttl_ms);
void nz_exec_registry_free (NzExecRegistry *reg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzExecRegistry, nz_exec_registry_free)

guint nz_exec_registry_size (NzExecRegistry *reg);
/* Borrowed, or NULL. */
NzExecRecord *nz_exec_registry_lookup (NzExecRegistry *reg, const char *id);

/* Calls @func for every tracked record (do not add or remove records from @func). */
typedef void (*NzExecRecordFunc) (NzExecRecord *rec, gpointer user_data);
void nz_exec_registry_foreach (NzExecRegistry *reg, NzExecRecordFunc func, gpointer user_data);

/* Deletes reserved and terminal records whose lease or retention has run out. */
void nz_exec_registry_prune (NzExecRegistry *reg, gint64 now_ms);

/* Reserve (spec A.6.2 steps 4-6): a known @id returns its record with *@out_existing TRUE;
 * otherwise makes room (evicting terminal records, oldest expiry first) and creates a
 * `reserved` record, minting exec_<uuid> when @id is NULL. Full -> NZ_ERROR_BUSY
 * "execution_capacity". @id must already be valid. Returns a borrowed record. */
NzExecRecord *nz_exec_registry_reserve (NzExecRegistry *reg, const char *id, gint64 now_ms,
                                        gboolean *out_existing, GError **error);

/* rememberTerminal: state terminal, outcome/result/error stored, retention clock started.
 * Works for untracked records too (they just are not in the table). @result may be NULL. */
void nz_exec_registry_remember_terminal (NzExecRegistry *reg, NzExecRecord *rec,
                                         NzExecOutcome outcome, const NzExecResult *result,
                                         const char *error, gint64 now_ms);

/* makeRoomForRetainedOutput (spec C.5): below @max_logs live logs is fine; otherwise the logs
 * of terminal records are discarded (oldest expiry first; the records and their results stay).
 * FALSE when running records hold every slot (retained_output_capacity). */
gboolean nz_exec_registry_make_room_for_log (NzExecRegistry *reg, gint64 max_logs);

/* Moves a reserved record to starting (lease cleared, startedAt set). */
void nz_exec_registry_mark_starting (NzExecRegistry *reg, NzExecRecord *rec, gint64 now_ms);

G_END_DECLS
