#define _GNU_SOURCE
#include "nz-pty.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-errors.h"
#include "nz-exec.h"
#include "nz-privsep.h"

#define READ_CHUNK_BYTES 65536

struct _NzPty
{
  GPid pid;
  int master;
  guint read_watch;
  guint write_watch;
  GByteArray *pending_input;
  gboolean output_paused;
  gboolean exited;
  gboolean spawning;
  int early_status;
  guint early_exit_id;
  NzPtyCallbacks callbacks;
  gpointer user_data;
};

GPid
nz_pty_get_pid (NzPty *pty)
{
  return pty->pid;
}

gboolean
nz_pty_has_exited (NzPty *pty)
{
  return pty->exited;
}

/* Reads what is available; FALSE at EOF (EIO once no slave is open) or on error. */
static gboolean
pty_read_some (NzPty *pty)
{
  guint8 buf[READ_CHUNK_BYTES];

  for (;;)
    {
      ssize_t n = read (pty->master, buf, sizeof buf);

      if (n > 0)
        {
          if (pty->callbacks.output != NULL)
            pty->callbacks.output (pty, buf, (gsize)n, pty->user_data);
          if (pty->output_paused && !pty->exited)
            return TRUE;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return TRUE;
      return FALSE;
    }
}

static gboolean
pty_readable (int fd, GIOCondition cond, gpointer user_data)
{
  NzPty *pty = user_data;

  if (pty_read_some (pty))
    return G_SOURCE_CONTINUE;
  pty->read_watch = 0;
  return G_SOURCE_REMOVE;
}

static void
pty_watch_output (NzPty *pty)
{
  if (pty->read_watch == 0 && !pty->output_paused && !pty->exited && pty->master >= 0)
    pty->read_watch = g_unix_fd_add (pty->master, G_IO_IN | G_IO_HUP | G_IO_ERR, pty_readable, pty);
}

static void pty_child_exited (GPid pid, int wait_status, gpointer user_data);

static gboolean
pty_early_exit (gpointer user_data)
{
  NzPty *pty = user_data;

  pty->early_exit_id = 0;
  pty_child_exited (pty->pid, pty->early_status, pty);
  return G_SOURCE_REMOVE;
}

static void
pty_child_exited (GPid pid, int wait_status, gpointer user_data)
{
  NzPty *pty = user_data;

  /* Reaped while nz_pty_spawn() was still registering: the caller has no handle yet. */
  if (pty->spawning)
    {
      pty->early_status = wait_status;
      pty->early_exit_id = g_idle_add (pty_early_exit, pty);
      return;
    }
  pty->exited = TRUE;
  g_clear_handle_id (&pty->read_watch, g_source_remove);
  /* What the leader wrote is already readable: deliver it before the exit. Background jobs
   * still holding the terminal are not waited for (the reference's `script` does the same). */
  if (pty->master >= 0)
    pty_read_some (pty);
  if (pty->callbacks.exited != NULL)
    pty->callbacks.exited (pty, wait_status, pty->user_data);
}

void
nz_pty_free (NzPty *pty)
{
  if (pty == NULL)
    return;
  if (!pty->exited && pty->early_exit_id == 0)
    nz_exec_unwatch_child (pty->pid);
  g_clear_handle_id (&pty->early_exit_id, g_source_remove);
  g_clear_handle_id (&pty->read_watch, g_source_remove);
  g_clear_handle_id (&pty->write_watch, g_source_remove);
  if (pty->master >= 0)
    close (pty->master);
  g_byte_array_unref (pty->pending_input);
  g_free (pty);
}

G_NORETURN static void
child_exec (int slave, const char *cwd, const char *command, char *const *argv, char *const *envp)
{
  sigset_t none;
  int code;

  /* A new kernel session whose controlling terminal is the slave: pid = sid = pgid. */
  setsid ();
  ioctl (slave, TIOCSCTTY, 0);
  dup2 (slave, 0);
  dup2 (slave, 1);
  dup2 (slave, 2);
  if (slave > 2)
    close (slave);
  /* The agent ignores SIGPIPE and blocks nothing a shell expects; restore the defaults. */
  signal (SIGPIPE, SIG_DFL);
  signal (SIGCHLD, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (chdir (cwd) != 0)
    {
      dprintf (2, "%s: %s\r\n", cwd, strerror (errno));
      _exit (1);
    }
  /* A terminal is the workload's like any command: its uid, no capabilities. */
  if ((code = nz_privsep_drop_child ()) != 0)
    {
      dprintf (2, "namzu: cannot switch to the workload's uid: %s\r\n", strerror (code));
      _exit (126);
    }
  execvpe (command, argv, envp);
  code = errno == ENOENT ? 127 : 126;
  dprintf (2, "%s: %s\r\n", command, strerror (errno));
  _exit (code);
}

NzPty *
nz_pty_spawn (const char *command, const char *const *args, const char *cwd, char *const *envp,
              guint cols, guint rows, const NzPtyCallbacks *callbacks, gpointer user_data,
              GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
  int master = -1, slave = -1;
  int started[2];
  NzPty *pty;
  pid_t pid;

  g_return_val_if_fail (command != NULL && cwd != NULL && envp != NULL, NULL);

  g_ptr_array_add (argv, (gpointer)command);
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);

  if (openpty (&master, &slave, NULL, NULL, &ws) != 0)
    {
      nz_throw_errno_prefix (error, "openpty");
      return NULL;
    }
  fcntl (master, F_SETFD, FD_CLOEXEC);
  fcntl (slave, F_SETFD, FD_CLOEXEC);
  /* Closed by the child's exec (or exit): until then the child may not have its session yet,
   * and a kill right after ready would find neither the session nor the group. */
  if (pipe2 (started, O_CLOEXEC) != 0)
    {
      int errsv = errno;

      close (master);
      close (slave);
      errno = errsv;
      nz_throw_errno_prefix (error, "pipe");
      return NULL;
    }
  pid = fork ();
  if (pid < 0)
    {
      int errsv = errno;

      close (master);
      close (slave);
      close (started[0]);
      close (started[1]);
      errno = errsv;
      nz_throw_errno_prefix (error, "fork");
      return NULL;
    }
  if (pid == 0)
    {
      close (master);
      close (started[0]);
      child_exec (slave, cwd, command, (char *const *)argv->pdata, envp);
    }
  close (slave);
  close (started[1]);
  {
    char c;

    while (read (started[0], &c, 1) < 0 && errno == EINTR)
      ;
    close (started[0]);
  }
  g_unix_set_fd_nonblocking (master, TRUE, NULL);

  pty = g_new0 (NzPty, 1);
  pty->pid = pid;
  pty->master = master;
  pty->pending_input = g_byte_array_new ();
  if (callbacks != NULL)
    pty->callbacks = *callbacks;
  pty->user_data = user_data;
  pty_watch_output (pty);
  pty->spawning = TRUE;
  nz_exec_watch_child (pid, pty_child_exited, pty);
  pty->spawning = FALSE;
  return pty;
}

static gboolean
pty_writable (int fd, GIOCondition cond, gpointer user_data)
{
  NzPty *pty = user_data;

  while (pty->pending_input->len > 0)
    {
      ssize_t n = write (pty->master, pty->pending_input->data, pty->pending_input->len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return G_SOURCE_CONTINUE;
      if (n < 0)
        {
          /* The terminal is gone: drop the input, release the writer. */
          g_byte_array_set_size (pty->pending_input, 0);
          break;
        }
      g_byte_array_remove_range (pty->pending_input, 0, (guint)n);
    }
  pty->write_watch = 0;
  if (pty->callbacks.input_drained != NULL)
    pty->callbacks.input_drained (pty, pty->user_data);
  return G_SOURCE_REMOVE;
}

gboolean
nz_pty_write (NzPty *pty, const void *data, gsize len)
{
  const guint8 *p = data;

  g_return_val_if_fail (pty != NULL, TRUE);
  if (pty->master < 0)
    return TRUE;
  while (len > 0 && pty->pending_input->len == 0)
    {
      ssize_t n = write (pty->master, p, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        break;
      if (n < 0)
        return TRUE; /* EIO: nobody reads the terminal any more */
      p += n;
      len -= (gsize)n;
    }
  if (len == 0)
    return TRUE;
  g_byte_array_append (pty->pending_input, p, (guint)len);
  if (pty->write_watch == 0)
    pty->write_watch
        = g_unix_fd_add (pty->master, G_IO_OUT | G_IO_ERR | G_IO_HUP, pty_writable, pty);
  return FALSE;
}

gboolean
nz_pty_resize (NzPty *pty, guint cols, guint rows, GError **error)
{
  struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

  g_return_val_if_fail (pty != NULL, FALSE);
  if (ioctl (pty->master, TIOCSWINSZ, &ws) != 0)
    return nz_throw_errno_prefix (error, "TIOCSWINSZ");
  return TRUE;
}

void
nz_pty_set_output_paused (NzPty *pty, gboolean paused)
{
  if (pty == NULL || pty->output_paused == paused)
    return;
  pty->output_paused = paused;
  if (paused)
    g_clear_handle_id (&pty->read_watch, g_source_remove);
  else
    pty_watch_output (pty);
}

/* Session id (field 6 of /proc/<pid>/stat, the 4th after the command's closing ')'). */
static gboolean
proc_session_of (const char *pid, GPid *out_sid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%s/stat", pid);
  g_autofree char *text = NULL;
  const char *p;
  char state;
  int ppid, pgrp, sid;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  p = strrchr (text, ')');
  if (p == NULL || sscanf (p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4)
    return FALSE;
  *out_sid = sid;
  return TRUE;
}

guint
nz_pty_signal_sessions (const GPid *sids, guint n_sids, GPid pgid, int signo)
{
  g_autoptr (GArray) targets = g_array_new (FALSE, FALSE, sizeof (GPid));
  GPid self = getpid ();
  GPid own_sid = getsid (0);
  guint count = 0;
  DIR *dir;
  struct dirent *de;

  for (guint i = 0; i < n_sids; i++)
    if (sids[i] > 1 && sids[i] != own_sid)
      g_array_append_val (targets, sids[i]);
  if (targets->len > 0 && (dir = opendir ("/proc")) != NULL)
    {
      while ((de = readdir (dir)) != NULL)
        {
          char *end = NULL;
          long pid = strtol (de->d_name, &end, 10);
          GPid sid;

          if (end == de->d_name || *end != '\0' || pid <= 1 || pid == self)
            continue;
          if (!proc_session_of (de->d_name, &sid))
            continue;
          for (guint i = 0; i < targets->len; i++)
            if (g_array_index (targets, GPid, i) == sid)
              {
                if (kill ((pid_t)pid, signo) == 0)
                  count++;
                break;
              }
        }
      closedir (dir);
    }
  /* Never -1 or 0: those would mean "everyone we may signal" or "our own group". */
  if (pgid > 1 && pgid != getpgrp ())
    kill (-pgid, signo);
  return count;
}

int
nz_pty_allowed_signal (const char *name, int fallback)
{
  if (g_strcmp0 (name, "SIGTERM") == 0)
    return SIGTERM;
  if (g_strcmp0 (name, "SIGKILL") == 0)
    return SIGKILL;
  if (g_strcmp0 (name, "SIGINT") == 0)
    return SIGINT;
  if (g_strcmp0 (name, "SIGHUP") == 0)
    return SIGHUP;
  return fallback;
}
