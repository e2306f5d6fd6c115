#define _GNU_SOURCE
#include "nz-sessions.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-exec.h"
#include "nz-jail.h"
#include "nz-spawn.h"

#define READ_CHUNK_BYTES 65536

struct _NzSessionRegistry
{
  NzGuest *guest;
  GHashTable *sessions; /* id -> NzSession (ref) */
  guint64 next_serial;
  GSourceFunc drained;
  gpointer drained_data;
};

typedef struct
{
  GSourceFunc func;
  gpointer user_data;
  guint timer;
  NzSession *s; /* borrowed: the session owns its waiters */
} ExitWaiter;

static void session_finish (NzSession *s, int wait_status);

gboolean
nz_session_id_is_valid (const char *id)
{
  gsize len;

  if (id == NULL || !g_ascii_isalnum (id[0]))
    return FALSE;
  len = strlen (id);
  if (len > 64)
    return FALSE;
  for (gsize i = 1; i < len; i++)
    if (!g_ascii_isalnum (id[i]) && id[i] != '.' && id[i] != '_' && id[i] != '-')
      return FALSE;
  return TRUE;
}

const char *
nz_session_kind_to_string (NzSessionKind kind)
{
  return kind == NZ_SESSION_TERMINAL ? "terminal" : "detached";
}

NzSession *
nz_session_ref (NzSession *s)
{
  s->ref_count++;
  return s;
}

static void
exit_waiter_free (ExitWaiter *w)
{
  g_clear_handle_id (&w->timer, g_source_remove);
  g_free (w);
}

static void
session_stop_io (NzSession *s)
{
  g_clear_handle_id (&s->out_watch, g_source_remove);
  g_clear_handle_id (&s->err_watch, g_source_remove);
  if (s->out_fd >= 0)
    close (s->out_fd);
  if (s->err_fd >= 0)
    close (s->err_fd);
  s->out_fd = s->err_fd = -1;
}

void
nz_session_unref (NzSession *s)
{
  if (s == NULL || --s->ref_count > 0)
    return;
  if (!s->exited && s->pty == NULL && s->pid > 0)
    nz_exec_unwatch_child (s->pid);
  nz_pty_free (s->pty);
  session_stop_io (s);
  if (s->exit_waiters != NULL)
    g_ptr_array_unref (s->exit_waiters);
  nz_output_log_free (s->log);
  g_free (s->id);
  g_free (s->command);
  g_strfreev (s->args);
  g_free (s);
}

/* ---- the registry ---- */

static void
sessions_collect_owned (NzGuest *guest, GArray *ids, gpointer user_data)
{
  NzSessionRegistry *reg = user_data;
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, reg->sessions);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      NzSession *s = value;
      gint id = s->pid;

      /* unixSessionIds = [pid] and processGroupId = pid: one id covers both. */
      if (!s->exited && s->pid > 1)
        g_array_append_val (ids, id);
    }
}

static gboolean
sessions_unsettled (NzGuest *guest, gpointer user_data)
{
  NzSessionRegistry *reg = user_data;
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, reg->sessions);
  while (g_hash_table_iter_next (&it, NULL, &value))
    if (!((NzSession *)value)->exited)
      return TRUE;
  return FALSE;
}

static const NzGuestProcessProvider sessions_provider = {
  .collect_owned = sessions_collect_owned,
  .unsettled = sessions_unsettled,
};

NzSessionRegistry *
nz_session_registry_get (NzGuest *guest)
{
  NzSessionRegistry *reg;

  g_return_val_if_fail (guest != NULL, NULL);
  if (guest->sessions != NULL)
    return guest->sessions;
  reg = g_new0 (NzSessionRegistry, 1);
  reg->guest = guest;
  reg->sessions
      = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, (GDestroyNotify)nz_session_unref);
  guest->sessions = reg;
  nz_guest_add_process_provider (guest, &sessions_provider, reg);
  return reg;
}

void
nz_session_registry_free (NzSessionRegistry *reg)
{
  GHashTableIter it;
  gpointer value;

  if (reg == NULL)
    return;
  g_hash_table_iter_init (&it, reg->sessions);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      NzSession *s = value;

      /* Sessions live only in agent memory: nothing would own them after it. */
      if (!s->exited)
        nz_session_signal (s, SIGKILL);
      s->reg = NULL;
      s->attach = NULL;
    }
  g_hash_table_unref (reg->sessions);
  g_free (reg);
}

void
nz_session_registry_prune (NzSessionRegistry *reg, gint64 now_ms)
{
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, reg->sessions);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      NzSession *s = value;

      if (s->exited && s->expires_at <= now_ms)
        {
          s->reg = NULL;
          g_hash_table_iter_remove (&it);
        }
    }
}

NzSession *
nz_session_registry_lookup (NzSessionRegistry *reg, const char *id)
{
  if (id == NULL)
    return NULL;
  return g_hash_table_lookup (reg->sessions, id);
}

gboolean
nz_session_registry_make_room (NzSessionRegistry *reg)
{
  while ((gint64)g_hash_table_size (reg->sessions) >= reg->guest->limits.max_sessions)
    {
      GHashTableIter it;
      gpointer value;
      NzSession *oldest = NULL;

      g_hash_table_iter_init (&it, reg->sessions);
      while (g_hash_table_iter_next (&it, NULL, &value))
        {
          NzSession *s = value;

          if (s->exited && (oldest == NULL || s->expires_at < oldest->expires_at))
            oldest = s;
        }
      /* Running sessions are never evicted. */
      if (oldest == NULL)
        return FALSE;
      oldest->reg = NULL;
      g_hash_table_remove (reg->sessions, oldest->id);
    }
  return TRUE;
}

static gint
session_cmp_started (gconstpointer a, gconstpointer b)
{
  const NzSession *x = *(NzSession *const *)a;
  const NzSession *y = *(NzSession *const *)b;

  return x->started_at < y->started_at ? -1 : x->started_at > y->started_at;
}

GPtrArray *
nz_session_registry_list (NzSessionRegistry *reg)
{
  GPtrArray *out = g_ptr_array_new ();
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, reg->sessions);
  while (g_hash_table_iter_next (&it, NULL, &value))
    g_ptr_array_add (out, value);
  g_ptr_array_sort (out, session_cmp_started);
  return out;
}

/* ---- output and exit ---- */

static void
session_record_output (NzSession *s, int stream, const guint8 *data, gsize len)
{
  guint64 offset;

  if (len == 0)
    return;
  /* Read whether or not anyone is attached; the program is never paused. */
  offset = nz_output_log_append (s->log, stream, data, len);
  s->last_output_at = nz_guest_now_ms ();
  if (s->attach != NULL && s->attach->output != NULL)
    s->attach->output (s, stream, offset, data, len, s->attach_data);
}

static void
pty_output (NzPty *pty, const guint8 *data, gsize len, gpointer user_data)
{
  session_record_output (user_data, 0, data, len);
}

static void
pty_input_drained (NzPty *pty, gpointer user_data)
{
  NzSession *s = user_data;
  NzSessionRegistry *reg = s->reg;

  if (reg != NULL && reg->drained != NULL)
    {
      GSourceFunc func = reg->drained;

      reg->drained = NULL;
      func (reg->drained_data);
    }
}

static void
pty_exited (NzPty *pty, int wait_status, gpointer user_data)
{
  session_finish (user_data, wait_status);
}

static const NzPtyCallbacks session_pty_callbacks = {
  .output = pty_output,
  .input_drained = pty_input_drained,
  .exited = pty_exited,
};

/* Reads one detached stream; FALSE at EOF. */
static gboolean
pipe_drain (NzSession *s, int fd, int stream)
{
  guint8 buf[READ_CHUNK_BYTES];

  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      if (n > 0)
        {
          session_record_output (s, stream, buf, (gsize)n);
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      return n < 0 && errno == EAGAIN;
    }
}

static gboolean
pipe_readable (int fd, GIOCondition cond, gpointer user_data)
{
  NzSession *s = user_data;
  int stream = fd == s->out_fd ? 0 : 1;

  if (pipe_drain (s, fd, stream))
    return G_SOURCE_CONTINUE;
  close (fd);
  if (stream == 0)
    {
      s->out_fd = -1;
      s->out_watch = 0;
    }
  else
    {
      s->err_fd = -1;
      s->err_watch = 0;
    }
  return G_SOURCE_REMOVE;
}

static void
detached_exited (GPid pid, int wait_status, gpointer user_data)
{
  NzSession *s = user_data;

  /* What the leader wrote is already in the pipes; take it before recording the exit. */
  if (s->out_fd >= 0)
    pipe_drain (s, s->out_fd, 0);
  if (s->err_fd >= 0)
    pipe_drain (s, s->err_fd, 1);
  session_finish (s, wait_status);
}

static void
session_finish (NzSession *s, int wait_status)
{
  g_autoptr (NzSession) hold = nz_session_ref (s);
  gint64 now = nz_guest_now_ms ();

  if (s->exited)
    return;
  s->exited = TRUE;
  s->exit_code = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1;
  s->signal = WIFSIGNALED (wait_status) ? WTERMSIG (wait_status) : 0;
  s->exited_at = now;
  s->expires_at = now + (s->reg != NULL ? s->reg->guest->limits.session_terminal_ttl_ms : 0);
  if (s->attach != NULL)
    {
      const NzSessionAttachFuncs *funcs = s->attach;
      gpointer data = s->attach_data;

      s->attach = NULL;
      s->attach_data = NULL;
      if (funcs->exited != NULL)
        funcs->exited (s, data);
    }
  if (s->exit_waiters != NULL)
    {
      g_autoptr (GPtrArray) waiters = g_steal_pointer (&s->exit_waiters);

      for (guint i = 0; i < waiters->len; i++)
        {
          ExitWaiter *w = waiters->pdata[i];

          g_clear_handle_id (&w->timer, g_source_remove);
          w->func (w->user_data);
        }
    }
}

NzSession *
nz_session_start (NzSessionRegistry *reg, NzSessionKind kind, const char *id, const char *command,
                  const char *const *args, const char *cwd, char **envp, guint cols, guint rows,
                  GError **error)
{
  g_autoptr (NzSession) s = g_new0 (NzSession, 1);
  g_autofree char *cwd_path = NULL;
  nz_autofd int cwd_fd = -1;

  g_return_val_if_fail (reg != NULL && nz_session_id_is_valid (id), NULL);
  g_return_val_if_fail (command != NULL && cwd != NULL, NULL);

  s->ref_count = 1;
  s->id = g_strdup (id);
  s->kind = kind;
  s->command = g_strdup (command);
  s->args = g_strdupv ((char **)args);
  if (s->args == NULL)
    s->args = g_new0 (char *, 1);
  s->out_fd = s->err_fd = -1;
  s->log = nz_output_log_new ((guint64)reg->guest->limits.session_log_bytes);
  s->started_at = s->last_input_at = s->last_output_at = nz_guest_now_ms ();
  s->reg = reg;

  /* The child starts in the directory fd the jail opened, whatever is swapped in after. */
  if ((cwd_path = nz_jail_enter_cwd (reg->guest->jail, cwd, &cwd_fd, error)) == NULL)
    return NULL;
  if (kind == NZ_SESSION_TERMINAL)
    {
      s->pty = nz_pty_spawn (command, args, cwd_path, envp, cols, rows, &session_pty_callbacks, s,
                             error);
      if (s->pty == NULL)
        return NULL;
      s->pid = nz_pty_get_pid (s->pty);
    }
  else
    {
      g_autoptr (GPtrArray) argv = g_ptr_array_new ();
      GPid pid = 0;
      int errsv;

      g_ptr_array_add (argv, (gpointer)command);
      for (guint i = 0; args != NULL && args[i] != NULL; i++)
        g_ptr_array_add (argv, (gpointer)args[i]);
      g_ptr_array_add (argv, NULL);
      /* Its own kernel session and process group: pid = sid = pgid (spec C.10). */
      errsv = nz_spawn_session (cwd_path, (const char *const *)argv->pdata,
                                (const char *const *)envp,
                                NULL, &s->out_fd, &s->err_fd, &pid);
      if (errsv != 0)
        {
          g_autofree char *msg = nz_exec_spawn_error_message (command, errsv);

          nz_throw (error, NZ_ERROR_FAILED, "%s", msg);
          return NULL;
        }
      s->pid = pid;
      g_unix_set_fd_nonblocking (s->out_fd, TRUE, NULL);
      g_unix_set_fd_nonblocking (s->err_fd, TRUE, NULL);
      s->out_watch = g_unix_fd_add (s->out_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, pipe_readable, s);
      s->err_watch = g_unix_fd_add (s->err_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, pipe_readable, s);
    }
  g_hash_table_replace (reg->sessions, s->id, nz_session_ref (s));
  if (kind == NZ_SESSION_DETACHED)
    nz_exec_watch_child (s->pid, detached_exited, s);
  return s; /* borrowed: the registry holds it */
}

/* ---- attachment, input, signals ---- */

void
nz_session_attach (NzSession *s, const NzSessionAttachFuncs *funcs, gpointer user_data)
{
  if (s->attach != NULL)
    {
      const NzSessionAttachFuncs *old = s->attach;
      gpointer old_data = s->attach_data;

      s->attach = NULL;
      s->attach_data = NULL;
      if (old->detached != NULL)
        old->detached (s, "superseded", old_data);
    }
  s->attach = funcs;
  s->attach_data = user_data;
}

void
nz_session_detach (NzSession *s, gpointer user_data)
{
  if (s->attach != NULL && s->attach_data == user_data)
    {
      s->attach = NULL;
      s->attach_data = NULL;
    }
  /* The drain callback points at the attachment: a gone one must not be called back. */
  if (s->reg != NULL && s->reg->drained_data == user_data)
    {
      s->reg->drained = NULL;
      s->reg->drained_data = NULL;
    }
}

gboolean
nz_session_is_attached (NzSession *s)
{
  return s->attach != NULL;
}

gboolean
nz_session_write_input (NzSession *s, const void *data, gsize len, GSourceFunc drained,
                        gpointer drained_data)
{
  if (s->pty == NULL || s->exited)
    return TRUE;
  s->last_input_at = nz_guest_now_ms ();
  if (nz_pty_write (s->pty, data, len))
    return TRUE;
  if (s->reg != NULL)
    {
      s->reg->drained = drained;
      s->reg->drained_data = drained_data;
    }
  return FALSE;
}

void
nz_session_resize (NzSession *s, guint cols, guint rows)
{
  /* Failures are ignored, like the reference's stty. */
  if (s->pty != NULL && !s->exited)
    nz_pty_resize (s->pty, cols, rows, NULL);
}

guint
nz_session_signal (NzSession *s, int signo)
{
  GPid sids[1] = { s->pid };

  return nz_pty_signal_sessions (sids, 1, s->pid, signo);
}

static gboolean
exit_wait_timeout (gpointer user_data)
{
  ExitWaiter *w = user_data;
  NzSession *s = w->s;
  GSourceFunc func = w->func;
  gpointer data = w->user_data;

  w->timer = 0;
  g_ptr_array_remove (s->exit_waiters, w);
  func (data);
  return G_SOURCE_REMOVE;
}

void
nz_session_wait_exit (NzSession *s, gint64 timeout_ms, GSourceFunc func, gpointer user_data)
{
  ExitWaiter *w;

  if (s->exited)
    {
      func (user_data);
      return;
    }
  if (s->exit_waiters == NULL)
    s->exit_waiters = g_ptr_array_new_with_free_func ((GDestroyNotify)exit_waiter_free);
  w = g_new0 (ExitWaiter, 1);
  w->func = func;
  w->user_data = user_data;
  w->s = s;
  w->timer = g_timeout_add ((guint)MIN (timeout_ms, G_MAXUINT), exit_wait_timeout, w);
  g_ptr_array_add (s->exit_waiters, w);
}
