#define _GNU_SOURCE
#include "nz-privsep.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nz-errors.h"

static gboolean active;
static uid_t workload_uid_saved;
static gid_t workload_gid_saved;
static uid_t server_uid_saved;
static gid_t server_gid_saved;
/* gVisor: no setfsuid, so file IO for the host switches the effective ids per thread. */
static gboolean fs_by_euid;
static __thread guint fs_depth;
static char **volatile moved_environ; /* volatile: a store nobody reads stays */

static int
set_caps (guint64 mask)
{
  struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
  struct __user_cap_data_struct data[2];

  memset (data, 0, sizeof data);
  data[0].effective = data[0].permitted = (guint32)mask;
  data[1].effective = data[1].permitted = (guint32)(mask >> 32);
  return syscall (SYS_capset, &hdr, data) == 0 ? 0 : errno;
}

gboolean
nz_privsep_enter (uid_t server_uid, gid_t server_gid, uid_t workload_uid, gid_t workload_gid,
                  GError **error)
{
  const guint64 keep = (1ULL << CAP_SETUID) | (1ULL << CAP_SETGID) | (1ULL << CAP_KILL);
  int e;

  g_return_val_if_fail (server_uid != workload_uid, FALSE);
  /* Keep the capabilities over the uid change (root to non-root clears them otherwise). */
  if (prctl (PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0)
    return nz_throw_errno_prefix (error, "privsep: PR_SET_KEEPCAPS");
  /* No supplementary group of whoever started us may stay: the workload could share it. A user
   * namespace whose setgroups is "deny" has none to drop (EPERM there is expected). */
  if (setgroups (0, NULL) != 0 && errno != EPERM)
    return nz_throw_errno_prefix (error, "privsep: setgroups");
  if (setresgid (server_gid, server_gid, server_gid) != 0)
    return nz_throw_errno_prefix (error, "privsep: setresgid %u", (unsigned)server_gid);
  if (setresuid (server_uid, server_uid, server_uid) != 0)
    return nz_throw_errno_prefix (error, "privsep: setresuid %u", (unsigned)server_uid);
  prctl (PR_SET_KEEPCAPS, 0, 0, 0, 0);
  /* Ambient and inheritable capabilities would pass to the workload through exec. */
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return nz_throw_errno_prefix (error, "privsep: clearing ambient capabilities");
  if ((e = set_caps (keep)) != 0)
    {
      errno = e;
      return nz_throw_errno_prefix (error, "privsep: capset (CAP_SETUID, CAP_SETGID, CAP_KILL)");
    }
  /* /proc/<pid>/{environ,mem,fd}, ptrace and pidfd_getfd need a capability over us now. */
  if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    return nz_throw_errno_prefix (error, "privsep: PR_SET_DUMPABLE");
  /* File IO for the host acts with the workload's permissions and leaves its files to it. */
  setfsgid (workload_gid);
  setfsuid (workload_uid);
  if ((uid_t)setfsuid ((uid_t)-1) != workload_uid || (gid_t)setfsgid ((gid_t)-1) != workload_gid)
    {
      /* gVisor has no setfsuid (ENOSYS). Its /proc lets any uid open /proc/<pid>/fd/N of a
       * file it may open, and a pipe the server made under the workload's effective uid
       * would be the workload's: so the effective ids stay ours and only a file operation
       * takes the workload's, on its own thread, for its duration (nz_privsep_fs_begin). */
      fs_by_euid = TRUE;
    }
  workload_uid_saved = workload_uid;
  workload_gid_saved = workload_gid;
  server_uid_saved = server_uid;
  server_gid_saved = server_gid;
  active = TRUE;
  if (fs_by_euid)
    {
      /* Prove the switch works both ways now, not in the middle of a request. */
      nz_privsep_fs_begin ();
      nz_privsep_fs_end ();
    }
  return TRUE;
}

static gboolean
env_id (const char *prefix, const char *suffix, guint32 *out, gboolean *set, GError **error)
{
  g_autofree char *name = g_strconcat (prefix, suffix, NULL);
  const char *raw = g_getenv (name);
  guint64 v;

  if (raw == NULL || *raw == '\0')
    return TRUE;
  /* uid -1 means "unchanged" to the kernel: never a valid id here. */
  if (!g_ascii_string_to_unsigned (raw, 10, 0, G_MAXUINT32 - 1, &v, NULL))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s must be a uid/gid, got '%s'", name, raw);
  *out = (guint32)v;
  *set = TRUE;
  return TRUE;
}

gboolean
nz_privsep_enter_from_env (const char *prefix, GError **error)
{
  static const char *const suffixes[] = { "_UID", "_GID", "_WORKLOAD_UID", "_WORKLOAD_GID" };
  guint32 ids[4] = { 0 };
  gboolean set[4] = { FALSE };
  guint n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++)
    {
      if (!env_id (prefix, suffixes[i], &ids[i], &set[i], error))
        return FALSE;
      n += set[i] ? 1 : 0;
    }
  if (n == 0)
    {
      /* Hand-run, one uid for everything: still no /proc/<pid>/mem or pidfd_getfd for it. */
      if (prctl (PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return nz_throw_errno_prefix (error, "privsep: PR_SET_DUMPABLE");
      return TRUE;
    }
  /* Half a configuration would leave the workload under the server's uid. */
  if (n != 4)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s_UID, %s_GID, %s_WORKLOAD_UID and %s_WORKLOAD_GID go together", prefix,
                     prefix, prefix, prefix);
  if (ids[0] == ids[2])
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s_UID and %s_WORKLOAD_UID must differ (%u): the workload would own the "
                     "server", prefix, prefix, ids[0]);
  return nz_privsep_enter (ids[0], ids[1], ids[2], ids[3], error);
}

void
nz_privsep_hide_environ (const char *const *drop)
{
  GPtrArray *kept = g_ptr_array_new ();
  char **old = environ;

  for (char **e = old; e != NULL && *e != NULL; e++)
    {
      gboolean dropped = FALSE;

      for (guint i = 0; drop != NULL && drop[i] != NULL && !dropped; i++)
        {
          gsize len = strlen (drop[i]);

          dropped = strncmp (*e, drop[i], len) == 0 && (*e)[len] == '=';
        }
      if (!dropped)
        g_ptr_array_add (kept, g_strdup (*e));
    }
  g_ptr_array_add (kept, NULL);
  /* The process environment from now on: never freed, and held here too, since a later
   * setenv() may move environ to an array of the C library's own. */
  moved_environ = (char **)g_ptr_array_free (kept, FALSE);
  environ = moved_environ;
  for (char **e = old; e != NULL && *e != NULL; e++)
    explicit_bzero (*e, strlen (*e));
}

void
nz_privsep_fs_begin (void)
{
  if (!fs_by_euid || fs_depth++ > 0)
    return;
  /* The raw system calls change this thread only (the C library's would change all). */
  if (syscall (SYS_setresgid, (gid_t)-1, workload_gid_saved, (gid_t)-1) != 0
      || syscall (SYS_setresuid, (uid_t)-1, workload_uid_saved, (uid_t)-1) != 0)
    g_error ("privsep: cannot take the workload's effective ids for a file operation: %s",
             g_strerror (errno));
}

void
nz_privsep_fs_end (void)
{
  if (!fs_by_euid || --fs_depth > 0)
    return;
  /* Staying on the workload's ids would hand it what this thread creates next: abort. */
  if (syscall (SYS_setresuid, (uid_t)-1, server_uid_saved, (uid_t)-1) != 0
      || syscall (SYS_setresgid, (gid_t)-1, server_gid_saved, (gid_t)-1) != 0)
    g_error ("privsep: cannot leave the workload's effective ids: %s", g_strerror (errno));
}

uid_t
nz_privsep_workload_uid (void)
{
  return active ? workload_uid_saved : getuid ();
}

gboolean
nz_privsep_active (void)
{
  return active;
}

int
nz_privsep_drop_child (void)
{
  int e;

  if (!active)
    return 0;
  /* Raw system calls: the caller may share the server's memory (spawn_dropped's clone), where
   * the C library's set*id() would signal the server's threads to change theirs too. */
  if (syscall (SYS_setgroups, 0, NULL) != 0 && errno != EPERM)
    return errno;
  if (syscall (SYS_setresgid, workload_gid_saved, workload_gid_saved, workload_gid_saved) != 0
      || syscall (SYS_setresuid, workload_uid_saved, workload_uid_saved, workload_uid_saved) != 0)
    return errno;
  /* From a non-root server uid the kernel keeps the capabilities over setresuid: drop them. */
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return errno;
  if ((e = set_caps (0)) != 0)
    return e;
  return 0;
}

void
nz_privsep_child_setup (gpointer user_data)
{
  if (nz_privsep_drop_child () != 0)
    _exit (127);
}
