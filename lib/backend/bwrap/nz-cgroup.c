#include "nz-cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/magic.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nz-errors.h"

/* CFS bandwidth period: the kernel default, so a quota of N * period is N CPUs. */
#define NZ_CPU_PERIOD_US 100000
/* The kernel refuses quotas below 1 ms. */
#define NZ_CPU_QUOTA_MIN_US 1000

const char *
nz_cgroup_root (void)
{
  const char *env = g_getenv ("NAMZU_CGROUP_ROOT");

  return env != NULL && *env != '\0' ? env : "/sys/fs/cgroup";
}

void
nz_cgroup_close_fds (NzCgroup *cg)
{
  for (guint i = 0; cg != NULL && i < cg->procs_fds->len; i++)
    close (g_array_index (cg->procs_fds, int, i));
  if (cg != NULL)
    g_array_set_size (cg->procs_fds, 0);
}

void
nz_cgroup_free (NzCgroup *cg)
{
  if (cg == NULL)
    return;
  nz_cgroup_close_fds (cg);
  g_array_unref (cg->procs_fds);
  g_ptr_array_unref (cg->paths);
  g_free (cg);
}

static gboolean
write_file (const char *dir, const char *name, const char *value, GError **error)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  gsize len = strlen (value);
  ssize_t n;

  if (fd < 0)
    return nz_throw_errno_prefix (error, "open %s", path);
  n = write (fd, value, len);
  if (n < 0 || (gsize)n != len)
    {
      int errsv = n < 0 ? errno : EIO;

      close (fd);
      errno = errsv;
      return nz_throw_errno_prefix (error, "write '%s' to %s", value, path);
    }
  close (fd);
  return TRUE;
}

static gboolean
file_exists (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  return g_file_test (path, G_FILE_TEST_EXISTS);
}

static gboolean
is_fs (const char *path, long magic)
{
  struct statfs sfs;

  return statfs (path, &sfs) == 0 && (long)sfs.f_type == magic;
}

static gboolean
make_dir (const char *path, gboolean may_exist, GError **error)
{
  if (mkdir (path, 0755) == 0 || (may_exist && errno == EEXIST))
    return TRUE;
  return nz_throw_errno_prefix (error, "mkdir %s", path);
}

/* Creates <base>/namzu/<id>, remembers it in @cg and opens its cgroup.procs. */
static char *
make_leaf (NzCgroup *cg, const char *base, const char *id, GError **error)
{
  g_autofree char *parent = g_build_filename (base, "namzu", NULL);
  g_autofree char *leaf = g_build_filename (parent, id, NULL);

  if (!make_dir (parent, TRUE, error) || !make_dir (leaf, FALSE, error))
    return NULL;
  g_ptr_array_add (cg->paths, g_strdup (leaf));
  return g_steal_pointer (&leaf);
}

static gboolean
open_procs (NzCgroup *cg, const char *leaf, GError **error)
{
  g_autofree char *path = g_build_filename (leaf, "cgroup.procs", NULL);
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  if (fd < 0)
    return nz_throw_errno_prefix (error, "open %s", path);
  g_array_append_val (cg->procs_fds, fd);
  return TRUE;
}

static char *
cpu_quota (double cpus)
{
  gint64 quota = (gint64)llround (cpus * NZ_CPU_PERIOD_US);

  return g_strdup_printf ("%" G_GINT64_FORMAT, MAX (quota, NZ_CPU_QUOTA_MIN_US));
}

/* Our own cgroup in the v1 hierarchy of @ctrl, from /proc/self/cgroup ("4:memory:/a/b"), or
 * "/" when it is not listed. Sandboxes nest under it so they stay inside whatever limits and
 * accounting the caller's own cgroup carries (a supervisor's memory cap, say). */
static char *
own_v1_path (const char *ctrl)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents ("/proc/self/cgroup", &text, NULL, NULL))
    return g_strdup ("/");
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], ":", 3);

      if (g_strv_length (f) == 3)
        {
          g_auto (GStrv) ctrls = g_strsplit (f[1], ",", -1);

          if (g_strv_contains ((const char *const *)ctrls, ctrl))
            return g_strdup (f[2]);
        }
    }
  return g_strdup ("/");
}

/* cgroup v1: one hierarchy per controller, /sys/fs/cgroup/<controller>. */
static gboolean
limit_v1 (NzCgroup *cg, const char *root, const char *ctrl, const char *id,
          const NzCgroupLimits *l, GError **error)
{
  g_autofree char *mount = g_build_filename (root, ctrl, NULL);
  g_autofree char *own = own_v1_path (ctrl);
  g_autofree char *base = g_build_filename (mount, own, NULL);
  g_autofree char *leaf = NULL;

  if (!is_fs (mount, CGROUP_SUPER_MAGIC))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED, "%s is not a mounted cgroup v1 hierarchy",
                     mount);
  /* A cgroup namespace or a test root may not show our path: fall back to the mount root. */
  if (!g_file_test (base, G_FILE_TEST_IS_DIR))
    {
      g_free (base);
      base = g_strdup (mount);
    }
  leaf = make_leaf (cg, base, id, error);
  if (leaf == NULL)
    return FALSE;
  if (strcmp (ctrl, "memory") == 0)
    {
      g_autofree char *bytes = g_strdup_printf ("%" G_GINT64_FORMAT, l->memory_mb * 1024 * 1024);

      if (!write_file (leaf, "memory.limit_in_bytes", bytes, error))
        return FALSE;
      /* Without this the sandbox could page out past its limit where swap exists. */
      if (file_exists (leaf, "memory.memsw.limit_in_bytes")
          && !write_file (leaf, "memory.memsw.limit_in_bytes", bytes, error))
        return FALSE;
    }
  else if (strcmp (ctrl, "pids") == 0)
    {
      g_autofree char *n = g_strdup_printf ("%" G_GINT64_FORMAT, l->max_processes);

      if (!write_file (leaf, "pids.max", n, error))
        return FALSE;
    }
  else
    {
      g_autofree char *period = g_strdup_printf ("%d", NZ_CPU_PERIOD_US);
      g_autofree char *quota = cpu_quota (l->cpus);

      if (!write_file (leaf, "cpu.cfs_period_us", period, error)
          || !write_file (leaf, "cpu.cfs_quota_us", quota, error))
        return FALSE;
    }
  return open_procs (cg, leaf, error);
}

/* cgroup v2: one hierarchy; controllers must be enabled down the path to the leaf. */
static gboolean
limits_v2 (NzCgroup *cg, const char *root, const char *id, const NzCgroupLimits *l,
           const char **failed_ctrl, GError **error)
{
  g_autofree char *parent = g_build_filename (root, "namzu", NULL);
  g_autofree char *leaf = NULL;
  const char *ctrls[3];
  guint n = 0;

  if (l->memory_mb > 0)
    ctrls[n++] = "memory";
  if (l->max_processes > 0)
    ctrls[n++] = "pids";
  if (l->cpus > 0)
    ctrls[n++] = "cpu";
  if (!make_dir (parent, TRUE, error))
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *enable = g_strdup_printf ("+%s", ctrls[i]);

      *failed_ctrl = ctrls[i];
      if (!write_file (root, "cgroup.subtree_control", enable, error)
          || !write_file (parent, "cgroup.subtree_control", enable, error))
        return FALSE;
    }
  *failed_ctrl = NULL;
  leaf = make_leaf (cg, root, id, error);
  if (leaf == NULL)
    return FALSE;
  if (l->memory_mb > 0)
    {
      g_autofree char *bytes = g_strdup_printf ("%" G_GINT64_FORMAT, l->memory_mb * 1024 * 1024);

      *failed_ctrl = "memory";
      if (!write_file (leaf, "memory.max", bytes, error))
        return FALSE;
      if (file_exists (leaf, "memory.swap.max") && !write_file (leaf, "memory.swap.max", "0", error))
        return FALSE;
    }
  if (l->max_processes > 0)
    {
      g_autofree char *v = g_strdup_printf ("%" G_GINT64_FORMAT, l->max_processes);

      *failed_ctrl = "pids";
      if (!write_file (leaf, "pids.max", v, error))
        return FALSE;
    }
  if (l->cpus > 0)
    {
      g_autofree char *quota = cpu_quota (l->cpus);
      g_autofree char *v = g_strdup_printf ("%s %d", quota, NZ_CPU_PERIOD_US);

      *failed_ctrl = "cpu";
      if (!write_file (leaf, "cpu.max", v, error))
        return FALSE;
    }
  *failed_ctrl = NULL;
  return open_procs (cg, leaf, error);
}

static const char *
flag_for (const char *ctrl)
{
  if (strcmp (ctrl, "memory") == 0)
    return "--memory-mb";
  if (strcmp (ctrl, "pids") == 0)
    return "--max-processes";
  return "--cpus";
}

static const char *
first_requested (const NzCgroupLimits *l)
{
  return l->memory_mb > 0 ? "memory" : l->max_processes > 0 ? "pids" : "cpu";
}

NzCgroup *
nz_cgroup_create (const char *id, const NzCgroupLimits *limits, GError **error)
{
  g_autoptr (NzCgroup) cg = g_new0 (NzCgroup, 1);
  g_autoptr (GError) local = NULL;
  const char *root = nz_cgroup_root ();
  const char *failed = NULL;
  gboolean ok = TRUE;

  cg->paths = g_ptr_array_new_with_free_func (g_free);
  cg->procs_fds = g_array_new (FALSE, FALSE, sizeof (int));
  if (limits->memory_mb <= 0 && limits->max_processes <= 0 && limits->cpus <= 0)
    return g_steal_pointer (&cg);

  if (is_fs (root, CGROUP2_SUPER_MAGIC))
    {
      ok = limits_v2 (cg, root, id, limits, &failed, &local);
      if (!ok && failed == NULL)
        failed = first_requested (limits);
    }
  else
    {
      static const char *const ctrls[] = { "memory", "pids", "cpu" };
      gboolean wanted[] = { limits->memory_mb > 0, limits->max_processes > 0, limits->cpus > 0 };

      for (gsize i = 0; ok && i < G_N_ELEMENTS (ctrls); i++)
        if (wanted[i] && !limit_v1 (cg, root, ctrls[i], id, limits, &local))
          {
            ok = FALSE;
            failed = ctrls[i];
          }
    }
  if (!ok)
    {
      nz_cgroup_close_fds (cg);
      nz_cgroup_remove ((const char *const *)cg->paths->pdata, cg->paths->len, 1000, NULL);
      /* Refused, not degraded: a limit the host cannot enforce is not silently dropped. */
      return (nz_throw (error, NZ_ERROR_UNSUPPORTED,
                        "%s cannot be enforced: no writable %s cgroup controller (%s)",
                        flag_for (failed), failed, local->message), NULL);
    }
  return g_steal_pointer (&cg);
}

int
nz_cgroup_join_fds (const int *fds, guint n_fds)
{
  for (guint i = 0; i < n_fds; i++)
    {
      /* "0" means the writing process, in v1 and v2 alike. */
      ssize_t n = write (fds[i], "0", 1);

      if (n != 1)
        return n < 0 ? errno : EIO;
    }
  return 0;
}

static void
kill_members (const char *path)
{
  g_autofree char *procs = g_build_filename (path, "cgroup.procs", NULL);
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;

  if (!g_file_get_contents (procs, &text, NULL, NULL))
    return;
  lines = g_strsplit (text, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      gint64 pid = g_ascii_strtoll (*l, NULL, 10);

      if (pid > 1)
        kill ((pid_t)pid, SIGKILL);
    }
}

gboolean
nz_cgroup_remove (const char *const *paths, guint n_paths, guint timeout_ms, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  for (guint i = 0; i < n_paths; i++)
    for (;;)
      {
        if (rmdir (paths[i]) == 0 || errno == ENOENT)
          break;
        /* EBUSY: processes still inside (exiting, or zombies not yet reaped). */
        if (errno != EBUSY || g_get_monotonic_time () >= deadline)
          return nz_throw_errno_prefix (error, "cannot remove cgroup %s", paths[i]);
        kill_members (paths[i]);
        g_usleep (20 * 1000);
      }
  return TRUE;
}
