/* Unit tests for the container:bwrap pieces that need no sandbox: the bwrap argv and
 * environment, the seccomp filter (loaded for real into a forked test process), cgroup
 * refusals and binary lookup. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-backend.h"
#include "nz-bwrap.h"
#include "nz-cgroup.h"
#include "nz-errors.h"
#include "nz-seccomp.h"
#include "../nz-test.h"

static char *tmp;

static void
setup (void)
{
  tmp = g_dir_make_tmp ("nz-bwrap-XXXXXX", NULL);
  ck_assert (tmp != NULL);
}

static void
teardown (void)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmp);

  ck_assert_int_eq (system (cmd), 0);
  g_free (tmp);
}

static int
find (GPtrArray *argv, const char *a, guint from)
{
  for (guint i = from; i < argv->len; i++)
    if (g_strcmp0 (argv->pdata[i], a) == 0)
      return (int)i;
  return -1;
}

/* TRUE when a, b(, c) appear consecutively somewhere in argv. */
static gboolean
has_seq (GPtrArray *argv, const char *a, const char *b, const char *c)
{
  for (int i = find (argv, a, 0); i >= 0; i = find (argv, a, (guint)i + 1))
    if ((guint)i + 1 < argv->len && g_strcmp0 (argv->pdata[i + 1], b) == 0
        && (c == NULL || ((guint)i + 2 < argv->len && g_strcmp0 (argv->pdata[i + 2], c) == 0)))
      return TRUE;
  return FALSE;
}

static GPtrArray *
build (NzCreateOptions *opts, const char *host_root)
{
  NzBwrapPlan plan = { "/usr/bin/bwrap", opts, "/build/tools/namzu-agent", "/state/nz-x/sock",
                       host_root };

  return nz_bwrap_build_argv (&plan);
}

START_TEST (test_argv_baseline)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GPtrArray) argv = build (opts, "/");
  g_autofree char *joined = NULL;
  static const char *const flags[] = { "--unshare-user", "--unshare-pid", "--unshare-ipc",
                                       "--unshare-uts", "--unshare-net",
                                       "--unshare-cgroup-try", "--new-session" };

  ck_assert_str_eq (argv->pdata[0], "/usr/bin/bwrap");
  for (gsize i = 0; i < G_N_ELEMENTS (flags); i++)
    ck_assert_msg (find (argv, flags[i], 0) > 0, "missing %s", flags[i]);
  ck_assert (has_seq (argv, "--cap-drop", "ALL", NULL));
  ck_assert (has_seq (argv, "--hostname", "namzu", NULL));
  ck_assert (has_seq (argv, "--ro-bind", "/usr", "/usr"));
  ck_assert (has_seq (argv, "--ro-bind", "/etc", "/etc"));
  ck_assert (has_seq (argv, "--proc", "/proc", NULL));
  ck_assert (has_seq (argv, "--dev", "/dev", NULL));
  ck_assert (has_seq (argv, "--tmpfs", "/tmp", NULL));
  ck_assert (has_seq (argv, "--tmpfs", "/var/tmp", NULL));
  ck_assert (has_seq (argv, "--tmpfs", "/workspace", NULL));
  ck_assert (has_seq (argv, "--tmpfs", "/home/namzu", NULL));
  /* Read-only: the workload can neither replace a socket there nor write onto the host. */
  ck_assert (has_seq (argv, "--ro-bind", "/state/nz-x/sock", "/run/namzu"));
  ck_assert (!has_seq (argv, "--bind", "/state/nz-x/sock", "/run/namzu"));
  ck_assert (find (argv, "--userns", 0) < 0);
  ck_assert (has_seq (argv, "--ro-bind", "/build/tools/namzu-agent", NZ_BWRAP_BOUND_AGENT));
  ck_assert (has_seq (argv, "--remount-ro", "/", NULL));
  ck_assert (has_seq (argv, "--chdir", "/workspace", NULL));
  ck_assert (has_seq (argv, "--seccomp", "3", NULL));
  ck_assert (has_seq (argv, "--json-status-fd", "4", NULL));
  ck_assert (has_seq (argv, "--uid", "1001", NULL));
  /* The agent is the command, after "--", and last. */
  ck_assert_str_eq (argv->pdata[argv->len - 2], "--");
  ck_assert_str_eq (argv->pdata[argv->len - 1], NZ_BWRAP_BOUND_AGENT);
  /* Never the host's private places, never a way back to the parent's lifetime. */
  g_ptr_array_add (argv, NULL);
  joined = g_strjoinv (" ", (char **)argv->pdata);
  ck_assert_msg (strstr (joined, " /root") == NULL, "%s", joined);
  ck_assert (strstr (joined, " /home ") == NULL);
  ck_assert (strstr (joined, "--bind /run ") == NULL && strstr (joined, "--ro-bind /run ") == NULL);
  ck_assert (strstr (joined, "--die-with-parent") == NULL);
  ck_assert (strstr (joined, "--share-net") == NULL);
  ck_assert (strstr (joined, "--cap-add") == NULL);
  /* ro /usr comes before the writable tmpfs and the root is remounted read-only last */
  ck_assert_int_lt (find (argv, "--remount-ro", 0), find (argv, "--chdir", 0));
}
END_TEST

START_TEST (test_argv_network_and_layout)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GPtrArray) argv = NULL;
  g_autoptr (GError) error = NULL;

  opts->network = NZ_NETWORK_ALLOW_ALL;
  ck_assert (nz_create_options_set_mount (opts, "outputs", "/srv/out", &error));
  ck_assert (nz_create_options_set_mount (opts, "uploads", "/srv/up", &error));
  g_ptr_array_add (opts->writable_paths, g_strdup ("/opt/cache"));
  argv = build (opts, "/");
  ck_assert_int_eq (find (argv, "--unshare-net", 0), -1);
  ck_assert (has_seq (argv, "--bind", "/srv/out", NZ_LAYOUT_OUTPUTS_PATH));
  ck_assert (has_seq (argv, "--ro-bind", "/srv/up", NZ_LAYOUT_UPLOADS_PATH));
  ck_assert (has_seq (argv, "--tmpfs", "/opt/cache", NULL));
  /* The workspace is the outputs mount when there is one (spec B.4). */
  ck_assert (has_seq (argv, "--chdir", NZ_LAYOUT_OUTPUTS_PATH, NULL));
}
END_TEST

START_TEST (test_argv_host_layout_and_etc_masks)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GPtrArray) argv = NULL;
  const char *const dirs[] = { "usr/lib", "lib64", "etc/ssl/private", "etc/ok" };
  g_autofree char *p = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *d = g_build_filename (tmp, dirs[i], NULL);

      ck_assert_int_eq (g_mkdir_with_parents (d, 0755), 0);
    }
  p = g_build_filename (tmp, "lib", NULL);
  ck_assert_int_eq (symlink ("usr/lib", p), 0);
  g_free (p);
  p = g_build_filename (tmp, "etc/ssl/private", NULL);
  ck_assert_int_eq (chmod (p, 0700), 0);
  g_free (p);
  p = g_build_filename (tmp, "etc/shadow", NULL);
  ck_assert (g_file_set_contents (p, "root:x", -1, NULL));
  ck_assert_int_eq (chmod (p, 0640), 0);
  g_free (p);
  p = g_build_filename (tmp, "etc/ok/hosts", NULL);
  ck_assert (g_file_set_contents (p, "127.0.0.1", -1, NULL));
  ck_assert_int_eq (chmod (p, 0644), 0);
  g_free (p);

  argv = build (opts, tmp);
  ck_assert (has_seq (argv, "--symlink", "usr/lib", "/lib"));
  p = g_build_filename (tmp, "lib64", NULL);
  ck_assert (has_seq (argv, "--ro-bind", p, "/lib64"));
  ck_assert_int_eq (find (argv, "/sbin", 0), -1);
  /* root-only files are masked, world-readable ones are not */
  ck_assert (has_seq (argv, "--ro-bind", "/dev/null", "/etc/shadow"));
  ck_assert (has_seq (argv, "--tmpfs", "/etc/ssl/private", NULL));
  ck_assert_int_eq (find (argv, "/etc/ok/hosts", 0), -1);
  /* masks come after the /etc bind they cover */
  ck_assert_int_gt (find (argv, "/etc/shadow", 0), find (argv, "/etc", 0));
}
END_TEST

/* Privsep: our own two-uid namespace instead of bwrap's, and the agent's three capabilities. */
START_TEST (test_argv_privsep)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  NzBwrapPlan plan = { "/usr/bin/bwrap", opts, "/build/tools/namzu-agent", "/state/nz-x/sock",
                       "/", TRUE };
  g_autoptr (GPtrArray) argv = nz_bwrap_build_argv (&plan);
  g_auto (GStrv) env = nz_bwrap_build_envp (opts, TRUE);

  ck_assert (has_seq (argv, "--userns", "7", NULL));
  ck_assert (find (argv, "--unshare-user", 0) < 0);
  ck_assert (find (argv, "--uid", 0) < 0);
  ck_assert (has_seq (argv, "--cap-drop", "ALL", NULL));
  ck_assert (has_seq (argv, "--cap-add", "CAP_SETUID", NULL));
  ck_assert (has_seq (argv, "--cap-add", "CAP_SETGID", NULL));
  ck_assert (has_seq (argv, "--cap-add", "CAP_KILL", NULL));
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_AGENT_UID"), "0");
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_AGENT_WORKLOAD_UID"), "1001");
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_AGENT_WORKLOAD_GID"), "1001");
}
END_TEST

START_TEST (test_envp)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_auto (GStrv) env = nz_bwrap_build_envp (opts, FALSE);
  g_auto (GStrv) env2 = NULL;
  g_autoptr (GPtrArray) argv = build (opts, "/");

  ck_assert_str_eq (g_environ_getenv (env, "HOME"), "/home/namzu");
  ck_assert_str_eq (g_environ_getenv (env, "USER"), "namzu");
  /* The listener and the token come as descriptors; no socket path inside, no secret here. */
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_AGENT_LISTEN_FD"), "5");
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_AGENT_BIND_TOKEN_FD"), "6");
  ck_assert (g_environ_getenv (env, "NAMZU_AGENT_UNIX_PATH") == NULL);
  ck_assert (g_environ_getenv (env, "NAMZU_AGENT_UID") == NULL);
  ck_assert_str_eq (g_environ_getenv (env, "NAMZU_SANDBOX_WORKSPACE"), "/workspace");
  ck_assert (g_environ_getenv (env, "NAMZU_AGENT_BIND_TOKEN") == NULL);
  ck_assert (g_environ_getenv (env, "PATH") != NULL);
  ck_assert (g_environ_getenv (env, "NAMZU_SANDBOX_READ_ROOTS") == NULL);
  /* nothing of ours leaks in */
  g_setenv ("NZ_TEST_LEAK", "1", TRUE);
  ck_assert (g_environ_getenv (env, "NZ_TEST_LEAK") == NULL);
  ck_assert_uint_le (g_strv_length (env), 10);

  ck_assert (nz_create_options_set_mount (opts, "outputs", "/srv/o", NULL));
  ck_assert (nz_create_options_set_mount (opts, "uploads", "/srv/u", NULL));
  env2 = nz_bwrap_build_envp (opts, FALSE);
  ck_assert_str_eq (g_environ_getenv (env2, "NAMZU_SANDBOX_WORKSPACE"), NZ_LAYOUT_OUTPUTS_PATH);
  ck_assert_str_eq (g_environ_getenv (env2, "NAMZU_SANDBOX_READ_ROOTS"),
                    NZ_LAYOUT_OUTPUTS_PATH ":" NZ_LAYOUT_UPLOADS_PATH);
  ck_assert_str_eq (g_environ_getenv (env2, "NAMZU_SANDBOX_WRITE_ROOTS"), NZ_LAYOUT_OUTPUTS_PATH);
  ck_assert (g_environ_getenv (env2, "NAMZU_AGENT_BIND_TOKEN") == NULL);
}
END_TEST

START_TEST (test_seccomp_builds)
{
  g_autoptr (GError) error = NULL;
  int fd = nz_seccomp_build_fd (&error);
  struct stat st;
  const char *const *denied = nz_seccomp_denied_syscalls ();
  const char *const must[] = { "mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
                               "kexec_load", "init_module", "finit_module", "delete_module",
                               "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
                               "reboot", "swapon", "swapoff", "syslog", "acct",
                               "open_by_handle_at", "userfaultfd", "ptrace" };

  ck_assert_msg (fd >= 0, "%s", error ? error->message : "");
  ck_assert_int_eq (fstat (fd, &st), 0);
  ck_assert_int_gt (st.st_size, 0);
  ck_assert_int_eq (st.st_size % sizeof (struct sock_filter), 0);
  ck_assert_int_eq (lseek (fd, 0, SEEK_CUR), 0);
  ck_assert (fcntl (fd, F_GETFD) & FD_CLOEXEC);
  for (gsize i = 0; i < G_N_ELEMENTS (must); i++)
    ck_assert_msg (g_strv_contains ((const char *const *)denied, must[i]), "%s not denied",
                   must[i]);
  close (fd);
}
END_TEST

/* Loads the exported program into a child process, as bwrap does for the sandbox, and checks
 * what it denies and what it lets through. The child leaves with _exit(): nothing that runs at
 * exit (LeakSanitizer needs ptrace) may meet the filter. Returns the first failing check. */
static int
seccomp_child (int fd)
{
  struct sock_filter prog[4096];
  struct sock_fprog fprog;
  ssize_t n = read (fd, prog, sizeof prog);
  int pipefd[2];

  if (n <= 0 || n % sizeof (struct sock_filter) != 0)
    return 1;
  fprog.len = (unsigned short)(n / sizeof (struct sock_filter));
  fprog.filter = prog;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
      || syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0)
    return 2;
  if (unshare (CLONE_NEWUSER) != -1 || errno != EPERM)
    return 3;
  if (mount ("none", "/mnt", "tmpfs", 0, NULL) != -1 || errno != EPERM)
    return 4;
  if (syscall (SYS_clone3, NULL, 0) != -1 || errno != ENOSYS)
    return 5;
  if (syscall (SYS_clone, CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0) != -1 || errno != EPERM)
    return 6;
  if (ioctl (0, TIOCSTI, "x") != -1 || errno != EPERM)
    return 7;
  if (syscall (SYS_setns, 0, 0) != -1 || errno != EPERM)
    return 8;
  /* ordinary work still runs */
  if (pipe (pipefd) != 0 || write (pipefd[1], "ok", 2) != 2 || getpid () <= 0)
    return 9;
  return 0;
}

START_TEST (test_seccomp_enforces)
{
  g_autoptr (GError) error = NULL;
  int fd = nz_seccomp_build_fd (&error);
  int status = 0;
  pid_t pid;

  ck_assert (fd >= 0);
  pid = fork ();
  ck_assert (pid >= 0);
  if (pid == 0)
    _exit (seccomp_child (fd));
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  ck_assert (WIFEXITED (status));
  ck_assert_msg (WEXITSTATUS (status) == 0, "seccomp check %d failed", WEXITSTATUS (status));
  close (fd);
}
END_TEST

START_TEST (test_cgroup_refusal_names_the_flag)
{
  NzCgroupLimits none = { 0, 0, 0 };
  NzCgroupLimits mem = { 64, 0, 0 };
  NzCgroupLimits procs = { 0, 8, 0 };
  g_autoptr (NzCgroup) empty = NULL;
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  g_autofree char *leftover = g_build_filename (tmp, "memory", NULL);

  g_setenv ("NAMZU_CGROUP_ROOT", tmp, TRUE);
  empty = nz_cgroup_create ("nz-000000000001", &none, NULL);
  ck_assert (empty != NULL);
  ck_assert_uint_eq (empty->paths->len, 0);
  ck_assert (nz_cgroup_create ("nz-000000000001", &mem, &e1) == NULL);
  ck_assert (g_error_matches (e1, NZ_ERROR, NZ_ERROR_UNSUPPORTED));
  ck_assert_msg (g_str_has_prefix (e1->message, "--memory-mb cannot be enforced: no writable "
                                                "memory cgroup controller"), "%s", e1->message);
  ck_assert (nz_cgroup_create ("nz-000000000001", &procs, &e2) == NULL);
  ck_assert (strstr (e2->message, "--max-processes cannot be enforced") != NULL);
  ck_assert (!g_file_test (leftover, G_FILE_TEST_EXISTS));
}
END_TEST

/* @root is a cgroup2 mount whose cgroup.controllers offers memory, pids and cpu, and we may
 * enable them below it. */
static gboolean
v2_has_controllers (const char *root)
{
  g_autofree char *path = g_build_filename (root, "cgroup.controllers", NULL);
  g_autofree char *ctrl = NULL;
  g_auto (GStrv) words = NULL;
  g_autofree char *subtree = g_build_filename (root, "cgroup.subtree_control", NULL);

  if (!g_file_get_contents (path, &ctrl, NULL, NULL) || access (subtree, W_OK) != 0)
    return FALSE;
  words = g_strsplit_set (g_strstrip (ctrl), " ", -1);
  return g_strv_contains ((const char *const *)words, "memory")
         && g_strv_contains ((const char *const *)words, "pids")
         && g_strv_contains ((const char *const *)words, "cpu");
}

static gboolean
is_fs_type (const char *path, long magic)
{
  struct statfs sfs;

  return statfs (path, &sfs) == 0 && sfs.f_type == magic;
}

/* A real hierarchy's limits: every controller gets a leaf, the memory limit reads back, and
 * removing them leaves nothing behind. @memory_file is where the memory limit lives. */
static void
cgroup_real_on (const char *root, guint want_paths, const char *memory_file)
{
  NzCgroupLimits l = { 64, 8, 0.5 };
  g_autoptr (NzCgroup) cg = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *id = nz_state_new_id ();
  g_autofree char *mem = NULL;
  g_autofree char *p = NULL;

  g_setenv ("NAMZU_CGROUP_ROOT", root, TRUE);
  cg = nz_cgroup_create (id, &l, &error);
  ck_assert_msg (cg != NULL, "%s: %s", root, error ? error->message : "");
  ck_assert_uint_eq (cg->paths->len, want_paths);
  ck_assert_uint_eq (cg->procs_fds->len, want_paths);
  p = g_build_filename (cg->paths->pdata[0], memory_file, NULL);
  ck_assert (g_file_get_contents (p, &mem, NULL, NULL));
  ck_assert_str_eq (g_strstrip (mem), "67108864");
  nz_cgroup_close_fds (cg);
  ck_assert (nz_cgroup_remove ((const char *const *)cg->paths->pdata, cg->paths->len, 1000,
                               &error));
  for (guint i = 0; i < cg->paths->len; i++)
    ck_assert (!g_file_test (cg->paths->pdata[i], G_FILE_TEST_EXISTS));
}

/* The real thing on whatever hierarchy the host has: cgroup v2 (one hierarchy, controllers
 * enabled down to the leaf) or v1 (one mount per controller). A v2 hierarchy that lacks the
 * controllers (a hybrid host's /sys/fs/cgroup/unified, where v1 holds them) must refuse on the
 * real filesystem too, naming the flag. Under CI the host must offer one of them in full. */
START_TEST (test_cgroup_real)
{
  static const char *const roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
  gboolean enforced = FALSE;

  for (gsize i = 0; i < G_N_ELEMENTS (roots); i++)
    {
      const char *root = roots[i];

      if (is_fs_type (root, CGROUP2_SUPER_MAGIC) && v2_has_controllers (root))
        {
          cgroup_real_on (root, 1, "memory.max");
          enforced = TRUE;
        }
      else if (is_fs_type (root, CGROUP2_SUPER_MAGIC) && access (root, W_OK) == 0)
        {
          NzCgroupLimits mem = { 64, 0, 0 };
          g_autoptr (GError) error = NULL;
          g_autofree char *id = nz_state_new_id ();
          g_autofree char *parent = g_build_filename (root, "namzu", NULL);
          g_autofree char *leaf = g_build_filename (parent, id, NULL);

          g_setenv ("NAMZU_CGROUP_ROOT", root, TRUE);
          ck_assert (nz_cgroup_create (id, &mem, &error) == NULL);
          ck_assert_msg (g_str_has_prefix (error->message, "--memory-mb cannot be enforced: no "
                                                           "writable memory cgroup controller"),
                         "%s", error->message);
          ck_assert (!g_file_test (leaf, G_FILE_TEST_EXISTS));
          g_rmdir (parent); /* the shared parent, if nothing else uses it */
        }
      else if (i == 0 && access ("/sys/fs/cgroup/memory", W_OK) == 0
               && access ("/sys/fs/cgroup/pids", W_OK) == 0
               && access ("/sys/fs/cgroup/cpu", W_OK) == 0)
        {
          cgroup_real_on (root, 3, "memory.limit_in_bytes");
          enforced = TRUE;
        }
    }
  ck_assert_msg (enforced || !nz_test_under_ci (),
                 "CI: no writable cgroup v2 or v1 memory, pids and cpu controllers");
  if (!enforced)
    fprintf (stderr, "test_cgroup_real: no writable cgroup controllers here, only the refusal "
                     "was checked\n");
}
END_TEST

START_TEST (test_find_binaries)
{
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL;
  g_autofree char *path = g_strdup (g_getenv ("PATH"));

  g_setenv ("NAMZU_BWRAP", "/nonexistent/bwrap", TRUE);
  ck_assert (nz_bwrap_find_binary (&e1) == NULL);
  ck_assert (strstr (e1->message, "apt-get install bubblewrap") != NULL);
  g_unsetenv ("NAMZU_BWRAP");
  g_setenv ("PATH", "/nonexistent", TRUE);
  ck_assert (nz_bwrap_find_binary (&e2) == NULL);
  ck_assert (strstr (e2->message, "apt-get install bubblewrap") != NULL);
  g_setenv ("PATH", path, TRUE); /* teardown runs rm */
  g_setenv ("NAMZU_AGENT_BIN", "relative/agent", TRUE);
  ck_assert (nz_bwrap_find_agent (&e3) == NULL);
  ck_assert (strstr (e3->message, "NAMZU_AGENT_BIN") != NULL);
}
END_TEST

static Suite *
bwrap_suite (void)
{
  Suite *s = suite_create ("bwrap");
  TCase *tc = tcase_create ("bwrap");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_argv_baseline);
  tcase_add_test (tc, test_argv_privsep);
  tcase_add_test (tc, test_argv_network_and_layout);
  tcase_add_test (tc, test_argv_host_layout_and_etc_masks);
  tcase_add_test (tc, test_envp);
  tcase_add_test (tc, test_seccomp_builds);
  /* Valgrind cannot install seccomp filters: not registered there (the plan says so), never
   * a pass that checked nothing; the plain and sanitizer runs cover it. */
  if (g_getenv ("NZ_UNDER_VALGRIND") == NULL)
    tcase_add_test (tc, test_seccomp_enforces);
  tcase_add_test (tc, test_cgroup_refusal_names_the_flag);
  tcase_add_test (tc, test_cgroup_real);
  tcase_add_test (tc, test_find_binaries);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return nz_test_run (bwrap_suite ());
}
