#define _GNU_SOURCE /* O_PATH */
#include "nz-fsops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h> /* renameat */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-jail.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-privsep.h"

/* Ours, stable (the reference has no such ops): the refusals of a bad body. */
#define INVALID_ROOT "invalid_root: root must be a non-empty string"
#define INVALID_PATH "missing_path"
#define INVALID_MOVE "missing_from_or_to"
#define INVALID_PATTERN "invalid_pattern: pattern must be a string"
#define REMOVE_ROOT "remove_refused: a root of the workspace jail cannot be removed"
#define MOVE_ROOT "move_refused: a root of the workspace jail cannot be moved or replaced"
#define REMOVE_TOO_DEEP "remove_too_deep: more than 128 nested directories"
#define INVALID_TARGET "invalid_target: target must be a non-empty string of at most 4095 bytes"
#define MODE_ROOT "mode_refused: a root of the workspace jail cannot be changed"

static gboolean
int_member (JsonObject *body, const char *name, gint64 fallback, gint64 min, gint64 max,
            gint64 *out, GError **error)
{
  JsonNode *node = nz_json_member (body, name);
  double v;

  if (node == NULL || JSON_NODE_HOLDS_NULL (node))
    {
      *out = fallback;
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) == G_TYPE_STRING
      || json_node_get_value_type (node) == G_TYPE_BOOLEAN)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "invalid_%s: %s must be an integer in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                     "]",
                     name, name, min, max);
  v = json_node_get_double (node);
  if (!(v >= (double)min && v <= (double)max) || v != (double)(gint64)v)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "invalid_%s: %s must be an integer in [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                     "]",
                     name, name, min, max);
  *out = (gint64)v;
  return TRUE;
}

static const char *
type_name (mode_t mode)
{
  if (S_ISREG (mode))
    return "file";
  if (S_ISDIR (mode))
    return "directory";
  if (S_ISLNK (mode))
    return "symlink";
  return "other";
}

/* {path, type, size, mode, mtimeMs, target?} of the entry @name in @dirfd (not followed). */
static JsonObject *
entry_object (int dirfd, const char *name, const char *path, const struct stat *st)
{
  JsonObject *e = json_object_new ();

  json_object_set_string_member (e, "path", path);
  json_object_set_string_member (e, "type", type_name (st->st_mode));
  json_object_set_int_member (e, "size", (gint64)st->st_size);
  json_object_set_int_member (e, "mode", (gint64)(st->st_mode & 07777));
  json_object_set_int_member (e, "mtimeMs",
                              (gint64)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
  if (S_ISLNK (st->st_mode))
    {
      char buf[4096];
      ssize_t n = readlinkat (dirfd, name, buf, sizeof buf - 1);

      /* A link is only a name: reported as text, never resolved. */
      if (n >= 0)
        {
          buf[n] = '\0';
          if (g_utf8_validate (buf, n, NULL))
            json_object_set_string_member (e, "target", buf);
        }
    }
  return e;
}

typedef struct
{
  gboolean files_only;
  gboolean include_hidden;
  const char *pattern;
  gint64 max_entries, max_depth, max_visited;
  gint64 visited;
  gsize bytes;
  gboolean truncated;
  JsonArray *entries;
} Walk;

static gboolean
walk_full (Walk *w)
{
  return w->truncated;
}

static void
walk_add (Walk *w, JsonObject *e, const char *path)
{
  if ((gint64)json_array_get_length (w->entries) >= w->max_entries
      || w->bytes + strlen (path) + 160 > NZ_FSOPS_REPLY_BUDGET_BYTES)
    {
      json_object_unref (e);
      w->truncated = TRUE;
      return;
    }
  w->bytes += strlen (path) + 160;
  json_array_add_object_element (w->entries, e);
}

/* Walks the directory open at @dirfd (owned), named @path, at @depth (its children are at
 * @depth + 1). Nothing below is followed: entries are lstat'ed, directories opened
 * O_NOFOLLOW in their parent's fd. */
static gboolean
walk_dir (Walk *w, int dirfd, const char *path, gint64 depth, GError **error)
{
  DIR *dir = fdopendir (dirfd);
  struct dirent *de;
  gboolean ok = TRUE;

  if (dir == NULL)
    {
      close (dirfd);
      return nz_jstext_throw_errno (error, errno, "scandir", path);
    }
  while (ok && !walk_full (w) && (errno = 0, de = readdir (dir)) != NULL)
    {
      g_autofree char *child = NULL;
      struct stat st;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (++w->visited > w->max_visited)
        {
          ok = nz_throw (error, NZ_ERROR_FAILED,
                         NZ_FSOPS_WALK_LIMIT_PREFIX ": examined more than %" G_GINT64_FORMAT
                                                    " entries (maxVisitedEntries)",
                         w->max_visited);
          break;
        }
      /* Hidden names are neither reported nor descended, like a shell's wildcard. */
      if (!w->include_hidden && de->d_name[0] == '.')
        continue;
      /* A name the wire cannot carry as a JSON string is skipped, not mangled. */
      if (!g_utf8_validate (de->d_name, -1, NULL))
        continue;
      if (fstatat (dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        continue; /* gone since readdir */
      child = strcmp (path, "/") == 0 ? g_strconcat ("/", de->d_name, NULL)
                                      : g_strconcat (path, "/", de->d_name, NULL);
      if ((!w->files_only || S_ISREG (st.st_mode))
          && (w->pattern == NULL || fnmatch (w->pattern, de->d_name, 0) == 0))
        walk_add (w, entry_object (dirfd, de->d_name, child, &st), child);
      if (S_ISDIR (st.st_mode) && depth + 1 < w->max_depth && !walk_full (w))
        {
          int sub = openat (dirfd, de->d_name,
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

          /* An unreadable directory is listed, not descended (find says so and goes on). */
          if (sub >= 0)
            ok = walk_dir (w, sub, child, depth + 1, error);
        }
    }
  closedir (dir);
  return ok;
}

gboolean
nz_fsops_walk (NzGuest *guest, JsonObject *body, gboolean files_only, JsonObject *reply,
               GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  const char *root_arg = nz_json_get_string (body, "root");
  JsonNode *pattern = nz_json_member (body, "pattern");
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;
  g_autoptr (GError) local = NULL;
  Walk w = { 0 };
  struct stat st;
  int fd;

  if (root_arg == NULL || *root_arg == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_ROOT);
  if (pattern != NULL && !JSON_NODE_HOLDS_NULL (pattern) && nz_json_node_string (pattern) == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_PATTERN);
  w.files_only = files_only;
  w.pattern = pattern != NULL ? nz_json_node_string (pattern) : NULL;
  w.include_hidden = nz_json_get_bool (body, "includeHidden", FALSE);
  if (!int_member (body, "maxEntries", NZ_FSOPS_DEFAULT_MAX_ENTRIES, 1, NZ_FSOPS_MAX_ENTRIES,
                   &w.max_entries, error)
      || !int_member (body, "maxDepth", files_only ? NZ_FSOPS_MAX_DEPTH : 1, 1, NZ_FSOPS_MAX_DEPTH,
                      &w.max_depth, error)
      || !int_member (body, "maxVisitedEntries", NZ_FSOPS_DEFAULT_MAX_VISITED, 1,
                      NZ_FSOPS_MAX_VISITED, &w.max_visited, error))
    return FALSE;
  if ((lexical = nz_jail_resolve_read (guest->jail, root_arg, &root, error)) == NULL)
    return FALSE;
  w.entries = json_array_new ();
  json_object_set_string_member (reply, "root", lexical);
  json_object_set_array_member (reply, "entries", w.entries);
  /* The root itself may be a symlink that stays inside the jail (the realpath step decides);
   * nothing below it is followed. */
  fd = nz_jail_open_within (lexical, root, O_RDONLY | O_NONBLOCK, 0, NULL, &local);
  if (fd < 0)
    {
      /* A root that does not exist is an empty listing (the reference's listFiles and
       * walkFiles); an escape or any other failure is not. */
      if (g_str_has_prefix (local->message, "ENOENT:")
          || g_str_has_prefix (local->message, "ENOTDIR:"))
        {
          json_object_set_boolean_member (reply, "truncated", FALSE);
          return TRUE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (fstat (fd, &st) != 0)
    {
      int errsv = errno;

      close (fd);
      return nz_jstext_throw_errno (error, errsv, "stat", lexical);
    }
  if (!S_ISDIR (st.st_mode))
    {
      /* A file root lists itself, as find does. */
      close (fd);
      if (!w.files_only || S_ISREG (st.st_mode))
        walk_add (&w, entry_object (-1, "", lexical, &st), lexical);
    }
  else if (!walk_dir (&w, fd, lexical, 0, error))
    return FALSE;
  json_object_set_boolean_member (reply, "truncated", w.truncated);
  return TRUE;
}

/* The entry @path names, in its parent's fd; *@out_lexical gets the jailed path. */
static int
entry_parent (NzGuest *guest, const char *path, gboolean write, char **out_lexical, char **out_base,
              GError **error)
{
  g_autofree char *root = NULL;
  g_autofree char *lexical = write ? nz_jail_resolve_write (guest->jail, path, &root, error)
                                   : nz_jail_resolve_read (guest->jail, path, &root, error);
  int fd;

  if (lexical == NULL)
    return -1;
  fd = nz_jail_open_entry_parent (lexical, root, NULL, out_base, error);
  if (fd >= 0 && out_lexical != NULL)
    *out_lexical = g_steal_pointer (&lexical);
  return fd;
}

gboolean
nz_fsops_stat (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  const char *path = nz_json_get_string (body, "path");
  g_autofree char *lexical = NULL;
  g_autofree char *base = NULL;
  nz_autofd int dirfd = -1;
  struct stat st;

  if (path == NULL || *path == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_PATH);
  /* The workspace root itself has no parent in the jail: stat it directly. */
  {
    g_autofree char *root = NULL;
    g_autofree char *l = nz_jail_resolve_read (guest->jail, path, &root, error);

    if (l == NULL)
      return FALSE;
    if (strcmp (l, root) == 0)
      {
        nz_autofd int fd = nz_jail_open_within (l, root, O_PATH | O_DIRECTORY, 0, NULL, error);

        if (fd < 0)
          return FALSE;
        if (fstat (fd, &st) != 0)
          return nz_jstext_throw_errno (error, errno, "lstat", l);
        json_object_set_object_member (reply, "entry", entry_object (-1, "", l, &st));
        return TRUE;
      }
  }
  if ((dirfd = entry_parent (guest, path, FALSE, &lexical, &base, error)) < 0)
    return FALSE;
  if (fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return nz_jstext_throw_errno (error, errno, "lstat", lexical);
  json_object_set_object_member (reply, "entry", entry_object (dirfd, base, lexical, &st));
  return TRUE;
}

static gboolean
is_a_root (NzGuest *guest, const char *lexical)
{
  const char *const *roots[]
      = { nz_jail_get_read_roots (guest->jail), nz_jail_get_write_roots (guest->jail) };

  for (guint k = 0; k < G_N_ELEMENTS (roots); k++)
    for (guint i = 0; roots[k][i] != NULL; i++)
      if (strcmp (roots[k][i], lexical) == 0)
        return TRUE;
  return FALSE;
}

/* rm -r of @name in @dirfd: every directory opened O_NOFOLLOW in its parent's fd, so a
 * symlink is unlinked as a name and never entered. */
static gboolean
remove_tree (int dirfd, const char *name, const char *shown, guint depth, GError **error)
{
  struct stat st;
  int sub;
  DIR *dir;
  struct dirent *de;

  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? TRUE : nz_jstext_throw_errno (error, errno, "lstat", shown);
  if (!S_ISDIR (st.st_mode))
    {
      if (unlinkat (dirfd, name, 0) != 0 && errno != ENOENT)
        return nz_jstext_throw_errno (error, errno, "unlink", shown);
      return TRUE;
    }
  if (depth >= NZ_FSOPS_MAX_DEPTH)
    return nz_throw (error, NZ_ERROR_FAILED, REMOVE_TOO_DEEP);
  sub = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0)
    return nz_jstext_throw_errno (error, errno, "rmdir", shown);
  if ((dir = fdopendir (sub)) == NULL)
    {
      close (sub);
      return nz_jstext_throw_errno (error, errno, "rmdir", shown);
    }
  while ((de = readdir (dir)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (!remove_tree (sub, de->d_name, shown, depth + 1, error))
        {
          closedir (dir);
          return FALSE;
        }
    }
  closedir (dir);
  if (unlinkat (dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    return nz_jstext_throw_errno (error, errno, "rmdir", shown);
  return TRUE;
}

gboolean
nz_fsops_remove (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  const char *path = nz_json_get_string (body, "path");
  gboolean recursive = nz_json_get_bool (body, "recursive", FALSE);
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;
  g_autofree char *base = NULL;
  nz_autofd int dirfd = -1;
  struct stat st;

  if (path == NULL || *path == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_PATH);
  if ((lexical = nz_jail_resolve_write (guest->jail, path, &root, error)) == NULL)
    return FALSE;
  if (is_a_root (guest, lexical))
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, REMOVE_ROOT);
  if ((dirfd = nz_jail_open_entry_parent (lexical, root, NULL, &base, error)) < 0)
    {
      /* No parent, no entry: removing what is not there is done (rm -f). */
      if (error != NULL && *error != NULL && g_str_has_prefix ((*error)->message, "ENOENT:"))
        {
          g_clear_error (error);
          json_object_set_boolean_member (reply, "removed", FALSE);
          return TRUE;
        }
      return FALSE;
    }
  if (fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
    {
      if (errno != ENOENT)
        return nz_jstext_throw_errno (error, errno, "lstat", lexical);
      json_object_set_boolean_member (reply, "removed", FALSE);
      return TRUE;
    }
  if (S_ISDIR (st.st_mode) && !recursive)
    {
      if (unlinkat (dirfd, base, AT_REMOVEDIR) != 0)
        return nz_jstext_throw_errno (error, errno, "rmdir", lexical);
    }
  else if (!remove_tree (dirfd, base, lexical, 0, error))
    return FALSE;
  json_object_set_boolean_member (reply, "removed", TRUE);
  return TRUE;
}

gboolean
nz_fsops_move (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  const char *from = nz_json_get_string (body, "from");
  const char *to = nz_json_get_string (body, "to");
  g_autofree char *from_root = NULL;
  g_autofree char *to_root = NULL;
  g_autofree char *from_lexical = NULL;
  g_autofree char *to_lexical = NULL;
  g_autofree char *from_base = NULL;
  g_autofree char *to_base = NULL;
  nz_autofd int from_fd = -1;
  nz_autofd int to_fd = -1;

  if (from == NULL || *from == '\0' || to == NULL || *to == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_MOVE);
  if ((from_lexical = nz_jail_resolve_write (guest->jail, from, &from_root, error)) == NULL
      || (to_lexical = nz_jail_resolve_write (guest->jail, to, &to_root, error)) == NULL)
    return FALSE;
  if (is_a_root (guest, from_lexical) || is_a_root (guest, to_lexical))
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, MOVE_ROOT);
  if ((from_fd = nz_jail_open_entry_parent (from_lexical, from_root, NULL, &from_base, error)) < 0
      || (to_fd = nz_jail_open_entry_parent (to_lexical, to_root, NULL, &to_base, error)) < 0)
    return FALSE;
  /* renameat never follows either name: a symlink moves as a link, and one at @to is
   * replaced, not written through. */
  if (renameat (from_fd, from_base, to_fd, to_base) != 0)
    return nz_jstext_throw_errno (error, errno, "rename", from_lexical);
  fsync (to_fd);
  json_object_set_string_member (reply, "from", from_lexical);
  json_object_set_string_member (reply, "to", to_lexical);
  return TRUE;
}

/* ---- file-tree-ops: what a directory copy needs besides writes ---- */

/* The optional (@required FALSE) or required permission bits member "mode": 0..0777, or -1. */
static gboolean
mode_member (JsonObject *body, gboolean required, gint64 *out, GError **error)
{
  if (required && nz_json_member (body, "mode") == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "missing_mode");
  return int_member (body, "mode", -1, 0, 0777, out, error);
}

/* @path's parent in the write roots (made with mkdir -p when @make_parent), as an fd, with the
 * entry's name in *@out_base and the jailed path in *@out_lexical. No root of the jail. */
static int
write_entry_parent (NzGuest *guest, const char *path, gboolean make_parent, char **out_lexical,
                    char **out_base, GError **error)
{
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;
  int fd;

  if (path == NULL || *path == '\0')
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_PATH);
      return -1;
    }
  if ((lexical = nz_jail_resolve_write (guest->jail, path, &root, error)) == NULL)
    return -1;
  if (is_a_root (guest, lexical))
    {
      nz_throw (error, NZ_ERROR_PERMISSION_DENIED, MODE_ROOT);
      return -1;
    }
  if (make_parent)
    {
      g_autofree char *parent = g_path_get_dirname (lexical);

      if (!nz_jail_mkdir_p_within (parent, root, error))
        return -1;
    }
  if ((fd = nz_jail_open_entry_parent (lexical, root, NULL, out_base, error)) >= 0)
    *out_lexical = g_steal_pointer (&lexical);
  return fd;
}

gboolean
nz_fsops_make_directory (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *lexical = NULL;
  g_autofree char *base = NULL;
  nz_autofd int dirfd = -1;
  gboolean created = TRUE;
  gint64 mode = -1;
  struct stat st;

  if (!mode_member (body, FALSE, &mode, error))
    return FALSE;
  dirfd
      = write_entry_parent (guest, nz_json_get_string (body, "path"), TRUE, &lexical, &base, error);
  if (dirfd < 0)
    return FALSE;
  if (mkdirat (dirfd, base, mode >= 0 ? (mode_t)mode : 0777) != 0)
    {
      int errsv = errno;

      /* An existing directory is done (mkdir -p); anything else there is not a directory. */
      if (errsv != EEXIST || fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0
          || !S_ISDIR (st.st_mode))
        return nz_jstext_throw_errno (error, errsv, "mkdir", lexical);
      created = FALSE;
    }
  /* The exact bits, whatever the umask, and on an existing directory too. Not following a
   * symlink swapped in meanwhile (glibc refuses to chmod a link: EOPNOTSUPP). */
  if (mode >= 0 && fchmodat (dirfd, base, (mode_t)mode, AT_SYMLINK_NOFOLLOW) != 0)
    return nz_jstext_throw_errno (error, errno, "chmod", lexical);
  json_object_set_string_member (reply, "path", lexical);
  json_object_set_boolean_member (reply, "created", created);
  return TRUE;
}

gboolean
nz_fsops_make_symlink (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  const char *target = nz_json_get_string (body, "target");
  g_autofree char *lexical = NULL;
  g_autofree char *base = NULL;
  g_autofree char *tmp = NULL;
  nz_autofd int dirfd = -1;
  struct stat st;

  if (target == NULL || *target == '\0' || strlen (target) >= 4096)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, INVALID_TARGET);
  dirfd = write_entry_parent (guest, nz_json_get_string (body, "path"), FALSE, &lexical, &base,
                              error);
  if (dirfd < 0)
    return FALSE;
  /* The target is only text: never resolved here, and the jail refuses to follow it out. */
  if (symlinkat (target, dirfd, base) == 0)
    goto done;
  if (errno != EEXIST)
    return nz_jstext_throw_errno (error, errno, "symlink", lexical);
  /* ln -sfn: a file or a link there is replaced (atomically, by a rename); a directory is
   * not. */
  if (fstatat (dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR (st.st_mode))
    return nz_jstext_throw_errno (error, EEXIST, "symlink", lexical);
  tmp = g_strdup_printf (".namzu-link-%08x%08x", g_random_int (), g_random_int ());
  if (symlinkat (target, dirfd, tmp) != 0)
    return nz_jstext_throw_errno (error, errno, "symlink", lexical);
  if (renameat (dirfd, tmp, dirfd, base) != 0)
    {
      int errsv = errno;

      unlinkat (dirfd, tmp, 0);
      return nz_jstext_throw_errno (error, errsv, "rename", lexical);
    }
done:
  json_object_set_string_member (reply, "path", lexical);
  json_object_set_string_member (reply, "target", target);
  return TRUE;
}

gboolean
nz_fsops_set_mode (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error)
{
  NZ_PRIVSEP_FS_SCOPE;
  g_autofree char *lexical = NULL;
  g_autofree char *base = NULL;
  nz_autofd int dirfd = -1;
  gint64 mode = -1;

  if (!mode_member (body, TRUE, &mode, error))
    return FALSE;
  dirfd = write_entry_parent (guest, nz_json_get_string (body, "path"), FALSE, &lexical, &base,
                              error);
  if (dirfd < 0)
    return FALSE;
  /* The entry itself: a symlink is refused (EOPNOTSUPP), never followed. */
  if (fchmodat (dirfd, base, (mode_t)mode, AT_SYMLINK_NOFOLLOW) != 0)
    return nz_jstext_throw_errno (error, errno, "chmod", lexical);
  json_object_set_string_member (reply, "path", lexical);
  json_object_set_int_member (reply, "mode", mode);
  return TRUE;
}
