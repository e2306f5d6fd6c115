#define _GNU_SOURCE
#include "nz-spawn.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <paths.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-privsep.h"

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

/* libuv's search (uv__spawn_and_init_child): the child environment's PATH, else the default.
 * The candidate files, in order; a failed spawn costs a whole clone, so what is not there is
 * left out without one. */
static GPtrArray *
search_candidates (const char *cwd, const char *const *argv, const char *const *envp)
{
  const char *path = g_environ_getenv ((char **)envp, "PATH");
  GPtrArray *files = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) dirs = NULL;

  if (strchr (argv[0], '/') != NULL)
    {
      g_ptr_array_add (files, g_strdup (argv[0]));
      return files;
    }
  dirs = g_strsplit (path != NULL ? path : _PATH_DEFPATH, ":", -1);
  for (guint i = 0; dirs[i] != NULL; i++)
    {
      const char *dir = *dirs[i] != '\0' ? dirs[i] : ".";
      /* A relative entry is relative to the child's cwd, which is not ours. */
      char *file = g_path_is_absolute (dir) ? g_build_filename (dir, argv[0], NULL)
                                            : g_build_filename (cwd, dir, argv[0], NULL);

      if (access (file, F_OK) == 0)
        g_ptr_array_add (files, file);
      else
        g_free (file);
    }
  return files;
}

/* Folds one attempt's result into the search: 0 and hard errors end it, EACCES is remembered
 * and ENOENT/ENOTDIR move on. Returns TRUE when the search is over. */
static gboolean
search_step (int r, gboolean *denied)
{
  if (r == EACCES)
    *denied = TRUE;
  return r != EACCES && r != ENOENT && r != ENOTDIR;
}

static int
spawn_searched (SpawnSetup *s, const char *cwd, const char *const *argv,
                const char *const *envp, pid_t *pid)
{
  g_autoptr (GPtrArray) files = search_candidates (cwd, argv, envp);
  gboolean denied = FALSE;

  for (guint i = 0; i < files->len; i++)
    {
      int r = posix_spawn (pid, files->pdata[i], &s->fa, &s->attr, (char *const *)argv,
                           (char *const *)envp);

      if (search_step (r, &denied))
        return r;
    }
  return denied ? EACCES : ENOENT;
}

/* What spawn_dropped()'s child needs, prepared by the parent; @err is the child's answer. */
typedef struct
{
  const char *cwd;
  int in_rd, out_wr, err_wr;
  char *const *files;
  guint n_files;
  const char *const *argv, *const *envp;
  volatile int err;
} DroppedChild;

/* The child of spawn_dropped(). It shares the agent's memory until it execs (CLONE_VM, like
 * posix_spawn's own child), so: system calls only, no allocation, no lock, and the uid
 * changes as raw system calls (the C library's would signal the agent's threads). What
 * posix_spawn's attributes and file actions do, then the switch to the workload's uid, then
 * the search. A failure is left in @err for the parent, which resumes when we exit. */
static int
dropped_child (void *data)
{
  DroppedChild *c = data;
  gboolean denied = FALSE;
  sigset_t none;
  int e = 0;

  /* Signals stay blocked (the parent blocked them all) until no handler of the agent's can
   * run here: every disposition back to the default first. */
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal (sig, SIG_DFL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (setsid () < 0)
    e = errno;
  if (e == 0 && c->in_rd < 0)
    {
      int fd = open ("/dev/null", O_RDONLY);

      if (fd < 0 || (fd != STDIN_FILENO && dup2 (fd, STDIN_FILENO) < 0))
        e = errno;
    }
  else if (e == 0 && dup2 (c->in_rd, STDIN_FILENO) < 0)
    e = errno;
  if (e == 0 && (dup2 (c->out_wr, STDOUT_FILENO) < 0 || dup2 (c->err_wr, STDERR_FILENO) < 0))
    e = errno;
  if (e == 0 && chdir (c->cwd) != 0)
    e = errno;
  if (e == 0)
    e = nz_privsep_drop_child ();
  if (e == 0)
    {
      /* Descriptors the agent holds without close-on-exec must not leak into the workload. */
      syscall (SYS_close_range, STDERR_FILENO + 1, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */);
      e = ENOENT;
      for (guint i = 0; i < c->n_files; i++)
        {
          execve (c->files[i], (char *const *)c->argv, (char *const *)c->envp);
          if (search_step (errno, &denied))
            {
              e = errno;
              break;
            }
        }
      if (e == ENOENT && denied)
        e = EACCES;
    }
  c->err = e;
  _exit (127);
}

/* posix_spawn cannot change uids: under privsep every workload process is started by a
 * clone(CLONE_VM | CLONE_VFORK) of our own, the way posix_spawn starts its child, so the
 * agent's memory is neither copied nor faulted in (a fork cost more than the command). */
#define DROPPED_CHILD_STACK (64 * 1024)

static int
spawn_dropped (const char *cwd, int in_rd, int out_wr, int err_wr, const char *const *argv,
               const char *const *envp, pid_t *out_pid)
{
  g_autoptr (GPtrArray) files = search_candidates (cwd, argv, envp);
  DroppedChild c = { cwd, in_rd, out_wr, err_wr, (char *const *)files->pdata, files->len,
                     argv, envp, 0 };
  sigset_t all, old;
  void *stack;
  pid_t pid;
  int e;

  stack = mmap (NULL, DROPPED_CHILD_STACK, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED)
    return errno;
  sigfillset (&all);
  pthread_sigmask (SIG_BLOCK, &all, &old);
  pid = clone (dropped_child, (char *)stack + DROPPED_CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
               &c);
  e = errno;
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  munmap (stack, DROPPED_CHILD_STACK);
  if (pid < 0)
    return e;
  /* CLONE_VFORK: the child has exec'd or exited by now, and said which. */
  if (c.err != 0)
    {
      waitpid (pid, NULL, 0);
      return c.err;
    }
  *out_pid = pid;
  return 0;
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

  if (nz_privsep_active ())
    r = spawn_dropped (cwd, in_rd, out_wr, err_wr, argv, envp, &pid);
  else
    {
      r = spawn_setup_init (&s, cwd, in_rd, out_wr, err_wr);
      if (r == 0)
        r = spawn_searched (&s, cwd, argv, envp, &pid);
      spawn_setup_clear (&s);
    }
  if (r != 0)
    return r;

  if (in_fd != NULL)
    *in_fd = nz_steal_fd (&in_wr);
  *out_fd = nz_steal_fd (&out_rd);
  *err_fd = nz_steal_fd (&err_rd);
  *out_pid = pid;
  return 0;
}
