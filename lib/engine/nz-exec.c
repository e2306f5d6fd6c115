#define _GNU_SOURCE
#include "nz-exec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-errors.h"
#include "nz-autofd.h"
#include "nz-jail.h"
#include "nz-jstext.h"
#include "nz-spawn.h"

#define READ_CHUNK_BYTES 65536

struct _NzExecProc
{
  NzGuest *guest;
  NzExecRecord *rec; /* ref */
  GPid pid;          /* leader; also the pgid and sid (setsid in the child) */
  int out_fd;
  int err_fd;
  guint out_watch;
  guint err_watch;
  int stdin_fd;
  GBytes *stdin_data;
  gsize stdin_off;
  guint stdin_watch;
  gboolean exited;
  int wait_status;
  gint64 max_output;
  gint64 out_sent;
  gint64 err_sent;
  gboolean out_truncated;
  gboolean err_truncated;
  guint timeout_id;
  gint64 start_us; /* monotonic */
  gboolean closing;
  guint close_timer;
  gint64 close_deadline_us;
  NzExecCallbacks callbacks;
  gpointer user_data;
  GDestroyNotify destroy;
};

typedef enum
{
  TERM_GRACE,
  TERM_KILL,
  TERM_WAIT_DONE,
} TermPhase;

typedef struct
{
  NzExecTerminateFunc func;
  gpointer user_data;
} TermWaiter;

typedef struct
{
  NzGuest *guest;
  NzExecRecord *rec; /* ref */
  GPid pgid;
  TermPhase phase;
  gint64 deadline_us;
  gint64 grace_end_us;
  guint timer;
  GArray *waiters; /* TermWaiter */
} TermOp;

/* ---- reaper ---- */

static int reaper_pipe[2] = { -1, -1 };
static GHashTable *reaper_procs; /* pid -> NzExecProc* (borrowed) */
static GHashTable *reaper_watches; /* pid -> ChildWatch* (owned) */

typedef struct
{
  NzExecChildFunc func;
  gpointer user_data;
} ChildWatch;

static void proc_on_exit (NzExecProc *p, int status);

static void
reap_now (void)
{
  int status;
  pid_t pid;

  /* Reaps orphans we inherit as subreaper too: a zombie keeps its group "alive". */
  while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
    {
      NzExecProc *p
          = reaper_procs != NULL ? g_hash_table_lookup (reaper_procs, GINT_TO_POINTER (pid)) : NULL;

      if (p != NULL)
        {
          g_hash_table_remove (reaper_procs, GINT_TO_POINTER (pid));
          proc_on_exit (p, status);
        }
      else if (reaper_watches != NULL
               && g_hash_table_contains (reaper_watches, GINT_TO_POINTER (pid)))
        {
          ChildWatch *w = g_hash_table_lookup (reaper_watches, GINT_TO_POINTER (pid));
          ChildWatch copy = *w;

          g_hash_table_remove (reaper_watches, GINT_TO_POINTER (pid));
          copy.func (pid, status, copy.user_data);
        }
      else
        g_debug ("reaped inherited pid %d", (int)pid);
    }
}

static void
sigchld_handler (int signum)
{
  int errsv = errno;
  ssize_t r G_GNUC_UNUSED;

  r = write (reaper_pipe[1], "c", 1);
  errno = errsv;
}

static gboolean
reaper_readable (int fd, GIOCondition cond, gpointer user_data)
{
  char buf[256];

  while (read (fd, buf, sizeof buf) > 0)
    ;
  reap_now ();
  return G_SOURCE_CONTINUE;
}

gboolean
nz_exec_reaper_install (GError **error)
{
  struct sigaction sa;

  if (reaper_procs != NULL)
    return TRUE;
  if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return nz_throw_errno_prefix (error, "prctl(PR_SET_CHILD_SUBREAPER)");
  if (!g_unix_open_pipe (reaper_pipe, FD_CLOEXEC, error))
    return FALSE;
  if (!g_unix_set_fd_nonblocking (reaper_pipe[0], TRUE, error)
      || !g_unix_set_fd_nonblocking (reaper_pipe[1], TRUE, error))
    return FALSE;
  reaper_procs = g_hash_table_new (g_direct_hash, g_direct_equal);
  reaper_watches = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = sigchld_handler;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigemptyset (&sa.sa_mask);
  if (sigaction (SIGCHLD, &sa, NULL) != 0)
    return nz_throw_errno_prefix (error, "sigaction(SIGCHLD)");
  g_unix_fd_add (reaper_pipe[0], G_IO_IN, reaper_readable, NULL);
  return TRUE;
}

void
nz_exec_watch_child (GPid pid, NzExecChildFunc func, gpointer user_data)
{
  ChildWatch *w = g_new0 (ChildWatch, 1);

  g_return_if_fail (reaper_watches != NULL && pid > 0 && func != NULL);
  w->func = func;
  w->user_data = user_data;
  g_hash_table_replace (reaper_watches, GINT_TO_POINTER (pid), w);
  /* It may have exited already and be waiting as a zombie. */
  reap_now ();
}

void
nz_exec_unwatch_child (GPid pid)
{
  if (reaper_watches != NULL)
    g_hash_table_remove (reaper_watches, GINT_TO_POINTER (pid));
}

/* The group is alive iff kill(-pgid, 0) succeeds or fails with anything but ESRCH. Nothing is
 * reaped first, as the reference checks right after signalling (spec C.4): a member that died
 * of the signal but is not reaped yet still counts, so a zero confirmation window never
 * confirms, whichever way the race between its death and our check goes. The main loop's
 * reaper (and the next poll) sees it gone. */
static gboolean
group_alive (GPid pgid)
{
  /* Never probe or signal pgid 0/1: -1 would mean "every process we may signal". */
  if (pgid <= 1)
    return FALSE;
  return kill (-pgid, 0) == 0 || errno != ESRCH;
}

const char *
nz_exec_signal_name (int signum)
{
  static char names[65][16];
  const char *abbrev;

  if (signum <= 0 || signum > 64)
    return "SIGUNKNOWN";
  if (names[signum][0] == '\0')
    {
      abbrev = sigabbrev_np (signum);
      if (abbrev != NULL)
        g_snprintf (names[signum], sizeof names[signum], "SIG%s", abbrev);
      else
        g_snprintf (names[signum], sizeof names[signum], "SIG%d", signum);
    }
  return names[signum];
}

/* ---- process lifecycle ---- */

static gint64
mono_ms_since (gint64 start_us)
{
  return (g_get_monotonic_time () - start_us) / 1000;
}

static void
proc_close_stdin (NzExecProc *p)
{
  g_clear_handle_id (&p->stdin_watch, g_source_remove);
  if (p->stdin_fd >= 0)
    close (p->stdin_fd);
  p->stdin_fd = -1;
  g_clear_pointer (&p->stdin_data, g_bytes_unref);
}

static void
proc_free (NzExecProc *p)
{
  g_clear_handle_id (&p->out_watch, g_source_remove);
  g_clear_handle_id (&p->err_watch, g_source_remove);
  g_clear_handle_id (&p->timeout_id, g_source_remove);
  g_clear_handle_id (&p->close_timer, g_source_remove);
  proc_close_stdin (p);
  if (p->out_fd >= 0)
    close (p->out_fd);
  if (p->err_fd >= 0)
    close (p->err_fd);
  if (!p->exited && reaper_procs != NULL)
    g_hash_table_remove (reaper_procs, GINT_TO_POINTER (p->pid));
  if (p->destroy != NULL)
    p->destroy (p->user_data);
  nz_exec_record_unref (p->rec);
  g_free (p);
}

/* Detaches the process state from its record: after this the record owns no process. */
static void
proc_detach_and_free (NzExecProc *p)
{
  if (p->rec->proc == p)
    p->rec->proc = NULL;
  proc_free (p);
}

static void
proc_settle (NzExecProc *p, const NzExecResult *result, const char *error_message)
{
  NzExecRecord *rec = p->rec;
  NzExecOutcome outcome;

  g_clear_handle_id (&p->timeout_id, g_source_remove);
  if (rec->cause == NZ_EXEC_CAUSE_CANCELLED || rec->cause == NZ_EXEC_CAUSE_QUIESCED)
    outcome = NZ_EXEC_OUTCOME_CANCELLED;
  else if (error_message != NULL)
    outcome = NZ_EXEC_OUTCOME_FAILED;
  else
    outcome = NZ_EXEC_OUTCOME_COMPLETED;
  nz_exec_registry_remember_terminal (p->guest->registry, rec, outcome, result, error_message,
                                      nz_guest_now_ms ());
  if (p->callbacks.finished != NULL)
    p->callbacks.finished (rec, result, error_message, FALSE, p->user_data);
  proc_detach_and_free (p);
}

static void
proc_settle_result (NzExecProc *p)
{
  NzExecResult result = { 0 };

  if (WIFEXITED (p->wait_status))
    result.exit_code = WEXITSTATUS (p->wait_status);
  else
    {
      result.exit_code = -1;
      if (WIFSIGNALED (p->wait_status))
        result.signal = WTERMSIG (p->wait_status);
    }
  result.timed_out = p->rec->cause == NZ_EXEC_CAUSE_TIMEOUT;
  result.duration_ms = mono_ms_since (p->start_us);
  result.stdout_truncated = p->out_truncated;
  result.stderr_truncated = p->err_truncated;
  proc_settle (p, &result, NULL);
}

/* The close handler could not confirm the group is gone: fence, and send no terminal event,
 * so the host sees the stream die instead of a result it cannot trust. */
static void
proc_fence (NzExecProc *p, const char *message)
{
  nz_guest_retire (p->guest, message);
  if (p->callbacks.finished != NULL)
    p->callbacks.finished (p->rec, NULL, message, TRUE, p->user_data);
  proc_detach_and_free (p);
}

static gboolean
close_poll (gpointer user_data)
{
  NzExecProc *p = user_data;
  g_autofree char *msg = NULL;

  p->close_timer = 0;
  if (!group_alive (p->pid))
    {
      proc_settle_result (p);
      return G_SOURCE_REMOVE;
    }
  if (p->rec->cause == NZ_EXEC_CAUSE_NONE)
    {
      msg = g_strdup_printf ("process group %d remained live after its leader exited; refusing "
                             "to signal a reusable numeric process-group id",
                             (int)p->pid);
      proc_fence (p, msg);
      return G_SOURCE_REMOVE;
    }
  if (g_get_monotonic_time () >= p->close_deadline_us)
    {
      msg = g_strdup_printf ("process group %d remained live after termination", (int)p->pid);
      proc_fence (p, msg);
      return G_SOURCE_REMOVE;
    }
  p->close_timer = g_timeout_add (NZ_GUEST_GROUP_POLL_MS, close_poll, p);
  return G_SOURCE_REMOVE;
}

/* Node's 'close': the leader is reaped and both output pipes reached EOF. */
static void
proc_maybe_close (NzExecProc *p)
{
  if (!p->exited || p->out_fd >= 0 || p->err_fd >= 0 || p->closing)
    return;
  p->closing = TRUE;
  p->rec->state = NZ_EXEC_STATE_EXITED;
  proc_close_stdin (p);
  if (!group_alive (p->pid))
    {
      proc_settle_result (p);
      return;
    }
  /* A marked execution is being killed: give the kill its confirmation window. An unmarked
   * one lost its leader while members live on (e.g. `sleep 1 >/dev/null 2>&1 &`): one poll
   * interval of slack, then the numeric pgid may be reused and we refuse to own it. */
  p->close_deadline_us = g_get_monotonic_time ()
                         + p->guest->limits.cancel_confirm_timeout_ms * G_TIME_SPAN_MILLISECOND;
  p->close_timer = g_timeout_add (NZ_GUEST_GROUP_POLL_MS, close_poll, p);
}

static void
proc_on_exit (NzExecProc *p, int status)
{
  p->exited = TRUE;
  p->wait_status = status;
  if (p->rec->state == NZ_EXEC_STATE_RUNNING)
    p->rec->state = NZ_EXEC_STATE_EXITED;
  proc_maybe_close (p);
}

static void
proc_deliver (NzExecProc *p, NzExecStream stream, const guint8 *buf, gsize n)
{
  gint64 *sent = stream == NZ_EXEC_STREAM_STDOUT ? &p->out_sent : &p->err_sent;
  gboolean *truncated = stream == NZ_EXEC_STREAM_STDOUT ? &p->out_truncated : &p->err_truncated;
  gint64 room = MAX (p->max_output - *sent, 0);
  gsize keep = MIN ((gint64)n, room);

  /* Each stream forwards at most maxOutputBytes raw bytes; the rest is dropped and flagged. */
  if (keep < n)
    *truncated = TRUE;
  if (keep == 0)
    return;
  *sent += keep;
  nz_exec_record_retain_output (p->rec, stream, buf, keep);
  if (p->callbacks.output != NULL)
    p->callbacks.output (p->rec, stream, buf, keep, p->user_data);
}

static gboolean
pipe_readable (int fd, GIOCondition cond, gpointer user_data)
{
  NzExecProc *p = user_data;
  NzExecStream stream = fd == p->out_fd ? NZ_EXEC_STREAM_STDOUT : NZ_EXEC_STREAM_STDERR;
  guint8 buf[READ_CHUNK_BYTES];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  if (n > 0)
    {
      proc_deliver (p, stream, buf, (gsize)n);
      return G_SOURCE_CONTINUE;
    }
  /* EOF (or a read error, which ends the stream the same way). */
  close (fd);
  if (stream == NZ_EXEC_STREAM_STDOUT)
    {
      p->out_fd = -1;
      p->out_watch = 0;
    }
  else
    {
      p->err_fd = -1;
      p->err_watch = 0;
    }
  proc_maybe_close (p);
  return G_SOURCE_REMOVE;
}

static gboolean
stdin_writable (int fd, GIOCondition cond, gpointer user_data)
{
  NzExecProc *p = user_data;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (p->stdin_data, &len);

  while (p->stdin_off < len)
    {
      ssize_t n = write (fd, data + p->stdin_off, len - p->stdin_off);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return G_SOURCE_CONTINUE;
      if (n < 0)
        break; /* EPIPE: the command did not read its stdin; not an error of ours */
      p->stdin_off += (gsize)n;
    }
  p->stdin_watch = 0;
  proc_close_stdin (p);
  return G_SOURCE_REMOVE;
}

static void
timeout_terminated (NzExecRecord *rec, const char *error_message, gpointer user_data)
{
  NzGuest *guest = user_data;

  /* A timeout whose kill cannot be confirmed leaves an unknown workload: fence. */
  if (error_message != NULL)
    nz_guest_retire (guest, error_message);
}

static gboolean
timeout_fired (gpointer user_data)
{
  NzExecProc *p = user_data;

  p->timeout_id = 0;
  nz_exec_terminate (p->guest, p->rec, NZ_EXEC_CAUSE_TIMEOUT, timeout_terminated, p->guest);
  return G_SOURCE_REMOVE;
}

char *
nz_exec_spawn_error_message (const char *command, int errsv)
{
  return g_strdup_printf ("spawn %s %s", command, nz_jstext_errno_name (errsv));
}

static gboolean start_fail (NzGuest *guest, NzExecRecord *rec, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF (4, 5);

static gboolean
start_fail (NzGuest *guest, NzExecRecord *rec, GError **error, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  nz_exec_registry_remember_terminal (guest->registry, rec, NZ_EXEC_OUTCOME_FAILED, NULL, msg,
                                      nz_guest_now_ms ());
  return nz_throw (error, NZ_ERROR_FAILED, "%s", msg);
}

gboolean
nz_exec_start (NzGuest *guest, NzExecRecord *rec, const NzExecSpec *spec,
               const NzExecCallbacks *callbacks, gpointer user_data, GDestroyNotify destroy,
               GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) local_error = NULL;
  g_autofree char *cwd_path = NULL;
  nz_autofd int cwd_fd = -1;
  NzExecProc *p;
  GPid pid = 0;
  int in_fd = -1, out_fd = -1, err_fd = -1;
  int errsv;

  g_return_val_if_fail (guest != NULL && rec != NULL && spec != NULL, FALSE);
  g_return_val_if_fail (spec->command != NULL && spec->cwd != NULL, FALSE);
  g_return_val_if_fail (rec->proc == NULL, FALSE);

  if (!nz_exec_reaper_install (error))
    return FALSE;

  nz_exec_registry_mark_starting (guest->registry, rec, nz_guest_now_ms ());
  /* mkdir -p beneath the workspace and the directory opened race-free: the child starts in
   * that fd, whatever is swapped in after. */
  if ((cwd_path = nz_jail_enter_cwd (guest->jail, spec->cwd, &cwd_fd, &local_error)) == NULL)
    return start_fail (guest, rec, error, "mkdir_failed: %s", local_error->message);

  g_ptr_array_add (argv, (gpointer)spec->command);
  for (guint i = 0; spec->args != NULL && spec->args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)spec->args[i]);
  g_ptr_array_add (argv, NULL);

  errsv = nz_spawn_session (cwd_path, (const char *const *)argv->pdata,
                            (const char *const *)spec->envp,
                            spec->stdin_data != NULL ? &in_fd : NULL, &out_fd, &err_fd, &pid);
  if (errsv != 0)
    {
      g_autofree char *msg = nz_exec_spawn_error_message (spec->command, errsv);

      g_debug ("spawn %s: %s", spec->command, g_strerror (errsv));
      return start_fail (guest, rec, error, "%s", msg);
    }

  p = g_new0 (NzExecProc, 1);
  p->guest = guest;
  p->rec = nz_exec_record_ref (rec);
  p->pid = pid;
  p->out_fd = out_fd;
  p->err_fd = err_fd;
  p->stdin_fd = in_fd;
  p->max_output = spec->max_output_bytes;
  p->start_us = g_get_monotonic_time ();
  if (callbacks != NULL)
    p->callbacks = *callbacks;
  p->user_data = user_data;
  p->destroy = destroy;
  rec->proc = p;
  rec->started = TRUE;
  rec->state = NZ_EXEC_STATE_RUNNING;
  g_hash_table_insert (reaper_procs, GINT_TO_POINTER (pid), p);

  g_unix_set_fd_nonblocking (out_fd, TRUE, NULL);
  g_unix_set_fd_nonblocking (err_fd, TRUE, NULL);
  p->out_watch = g_unix_fd_add (out_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, pipe_readable, p);
  p->err_watch = g_unix_fd_add (err_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, pipe_readable, p);
  if (in_fd >= 0)
    {
      g_unix_set_fd_nonblocking (in_fd, TRUE, NULL);
      p->stdin_data = g_bytes_ref (spec->stdin_data);
      p->stdin_watch = g_unix_fd_add (in_fd, G_IO_OUT | G_IO_ERR | G_IO_HUP, stdin_writable, p);
    }
  p->timeout_id
      = g_timeout_add ((guint)MIN (spec->timeout_ms, (gint64)G_MAXUINT), timeout_fired, p);
  return TRUE;
}

/* ---- termination (spec C.4) ---- */

static void
term_finish (TermOp *op, const char *error_message)
{
  g_autoptr (GArray) waiters = op->waiters;
  g_autoptr (NzExecRecord) rec = op->rec;

  g_clear_handle_id (&op->timer, g_source_remove);
  /* Clear the memo first: a failed attempt may be retried by a later cancel. */
  if (rec->terminate == op)
    rec->terminate = NULL;
  g_free (op);
  for (guint i = 0; i < waiters->len; i++)
    {
      TermWaiter *w = &g_array_index (waiters, TermWaiter, i);

      w->func (rec, error_message, w->user_data);
    }
}

static gboolean term_tick (gpointer user_data);

static void
term_schedule (TermOp *op, gint64 until_us)
{
  gint64 remaining_ms = (until_us - g_get_monotonic_time () + 999) / 1000;

  op->timer = g_timeout_add ((guint)CLAMP (remaining_ms, 1, NZ_GUEST_GROUP_POLL_MS), term_tick, op);
}

static gboolean
term_tick (gpointer user_data)
{
  TermOp *op = user_data;
  gint64 now;
  g_autofree char *msg = NULL;

  op->timer = 0;
  for (;;)
    {
      now = g_get_monotonic_time ();
      switch (op->phase)
        {
        case TERM_GRACE:
          if (!group_alive (op->pgid))
            {
              op->phase = TERM_WAIT_DONE;
              continue;
            }
          if (now < op->grace_end_us)
            {
              term_schedule (op, op->grace_end_us);
              return G_SOURCE_REMOVE;
            }
          if (op->rec->state == NZ_EXEC_STATE_EXITED)
            {
              /* The leader is reaped: its numeric pgid may be reused, so never signal it. */
              msg = g_strdup_printf ("process group %d outlived its leader during cancellation; "
                                     "refusing to signal a reusable numeric process-group id",
                                     (int)op->pgid);
              term_finish (op, msg);
              return G_SOURCE_REMOVE;
            }
          if (kill (-op->pgid, SIGKILL) != 0 && errno != ESRCH)
            {
              msg = g_strdup_printf ("kill %s", g_strerror (errno));
              term_finish (op, msg);
              return G_SOURCE_REMOVE;
            }
          op->phase = TERM_KILL;
          continue;
        case TERM_KILL:
          if (!group_alive (op->pgid))
            {
              op->phase = TERM_WAIT_DONE;
              continue;
            }
          if (now >= op->deadline_us)
            {
              msg = g_strdup_printf ("process group %d remained live after SIGKILL", (int)op->pgid);
              term_finish (op, msg);
              return G_SOURCE_REMOVE;
            }
          term_schedule (op, op->deadline_us);
          return G_SOURCE_REMOVE;
        case TERM_WAIT_DONE:
        default:
          reap_now ();
          if (op->rec->state == NZ_EXEC_STATE_TERMINAL)
            {
              term_finish (op, NULL);
              return G_SOURCE_REMOVE;
            }
          if (now >= op->deadline_us)
            {
              term_finish (op, "execution close was not observed before the deadline");
              return G_SOURCE_REMOVE;
            }
          term_schedule (op, op->deadline_us);
          return G_SOURCE_REMOVE;
        }
    }
}

void
nz_exec_terminate (NzGuest *guest, NzExecRecord *rec, NzExecCause cause, NzExecTerminateFunc func,
                   gpointer user_data)
{
  TermWaiter w = { func, user_data };
  TermOp *op;

  g_return_if_fail (guest != NULL && rec != NULL && func != NULL);

  if (rec->state == NZ_EXEC_STATE_TERMINAL)
    {
      func (rec, NULL, user_data);
      return;
    }
  if (rec->terminate != NULL)
    {
      /* Concurrent cancel and timeout share one attempt. */
      g_array_append_val (((TermOp *)rec->terminate)->waiters, w);
      return;
    }
  if (rec->state != NZ_EXEC_STATE_RUNNING && rec->state != NZ_EXEC_STATE_EXITED)
    {
      g_autofree char *msg = g_strdup_printf ("execution is not running (state=%s)",
                                              nz_exec_state_to_string (rec->state));

      func (rec, msg, user_data);
      return;
    }

  op = g_new0 (TermOp, 1);
  op->guest = guest;
  op->rec = nz_exec_record_ref (rec);
  op->waiters = g_array_new (FALSE, FALSE, sizeof (TermWaiter));
  g_array_append_val (op->waiters, w);
  op->deadline_us
      = g_get_monotonic_time () + guest->limits.cancel_confirm_timeout_ms * G_TIME_SPAN_MILLISECOND;
  rec->terminate = op;

  if (rec->state == NZ_EXEC_STATE_EXITED || rec->proc == NULL)
    {
      /* The leader is gone: only wait for the close handler to settle it. */
      op->phase = TERM_WAIT_DONE;
      term_tick (op);
      return;
    }
  op->pgid = rec->proc->pid;
  if (rec->cause == NZ_EXEC_CAUSE_NONE)
    rec->cause = cause;
  if (op->pgid > 1 && kill (-op->pgid, SIGTERM) != 0 && errno != ESRCH)
    {
      g_autofree char *msg = g_strdup_printf ("kill %s", g_strerror (errno));

      term_finish (op, msg);
      return;
    }
  op->grace_end_us
      = MIN (op->deadline_us,
             g_get_monotonic_time () + guest->limits.cancel_grace_ms * G_TIME_SPAN_MILLISECOND);
  op->phase = TERM_GRACE;
  term_tick (op);
}

/* ---- quiesce provider (spec C.13) ---- */

static void
collect_one (NzExecRecord *rec, gpointer user_data)
{
  if (rec->proc != NULL)
    {
      gint pgid = rec->proc->pid;

      g_array_append_val ((GArray *)user_data, pgid);
    }
}

static void
exec_collect_owned (NzGuest *guest, GArray *ids, gpointer user_data)
{
  nz_exec_registry_foreach (guest->registry, collect_one, ids);
}

static void
mark_one (NzExecRecord *rec, gpointer user_data)
{
  /* Marked before any signal, so the close handler waits for the group instead of fencing. */
  if (rec->proc != NULL && rec->state == NZ_EXEC_STATE_RUNNING && rec->cause == NZ_EXEC_CAUSE_NONE)
    rec->cause = NZ_EXEC_CAUSE_QUIESCED;
}

static void
exec_mark_quiesced (NzGuest *guest, gpointer user_data)
{
  nz_exec_registry_foreach (guest->registry, mark_one, NULL);
}

static void
unsettled_one (NzExecRecord *rec, gpointer user_data)
{
  if (rec->proc != NULL)
    *(gboolean *)user_data = TRUE;
}

static gboolean
exec_unsettled (NzGuest *guest, gpointer user_data)
{
  gboolean any = FALSE;

  nz_exec_registry_foreach (guest->registry, unsettled_one, &any);
  return any;
}

static const NzGuestProcessProvider exec_provider = {
  .collect_owned = exec_collect_owned,
  .mark_quiesced = exec_mark_quiesced,
  .unsettled = exec_unsettled,
};

void
nz_exec_add_process_provider (NzGuest *guest)
{
  nz_guest_add_process_provider (guest, &exec_provider, NULL);
}
