#include "nz-jail.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-jstext.h"

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

char *
nz_jail_realpath_within (const char *target, const char *root, GError **error)
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
  return g_steal_pointer (&real);
}
