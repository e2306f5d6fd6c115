/* guard.c: namzu-run's guard process (guard.h). */
#include "guard.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-state.h"

/* An id line and "done": anything longer is not from namzu-run. */
#define GUARD_INPUT_MAX 4096

static void
guard_setup (gpointer user_data)
{
  (void)user_data;
  setsid ();
}

gboolean
nz_run_guard_start (NzRunGuard *guard, GError **error)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), NZ_RUN_GUARD_ENV, "1", TRUE);
  const char *argv[] = { self, NULL };
  int sv[2];
  gboolean ok;

  if (self == NULL)
    return nz_throw_errno_prefix (error, "cannot find namzu-run itself for its guard");
  /* A socket, not a pipe: send(MSG_NOSIGNAL) to a guard that died costs no SIGPIPE. */
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return nz_throw_errno_prefix (error, "socketpair for namzu-run's guard");
  ok = g_spawn_async_with_pipes_and_fds (NULL, argv, (const char *const *)envp,
                                         G_SPAWN_STDOUT_TO_DEV_NULL, guard_setup, NULL, sv[1], -1,
                                         -1, NULL, NULL, 0, NULL, NULL, NULL, NULL, error);
  close (sv[1]);
  if (!ok)
    return close (sv[0]), FALSE;
  guard->fd = sv[0];
  return TRUE;
}

static void
guard_say (NzRunGuard *guard, const char *line)
{
  g_autofree char *msg = g_strconcat (line, "\n", NULL);
  gsize len = strlen (msg), off = 0;

  while (guard->fd >= 0 && off < len)
    {
      ssize_t n = send (guard->fd, msg + off, len - off, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      off += (gsize)n;
    }
}

void
nz_run_guard_arm (NzRunGuard *guard, const char *id)
{
  guard_say (guard, id);
}

void
nz_run_guard_disarm (NzRunGuard *guard)
{
  guard_say (guard, "done");
  nz_run_guard_clear (guard);
}

void
nz_run_guard_clear (NzRunGuard *guard)
{
  if (guard->fd >= 0)
    close (guard->fd);
  guard->fd = -1;
}

int
nz_run_guard_main (void)
{
  g_autoptr (GString) in = g_string_new (NULL);
  g_auto (GStrv) lines = NULL;
  g_autoptr (GError) error = NULL;
  gboolean gone = FALSE;
  char buf[512];
  ssize_t n;

  nz_cli_init ("namzu-run");
  g_unsetenv (NZ_RUN_GUARD_ENV);
  signal (SIGPIPE, SIG_IGN);
  while (in->len <= GUARD_INPUT_MAX
         && ((n = read (STDIN_FILENO, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
    if (n > 0)
      g_string_append_len (in, buf, n);
  lines = g_strsplit (in->str, "\n", 3);
  /* Nothing armed (the sandbox was never made), or disarmed: nothing to do. */
  if (lines[0] == NULL || *lines[0] == '\0' || (lines[1] != NULL && g_str_equal (lines[1], "done")))
    return 0;
  /* Already gone (its lifetime ended it, or namzu-run's own destroy got there first): fine. */
  if (!nz_backend_destroy_id (lines[0], &gone, &error))
    {
      nz_cli_warn ("namzu-run ended without destroying sandbox %s, and neither could its guard: "
                   "%s",
                   lines[0], error->message);
      return 1;
    }
  if (!gone)
    nz_cli_warn ("namzu-run ended without destroying sandbox %s; its guard destroyed it",
                 lines[0]);
  return 0;
}
