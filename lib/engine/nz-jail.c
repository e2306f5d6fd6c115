#define _GNU_SOURCE /* O_PATH, O_TMPFILE */
#include "nz-jail.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nz-autofd.h"

#include "nz-errors.h"
#include "nz-jstext.h"
#include "nz-privsep.h"

#define ESCAPE_MESSAGE "path escapes the workspace"
#define SYMLINK_ESCAPE_MESSAGE "symlink escapes the workspace"

struct _NzJail
{
  char *workspace;
  GPtrArray *read_roots;  /* char*, NULL-terminated */
  GPtrArray *write_roots; /* char*, NULL-terminated */
};

char *
nz_jail_resolve_path (const char *base, const char *path)
{
  g_autoptr (GPtrArray) parts = g_ptr_array_new_with_free_func (g_free);
  GString *out;
  const char *inputs[2];

  inputs[0] = (path != NULL && path[0] == '/') ? "" : base;
  inputs[1] = path != NULL ? path : "";
  for (int k = 0; k < 2; k++)
    {
      g_auto (GStrv) comps = g_strsplit (inputs[k] != NULL ? inputs[k] : "", "/", -1);

      for (guint i = 0; comps[i] != NULL; i++)
        {
          if (comps[i][0] == '\0' || strcmp (comps[i], ".") == 0)
            continue;
          if (strcmp (comps[i], "..") == 0)
            {
              if (parts->len > 0)
                g_ptr_array_remove_index (parts, parts->len - 1);
              continue;
            }
          g_ptr_array_add (parts, g_strdup (comps[i]));
        }
    }
  if (parts->len == 0)
    return g_strdup ("/");
  out = g_string_new (NULL);
  for (guint i = 0; i < parts->len; i++)
    {
      g_string_append_c (out, '/');
      g_string_append (out, parts->pdata[i]);
    }
  return g_string_free (out, FALSE);
}

/* Equal to @root, or under it with a '/' boundary, so /workspace2 is not inside /workspace. */
static gboolean
is_inside (const char *path, const char *root)
{
  gsize n = strlen (root);

  if (strcmp (root, "/") == 0)
    return path[0] == '/';
  return strncmp (path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static char *
cwd_resolve (const char *path)
{
  g_autofree char *cwd = g_get_current_dir ();

  return nz_jail_resolve_path (cwd, path);
}

static GPtrArray *
build_roots (const char *workspace, const char *extra)
{
  GPtrArray *roots = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (roots, g_strdup (workspace));
  if (extra != NULL)
    {
      g_auto (GStrv) items = g_strsplit (extra, ":", -1);

      for (guint i = 0; items[i] != NULL; i++)
        {
          g_autofree char *item = g_strstrip (g_strdup (items[i]));
          g_autofree char *resolved = NULL;
          gboolean dup = FALSE;

          if (*item == '\0')
            continue;
          resolved = cwd_resolve (item);
          for (guint j = 0; j < roots->len && !dup; j++)
            dup = strcmp (roots->pdata[j], resolved) == 0;
          if (!dup)
            g_ptr_array_add (roots, g_steal_pointer (&resolved));
        }
    }
  g_ptr_array_add (roots, NULL);
  return roots;
}

NzJail *
nz_jail_new (const char *workspace, const char *read_roots, const char *write_roots)
{
  NzJail *jail;

  g_return_val_if_fail (workspace != NULL, NULL);
  jail = g_new0 (NzJail, 1);
  jail->workspace = cwd_resolve (workspace);
  jail->read_roots = build_roots (jail->workspace, read_roots);
  jail->write_roots = build_roots (jail->workspace, write_roots);
  return jail;
}

void
nz_jail_free (NzJail *jail)
{
  if (jail == NULL)
    return;
  g_free (jail->workspace);
  g_ptr_array_unref (jail->read_roots);
  g_ptr_array_unref (jail->write_roots);
  g_free (jail);
}

const char *
nz_jail_get_workspace (NzJail *jail)
{
  return jail->workspace;
}

const char *const *
nz_jail_get_read_roots (NzJail *jail)
{
  return (const char *const *)jail->read_roots->pdata;
}

const char *const *
nz_jail_get_write_roots (NzJail *jail)
{
  return (const char *const *)jail->write_roots->pdata;
}

char *
nz_jail_resolve_cwd (NzJail *jail, const char *path, GError **error)
{
  g_autofree char *resolved = NULL;

  g_return_val_if_fail (jail != NULL && path != NULL, NULL);
  resolved = nz_jail_resolve_path (jail->workspace, path);
  if (!is_inside (resolved, jail->workspace))
    {
      nz_throw (error, NZ_ERROR_PERMISSION_DENIED, ESCAPE_MESSAGE);
      return NULL;
    }
  return g_steal_pointer (&resolved);
}

static char *
resolve_in_roots (NzJail *jail, GPtrArray *roots, const char *path, char **out_root, GError **error)
{
  g_autofree char *resolved = NULL;

  g_return_val_if_fail (jail != NULL && path != NULL, NULL);
  resolved = nz_jail_resolve_path (jail->workspace, path);
  if (path[0] != '/')
    {
      /* A relative path only ever means "inside the workspace". */
      if (!is_inside (resolved, jail->workspace))
        {
          nz_throw (error, NZ_ERROR_PERMISSION_DENIED, ESCAPE_MESSAGE);
          return NULL;
        }
      if (out_root != NULL)
        *out_root = g_strdup (jail->workspace);
      return g_steal_pointer (&resolved);
    }
  for (guint i = 0; i + 1 < roots->len; i++)
    {
      if (is_inside (resolved, roots->pdata[i]))
        {
          if (out_root != NULL)
            *out_root = g_strdup (roots->pdata[i]);
          return g_steal_pointer (&resolved);
        }
    }
  nz_throw (error, NZ_ERROR_PERMISSION_DENIED, ESCAPE_MESSAGE);
  return NULL;
}

char *
nz_jail_resolve_read (NzJail *jail, const char *path, char **out_root, GError **error)
{
  return resolve_in_roots (jail, jail->read_roots, path, out_root, error);
}

char *
nz_jail_resolve_write (NzJail *jail, const char *path, char **out_root, GError **error)
{
  return resolve_in_roots (jail, jail->write_roots, path, out_root, error);
}

/* The realpath step; *@out_real_root gets realpath(@root), *@out_missing (optional) whether
 * @target itself did not resolve (so the parent decided). */
static char *
realpath_within (const char *target, const char *root, char **out_real_root,
                 gboolean *out_missing, GError **error)
{
  g_autofree char *real_root = NULL;
  g_autofree char *real = NULL;

  g_return_val_if_fail (target != NULL && root != NULL, NULL);
  real_root = realpath (root, NULL);
  if (real_root == NULL)
    {
      nz_jstext_throw_errno (error, errno, "realpath", root);
      return NULL;
    }
  real = realpath (target, NULL);
  if (real == NULL)
    {
      g_autofree char *dir = NULL;
      g_autofree char *base = NULL;
      g_autofree char *real_dir = NULL;

      if (errno != ENOENT)
        {
          nz_jstext_throw_errno (error, errno, "realpath", target);
          return NULL;
        }
      /* Not there yet (a write target): the parent decides where it would land. */
      if (out_missing != NULL)
        *out_missing = TRUE;
      dir = g_path_get_dirname (target);
      base = g_path_get_basename (target);
      real_dir = realpath (dir, NULL);
      if (real_dir == NULL)
        {
          nz_jstext_throw_errno (error, errno, "realpath", dir);
          return NULL;
        }
      real = g_build_filename (real_dir, base, NULL);
    }
  if (!is_inside (real, real_root))
    {
      nz_throw (error, NZ_ERROR_PERMISSION_DENIED, SYMLINK_ESCAPE_MESSAGE);
      return NULL;
    }
  if (out_real_root != NULL)
    *out_real_root = g_steal_pointer (&real_root);
  return g_steal_pointer (&real);
}

char *
nz_jail_realpath_within (const char *target, const char *root, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  return realpath_within (target, root, NULL, NULL, error);
}

/* ---- race-free opens ---- */

static gboolean force_walk;
static gint have_openat2 = -1; /* unknown until the first call */

void
nz_jail_set_force_walk (gboolean force)
{
  force_walk = force;
}

/* The kernel-less path: every directory on the way opened O_PATH | O_NOFOLLOW | O_DIRECTORY
 * from the one before, the last entry O_NOFOLLOW; ".." is refused outright. */
static int
walk_beneath (int root_fd, const char *rel, int flags, mode_t mode)
{
  g_auto (GStrv) all = g_strsplit (rel, "/", -1);
  g_autoptr (GPtrArray) comps = g_ptr_array_new (); /* borrowed from all */
  nz_autofd int cur = -1;
  const char *last = ".";
  guint n;
  int fd;

  for (guint i = 0; all[i] != NULL; i++)
    {
      if (strcmp (all[i], "..") == 0)
        {
          errno = EXDEV;
          return -1;
        }
      if (all[i][0] != '\0' && strcmp (all[i], ".") != 0)
        g_ptr_array_add (comps, all[i]);
    }
  n = comps->len;
  cur = fcntl (root_fd, F_DUPFD_CLOEXEC, 0);
  if (cur < 0)
    return -1;
  for (guint i = 0; i + 1 < n; i++)
    {
      int next = openat (cur, comps->pdata[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      struct stat st;

      /* A symlink in the way reads ENOTDIR here; say ELOOP, as openat2 does. */
      if (next < 0 && errno == ENOTDIR
          && fstatat (cur, comps->pdata[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (st.st_mode))
        errno = ELOOP;
      if (next < 0)
        return -1;
      nz_close_fd (&cur);
      cur = next;
    }
  if (n > 0)
    last = comps->pdata[n - 1];
  fd = openat (cur, last, flags | O_NOFOLLOW | O_CLOEXEC, mode);
  /* O_PATH | O_NOFOLLOW opens a symlink itself rather than failing: refuse it. */
  if (fd >= 0 && (flags & O_PATH) != 0)
    {
      struct stat st;

      if (fstat (fd, &st) != 0 || S_ISLNK (st.st_mode))
        {
          close (fd);
          errno = ELOOP;
          return -1;
        }
    }
  return fd;
}

int
nz_jail_openat_beneath (int root_fd, const char *rel, int flags, mode_t mode)
{
  NZ_PRIVSEP_FS_SCOPE;
  struct open_how how = { 0 };
  int fd;

  g_return_val_if_fail (rel != NULL, -1);
  if (force_walk || g_atomic_int_get (&have_openat2) == 0)
    return walk_beneath (root_fd, rel, flags, mode);
  how.flags = (guint64)(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  fd = (int)syscall (SYS_openat2, root_fd, *rel != '\0' ? rel : ".", &how, sizeof how);
  if (fd < 0 && errno == ENOSYS)
    {
      g_atomic_int_set (&have_openat2, 0);
      return walk_beneath (root_fd, rel, flags, mode);
    }
  if (fd >= 0)
    g_atomic_int_set (&have_openat2, 1);
  return fd;
}

/* @real (inside @real_root) relative to it; "." for the root itself. */
static const char *
relative_to (const char *real, const char *real_root)
{
  const char *rel = strcmp (real_root, "/") == 0 ? real : real + strlen (real_root);

  while (*rel == '/')
    rel++;
  return *rel != '\0' ? rel : ".";
}

static int
open_real_beneath (const char *real, const char *real_root, int flags, mode_t mode,
                   const char *shown, GError **error)
{
  nz_autofd int root_fd = open (real_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd;

  if (root_fd < 0)
    {
      nz_jstext_throw_errno (error, errno, "open", real_root);
      return -1;
    }
  fd = nz_jail_openat_beneath (root_fd, relative_to (real, real_root), flags, mode);
  if (fd < 0)
    {
      /* A symlink where the realpath step saw none: it was swapped in since. */
      if (errno == ELOOP || errno == EXDEV)
        nz_throw (error, NZ_ERROR_PERMISSION_DENIED, SYMLINK_ESCAPE_MESSAGE);
      else
        nz_jstext_throw_errno (error, errno, "open", shown);
      return -1;
    }
  return fd;
}

int
nz_jail_open_within (const char *target, const char *root, int flags, mode_t mode,
                     char **out_real, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *real_root = NULL;
  gboolean missing = FALSE;
  g_autofree char *real = realpath_within (target, root, &real_root, &missing, error);
  g_autoptr (GError) local = NULL;
  int fd;

  if (real == NULL)
    return -1;
  fd = open_real_beneath (real, real_root, flags, mode, real, &local);
  /* A dangling symlink (the target did not resolve, its last entry is a link): no file, as a
   * following open would say; nothing is opened either way. */
  if (fd < 0 && missing && (flags & O_CREAT) == 0
      && g_error_matches (local, NZ_ERROR, NZ_ERROR_PERMISSION_DENIED))
    {
      nz_jstext_throw_errno (error, ENOENT, "open", real);
      return -1;
    }
  if (fd < 0)
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return -1;
    }
  if (fd >= 0 && out_real != NULL)
    *out_real = g_steal_pointer (&real);
  return fd;
}

int
nz_jail_open_parent_within (const char *target, const char *root, char **out_real,
                            char **out_base, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *real_root = NULL;
  g_autofree char *real = realpath_within (target, root, &real_root, NULL, error);
  g_autofree char *dir = NULL;
  int fd;

  if (real == NULL)
    return -1;
  /* The root itself has no parent inside the jail; it is a directory anyway. */
  if (strcmp (real, real_root) == 0)
    {
      nz_jstext_throw_errno (error, EISDIR, "open", target);
      return -1;
    }
  dir = g_path_get_dirname (real);
  fd = open_real_beneath (dir, real_root, O_RDONLY | O_DIRECTORY, 0, dir, error);
  if (fd < 0)
    return -1;
  *out_base = g_path_get_basename (real);
  if (out_real != NULL)
    *out_real = g_steal_pointer (&real);
  return fd;
}

int
nz_jail_open_entry_parent (const char *target, const char *root, char **out_real,
                           char **out_base, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *lexical_root = nz_jail_resolve_path ("/", root);
  g_autofree char *lexical = nz_jail_resolve_path ("/", target);
  g_autofree char *dir = NULL;
  g_autofree char *real_root = NULL;
  g_autofree char *real_dir = NULL;
  int fd;

  g_return_val_if_fail (target != NULL && root != NULL && out_base != NULL, -1);
  /* The root has no entry of its own inside the jail to stat, remove or rename. */
  if (!is_inside (lexical, lexical_root) || strcmp (lexical, lexical_root) == 0)
    {
      nz_throw (error, NZ_ERROR_PERMISSION_DENIED, ESCAPE_MESSAGE);
      return -1;
    }
  dir = g_path_get_dirname (lexical);
  /* The parent must exist: realpath_within's missing-target fallback is for write targets. */
  real_dir = realpath_within (dir, root, &real_root, NULL, error);
  if (real_dir == NULL)
    return -1;
  {
    g_autofree char *probe = realpath (dir, NULL);

    if (probe == NULL)
      {
        nz_jstext_throw_errno (error, errno, "lstat", target);
        return -1;
      }
  }
  fd = open_real_beneath (real_dir, real_root, O_RDONLY | O_DIRECTORY, 0, dir, error);
  if (fd < 0)
    return -1;
  *out_base = g_path_get_basename (lexical);
  if (out_real != NULL)
    *out_real = g_build_filename (real_dir, *out_base, NULL);
  return fd;
}

gboolean
nz_jail_mkdir_p_within (const char *dir, const char *root, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *lexical_root = nz_jail_resolve_path ("/", root);
  g_autofree char *lexical = nz_jail_resolve_path ("/", dir);
  g_auto (GStrv) comps = NULL;
  g_autoptr (GString) cur = NULL;

  g_return_val_if_fail (dir != NULL && root != NULL, FALSE);
  if (!is_inside (lexical, lexical_root))
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, ESCAPE_MESSAGE);
  comps = g_strsplit (lexical + (strcmp (lexical_root, "/") == 0 ? 0 : strlen (lexical_root)),
                      "/", -1);
  cur = g_string_new (lexical_root);
  for (guint i = 0; comps[i] != NULL; i++)
    {
      nz_autofd int parent = -1;
      struct stat st;

      if (comps[i][0] == '\0')
        continue;
      /* Each parent through the realpath step (inside symlinks still work), opened beneath
       * the root with nothing followed; the new directory is made in that fd. */
      parent = nz_jail_open_within (cur->str, root, O_PATH | O_DIRECTORY, 0, NULL, error);
      if (parent < 0)
        return FALSE;
      if (mkdirat (parent, comps[i], 0777) != 0)
        {
          int errsv = errno;

          if (errsv != EEXIST)
            return nz_jstext_throw_errno (error, errsv, "mkdir", dir);
          if (fstatat (parent, comps[i], &st, 0) != 0 || !S_ISDIR (st.st_mode))
            return nz_jstext_throw_errno (error, ENOTDIR, "mkdir", dir);
        }
      if (cur->str[cur->len - 1] != '/')
        g_string_append_c (cur, '/');
      g_string_append (cur, comps[i]);
    }
  return TRUE;
}

char *
nz_jail_enter_cwd (NzJail *jail, const char *dir, int *out_fd, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *abs = NULL;
  int fd;

  g_return_val_if_fail (jail != NULL && dir != NULL && out_fd != NULL, NULL);
  *out_fd = -1;
  abs = nz_jail_resolve_path (jail->workspace, dir);
  if (!nz_jail_mkdir_p_within (abs, jail->workspace, error))
    return NULL;
  fd = nz_jail_open_within (abs, jail->workspace, O_PATH | O_DIRECTORY, 0, NULL, error);
  if (fd < 0)
    return NULL;
  *out_fd = fd;
  /* The magic link names the opened directory itself, in the child as in us (the fd is
   * inherited up to the exec; O_CLOEXEC closes it there). */
  return g_strdup_printf ("/proc/self/fd/%d", fd);
}
