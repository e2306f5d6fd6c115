/* nz-exec.h: running one command for the engine (spec C.3, C.4): spawn in a new session and
 * process group, per-stream output with clipping, timeout, and termination with confirmation
 * and fencing. Output and completion come back through callbacks; no wire framing here. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-exec-registry.h"
#include "nz-guest.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_EXEC_STREAM_STDOUT,
  NZ_EXEC_STREAM_STDERR,
} NzExecStream;

typedef struct
{
  const char *command;
  const char *const *args; /* NULL-terminated, without argv[0]; may be NULL */
  const char *cwd;         /* already jailed */
  char **envp;             /* child environment (nz_guest_child_environ) */
  GBytes *stdin_data;      /* NULL: stdin is /dev/null */
  gint64 timeout_ms;       /* > 0 */
  gint64 max_output_bytes; /* per stream; bytes beyond are dropped and flagged */
} NzExecSpec;

typedef struct
{
  /* One raw pipe chunk (already clipped to the stream's budget; never empty). */
  void (*output) (NzExecRecord *rec, NzExecStream stream, const guint8 *data, gsize len,
                  gpointer user_data);
  /* Exactly once. @result on success, else @error_message. @fenced: the close handler found
   * an un-owned live process group; the engine retired and no terminal event may be sent. */
  void (*finished) (NzExecRecord *rec, const NzExecResult *result, const char *error_message,
                    gboolean fenced, gpointer user_data);
} NzExecCallbacks;

/* Makes this process a child subreaper and reaps every child it gets, including orphans it
 * inherits: on these hosts PID 1 reaps slowly, and a lingering zombie keeps a process group
 * "alive" forever. Idempotent; call once before the first nz_exec_start(). */
gboolean nz_exec_reaper_install (GError **error);

/* The reaper above reaps every child, so g_child_watch_add() cannot be used for helpers the
 * agent spawns itself (flush, reseed hook; terminals and detached programs of the other lane):
 * register them here instead. @func runs once, from the main loop, with the wait status.
 * Requires nz_exec_reaper_install(). */
typedef void (*NzExecChildFunc) (GPid pid, int wait_status, gpointer user_data);
void nz_exec_watch_child (GPid pid, NzExecChildFunc func, gpointer user_data);
/* Forgets a watch (the child is still reaped, silently). */
void nz_exec_unwatch_child (GPid pid);

/* Starts @rec (state reserved, or an untracked record): mkdir -p cwd, spawn, state running.
 * On failure the record is terminal `failed` and the error message is the wire string
 * ("mkdir_failed: …", "spawn nosuch ENOENT"). On success @callbacks fire later, on the
 * thread-default main context; @user_data is released with @destroy after `finished`. */
gboolean nz_exec_start (NzGuest *guest, NzExecRecord *rec, const NzExecSpec *spec,
                        const NzExecCallbacks *callbacks, gpointer user_data,
                        GDestroyNotify destroy, GError **error);

/* Called with NULL @error_message once termination is confirmed (the record is terminal),
 * otherwise with the reason it could not be confirmed. */
typedef void (*NzExecTerminateFunc) (NzExecRecord *rec, const char *error_message,
                                     gpointer user_data);

/* ensureTermination (spec C.4): SIGTERM the group, grace, SIGKILL, confirm; concurrent calls
 * share one attempt. Does not retire the engine itself; callers decide. */
void nz_exec_terminate (NzGuest *guest, NzExecRecord *rec, NzExecCause cause,
                        NzExecTerminateFunc func, gpointer user_data);

/* Registers the execution registry as a process provider of @guest (nz_guest_new does it):
 * each tracked execution's process group is an owned kernel session (spec C.13). */
void nz_exec_add_process_provider (NzGuest *guest);

/* Node's message for a failed spawn of @command with errno @errsv: "spawn <command> <CODE>".
 * New string. */
char *nz_exec_spawn_error_message (const char *command, int errsv);

/* "SIGTERM" for SIGTERM. */
const char *nz_exec_signal_name (int signum);

G_END_DECLS
