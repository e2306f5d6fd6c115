#define _GNU_SOURCE
#include "nz-spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <paths.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <unistd.h>

#include "nz-autofd.h"

/* posix_spawn file actions and attributes, destroyed together. */
typedef struct
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
} SpawnSetup;

static void
spawn_setup_clear (SpawnSetup *s)
{
  posix_spawn_file_actions_destroy (&s->fa);
  posix_spawnattr_destroy (&s->attr);
}

static int
spawn_setup_init (SpawnSetup *s, const char *cwd, int in_rd, int out_wr, int err_wr)
{
  sigset_t none, all;
  int r;

  posix_spawn_file_actions_init (&s->fa);
  posix_spawnattr_init (&s->attr);
  sigemptyset (&none);
  /* Not sigfillset(): it leaves out glibc's internal signals (32, 33), and posix_spawn then
   * hands them to the child as SIG_IGN, which survives exec into programs that use them. */
  memset (&all, 0xff, sizeof all);
  /* Like libuv's child: every disposition back to default (the agent ignores SIGPIPE, and
   * ignored dispositions survive exec), nothing blocked, and a session of its own so the
   * whole group can be signalled. */
  if ((r = posix_spawnattr_setflags (&s->attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK
                                                   | POSIX_SPAWN_SETSIGDEF))
          != 0
      || (r = posix_spawnattr_setsigmask (&s->attr, &none)) != 0
      || (r = posix_spawnattr_setsigdefault (&s->attr, &all)) != 0)
    return r;
  if (in_rd >= 0)
    r = posix_spawn_file_actions_adddup2 (&s->fa, in_rd, STDIN_FILENO);
  else
    r = posix_spawn_file_actions_addopen (&s->fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (r != 0 || (r = posix_spawn_file_actions_adddup2 (&s->fa, out_wr, STDOUT_FILENO)) != 0
      || (r = posix_spawn_file_actions_adddup2 (&s->fa, err_wr, STDERR_FILENO)) != 0
      || (r = posix_spawn_file_actions_addchdir_np (&s->fa, cwd)) != 0)
    return r;
  /* Descriptors the agent holds without close-on-exec must not leak into the workload. */
  return posix_spawn_file_actions_addclosefrom_np (&s->fa, STDERR_FILENO + 1);
}

/* libuv's search (uv__spawn_and_init_child): the child environment's PATH, else the default. */
static int
spawn_searched (SpawnSetup *s, const char *cwd, const char *const *argv,
                const char *const *envp, pid_t *pid)
{
  const char *path = g_environ_getenv ((char **)envp, "PATH");
  g_auto (GStrv) dirs = NULL;
  gboolean denied = FALSE;

  if (strchr (argv[0], '/') != NULL)
    return posix_spawn (pid, argv[0], &s->fa, &s->attr, (char *const *)argv,
                        (char *const *)envp);
  dirs = g_strsplit (path != NULL ? path : _PATH_DEFPATH, ":", -1);
  for (guint i = 0; dirs[i] != NULL; i++)
    {
      const char *dir = *dirs[i] != '\0' ? dirs[i] : ".";
      /* A relative entry is relative to the child's cwd, which is not ours. */
      g_autofree char *file = g_path_is_absolute (dir)
                                  ? g_build_filename (dir, argv[0], NULL)
                                  : g_build_filename (cwd, dir, argv[0], NULL);
      int r;

      /* A failed spawn costs a whole clone; skip what is not there without one. */
      if (access (file, F_OK) != 0)
        continue;
      r = posix_spawn (pid, file, &s->fa, &s->attr, (char *const *)argv, (char *const *)envp);
      if (r == 0)
        return 0;
      if (r == EACCES)
        denied = TRUE;
      else if (r != ENOENT && r != ENOTDIR)
        return r;
    }
  return denied ? EACCES : ENOENT;
}

int
nz_spawn_session (const char *cwd, const char *const *argv, const char *const *envp,
                  int *in_fd, int *out_fd, int *err_fd, GPid *out_pid)
{
  nz_autofd int in_rd = -1, in_wr = -1, out_rd = -1, out_wr = -1, err_rd = -1, err_wr = -1;
  SpawnSetup s;
  pid_t pid = 0;
  int fds[2];
  int r;

  g_return_val_if_fail (cwd != NULL && argv != NULL && argv[0] != NULL && envp != NULL, EINVAL);
  g_return_val_if_fail (out_fd != NULL && err_fd != NULL && out_pid != NULL, EINVAL);

  if (in_fd != NULL)
    {
      if (pipe2 (fds, O_CLOEXEC) != 0)
        return errno;
      in_rd = fds[0];
      in_wr = fds[1];
    }
  if (pipe2 (fds, O_CLOEXEC) != 0)
    return errno;
  out_rd = fds[0];
  out_wr = fds[1];
  if (pipe2 (fds, O_CLOEXEC) != 0)
    return errno;
  err_rd = fds[0];
  err_wr = fds[1];

  r = spawn_setup_init (&s, cwd, in_rd, out_wr, err_wr);
  if (r == 0)
    r = spawn_searched (&s, cwd, argv, envp, &pid);
  spawn_setup_clear (&s);
  if (r != 0)
    return r;

  if (in_fd != NULL)
    *in_fd = nz_steal_fd (&in_wr);
  *out_fd = nz_steal_fd (&out_rd);
  *err_fd = nz_steal_fd (&err_rd);
  *out_pid = pid;
  return 0;
}
