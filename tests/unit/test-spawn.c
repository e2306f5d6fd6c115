/* Unit tests for nz_spawn_session (the engine's posix_spawn): the child's session, signal
 * state and descriptors, libuv's PATH search in the child environment, and stdin. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "nz-spawn.h"
#include "../nz-test.h"

typedef struct
{
  int errsv;
  int status;
  char *out;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Run, run_clear)

static char *
read_all (int fd)
{
  g_autoptr (GString) s = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0)
      g_string_append_len (s, buf, n);
  close (fd);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

/* Spawns, feeds @input (NULL: stdin is /dev/null), and waits; stderr is discarded. */
static void
run (Run *r, const char *cwd, const char *const *argv, const char *const *envp,
     const char *input)
{
  int in_fd = -1, out_fd = -1, err_fd = -1;
  GPid pid = 0;

  memset (r, 0, sizeof *r);
  r->errsv = nz_spawn_session (cwd, argv, envp, input != NULL ? &in_fd : NULL, &out_fd, &err_fd,
                               &pid);
  if (r->errsv != 0)
    return;
  if (input != NULL)
    {
      ck_assert_int_eq (write (in_fd, input, strlen (input)), (ssize_t)strlen (input));
      close (in_fd);
    }
  close (err_fd);
  r->out = read_all (out_fd);
  ck_assert_int_eq (waitpid (pid, &r->status, 0), pid);
}

static char *
make_tool (const char *dir, const char *name, const char *says, mode_t mode)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *body = g_strdup_printf ("#!/bin/sh\necho %s\n", says);

  ck_assert (g_mkdir_with_parents (dir, 0755) == 0);
  ck_assert (g_file_set_contents (path, body, -1, NULL));
  ck_assert (chmod (path, mode) == 0);
  return g_steal_pointer (&path);
}

START_TEST (test_session_signals_fds)
{
  const char *argv[] = { "/bin/sh", "-c",
                         "read pid _ _ _ pgid sid _ < /proc/self/stat; echo $pid $pgid $sid; "
                         "grep -E '^Sig(Ign|Blk)' /proc/self/status; "
                         "test -e /proc/self/fd/$LEAK && echo leaked || echo closed",
                         NULL };
  g_auto (Run) r = { 0 };
  g_auto (GStrv) envp = NULL;
  g_auto (GStrv) words = NULL;
  g_autofree char *leak = NULL;
  sigset_t block;
  int fd;

  /* The agent's state: SIGPIPE ignored, a blocked signal, a descriptor without CLOEXEC. */
  signal (SIGPIPE, SIG_IGN);
  sigemptyset (&block);
  sigaddset (&block, SIGUSR1);
  sigprocmask (SIG_BLOCK, &block, NULL);
  fd = open ("/dev/null", O_RDONLY);
  ck_assert_int_ge (fd, 3);
  leak = g_strdup_printf ("%d", fd);
  envp = g_environ_setenv (g_get_environ (), "LEAK", leak, TRUE);

  run (&r, "/", argv, (const char *const *)envp, NULL);
  ck_assert_int_eq (r.errsv, 0);
  ck_assert (WIFEXITED (r.status) && WEXITSTATUS (r.status) == 0);
  words = g_strsplit_set (r.out, " \n\t", -1);
  /* pid == pgid == sid: the leader of its own session and process group. */
  ck_assert_str_eq (words[0], words[1]);
  ck_assert_str_eq (words[0], words[2]);
  ck_assert_msg (strstr (r.out, "SigIgn:\t0000000000000000") != NULL, "%s", r.out);
  ck_assert_msg (strstr (r.out, "SigBlk:\t0000000000000000") != NULL, "%s", r.out);
  ck_assert_msg (g_str_has_suffix (r.out, "closed\n"), "%s", r.out);
  close (fd);
}
END_TEST

START_TEST (test_path_search)
{
  g_autofree char *tmp = g_dir_make_tmp ("nz-spawn-XXXXXX", NULL);
  g_autofree char *noexec = g_build_filename (tmp, "noexec", NULL);
  g_autofree char *good = g_build_filename (tmp, "good", NULL);
  g_autofree char *rel = g_build_filename (tmp, "rel", NULL);
  g_autofree char *t1 = make_tool (noexec, "nztool", "noexec", 0644);
  g_autofree char *t2 = make_tool (good, "nztool", "good", 0755);
  g_autofree char *t3 = make_tool (rel, "nztool", "rel", 0755);
  const char *argv[] = { "nztool", NULL };
  const char *sh[] = { "sh", "-c", "echo default", NULL };
  g_autofree char *p_skip = g_strdup_printf ("PATH=/nonexistent:%s:%s", noexec, good);
  g_autofree char *p_denied = g_strdup_printf ("PATH=/nonexistent:%s", noexec);
  const char *skip_env[] = { p_skip, NULL };
  const char *denied_env[] = { p_denied, NULL };
  const char *rel_env[] = { "PATH=rel", NULL };
  const char *none_env[] = { "HOME=/", NULL };
  g_autofree char *our_path = g_strdup_printf ("%s:/usr/bin:/bin", good);

  /* A candidate that cannot be executed does not stop the search. */
  {
    g_auto (Run) r = { 0 };

    run (&r, "/", argv, skip_env, NULL);
    ck_assert_int_eq (r.errsv, 0);
    ck_assert_str_eq (r.out, "good\n");
  }
  /* ... but is the answer when nothing else is found. */
  {
    g_auto (Run) r = { 0 };

    run (&r, "/", argv, denied_env, NULL);
    ck_assert_int_eq (r.errsv, EACCES);
  }
  /* A relative entry is relative to the child's cwd, not ours. */
  {
    g_auto (Run) r = { 0 };

    run (&r, tmp, argv, rel_env, NULL);
    ck_assert_int_eq (r.errsv, 0);
    ck_assert_str_eq (r.out, "rel\n");
  }
  /* The child environment's PATH, never ours: ours would find the good tool. */
  g_setenv ("PATH", our_path, TRUE);
  {
    g_auto (Run) r = { 0 };

    run (&r, "/", argv, none_env, NULL);
    ck_assert_int_eq (r.errsv, ENOENT);
  }
  /* Without PATH in the child environment, libuv's default /usr/bin:/bin. */
  {
    g_auto (Run) r = { 0 };

    run (&r, "/", sh, none_env, NULL);
    ck_assert_int_eq (r.errsv, 0);
    ck_assert_str_eq (r.out, "default\n");
  }
  /* A cwd that does not exist fails the spawn with its errno, like Node. */
  {
    g_autofree char *missing = g_build_filename (tmp, "missing", NULL);
    g_auto (Run) r = { 0 };

    run (&r, missing, sh, none_env, NULL);
    ck_assert_int_eq (r.errsv, ENOENT);
  }
  g_unlink (t1);
  g_unlink (t2);
  g_unlink (t3);
  g_rmdir (noexec);
  g_rmdir (good);
  g_rmdir (rel);
  g_rmdir (tmp);
}
END_TEST

START_TEST (test_stdin)
{
  const char *cat[] = { "cat", NULL };
  const char *env[] = { "PATH=/usr/bin:/bin", NULL };
  g_auto (Run) with = { 0 };
  g_auto (Run) without = { 0 };

  run (&with, "/", cat, env, "fed through the pipe");
  ck_assert_int_eq (with.errsv, 0);
  ck_assert_str_eq (with.out, "fed through the pipe");
  /* No stdin pipe: /dev/null, so cat ends at once with nothing. */
  run (&without, "/", cat, env, NULL);
  ck_assert_int_eq (without.errsv, 0);
  ck_assert_str_eq (without.out, "");
  ck_assert (WIFEXITED (without.status) && WEXITSTATUS (without.status) == 0);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("spawn");
  TCase *tc = tcase_create ("spawn");

  tcase_add_test (tc, test_session_signals_fds);
  tcase_add_test (tc, test_path_search);
  tcase_add_test (tc, test_stdin);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
