#include "nz-flush.h"
#include "nz-privsep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-exec.h"
#include "nz-jail.h"

/* The reference keeps about this much of the helper's stderr for its message. */
#define STDERR_CAP_CHARS 4096

const char *
nz_flush_program (NzGuest *guest)
{
  return guest->flush_command != NULL ? "/bin/sh" : "sync";
}

static gboolean
is_executable_file (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0 && S_ISREG (st.st_mode) && access (path, X_OK) == 0;
}

/* isExecutableFile: execvp's search, so what we advertise is what a spawn would find. */
static gboolean
resolve_executable (const char *file)
{
  const char *path_env = g_getenv ("PATH");
  g_auto (GStrv) dirs = NULL;

  if (strchr (file, '/') != NULL)
    return is_executable_file (file);
  dirs = g_strsplit (path_env != NULL ? path_env : "/usr/local/bin:/usr/bin:/bin", ":", -1);
  for (guint i = 0; dirs[i] != NULL; i++)
    {
      g_autofree char *candidate = g_build_filename (*dirs[i] != '\0' ? dirs[i] : ".", file, NULL);

      if (is_executable_file (candidate))
        return TRUE;
    }
  return FALSE;
}

gboolean
nz_flush_available (NzGuest *guest)
{
  static int cached = -1;

  /* Computed once, like the reference's canFlush: the image does not change under us. */
  if (cached < 0)
    cached = resolve_executable (nz_flush_program (guest)) ? 1 : 0;
  return cached == 1;
}

char *
nz_flush_unsupported_message (NzGuest *guest)
{
  return g_strdup_printf ("no '%s' on this guest's PATH, so nothing here can run syncfs(2) over "
                          "%s; healthz does not advertise 'flush' for this image",
                          nz_flush_program (guest), nz_jail_get_workspace (guest->jail));
}

typedef struct
{
  NzGuest *guest;
  GPid pid;
  int err_fd;
  guint err_watch;
  guint timer;
  gboolean exited;
  int status;
  gboolean done;
  GString *err;
  gint64 start_us;
  gint64 timeout_ms;
  char *source;
  NzFlushFunc func;
  gpointer user_data;
} FlushRun;

static void
flush_finish (FlushRun *r, const char *error_message)
{
  NzFlushFunc func = r->func;
  gpointer user_data = r->user_data;
  gint64 duration = (g_get_monotonic_time () - r->start_us) / 1000;
  g_autofree char *msg = g_strdup (error_message);

  if (r->done)
    return;
  r->done = TRUE;
  g_clear_handle_id (&r->timer, g_source_remove);
  g_clear_handle_id (&r->err_watch, g_source_remove);
  if (r->err_fd >= 0)
    close (r->err_fd);
  r->err_fd = -1;
  /* A killed helper is still reaped by the agent's reaper; we just stop listening. */
  if (!r->exited)
    nz_exec_unwatch_child (r->pid);
  g_string_free (r->err, TRUE);
  g_free (r->source);
  g_free (r);
  func (duration, msg, user_data);
}

static void
flush_maybe_close (FlushRun *r)
{
  const char *file = nz_flush_program (r->guest);
  g_autoptr (GString) msg = NULL;
  g_autofree char *trimmed = NULL;

  /* Node's 'close': the process exited and its stderr reached EOF. */
  if (!r->exited || r->err_fd >= 0)
    return;
  if (WIFEXITED (r->status) && WEXITSTATUS (r->status) == 0)
    {
      flush_finish (r, NULL);
      return;
    }
  msg = g_string_new (NULL);
  if (WIFSIGNALED (r->status))
    g_string_append_printf (msg, "flush command '%s' was killed by %s", file,
                            nz_exec_signal_name (WTERMSIG (r->status)));
  else
    g_string_append_printf (msg, "flush command '%s' exited %d", file, WEXITSTATUS (r->status));
  trimmed = g_strstrip (g_strdup (r->err->str));
  if (*trimmed != '\0')
    g_string_append_printf (msg, ": %s", trimmed);
  flush_finish (r, msg->str);
}

static gboolean
flush_stderr (int fd, GIOCondition cond, gpointer user_data)
{
  FlushRun *r = user_data;
  char buf[4096];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  if (n > 0)
    {
      if (r->err->len < STDERR_CAP_CHARS)
        g_string_append_len (r->err, buf, MIN ((gsize)n, STDERR_CAP_CHARS - r->err->len));
      return G_SOURCE_CONTINUE;
    }
  r->err_watch = 0;
  close (r->err_fd);
  r->err_fd = -1;
  flush_maybe_close (r);
  return G_SOURCE_REMOVE;
}

static void
flush_exited (GPid pid, int status, gpointer user_data)
{
  FlushRun *r = user_data;

  r->exited = TRUE;
  r->status = status;
  flush_maybe_close (r);
}

static gboolean
flush_timeout (gpointer user_data)
{
  FlushRun *r = user_data;
  g_autofree char *msg = NULL;

  r->timer = 0;
  if (!r->exited)
    kill (r->pid, SIGKILL);
  msg = g_strdup_printf ("flush did not finish within %" G_GINT64_FORMAT "ms (%s); the workspace "
                         "filesystem may still hold unwritten pages",
                         r->timeout_ms, r->source);
  flush_finish (r, msg);
  return G_SOURCE_REMOVE;
}

void
nz_flush_run (NzGuest *guest, gint64 timeout_ms, const char *source, NzFlushFunc func,
              gpointer user_data)
{
  const char *file = nz_flush_program (guest);
  const char *sync_argv[] = { "sync", "-f", nz_jail_get_workspace (guest->jail), NULL };
  const char *sh_argv[] = { "/bin/sh", "-c", guest->flush_command, NULL };
  g_autoptr (GError) error = NULL;
  FlushRun *r;
  GPid pid = 0;
  int err_fd = -1;

  g_return_if_fail (guest != NULL && func != NULL);
  if (!nz_exec_reaper_install (&error))
    {
      g_autofree char *msg = g_strdup_printf ("flush could not start '%s': %s", file,
                                              error->message);

      func (0, msg, user_data);
      return;
    }
  /* The unscrubbed environment on purpose (spec B.3): a flush command may need the agent's
   * own configuration. */
  if (!g_spawn_async_with_pipes_and_fds (
          NULL, guest->flush_command != NULL ? sh_argv : sync_argv, NULL,
          G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH | G_SPAWN_STDIN_FROM_DEV_NULL
              | G_SPAWN_STDOUT_TO_DEV_NULL,
          nz_privsep_child_setup, NULL, -1, -1, -1, NULL, NULL, 0, &pid, NULL, NULL, &err_fd, &error))
    {
      g_autofree char *msg = g_strdup_printf ("flush could not start '%s': %s", file,
                                              error->message);

      func (0, msg, user_data);
      return;
    }
  r = g_new0 (FlushRun, 1);
  r->guest = guest;
  r->pid = pid;
  r->err_fd = err_fd;
  r->err = g_string_new (NULL);
  r->start_us = g_get_monotonic_time ();
  r->timeout_ms = timeout_ms;
  r->source = g_strdup (source);
  r->func = func;
  r->user_data = user_data;
  g_unix_set_fd_nonblocking (err_fd, TRUE, NULL);
  r->err_watch = g_unix_fd_add (err_fd, G_IO_IN | G_IO_HUP | G_IO_ERR, flush_stderr, r);
  r->timer = g_timeout_add ((guint)MIN (timeout_ms, G_MAXUINT), flush_timeout, r);
  /* Last: the watch may report an already-exited child at once. */
  nz_exec_watch_child (pid, flush_exited, r);
}
