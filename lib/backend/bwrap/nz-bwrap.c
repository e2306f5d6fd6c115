#define _GNU_SOURCE
#include "nz-bwrap.h"
#include "nz-bwrap-egress.h"

#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-agent-client.h"
#include "nz-autofd.h"
#include "nz-cgroup.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-sandbox-env.h"
#include "nz-seccomp.h"
#include "nz-token.h"

/* How long destroy waits for the sandbox's processes to be gone before it reports failure. */
#define NZ_BWRAP_KILL_TIMEOUT_MS 5000
/* /etc is scanned this deep for files the sandbox must not read (see mask_etc). */
#define NZ_BWRAP_ETC_DEPTH 4

static const char *const bwrap_missing_hint = "install bubblewrap: apt-get install bubblewrap";

/* ---- argv ----------------------------------------------------------------------------- */

static void
add (GPtrArray *argv, const char *arg)
{
  g_ptr_array_add (argv, g_strdup (arg));
}

static void
add2 (GPtrArray *argv, const char *a, const char *b)
{
  add (argv, a);
  add (argv, b);
}

static void
add3 (GPtrArray *argv, const char *a, const char *b, const char *c)
{
  add (argv, a);
  add (argv, b);
  add (argv, c);
}

/* The sandbox's uid maps onto ours, and we are usually root, so every root-only file in /etc
 * (shadow, gshadow, ssh host keys, sudoers) would be readable by its owner: the workload.
 * Anything not world-readable is masked: files by /dev/null, directories by an empty tmpfs. */
static void
mask_etc (GPtrArray *argv, const char *host_root, const char *rel, int depth)
{
  g_autofree char *host_dir = g_build_filename (host_root, rel, NULL);
  g_autoptr (GDir) d = g_dir_open (host_dir, 0, NULL);
  const char *name;

  if (d == NULL || depth <= 0)
    return;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *child_rel = g_build_filename (rel, name, NULL);
      g_autofree char *host = g_build_filename (host_root, child_rel, NULL);
      struct stat st;

      if (lstat (host, &st) != 0 || S_ISLNK (st.st_mode))
        continue;
      if (S_ISDIR (st.st_mode))
        {
          if ((st.st_mode & S_IROTH) == 0 || (st.st_mode & S_IXOTH) == 0)
            {
              /* Read-only too: a mask is no place to write past --disk-mb. */
              add2 (argv, "--tmpfs", child_rel);
              add2 (argv, "--remount-ro", child_rel);
            }
          else
            mask_etc (argv, host_root, child_rel, depth - 1);
        }
      else if ((st.st_mode & S_IROTH) == 0)
        add3 (argv, "--ro-bind", "/dev/null", child_rel);
    }
}

/* /bin, /lib, ... as the host has them: a merged-/usr host has symlinks, an older one dirs. */
static void
add_system_dirs (GPtrArray *argv, const char *host_root)
{
  static const char *const dirs[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
  g_autofree char *usr = g_build_filename (host_root, "usr", NULL);

  add3 (argv, "--ro-bind", usr, "/usr");
  for (gsize i = 0; i < G_N_ELEMENTS (dirs); i++)
    {
      g_autofree char *host = g_build_filename (host_root, dirs[i], NULL);
      struct stat st;

      if (lstat (host, &st) != 0)
        continue;
      if (S_ISLNK (st.st_mode))
        {
          g_autofree char *target = g_file_read_link (host, NULL);

          if (target != NULL)
            add3 (argv, "--symlink", target, dirs[i]);
        }
      else if (S_ISDIR (st.st_mode))
        add3 (argv, "--ro-bind", host, dirs[i]);
    }
}

/* A writable scratch tmpfs; --disk-mb sizes it (bwrap >= 0.8 takes --size just before
 * --tmpfs). Unsized, the kernel caps it at half the RAM. Either way its pages are memory,
 * charged to the sandbox's memory cgroup, never the host's disk. */
static void
add_scratch_tmpfs (GPtrArray *argv, const char *path, gint64 disk_mb)
{
  if (disk_mb > 0)
    {
      add (argv, "--size");
      g_ptr_array_add (argv, g_strdup_printf ("%" G_GINT64_FORMAT, disk_mb * 1024 * 1024));
    }
  add2 (argv, "--tmpfs", path);
}

const char *
nz_bwrap_workspace (const NzCreateOptions *opts)
{
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];

      if (strcmp (m->label, "outputs") == 0)
        return m->container_path;
    }
  return NZ_BWRAP_WORKSPACE;
}

static const char *
agent_inside (const char *agent_host_path)
{
  /* An agent installed under /usr is already in the sandbox's read-only /usr. */
  return g_str_has_prefix (agent_host_path, "/usr/") ? agent_host_path : NZ_BWRAP_BOUND_AGENT;
}

GPtrArray *
nz_bwrap_build_argv (const NzBwrapPlan *plan)
{
  static const char *const tmpfs_paths[] = { "/tmp", "/var/tmp", NZ_BWRAP_WORKSPACE,
                                             NZ_BWRAP_HOME };
  const NzCreateOptions *opts = plan->opts;
  const char *root = plan->host_root != NULL ? plan->host_root : "/";
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *uid = g_strdup_printf ("%d", NZ_BWRAP_UID);
  g_autofree char *etc = g_build_filename (root, "etc", NULL);
  g_autofree char *fd_seccomp = g_strdup_printf ("%d", NZ_BWRAP_SECCOMP_FD);
  g_autofree char *fd_status = g_strdup_printf ("%d", NZ_BWRAP_STATUS_FD);
  g_autofree char *userns_fd = g_strdup_printf ("%d", NZ_BWRAP_USERNS_FD);
  const char *agent = agent_inside (plan->agent_host_path);

  add (argv, plan->bwrap);
  /* Namespaces: user (so the sandbox's root is nobody's root), pid, ipc, uts, cgroup where the
   * kernel has it, and net unless the host asked for its network. Under privsep the user
   * namespace is ours, with two uids: bwrap (host root) enters it as the workload's uid. */
  if (plan->privsep)
    add2 (argv, "--userns", userns_fd);
  else
    {
      add3 (argv, "--unshare-user", "--uid", uid);
      add2 (argv, "--gid", uid);
    }
  add3 (argv, "--unshare-pid", "--unshare-ipc", "--unshare-uts");
  add (argv, "--unshare-cgroup-try");
  if (opts->network != NZ_NETWORK_ALLOW_ALL)
    add (argv, "--unshare-net"); /* deny-all: a fresh net namespace has only lo */
  add2 (argv, "--hostname", NZ_BWRAP_HOSTNAME);
  /* No capabilities, even inside the user namespace; bwrap always sets no-new-privs. Under
   * privsep the agent keeps the three it needs to start commands as the workload and signal
   * them; it drops them from every command (nz-privsep.c). */
  add2 (argv, "--cap-drop", "ALL");
  if (plan->privsep)
    {
      add2 (argv, "--cap-add", "CAP_SETUID");
      add2 (argv, "--cap-add", "CAP_SETGID");
      add2 (argv, "--cap-add", "CAP_KILL");
    }
  /* Its own session, so the workload cannot TIOCSTI into a terminal it was started from. */
  add (argv, "--new-session");

  /* The root: a read-only view of the host's system directories. Not /home, /root, /run, /srv,
   * /var or /mnt of the host: nothing of the host's data. */
  add_system_dirs (argv, root);
  add3 (argv, "--ro-bind", etc, "/etc");
  mask_etc (argv, root, "/etc", NZ_BWRAP_ETC_DEPTH);
  add2 (argv, "--proc", "/proc");
  add2 (argv, "--dev", "/dev");
  /* bwrap's /dev is a writable tmpfs with no size: read-only here, with /dev/shm a scratch
   * tmpfs like the others, so --disk-mb leaves no unbounded place to write. */
  add_scratch_tmpfs (argv, "/dev/shm", opts->disk_mb);
  add2 (argv, "--remount-ro", "/dev");
  /* Writable scratch, the docker baseline's set (spec B.1 DEFAULT_WRITABLE_ROOTFS_PATHS); bwrap's
   * tmpfs is exec, like docker's `exec` option, so `cc -o /tmp/a && /tmp/a` works. */
  for (gsize i = 0; i < G_N_ELEMENTS (tmpfs_paths); i++)
    add_scratch_tmpfs (argv, tmpfs_paths[i], opts->disk_mb);
  for (guint i = 0; i < opts->writable_paths->len; i++)
    add_scratch_tmpfs (argv, opts->writable_paths->pdata[i], opts->disk_mb);
  /* Layout mounts, spec B.4 order and modes. */
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];

      add3 (argv, m->writable ? "--bind" : "--ro-bind", m->host_path, m->container_path);
    }
  /* The egress proxy's socket directory, read-only: the workload must not replace what is
   * there nor write onto the host's disk through it. */
  add3 (argv, "--ro-bind", plan->sock_dir, NZ_BWRAP_SOCK_DIR);
  if (strcmp (agent, plan->agent_host_path) != 0)
    add3 (argv, "--ro-bind", plan->agent_host_path, agent);
  /* Like docker's --read-only: the root tmpfs bwrap built stays as it is now. */
  add2 (argv, "--remount-ro", "/");
  add2 (argv, "--chdir", nz_bwrap_workspace (opts));
  add2 (argv, "--seccomp", fd_seccomp);
  add2 (argv, "--json-status-fd", fd_status);
  /* No --die-with-parent: the sandbox outlives namzu-create. */
  add2 (argv, "--", agent);
  return argv;
}

static char *
join_roots (const NzCreateOptions *opts, gboolean writable_only)
{
  g_autoptr (GPtrArray) roots = g_ptr_array_new ();
  const char *ws = nz_bwrap_workspace (opts);

  g_ptr_array_add (roots, (gpointer)ws);
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];
      gboolean seen = FALSE;

      if (writable_only && !m->writable)
        continue;
      for (guint j = 0; j < roots->len; j++)
        seen = seen || strcmp (roots->pdata[j], m->container_path) == 0;
      if (!seen)
        g_ptr_array_add (roots, m->container_path);
    }
  g_ptr_array_add (roots, NULL);
  return g_strjoinv (":", (char **)roots->pdata);
}

char **
nz_bwrap_build_envp (const NzCreateOptions *opts, gboolean privsep)
{
  GPtrArray *env = g_ptr_array_new ();

  /* The whole environment, nothing inherited from the host: bwrap hands its own environment
   * to the agent. This replaces `--clearenv` + `--setenv`, which would put the token in
   * bwrap's argv for every `ps` on the host to read. */
  g_ptr_array_add (env, g_strdup ("PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"));
  g_ptr_array_add (env, g_strdup ("HOME=" NZ_BWRAP_HOME));
  g_ptr_array_add (env, g_strdup ("USER=namzu"));
  g_ptr_array_add (env, g_strdup ("LOGNAME=namzu"));
  g_ptr_array_add (env, g_strdup ("LANG=C.UTF-8"));
  g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_LISTEN_FD=%d", NZ_BWRAP_LISTEN_FD));
  g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_BIND_TOKEN_FD=%d", NZ_BWRAP_TOKEN_FD));
  if (privsep)
    {
      g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_UID=%d", NZ_BWRAP_AGENT_UID));
      g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_GID=%d", NZ_BWRAP_AGENT_UID));
      g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_WORKLOAD_UID=%d", NZ_BWRAP_UID));
      g_ptr_array_add (env, g_strdup_printf ("NAMZU_AGENT_WORKLOAD_GID=%d", NZ_BWRAP_UID));
    }
  g_ptr_array_add (env, g_strdup_printf ("NAMZU_SANDBOX_WORKSPACE=%s", nz_bwrap_workspace (opts)));
  if (opts->mounts->len > 0)
    {
      g_autofree char *r = join_roots (opts, FALSE);
      g_autofree char *w = join_roots (opts, TRUE);

      g_ptr_array_add (env, g_strdup_printf ("NAMZU_SANDBOX_READ_ROOTS=%s", r));
      g_ptr_array_add (env, g_strdup_printf ("NAMZU_SANDBOX_WRITE_ROOTS=%s", w));
    }
  /* The sandbox's environment goes to the agent's children only, not to the agent itself:
   * it applies it under each request's env (nz_guest_child_environ). */
  if (opts->env->len > 0)
    {
      g_autofree char *json = nz_sandbox_env_to_json (opts->env);

      g_ptr_array_add (env, g_strconcat (NZ_SANDBOX_ENV_AGENT_KNOB "=", json, NULL));
    }
  g_ptr_array_add (env, NULL);
  return (char **)g_ptr_array_free (env, FALSE);
}

/* ---- finding binaries ----------------------------------------------------------------- */

char *
nz_bwrap_find_binary (GError **error)
{
  const char *env = g_getenv ("NAMZU_BWRAP");
  char *path;

  if (env != NULL && *env != '\0')
    {
      if (g_file_test (env, G_FILE_TEST_IS_EXECUTABLE) && !g_file_test (env, G_FILE_TEST_IS_DIR))
        return g_strdup (env);
      return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                        "bubblewrap not found at NAMZU_BWRAP=%s: %s", env, bwrap_missing_hint),
              NULL);
    }
  path = g_find_program_in_path ("bwrap");
  if (path == NULL)
    return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                      "bubblewrap (bwrap) is not installed or not on PATH: %s",
                      bwrap_missing_hint), NULL);
  return path;
}

char *
nz_bwrap_find_agent (GError **error)
{
  const char *env = g_getenv ("NAMZU_AGENT_BIN");
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autoptr (GPtrArray) tried = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *list = NULL;

  if (env != NULL && *env != '\0')
    {
      if (g_path_is_absolute (env) && g_file_test (env, G_FILE_TEST_IS_EXECUTABLE))
        return g_strdup (env);
      return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                        "NAMZU_AGENT_BIN=%s is not an executable absolute path", env), NULL);
    }
  if (self != NULL)
    {
      g_autofree char *dir = g_path_get_dirname (self);

      /* Build tree: every tool sits in <build>/tools/; installed: <prefix>/bin. */
      g_ptr_array_add (tried, g_build_filename (dir, "namzu-agent", NULL));
      g_ptr_array_add (tried, g_build_filename (dir, "..", "namzu-agent", "namzu-agent", NULL));
    }
  g_ptr_array_add (tried, g_strdup (NZ_BACKEND_LIBEXECDIR "/namzu/namzu-agent"));
  for (guint i = 0; i < tried->len; i++)
    if (g_file_test (tried->pdata[i], G_FILE_TEST_IS_EXECUTABLE)
        && !g_file_test (tried->pdata[i], G_FILE_TEST_IS_DIR))
      return g_canonicalize_filename (tried->pdata[i], NULL);
  g_ptr_array_add (tried, NULL);
  list = g_strjoinv (", ", (char **)tried->pdata);
  return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                    "namzu-agent not found (looked at %s); set NAMZU_AGENT_BIN", list), NULL);
}

/* ---- processes ------------------------------------------------------------------------ */

/* State letter and start time (clock ticks since boot) of @pid, from /proc/<pid>/stat. */
static gboolean
proc_stat (pid_t pid, char *state, guint64 *start)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *text = NULL;
  g_auto (GStrv) fields = NULL;
  char *p;

  if (pid <= 0 || !g_file_get_contents (path, &text, NULL, NULL))
    return FALSE;
  /* The command name may hold spaces and parentheses: fields start after the last ')'. */
  p = strrchr (text, ')');
  if (p == NULL || p[1] != ' ')
    return FALSE;
  fields = g_strsplit (p + 2, " ", -1);
  /* fields[0] is field 3 (state); starttime is field 22 → fields[19]. */
  if (g_strv_length (fields) < 20)
    return FALSE;
  *state = fields[0][0];
  *start = g_ascii_strtoull (fields[19], NULL, 10);
  return TRUE;
}

static guint64
proc_start_time (pid_t pid)
{
  char state;
  guint64 start = 0;

  return proc_stat (pid, &state, &start) ? start : 0;
}

/* Alive and still the process we started (a recycled pid has another start time). A zombie
 * counts as gone: it holds no resources, and its reaper is not us. */
static gboolean
proc_is_ours (pid_t pid, guint64 start)
{
  char state;
  guint64 now_start;

  if (!proc_stat (pid, &state, &now_start))
    return FALSE;
  return state != 'Z' && state != 'X' && now_start == start;
}

typedef struct
{
  pid_t pid;
  guint64 start;
} NzProc;

static void
priv_procs (NzHandle *h, NzProc procs[2])
{
  double v = 0;

  memset (procs, 0, sizeof (NzProc) * 2);
  if (nz_json_get_number (h->priv, "childPid", &v))
    procs[0].pid = (pid_t)v;
  if (nz_json_get_number (h->priv, "childStartTime", &v))
    procs[0].start = (guint64)v;
  if (nz_json_get_number (h->priv, "bwrapPid", &v))
    procs[1].pid = (pid_t)v;
  if (nz_json_get_number (h->priv, "bwrapStartTime", &v))
    procs[1].start = (guint64)v;
}

/* SIGKILLs the sandbox's pid 1 (which takes its whole pid namespace down) and bwrap, then waits
 * up to @timeout_ms for both to be gone. */
static gboolean
kill_procs (const char *id, NzProc procs[2], pid_t reap_child, guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  for (int i = 0; i < 2; i++)
    if (procs[i].pid > 0 && proc_is_ours (procs[i].pid, procs[i].start))
      kill (procs[i].pid, SIGKILL);
  for (;;)
    {
      gboolean alive = FALSE;

      if (reap_child > 0)
        waitpid (reap_child, NULL, WNOHANG);
      for (int i = 0; i < 2; i++)
        alive = alive || (procs[i].pid > 0 && proc_is_ours (procs[i].pid, procs[i].start));
      if (!alive)
        return TRUE;
      if (g_get_monotonic_time () >= deadline)
        return nz_throw (error, NZ_ERROR_FAILED,
                         "sandbox '%s' could not be confirmed gone: its processes (%d, %d) are "
                         "still alive %u ms after SIGKILL", id, (int)procs[0].pid,
                         (int)procs[1].pid, timeout_ms);
      g_usleep (10 * 1000);
    }
}

/* The last non-empty line bwrap wrote to its log, for a failure message. */
static char *
log_tail (const char *log_path)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  guint n;

  if (!g_file_get_contents (log_path, &text, NULL, NULL))
    return g_strdup ("(no log)");
  lines = g_strsplit (g_strstrip (text), "\n", -1);
  n = g_strv_length (lines);
  return g_strdup (n > 0 && *lines[n - 1] != '\0' ? lines[n - 1] : "(empty log)");
}

/* Reads "child-pid" from bwrap's --json-status-fd file, once bwrap has written it. */
/* A number member @key of one of the lines bwrap wrote to its --json-status-fd file, or -1. */
static gint64
read_status_member (const char *status_path, const char *key)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (status_path, &text, NULL, NULL))
    return -1;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      g_autoptr (JsonObject) obj = NULL;
      double v;

      if (**l == '\0')
        continue;
      obj = nz_json_parse_object (*l, -1, NULL);
      if (obj != NULL && nz_json_get_number (obj, key, &v) && v >= 0 && v <= G_MAXINT32)
        return (gint64)v;
    }
  return -1;
}

/* Reads "child-pid" from bwrap's --json-status-fd file, once bwrap has written it. */
static pid_t
read_child_pid (const char *status_path)
{
  gint64 v = read_status_member (status_path, "child-pid");

  return v > 0 ? (pid_t)v : 0;
}

static int
move_fd_high (int fd)
{
  /* Above the fixed numbers the child dup2()s into (see spawn_bwrap). */
  int high = fcntl (fd, F_DUPFD_CLOEXEC, 10);

  close (fd);
  return high;
}

/* fork + exec bwrap detached: its own session, stdin /dev/null, stdout/stderr to @log_fd,
 * @inherit[i] at fd 3 + i (the seccomp program, the status file, the agent's listener, the
 * token pipe, the user namespace; -1 leaves a number unused), joined to the cgroups before exec
 * so nothing it forks escapes the limits. Returns bwrap's pid, or -1 with an error. */
#define NZ_BWRAP_N_INHERIT (NZ_BWRAP_USERNS_FD - NZ_BWRAP_SECCOMP_FD + 1)
static pid_t
spawn_bwrap (char **argv, char **envp, int log_in, const int inherit_in[NZ_BWRAP_N_INHERIT],
             NzCgroup *cg, GError **error)
{
  nz_autofd int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  nz_autofd int err_r = -1;
  nz_autofd int err_w = -1;
  /* Above the fixed numbers the child dup2()s into, so no dup2 clobbers a source. */
  nz_autofd int log_fd = fcntl (log_in, F_DUPFD_CLOEXEC, 10);
  int inherit[NZ_BWRAP_N_INHERIT];
  int pipefd[2];
  int child_errno = 0;
  const int *cg_fds = (const int *)(gpointer)cg->procs_fds->data;
  guint n_cg = cg->procs_fds->len;
  gboolean ok = TRUE;
  pid_t pid;
  ssize_t n;

  for (int i = 0; i < NZ_BWRAP_N_INHERIT; i++)
    {
      inherit[i] = inherit_in[i] >= 0 ? fcntl (inherit_in[i], F_DUPFD_CLOEXEC, 10) : -1;
      ok = ok && (inherit_in[i] < 0 || inherit[i] >= 0);
    }
  if (devnull < 0 || !ok || pipe2 (pipefd, O_CLOEXEC) != 0)
    {
      for (int i = 0; i < NZ_BWRAP_N_INHERIT; i++)
        nz_close_fd (&inherit[i]);
      return (nz_throw_errno_prefix (error, "cannot prepare bwrap's descriptors"), -1);
    }
  err_r = pipefd[0];
  err_w = move_fd_high (pipefd[1]);
  devnull = move_fd_high (devnull);
  if (err_w < 0 || devnull < 0 || log_fd < 0)
    {
      for (int i = 0; i < NZ_BWRAP_N_INHERIT; i++)
        nz_close_fd (&inherit[i]);
      return (nz_throw_errno_prefix (error, "cannot prepare bwrap's descriptors"), -1);
    }

  pid = fork ();
  if (pid == 0)
    {
      /* Child: async-signal-safe calls only. */
      sigset_t none;
      int e = 0;

      /* The caller may block or catch signals while it creates; the sandbox starts clean. */
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
          signal (sig, SIG_DFL);
      if (setsid () < 0)
        e = errno;
      if (e == 0)
        e = nz_cgroup_join_fds (cg_fds, n_cg);
      if (e == 0 && (dup2 (devnull, 0) < 0 || dup2 (log_fd, 1) < 0 || dup2 (log_fd, 2) < 0))
        e = errno;
      for (int i = 0; e == 0 && i < NZ_BWRAP_N_INHERIT; i++)
        if (inherit[i] >= 0 && dup2 (inherit[i], NZ_BWRAP_SECCOMP_FD + i) < 0)
          e = errno;
      if (e == 0)
        {
          /* Everything else we hold (sockets, other sandboxes' files) stays out of bwrap. */
          syscall (SYS_close_range, NZ_BWRAP_USERNS_FD + 1, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */);
          execve (argv[0], argv, envp);
          e = errno;
        }
      while (write (err_w, &e, sizeof e) < 0 && errno == EINTR)
        ;
      _exit (127);
    }
  for (int i = 0; i < NZ_BWRAP_N_INHERIT; i++)
    nz_close_fd (&inherit[i]);
  if (pid < 0)
    return (nz_throw_errno_prefix (error, "fork"), -1);
  nz_close_fd (&err_w);
  do
    n = read (err_r, &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  if (n == sizeof child_errno)
    {
      waitpid (pid, NULL, 0);
      errno = child_errno;
      if (child_errno == ENOENT)
        return (nz_throw (error, NZ_ERROR_NOT_FOUND, "cannot run %s: %s: %s", argv[0],
                          g_strerror (child_errno), bwrap_missing_hint), -1);
      return (nz_throw_errno_prefix (error, "cannot start %s", argv[0]), -1);
    }
  return pid;
}

/* ---- privsep: the agent's socket, token and user namespace ------------------------------ */

/* The agent's listening socket, bound on the host where the workload cannot see it (not in
 * any directory bound into the sandbox) and handed to the agent as a descriptor. */
static int
bind_agent_socket (const char *path, GError **error)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  nz_autofd int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return (nz_throw_errno_prefix (error, "socket"), -1);
  g_strlcpy (addr.sun_path, path, sizeof addr.sun_path);
  unlink (path);
  if (bind (fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen (fd, 128) != 0)
    return (nz_throw_errno_prefix (error, "cannot listen on '%s'", path), -1);
  return nz_steal_fd (&fd);
}

/* The token in a pipe the agent reads to EOF at start: never in an environment, which
 * /proc/<pid>/environ shows for the life of the process. */
static int
token_pipe (const char *token, GError **error)
{
  nz_autofd int rd = -1, wr = -1;
  gsize len = strlen (token);
  int fds[2];

  /* A token is far below a pipe's capacity: the write never blocks. */
  if (pipe2 (fds, O_CLOEXEC) != 0)
    return (nz_throw_errno_prefix (error, "pipe"), -1);
  rd = fds[0];
  wr = fds[1];
  if (write (wr, token, len) != (ssize_t)len)
    return (nz_throw_errno_prefix (error, "cannot hand the token over"), -1);
  return nz_steal_fd (&rd);
}

static gboolean
write_proc_file (pid_t pid, const char *name, const char *text, GError **error)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", (int)pid, name);
  nz_autofd int fd = open (path, O_WRONLY | O_CLOEXEC);
  gsize len = strlen (text);

  if (fd < 0 || write (fd, text, len) != (ssize_t)len)
    return nz_throw_errno_prefix (error, "privsep: cannot write '%s'", path);
  return TRUE;
}

/* Who maps the two-uid namespace, and onto which host ids. Root writes the maps itself, with
 * the agent on NZ_BWRAP_AGENT_HOST_UID and the workload on root (as bwrap's own single-uid map
 * has it, so layout outputs keep their owner). Anyone else needs the setuid helpers of Debian's
 * uidmap and a subordinate range in /etc/subuid and /etc/subgid: the agent takes the first id
 * of the range, the workload keeps the user's own uid and gid. */
typedef struct
{
  guint64 agent_uid, agent_gid;       /* host ids of the agent */
  guint64 workload_uid, workload_gid; /* host ids of the workload */
  char *newuidmap, *newgidmap;        /* NULL when root writes the maps */
} UsernsMap;

static void
userns_map_clear (UsernsMap *m)
{
  g_clear_pointer (&m->newuidmap, g_free);
  g_clear_pointer (&m->newgidmap, g_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (UsernsMap, userns_map_clear)

/* The first id of the first range in @file (subuid(5): "name-or-id:start:count") that belongs
 * to @name or @id and has at least one id. */
static gboolean
subid_first (const char *file, const char *name, guint64 id, guint64 *out)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (file, &text, NULL, NULL))
    return FALSE;
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) f = g_strsplit (g_strstrip (lines[i]), ":", -1);
      guint64 owner = 0, start = 0, count = 0;
      gboolean mine;

      if (g_strv_length (f) != 3)
        continue;
      mine = (name != NULL && strcmp (f[0], name) == 0)
             || (g_ascii_string_to_unsigned (f[0], 10, 0, G_MAXUINT32, &owner, NULL)
                 && owner == id);
      if (mine && g_ascii_string_to_unsigned (f[1], 10, 1, G_MAXUINT32 - 1, &start, NULL)
          && g_ascii_string_to_unsigned (f[2], 10, 1, G_MAXUINT32, &count, NULL))
        {
          *out = start;
          return TRUE;
        }
    }
  return FALSE;
}

/* Can the agent get a uid of its own? Fills @m when it can. */
static gboolean
userns_map_plan (UsernsMap *m)
{
  struct passwd *pw;
  const char *name;

  memset (m, 0, sizeof *m);
  if (geteuid () == 0)
    {
      m->agent_uid = m->agent_gid = NZ_BWRAP_AGENT_HOST_UID;
      m->workload_uid = m->workload_gid = 0;
      return TRUE;
    }
  pw = getpwuid (getuid ());
  name = pw != NULL ? pw->pw_name : NULL;
  m->workload_uid = getuid ();
  m->workload_gid = getgid ();
  m->newuidmap = g_find_program_in_path ("newuidmap");
  m->newgidmap = g_find_program_in_path ("newgidmap");
  return m->newuidmap != NULL && m->newgidmap != NULL
         && subid_first ("/etc/subuid", name, m->workload_uid, &m->agent_uid)
         && subid_first ("/etc/subgid", name, m->workload_gid, &m->agent_gid);
}

static gboolean
run_idmap (const char *helper, pid_t pid, guint64 agent_id, guint64 workload_id, GError **error)
{
  g_autofree char *pid_s = g_strdup_printf ("%d", (int)pid);
  g_autofree char *agent_in = g_strdup_printf ("%d", NZ_BWRAP_AGENT_UID);
  g_autofree char *agent_out = g_strdup_printf ("%" G_GUINT64_FORMAT, agent_id);
  g_autofree char *work_in = g_strdup_printf ("%d", NZ_BWRAP_UID);
  g_autofree char *work_out = g_strdup_printf ("%" G_GUINT64_FORMAT, workload_id);
  const char *argv[] = { helper, pid_s, agent_in, agent_out, "1", work_in, work_out, "1", NULL };
  g_autofree char *err = NULL;
  g_autoptr (GError) local = NULL;
  int status = 0;

  if (!g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                     &err, &status, &local))
    return nz_throw (error, NZ_ERROR_FAILED, "privsep: cannot run %s: %s", helper,
                     local->message);
  if (!g_spawn_check_wait_status (status, NULL))
    return nz_throw (error, NZ_ERROR_FAILED, "privsep: %s refused the map for the agent's id %s: %s",
                     helper, agent_out, g_strstrip (err));
  return TRUE;
}

/* A user namespace with two ids: NZ_BWRAP_AGENT_UID for the agent and NZ_BWRAP_UID for the
 * workload, mapped as @m says. Returns a descriptor of the namespace (it lives as long as a
 * descriptor or a process holds it). */
static int
make_userns (const UsernsMap *m, GError **error)
{
  g_autofree char *uid_map = g_strdup_printf ("%d %" G_GUINT64_FORMAT " 1\n%d %" G_GUINT64_FORMAT
                                              " 1\n", NZ_BWRAP_AGENT_UID, m->agent_uid,
                                              NZ_BWRAP_UID, m->workload_uid);
  g_autofree char *gid_map = g_strdup_printf ("%d %" G_GUINT64_FORMAT " 1\n%d %" G_GUINT64_FORMAT
                                              " 1\n", NZ_BWRAP_AGENT_UID, m->agent_gid,
                                              NZ_BWRAP_UID, m->workload_gid);
  g_autofree char *ns_path = NULL;
  nz_autofd int go_r = -1, go_w = -1;
  gboolean mapped;
  int ns_fd = -1;
  int fds[2];
  char c = 0;
  pid_t pid;

  if (pipe2 (fds, O_CLOEXEC) != 0)
    return (nz_throw_errno_prefix (error, "pipe"), -1);
  go_r = fds[0];
  go_w = fds[1];
  pid = fork ();
  if (pid < 0)
    return (nz_throw_errno_prefix (error, "fork"), -1);
  if (pid == 0)
    {
      /* Child: unshare, then wait until the parent has the namespace (or gave up). */
      nz_close_fd (&go_w);
      if (unshare (CLONE_NEWUSER) != 0)
        _exit (1);
      while (read (go_r, &c, 1) < 0 && errno == EINTR)
        ;
      _exit (0);
    }
  nz_close_fd (&go_r);
  ns_path = g_strdup_printf ("/proc/%d/ns/user", (int)pid);
  /* The child's namespace differs from ours once it has unshared. */
  for (int i = 0; i < 2000; i++)
    {
      struct stat self_st, child_st;

      if (stat ("/proc/self/ns/user", &self_st) == 0 && stat (ns_path, &child_st) == 0
          && child_st.st_ino != self_st.st_ino)
        break;
      g_usleep (1000);
    }
  if (m->newuidmap != NULL)
    mapped = run_idmap (m->newuidmap, pid, m->agent_uid, m->workload_uid, error)
             && run_idmap (m->newgidmap, pid, m->agent_gid, m->workload_gid, error);
  else
    mapped = write_proc_file (pid, "uid_map", uid_map, error)
             && write_proc_file (pid, "gid_map", gid_map, error);
  if (mapped)
    {
      ns_fd = open (ns_path, O_RDONLY | O_CLOEXEC);
      if (ns_fd < 0)
        nz_throw_errno_prefix (error, "privsep: open '%s'", ns_path);
    }
  nz_close_fd (&go_w);
  waitpid (pid, NULL, 0);
  return ns_fd;
}

/* ---- create --------------------------------------------------------------------------- */

gboolean
nz_bwrap_check (const NzCreateOptions *opts, GError **error)
{
  g_auto (UsernsMap) map = { 0 };

  /* Refuse, do not degrade: an agent the workload could signal is only taken when asked for. */
  if (!userns_map_plan (&map) && !opts->agent_shares_uid)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "container:bwrap cannot give the agent a uid of its own: uid %u is not root "
                     "and has %s. Add a range (usermod --add-subuids 100000-165535 "
                     "--add-subgids 100000-165535 USER), or pass --agent-shares-uid to run the "
                     "agent under the workload's uid, where the workload can signal it "
                     "(docs/security.md)",
                     (unsigned)getuid (),
                     map.newuidmap == NULL || map.newgidmap == NULL
                         ? "no newuidmap/newgidmap (apt-get install uidmap)"
                         : "no subordinate range in /etc/subuid and /etc/subgid");
  /* An allowlist goes through the host-side egress proxy (nz-bwrap-egress.c). */
  if ((opts->network == NZ_NETWORK_ALLOWLIST || opts->egress_credentials != NULL)
      && !nz_bwrap_egress_check (opts, error))
    return FALSE;
  if (opts->image != NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "--image: container:bwrap runs no image (its root is a read-only view of "
                     "the host's system directories)");
  if (!opts->read_only_rootfs)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "backend.readOnlyRootfs: container:bwrap cannot offer a writable root");
  /* One variable carries it to the agent, and the kernel takes at most 128 KiB in one
   * (MAX_ARG_STRLEN): only control bytes, written \u00XX, can grow it that far. */
  if (opts->env->len > 0)
    {
      g_autofree char *json = nz_sandbox_env_to_json (opts->env);

      if (strlen (json) + sizeof NZ_SANDBOX_ENV_AGENT_KNOB >= 128 * 1024)
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "env: too large for container:bwrap once encoded (%" G_GSIZE_FORMAT
                         " bytes of JSON; control characters take six bytes each)",
                         strlen (json));
    }
  return TRUE;
}

typedef struct
{
  NzHandle *h;
  NzCgroup *cg;
  pid_t bwrap_pid;
} CreateState;

/* Undo everything a failed create started: processes, cgroups, state. */
static void
create_rollback (CreateState *st)
{
  NzProc procs[2];

  if (st->bwrap_pid > 0)
    {
      priv_procs (st->h, procs);
      if (procs[1].pid == 0)
        {
          procs[1].pid = st->bwrap_pid;
          procs[1].start = proc_start_time (st->bwrap_pid);
        }
      kill (st->bwrap_pid, SIGKILL);
      kill_procs (st->h->id, procs, st->bwrap_pid, NZ_BWRAP_KILL_TIMEOUT_MS, NULL);
      waitpid (st->bwrap_pid, NULL, WNOHANG);
    }
  nz_bwrap_egress_stop (st->h, NULL);
  if (st->cg != NULL)
    {
      nz_cgroup_close_fds (st->cg);
      nz_cgroup_remove ((const char *const *)st->cg->paths->pdata, st->cg->paths->len,
                        NZ_BWRAP_KILL_TIMEOUT_MS, NULL);
    }
  nz_handle_remove_dir (st->h, NULL);
}

static void
record_policy (NzHandle *h, const NzCreateOptions *opts, const char *agent, NzCgroup *cg)
{
  JsonArray *cgroups = json_array_new ();
  JsonArray *mounts = json_array_new ();

  for (guint i = 0; i < cg->paths->len; i++)
    json_array_add_string_element (cgroups, cg->paths->pdata[i]);
  json_object_set_array_member (h->priv, "cgroups", cgroups);
  json_object_set_string_member (h->priv, "network",
                                 opts->network == NZ_NETWORK_ALLOW_ALL ? "allow-all"
                                 : opts->network == NZ_NETWORK_ALLOWLIST ? "allowlist"
                                                                         : "deny-all");
  json_object_set_object_member (h->priv, "limits", nz_create_options_limits (opts));
  json_object_set_string_member (h->priv, "rootDir", nz_bwrap_workspace (opts));
  json_object_set_string_member (h->priv, "agent", agent);
  if (opts->default_timeout_ms > 0)
    json_object_set_int_member (h->priv, "defaultTimeoutMs", opts->default_timeout_ms);
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];
      JsonObject *o = json_object_new ();

      json_object_set_string_member (o, "label", m->label);
      json_object_set_string_member (o, "hostPath", m->host_path);
      json_object_set_string_member (o, "containerPath", m->container_path);
      json_object_set_boolean_member (o, "writable", m->writable);
      json_array_add_object_element (mounts, o);
    }
  json_object_set_array_member (h->priv, "mounts", mounts);
  nz_sandbox_env_record (h->priv, opts->env);
}

/* TRUE (and @error set) once bwrap has exited, with its status and the log's last line. */
static gboolean
bwrap_exited (CreateState *st, const char *log_path, GError **error)
{
  g_autofree char *tail = NULL;
  int status = 0;

  if (waitpid (st->bwrap_pid, &status, WNOHANG) != st->bwrap_pid)
    return FALSE;
  tail = log_tail (log_path);
  st->bwrap_pid = 0;
  nz_throw (error, NZ_ERROR_FAILED, "the sandbox exited during startup (%s %d): %s",
            WIFSIGNALED (status) ? "signal" : "status",
            WIFSIGNALED (status) ? WTERMSIG (status) : WEXITSTATUS (status), tail);
  return TRUE;
}

/* Waits for bwrap to report its child and for the agent to answer healthz with protocol 2,
 * watching bwrap so a sandbox that died is reported at once, not at the deadline. */
static gboolean
wait_ready (CreateState *st, const char *status_path, const char *log_path,
            const NzCreateOptions *opts, GError **error)
{
  guint timeout_ms = opts->ready_timeout_ms;
  volatile sig_atomic_t *interrupted = opts->interrupted;
  g_autoptr (NzAgentClient) client = nz_agent_client_new (st->h->endpoint, st->h->token);
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;
  g_autoptr (GError) last = NULL;
  pid_t child = 0;

  for (;;)
    {
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;

      if (opts->waiting != NULL)
        opts->waiting (opts->waiting_data);
      if (bwrap_exited (st, log_path, error))
        return FALSE;
      if (child == 0 && (child = read_child_pid (status_path)) > 0)
        {
          json_object_set_int_member (st->h->priv, "childPid", child);
          json_object_set_int_member (st->h->priv, "childStartTime",
                                      (gint64)proc_start_time (child));
          if (!nz_handle_save (st->h, error))
            return FALSE;
        }
      if (interrupted != NULL && *interrupted)
        return nz_throw (error, NZ_ERROR_FAILED, "interrupted while the sandbox was starting");
      if (left_ms <= 0)
        return nz_throw (error, NZ_ERROR_TIMED_OUT,
                         "the sandbox's agent did not become ready within %u ms: %s", timeout_ms,
                         last != NULL ? last->message : "bwrap did not start its child");
      if (child > 0)
        {
          g_clear_error (&last);
          if (nz_agent_client_wait_ready (client, (guint)MIN (left_ms, 200), &last))
            {
              const char *const *features = nz_agent_client_get_features (client);
              JsonArray *arr = json_array_new ();

              /* What this agent serves (files, terminal, ...), for the public handle. */
              for (; features != NULL && *features != NULL; features++)
                json_array_add_string_element (arr, *features);
              json_object_set_array_member (st->h->priv, "features", arr);
              return nz_handle_save (st->h, error);
            }
          /* A protocol mismatch or a retiring agent does not heal by waiting. */
          if (!g_error_matches (last, NZ_ERROR, NZ_ERROR_TIMED_OUT))
            {
              /* The host holds the socket from the start, so an agent that died shows up as a
               * closed connection: its exit status and log say more, if it is on its way out. */
              for (int i = 0; i < 50; i++, g_usleep (10 * 1000))
                if (bwrap_exited (st, log_path, error))
                  return FALSE;
              g_propagate_prefixed_error (error, g_steal_pointer (&last),
                                          "the sandbox's agent was refused: ");
              return FALSE;
            }
        }
      else
        g_usleep (5 * 1000);
    }
}

NzHandle *
nz_bwrap_create (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (NzHandle) h = nz_handle_new ();
  g_autoptr (NzCgroup) cg = NULL;
  g_autoptr (GPtrArray) argv = NULL;
  g_auto (GStrv) envp = NULL;
  g_autofree char *bwrap = NULL;
  g_autofree char *agent = NULL;
  g_autofree char *sock_dir = NULL;
  g_autofree char *log_path = NULL;
  g_autofree char *status_path = NULL;
  g_autofree char *sock_path = NULL;
  g_autofree char *egress_bin = NULL;
  nz_autofd int seccomp_fd = -1;
  nz_autofd int log_fd = -1;
  nz_autofd int status_fd = -1;
  nz_autofd int listen_fd = -1;
  nz_autofd int token_fd = -1;
  nz_autofd int userns_fd = -1;
  /* Root, or a user with subordinate ids and uidmap's helpers, gives the agent a uid of its
   * own; anyone else gets bwrap's one-uid namespace, where the agent is only non-dumpable
   * (docs/security.md, "container:bwrap without root"). */
  g_auto (UsernsMap) map = { 0 };
  gboolean privsep = userns_map_plan (&map);

  /* nz_bwrap_check refused this unless --agent-shares-uid said yes. */
  g_return_val_if_fail (privsep || opts->agent_shares_uid, NULL);
  NzCgroupLimits limits = { opts->memory_mb, opts->max_processes, opts->cpus };
  CreateState st = { h, NULL, 0 };
  NzBwrapPlan plan = { 0 };

  /* Everything that needs no sandbox first, so a refusal leaves nothing behind. */
  bwrap = nz_bwrap_find_binary (error);
  if (bwrap == NULL)
    return NULL;
  agent = nz_bwrap_find_agent (error);
  if (agent == NULL)
    return NULL;
  if (opts->network == NZ_NETWORK_ALLOWLIST
      && (egress_bin = nz_bwrap_egress_find_binary (error)) == NULL)
    return NULL;
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];

      if (!g_file_test (m->host_path, G_FILE_TEST_IS_DIR))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "layout.%s: host directory '%s' does "
                          "not exist", m->label, m->host_path), NULL);
    }
  seccomp_fd = nz_seccomp_build_fd (error);
  if (seccomp_fd < 0)
    return NULL;

  h->id = nz_state_new_id ();
  h->backend = g_strdup ("container:bwrap");
  h->tier = g_strdup ("container");
  h->created_at_ms = g_get_real_time () / 1000;
  nz_handle_set_lifetime (h, opts);
  h->token = nz_token_mint (error);
  if (h->token == NULL || !nz_handle_make_dir (h, error))
    return NULL;

  cg = nz_cgroup_create (h->id, &limits, error);
  if (cg == NULL)
    {
      create_rollback (&st);
      return NULL;
    }
  st.cg = cg;
  sock_dir = g_build_filename (h->dir, "sock", NULL);
  /* Beside the sock dir, not in it: the sock dir is bound into the sandbox, this is not. */
  sock_path = g_build_filename (h->dir, "agent.sock", NULL);
  log_path = g_build_filename (h->dir, "bwrap.log", NULL);
  status_path = g_build_filename (h->dir, "status.json", NULL);
  h->endpoint = g_strdup_printf ("unix:%s", sock_path);
  /* We bind and connect by the host path, which must fit a sockaddr_un. */
  if (strlen (sock_path) >= sizeof (((struct sockaddr_un *)NULL)->sun_path))
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "the state directory's path is too long for a unix socket (%s); set "
                "NAMZU_STATE_DIR to a shorter path", sock_path);
      create_rollback (&st);
      return NULL;
    }
  record_policy (h, opts, agent, cg);
  if (mkdir (sock_dir, 0700) != 0)
    {
      nz_throw_errno_prefix (error, "mkdir '%s'", sock_dir);
      create_rollback (&st);
      return NULL;
    }
  if ((listen_fd = bind_agent_socket (sock_path, error)) < 0
      || (token_fd = token_pipe (h->token, error)) < 0
      || (privsep && (userns_fd = make_userns (&map, error)) < 0))
    {
      create_rollback (&st);
      return NULL;
    }
  log_fd = open (log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  status_fd = open (status_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log_fd < 0 || status_fd < 0)
    {
      nz_throw_errno_prefix (error, "cannot create files in '%s'", h->dir);
      create_rollback (&st);
      return NULL;
    }
  /* Saved before anything runs: a create killed half-way still leaves a handle that
   * namzu-destroy can act on. */
  if (!nz_handle_save (h, error))
    {
      create_rollback (&st);
      return NULL;
    }

  if (egress_bin != NULL)
    {
      g_autoptr (GPtrArray) hosts = g_ptr_array_copy (opts->egress_hosts, NULL, NULL);

      /* The proxy first: the relay in front of the agent dials it from the first request.
       * The copy borrows the strings (g_ptr_array_copy also copies the free func). */
      g_ptr_array_set_free_func (hosts, NULL);
      g_ptr_array_add (hosts, NULL);
      if (!nz_bwrap_egress_start (h, egress_bin, (const char *const *)hosts->pdata,
                                  opts->egress_profile, opts->egress_credentials, sock_dir,
                                  error)
          || !nz_handle_save (h, error))
        {
          create_rollback (&st);
          return NULL;
        }
    }
  plan.bwrap = bwrap;
  plan.opts = opts;
  plan.agent_host_path = agent;
  plan.sock_dir = sock_dir;
  plan.host_root = "/";
  plan.privsep = privsep;
  argv = nz_bwrap_build_argv (&plan);
  if (egress_bin != NULL)
    nz_bwrap_egress_wrap_argv (argv, egress_bin);
  g_ptr_array_add (argv, NULL);
  envp = nz_bwrap_build_envp (opts, privsep);
  envp = nz_bwrap_lifetime_envp (envp, h);
  if (egress_bin != NULL)
    envp = nz_bwrap_egress_envp (envp);
  {
    const int inherit[NZ_BWRAP_N_INHERIT] = { seccomp_fd, status_fd, listen_fd, token_fd,
                                              userns_fd };

    st.bwrap_pid = spawn_bwrap ((char **)argv->pdata, envp, log_fd, inherit, cg, error);
  }
  /* The agent holds the listener now; the token went into the pipe already. */
  nz_close_fd (&listen_fd);
  nz_close_fd (&token_fd);
  nz_close_fd (&userns_fd);
  if (st.bwrap_pid < 0)
    {
      st.bwrap_pid = 0;
      create_rollback (&st);
      return NULL;
    }
  nz_cgroup_close_fds (cg);
  json_object_set_int_member (h->priv, "bwrapPid", st.bwrap_pid);
  json_object_set_int_member (h->priv, "bwrapStartTime",
                              (gint64)proc_start_time (st.bwrap_pid));
  if (!nz_handle_save (h, error) || !wait_ready (&st, status_path, log_path, opts, error))
    {
      create_rollback (&st);
      return NULL;
    }
  return g_steal_pointer (&h);
}

char **
nz_bwrap_lifetime_envp (char **envp, const NzHandle *h)
{
  /* The agent is the sandbox's payload: when its lifetime ends it exits, and bwrap's pid 1
   * with it, which takes the whole pid namespace down. */
  if (h->expires_at_ms > 0)
    {
      g_autofree char *v = g_strdup_printf ("%" G_GINT64_FORMAT, h->expires_at_ms);

      envp = g_environ_setenv (envp, "NAMZU_AGENT_EXPIRES_AT_MS", v, TRUE);
    }
  if (h->idle_timeout_ms > 0)
    {
      g_autofree char *v = g_strdup_printf ("%" G_GINT64_FORMAT, h->idle_timeout_ms);

      envp = g_environ_setenv (envp, "NAMZU_AGENT_IDLE_TIMEOUT_MS", v, TRUE);
    }
  return envp;
}

/* ---- destroy, status, describe -------------------------------------------------------- */

gboolean
nz_bwrap_destroy (NzHandle *h, GError **error)
{
  NzProc procs[2];
  JsonArray *cgroups = nz_json_get_array (h->priv, "cgroups");
  g_autoptr (GPtrArray) paths = g_ptr_array_new ();

  priv_procs (h, procs);
  if (!kill_procs (h->id, procs, 0, NZ_BWRAP_KILL_TIMEOUT_MS, error)
      || !nz_bwrap_egress_stop (h, error))
    return FALSE;
  for (guint i = 0; cgroups != NULL && i < json_array_get_length (cgroups); i++)
    {
      const char *p = json_array_get_string_element (cgroups, i);

      if (p != NULL)
        g_ptr_array_add (paths, (gpointer)p);
    }
  if (!nz_cgroup_remove ((const char *const *)paths->pdata, paths->len,
                         NZ_BWRAP_KILL_TIMEOUT_MS, error))
    return nz_prefix_error (error, "sandbox '%s' is stopped but not cleaned up", h->id);
  return nz_handle_remove_dir (h, error);
}

NzSandboxStatus
nz_bwrap_status (NzHandle *h, guint timeout_ms)
{
  NzProc procs[2];
  g_autoptr (NzAgentClient) client = NULL;

  priv_procs (h, procs);
  if (!proc_is_ours (procs[0].pid, procs[0].start) || !proc_is_ours (procs[1].pid, procs[1].start))
    {
      g_autofree char *status_path = g_build_filename (h->dir, "status.json", NULL);

      /* bwrap records the agent's exit status; the agent exits 3 when its lifetime ends.
       * That file is the host's (the sandbox cannot write it), and a deadline past is
       * the handle's own word. */
      return nz_handle_is_past_deadline (h)
                     || read_status_member (status_path, "exit-code") == NZ_EXIT_EXPIRED
                 ? NZ_SANDBOX_EXPIRED
                 : NZ_SANDBOX_DEAD;
    }
  if (timeout_ms == 0 || h->endpoint == NULL)
    return NZ_SANDBOX_RUNNING;
  client = nz_agent_client_new (h->endpoint, h->token);
  return nz_agent_client_wait_ready (client, timeout_ms, NULL) ? NZ_SANDBOX_RUNNING
                                                               : NZ_SANDBOX_UNRESPONSIVE;
}

void
nz_bwrap_describe (NzHandle *h, JsonObject *pub)
{
  JsonObject *caps = json_object_new ();
  JsonObject *limits = nz_json_get_object (h->priv, "limits");
  const char *root = nz_json_get_string (h->priv, "rootDir");
  const char *net = nz_json_get_string (h->priv, "network");

  if (root != NULL)
    json_object_set_string_member (pub, "rootDir", root);
  json_object_set_string_member (pub, "network", net != NULL ? net : "deny-all");
  if (limits != NULL)
    json_object_set_object_member (pub, "limits", json_object_ref (limits));
  /* What a host may rely on; everything else the agent advertises in healthz features. */
  json_object_set_string_member (caps, "transport", "agent");
  json_object_set_boolean_member (caps, "egressAllowlist", TRUE);
  json_object_set_boolean_member (caps, "setNetworkPolicy",
                                  nz_json_get_object (h->priv, "egress") != NULL);
  json_object_set_boolean_member (caps, "persistentAfterCreate", TRUE);
  if (nz_json_get_array (h->priv, "features") != NULL)
    json_object_set_array_member (caps, "features",
                                  json_array_ref (nz_json_get_array (h->priv, "features")));
  json_object_set_object_member (pub, "capabilities", caps);
}
