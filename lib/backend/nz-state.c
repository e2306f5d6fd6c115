#include "nz-state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"

/* A handle on stdin is one small JSON object; anything bigger is not a handle. */
#define NZ_STDIN_HANDLE_MAX (64 * 1024)

NzHandle *
nz_handle_new (void)
{
  NzHandle *h = g_new0 (NzHandle, 1);

  h->priv = json_object_new ();
  return h;
}

void
nz_handle_free (NzHandle *h)
{
  if (h == NULL)
    return;
  g_free (h->id);
  g_free (h->backend);
  g_free (h->tier);
  g_free (h->dir);
  g_free (h->endpoint);
  if (h->token != NULL)
    memset (h->token, 0, strlen (h->token));
  g_free (h->token);
  g_clear_pointer (&h->priv, json_object_unref);
  g_free (h);
}

char *
nz_state_dir (GError **error)
{
  const char *env = g_getenv ("NAMZU_STATE_DIR");
  const char *xdg = g_getenv ("XDG_RUNTIME_DIR");

  if (env != NULL && *env != '\0')
    {
      if (!g_path_is_absolute (env))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "NAMZU_STATE_DIR must be an absolute path, got '%s'", env),
                NULL);
      return g_strdup (env);
    }
  if (xdg != NULL && g_path_is_absolute (xdg))
    return g_build_filename (xdg, "namzu", NULL);
  if (geteuid () == 0)
    return g_strdup ("/run/namzu");
  return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                    "no state directory: set NAMZU_STATE_DIR or XDG_RUNTIME_DIR"),
          NULL);
}

char *
nz_state_dir_ensure (GError **error)
{
  g_autofree char *dir = nz_state_dir (error);
  struct stat st;

  if (dir == NULL)
    return NULL;
  if (g_mkdir_with_parents (dir, 0700) != 0)
    {
      nz_throw_errno_prefix (error, "cannot create the state directory '%s'", dir);
      /* ENOTDIR and friends: the environment is broken, not the command line (exit 1). */
      if (error != NULL && (*error)->code == NZ_ERROR_INVALID_ARGS)
        (*error)->code = NZ_ERROR_FAILED;
      return NULL;
    }
  if (lstat (dir, &st) != 0)
    return (nz_throw_errno_prefix (error, "state directory '%s'", dir), NULL);
  if (!S_ISDIR (st.st_mode))
    return (nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                      "state directory '%s' is not a directory", dir), NULL);
  /* It holds credentials: someone else's directory, or a shared one, is not ours to use. */
  if (st.st_uid != geteuid ())
    return (nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                      "state directory '%s' is owned by uid %u, not by us (uid %u)", dir,
                      (guint)st.st_uid, (guint)geteuid ()), NULL);
  if ((st.st_mode & 077) != 0 && chmod (dir, 0700) != 0)
    return (nz_throw_errno_prefix (error, "cannot make the state directory '%s' private", dir),
            NULL);
  if (access (dir, W_OK | X_OK) != 0)
    return (nz_throw_errno_prefix (error, "state directory '%s' is not writable", dir), NULL);
  return g_steal_pointer (&dir);
}

char *
nz_state_new_id (void)
{
  return g_strdup_printf ("nz-%06x%06x", g_random_int_range (0, 0x1000000),
                          g_random_int_range (0, 0x1000000));
}

gboolean
nz_state_id_is_valid (const char *id)
{
  if (id == NULL || strlen (id) != 15 || strncmp (id, "nz-", 3) != 0)
    return FALSE;
  for (const char *p = id + 3; *p != '\0'; p++)
    if (!g_ascii_isxdigit (*p) || g_ascii_isupper (*p))
      return FALSE;
  return TRUE;
}

gboolean
nz_handle_make_dir (NzHandle *h, GError **error)
{
  g_autofree char *state = nz_state_dir_ensure (error);
  g_autofree char *dir = NULL;

  g_return_val_if_fail (h != NULL && nz_state_id_is_valid (h->id), FALSE);
  if (state == NULL)
    return FALSE;
  dir = g_build_filename (state, h->id, NULL);
  if (mkdir (dir, 0700) != 0)
    return nz_throw_errno_prefix (error, "cannot create '%s'", dir);
  g_free (h->dir);
  h->dir = g_steal_pointer (&dir);
  return TRUE;
}

JsonObject *
nz_handle_to_private_json (const NzHandle *h)
{
  JsonObject *obj = json_object_new ();

  json_object_set_string_member (obj, "id", h->id);
  json_object_set_string_member (obj, "backend", h->backend);
  json_object_set_string_member (obj, "tier", h->tier);
  json_object_set_int_member (obj, "createdAt", h->created_at_ms);
  if (h->endpoint != NULL)
    json_object_set_string_member (obj, "endpoint", h->endpoint);
  if (h->token != NULL)
    json_object_set_string_member (obj, "token", h->token);
  if (h->expires_at_ms > 0)
    json_object_set_int_member (obj, "expiresAt", h->expires_at_ms);
  if (h->idle_timeout_ms > 0)
    json_object_set_int_member (obj, "idleTimeoutMs", h->idle_timeout_ms);
  json_object_set_object_member (obj, "private", json_object_ref (h->priv));
  return obj;
}

NzHandle *
nz_handle_from_private_json (JsonObject *obj, GError **error)
{
  g_autoptr (NzHandle) h = nz_handle_new ();
  const char *id = nz_json_get_string (obj, "id");
  const char *backend = nz_json_get_string (obj, "backend");
  const char *tier = nz_json_get_string (obj, "tier");
  JsonObject *priv = nz_json_get_object (obj, "private");
  double created = 0, expires = 0, idle = 0;

  if (!nz_state_id_is_valid (id) || backend == NULL || tier == NULL
      || !nz_json_get_number (obj, "createdAt", &created))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "not a namzu handle (needs id, backend, tier, createdAt)"), NULL);
  h->id = g_strdup (id);
  h->backend = g_strdup (backend);
  h->tier = g_strdup (tier);
  h->created_at_ms = (gint64)created;
  /* Absent (a handle from before lifetimes) or nonsense: no deadline, no idle timeout. */
  if (nz_json_get_number (obj, "expiresAt", &expires) && expires > 0
      && expires <= (double)NZ_MAX_SAFE_INTEGER)
    h->expires_at_ms = (gint64)expires;
  if (nz_json_get_number (obj, "idleTimeoutMs", &idle) && idle > 0
      && idle <= (double)NZ_MAX_SAFE_INTEGER)
    h->idle_timeout_ms = (gint64)idle;
  h->endpoint = g_strdup (nz_json_get_string (obj, "endpoint"));
  h->token = g_strdup (nz_json_get_string (obj, "token"));
  if (priv != NULL)
    {
      json_object_unref (h->priv);
      h->priv = json_object_ref (priv);
    }
  return g_steal_pointer (&h);
}

gboolean
nz_handle_save (NzHandle *h, GError **error)
{
  g_autoptr (JsonObject) obj = NULL;
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  gsize len = 0;

  g_return_val_if_fail (h != NULL && h->dir != NULL, FALSE);
  obj = nz_handle_to_private_json (h);
  text = nz_json_object_to_string (obj, &len);
  /* json-glib writes some doubles as invalid JSON ("1e+17.0"); a handle no reader can parse
   * hides its sandbox from namzu-ls and namzu-destroy, so such a handle is never written. */
  {
    g_autoptr (JsonObject) back = nz_json_parse_object (text, (gssize)len, NULL);

    if (back == NULL)
      return nz_throw (error, NZ_ERROR_FAILED,
                       "sandbox '%s': its handle does not serialise as valid JSON", h->id);
  }
  path = g_build_filename (h->dir, NZ_HANDLE_FILE, NULL);
  /* Atomic (rename over) and created 0600: a reader sees the old handle or the new one, and
   * never a token in a world-readable file. */
  if (!g_file_set_contents_full (path, text, (gssize)len, G_FILE_SET_CONTENTS_CONSISTENT, 0600,
                                 error))
    {
      nz_error_convert (error);
      return FALSE;
    }
  return TRUE;
}

static NzHandle *
load_from_dir (const char *dir, GError **error)
{
  g_autofree char *path = g_build_filename (dir, NZ_HANDLE_FILE, NULL);
  g_autofree char *text = NULL;
  g_autoptr (JsonObject) obj = NULL;
  gsize len = 0;
  NzHandle *h;

  if (!g_file_get_contents (path, &text, &len, error))
    {
      nz_error_convert (error);
      return NULL;
    }
  obj = nz_json_parse_object (text, (gssize)len, error);
  if (obj == NULL)
    return (nz_prefix_error (error, "'%s'", path), NULL);
  h = nz_handle_from_private_json (obj, error);
  if (h == NULL)
    return (nz_prefix_error (error, "'%s'", path), NULL);
  h->dir = g_strdup (dir);
  return h;
}

NzHandle *
nz_handle_load (const char *id, GError **error)
{
  g_autofree char *state = nz_state_dir (error);
  g_autofree char *dir = NULL;
  NzHandle *h;

  if (state == NULL)
    return NULL;
  if (!nz_state_id_is_valid (id))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "'%s' is not a sandbox id (expected nz- and 12 hex digits)", id), NULL);
  dir = g_build_filename (state, id, NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR))
    return (nz_throw (error, NZ_ERROR_NOT_FOUND,
                      "unknown sandbox '%s': it is not in the state directory '%s' "
                      "(namzu-ls lists the sandboxes there)", id, state), NULL);
  h = load_from_dir (dir, error);
  if (h == NULL)
    return (nz_prefix_error (error, "sandbox '%s' has an unreadable handle", id), NULL);
  if (g_strcmp0 (h->id, id) != 0)
    {
      nz_handle_free (h);
      return (nz_throw (error, NZ_ERROR_FAILED, "handle in '%s' names another sandbox", dir),
              NULL);
    }
  return h;
}

static gint
compare_created (gconstpointer a, gconstpointer b)
{
  const NzHandle *ha = *(NzHandle *const *)a;
  const NzHandle *hb = *(NzHandle *const *)b;

  if (ha->created_at_ms != hb->created_at_ms)
    return ha->created_at_ms < hb->created_at_ms ? -1 : 1;
  return strcmp (ha->id, hb->id);
}

GPtrArray *
nz_state_list (GPtrArray *unreadable, GError **error)
{
  g_autofree char *state = nz_state_dir (error);
  g_autoptr (GPtrArray) out = NULL;
  g_autoptr (GDir) d = NULL;
  g_autoptr (GError) local = NULL;
  const char *name;

  if (state == NULL)
    return NULL;
  out = g_ptr_array_new_with_free_func ((GDestroyNotify)nz_handle_free);
  d = g_dir_open (state, 0, &local);
  if (d == NULL)
    {
      /* No state directory yet simply means no sandboxes. */
      if (g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return g_steal_pointer (&out);
      g_propagate_error (error, g_steal_pointer (&local));
      nz_error_convert (error);
      return NULL;
    }
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *dir = NULL;
      NzHandle *h;
      g_autoptr (GError) bad = NULL;

      if (!nz_state_id_is_valid (name))
        continue;
      dir = g_build_filename (state, name, NULL);
      h = load_from_dir (dir, &bad);
      if (h != NULL && g_strcmp0 (h->id, name) == 0)
        {
          g_ptr_array_add (out, h);
          continue;
        }
      if (h != NULL)
        g_set_error (&bad, NZ_ERROR, NZ_ERROR_FAILED, "its handle names another sandbox, '%s'",
                     h->id);
      nz_handle_free (h);
      /* No handle.json: a create that has not written it yet, or a destroy that removed it
       * last. Anything else is a sandbox nobody could list or destroy: say so. */
      if (unreadable != NULL && !g_error_matches (bad, NZ_ERROR, NZ_ERROR_NOT_FOUND))
        g_ptr_array_add (unreadable, g_strdup_printf ("sandbox '%s' (%s): %s", name, dir,
                                                      bad->message));
    }
  g_ptr_array_sort (out, compare_created);
  return g_steal_pointer (&out);
}

/* One level of the walk below: how we came in, to check ".." on the way back up. */
typedef struct
{
  char *name; /* in the parent */
  dev_t dev;
  ino_t ino;
} WalkLevel;

static void
walk_level_clear (gpointer p)
{
  g_free (((WalkLevel *)p)->name);
}

/* Owner rwx on a directory the workload made unreadable or unwritable (chmod 000), so it can
 * be listed and emptied; as root this changes nothing that matters. */
static void
make_accessible (int fd)
{
  struct stat st;

  if (fstat (fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
    fchmod (fd, (st.st_mode & 07777) | S_IRWXU);
}

static int
open_dir_at (int parent_fd, const char *name)
{
  int fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

  if (fd < 0 && errno == EACCES && fchmodat (parent_fd, name, S_IRWXU, 0) == 0)
    fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  return fd;
}

/* Removes every entry of the directory @fd but (at the top) @keep. Sets *@child to the first
 * non-empty subdirectory met (which the caller descends into), else leaves it NULL: the
 * directory is then empty. */
static gboolean
empty_one_level (int fd, const char *keep, char **child, GError **error)
{
  nz_autofd int dup_fd = fcntl (fd, F_DUPFD_CLOEXEC, 0);
  DIR *dp;
  struct dirent *de = NULL;
  gboolean ok = TRUE;

  *child = NULL;
  make_accessible (fd);
  dp = dup_fd >= 0 ? fdopendir (dup_fd) : NULL;
  if (dp == NULL)
    return nz_throw_errno_prefix (error, "read a directory");
  dup_fd = -1; /* the DIR owns it now */
  while (ok && *child == NULL && (errno = 0, de = readdir (dp)) != NULL)
    {
      struct stat st;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || g_strcmp0 (de->d_name, keep) == 0)
        continue;
      if (fstatat (fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        {
          if (errno != ENOENT)
            ok = nz_throw_errno_prefix (error, "stat '%s'", de->d_name);
          continue;
        }
      if (!S_ISDIR (st.st_mode))
        {
          if (unlinkat (fd, de->d_name, 0) != 0 && errno != ENOENT)
            ok = nz_throw_errno_prefix (error, "remove '%s'", de->d_name);
        }
      else if (unlinkat (fd, de->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT)
        {
          if (errno == ENOTEMPTY || errno == EEXIST || errno == EACCES || errno == EPERM)
            *child = g_strdup (de->d_name);
          else
            ok = nz_throw_errno_prefix (error, "remove '%s'", de->d_name);
        }
    }
  if (ok && *child == NULL && de == NULL && errno != 0)
    ok = nz_throw_errno_prefix (error, "read a directory");
  closedir (dp);
  return ok;
}

/* Empties the directory @top_fd (all but @keep at its top) without recursion and holding two
 * fds at most, whatever the depth, and without crossing into another filesystem: the workload may have built a tree deeper than the
 * open-file limit, with unreadable directories, and a destroy must still get through it. It
 * climbs back through "..", checked against the device and inode it came down through, so a
 * renamed directory cannot lead it out of the tree. */
static gboolean
empty_tree (int top_fd, const char *keep, GError **error)
{
  g_autoptr (GArray) path = g_array_new (FALSE, FALSE, sizeof (WalkLevel));
  nz_autofd int fd = fcntl (top_fd, F_DUPFD_CLOEXEC, 0);

  struct stat top_st;
  dev_t top_dev;

  g_array_set_clear_func (path, walk_level_clear);
  if (fd < 0 || fstat (fd, &top_st) != 0)
    return nz_throw_errno_prefix (error, "open the tree");
  top_dev = top_st.st_dev;
  for (;;)
    {
      g_autofree char *child = NULL;
      struct stat st;

      if (!empty_one_level (fd, path->len == 0 ? keep : NULL, &child, error))
        return FALSE;
      if (child != NULL)
        {
          int next = open_dir_at (fd, child);
          WalkLevel lv = { 0 };

          if (next < 0 || fstat (next, &st) != 0)
            {
              if (next >= 0)
                close (next);
              return nz_throw_errno_prefix (error, "open '%s'", child);
            }
          /* Another filesystem mounted in the tree: its contents are not the sandbox's. */
          if (st.st_dev != top_dev)
            {
              close (next);
              return nz_throw (error, NZ_ERROR_BUSY, "'%s' is a mount point", child);
            }
          lv.name = g_steal_pointer (&child);
          lv.dev = st.st_dev;
          lv.ino = st.st_ino;
          g_array_append_val (path, lv);
          close (fd);
          fd = next;
          continue;
        }
      if (path->len == 0)
        return TRUE;
      /* Empty: climb to the parent and remove it there. */
      {
        WalkLevel *lv = &g_array_index (path, WalkLevel, path->len - 1);
        int up = openat (fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat here, above_want;
        gboolean ok;

        if (up < 0)
          return nz_throw_errno_prefix (error, "open '..' of '%s'", lv->name);
        if (path->len >= 2)
          {
            WalkLevel *parent = &g_array_index (path, WalkLevel, path->len - 2);

            above_want.st_dev = parent->dev;
            above_want.st_ino = parent->ino;
          }
        else if (fstat (top_fd, &above_want) != 0)
          {
            close (up);
            return nz_throw_errno_prefix (error, "stat the top directory");
          }
        if (fstat (up, &here) != 0 || here.st_dev != above_want.st_dev
            || here.st_ino != above_want.st_ino)
          {
            close (up);
            return nz_throw (error, NZ_ERROR_FAILED,
                             "'%s' moved while it was being removed", lv->name);
          }
        ok = unlinkat (up, lv->name, AT_REMOVEDIR) == 0 || errno == ENOENT;
        if (!ok)
          nz_throw_errno_prefix (error, "remove '%s'", lv->name);
        close (fd);
        fd = up;
        g_array_set_size (path, path->len - 1);
        if (!ok)
          return FALSE;
      }
    }
}

gboolean
nz_handle_remove_dir (NzHandle *h, GError **error)
{
  g_autofree char *parent = NULL;
  g_autofree char *base = NULL;
  nz_autofd int parent_fd = -1;
  nz_autofd int fd = -1;

  g_return_val_if_fail (h != NULL, FALSE);
  if (h->dir == NULL)
    return TRUE;
  parent = g_path_get_dirname (h->dir);
  base = g_path_get_basename (h->dir);
  parent_fd = open (parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (parent_fd < 0)
    return errno == ENOENT ? TRUE : nz_throw_errno_prefix (error, "open '%s'", parent);
  fd = open_dir_at (parent_fd, base);
  if (fd < 0)
    return errno == ENOENT ? TRUE : nz_throw_errno_prefix (error, "open '%s'", h->dir);
  /* The handle goes last: until everything else is gone it is what lets a retry find the
   * sandbox (namzu-destroy resolves it by id). */
  if (!empty_tree (fd, NZ_HANDLE_FILE, error)
      || (unlinkat (fd, NZ_HANDLE_FILE, 0) != 0 && errno != ENOENT
          && !nz_throw_errno_prefix (error, "remove '%s'", NZ_HANDLE_FILE))
      || (unlinkat (parent_fd, base, AT_REMOVEDIR) != 0 && errno != ENOENT
          && !nz_throw_errno_prefix (error, "remove the directory")))
    return nz_prefix_error (error, "cannot remove '%s'", h->dir);
  return TRUE;
}

static char *
read_handle_id (int fd, GError **error)
{
  g_autoptr (GString) buf = g_string_new (NULL);
  g_autoptr (JsonObject) obj = NULL;
  JsonObject *err;
  const char *id;
  char chunk[4096];

  for (;;)
    {
      ssize_t n = read (fd, chunk, sizeof chunk);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return (nz_throw_errno_prefix (error, "read the handle on stdin"), NULL);
      if (n == 0)
        break;
      g_string_append_len (buf, chunk, n);
      /* Stop at the end of the first complete object (namzu-create prints one line), so a
       * stdin that is never closed does not hang us; a pretty-printed handle still works. */
      if (memchr (chunk, '\n', n) != NULL)
        {
          g_autoptr (JsonObject) probe = nz_json_parse_object (buf->str, -1, NULL);

          if (probe != NULL)
            break;
        }
      if (buf->len > NZ_STDIN_HANDLE_MAX)
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "stdin holds more than %d bytes, which is not a sandbox handle",
                          NZ_STDIN_HANDLE_MAX), NULL);
    }
  g_strstrip (buf->str);
  if (buf->str[0] == '\0')
    return NULL; /* nothing there: the caller reports "no sandbox given" */
  obj = nz_json_parse_object (buf->str, -1, error);
  if (obj == NULL && error != NULL && *error != NULL)
    (*error)->code = NZ_ERROR_INVALID_ARGS;
  if (obj == NULL)
    return (nz_prefix_error (error, "stdin does not hold a sandbox handle (JSON from namzu-create)"),
            NULL);
  /* A failed namzu-create upstream prints its error object: pass its message on. */
  err = nz_json_get_object (obj, "error");
  if (err != NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "the handle on stdin is an error: %s",
                      nz_json_get_string (err, "message") ?: "(no message)"), NULL);
  id = nz_json_get_string (obj, "id");
  if (id == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "the JSON on stdin is not a sandbox handle: it has no string \"id\""),
            NULL);
  return g_strdup (id);
}

char *
nz_handle_resolve_id_fd (const char *sandbox_arg, int fd, GError **error)
{
  const char *env = g_getenv ("NAMZU_SANDBOX");
  g_autofree char *id = NULL;

  if (sandbox_arg != NULL && *sandbox_arg != '\0')
    id = g_strdup (sandbox_arg);
  else if (env != NULL && *env != '\0')
    id = g_strdup (env);
  else if (fd >= 0)
    {
      g_autoptr (GError) local = NULL;

      id = read_handle_id (fd, &local);
      if (local != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
  if (id == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "no sandbox given: pass --sandbox ID, set NAMZU_SANDBOX, or pipe the "
                      "handle from namzu-create on stdin"), NULL);
  return g_steal_pointer (&id);
}

NzHandle *
nz_handle_resolve_fd (const char *sandbox_arg, int fd, GError **error)
{
  g_autofree char *id = nz_handle_resolve_id_fd (sandbox_arg, fd, error);

  return id != NULL ? nz_handle_load (id, error) : NULL;
}

NzHandle *
nz_handle_resolve (const char *sandbox_arg, gboolean allow_stdin, GError **error)
{
  return nz_handle_resolve_fd (sandbox_arg, allow_stdin && !isatty (STDIN_FILENO) ? STDIN_FILENO : -1,
                               error);
}

char *
nz_handle_resolve_id (const char *sandbox_arg, gboolean allow_stdin, GError **error)
{
  return nz_handle_resolve_id_fd (sandbox_arg,
                                  allow_stdin && !isatty (STDIN_FILENO) ? STDIN_FILENO : -1, error);
}

/* ---- tombstones ---- */

static char *
tombstone_path (const char *state, const char *id)
{
  g_autofree char *name = g_strconcat (id, NZ_TOMBSTONE_SUFFIX, NULL);

  return g_build_filename (state, name, NULL);
}

/* Tombstones older than NZ_TOMBSTONE_KEEP_DAYS go, so the state dir does not grow forever. */
static void
prune_tombstones (const char *state)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  gint64 cutoff = g_get_real_time () / G_USEC_PER_SEC - (gint64)NZ_TOMBSTONE_KEEP_DAYS * 86400;
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = NULL;
      struct stat st;

      if (!nz_state_is_tombstone_name (name))
        continue;
      path = g_build_filename (state, name, NULL);
      if (lstat (path, &st) == 0 && S_ISREG (st.st_mode) && (gint64)st.st_mtime < cutoff)
        unlink (path);
    }
}

gboolean
nz_state_is_tombstone_name (const char *name)
{
  g_autofree char *id = NULL;

  if (!g_str_has_suffix (name, NZ_TOMBSTONE_SUFFIX))
    return FALSE;
  id = g_strndup (name, strlen (name) - strlen (NZ_TOMBSTONE_SUFFIX));
  return nz_state_id_is_valid (id);
}

gboolean
nz_state_bury (const char *id, GError **error)
{
  g_autofree char *state = nz_state_dir (error);
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;

  g_return_val_if_fail (nz_state_id_is_valid (id), FALSE);
  if (state == NULL)
    return FALSE;
  prune_tombstones (state);
  path = tombstone_path (state, id);
  text = g_strdup_printf ("{\"id\":\"%s\",\"destroyedAt\":%" G_GINT64_FORMAT "}\n", id,
                          g_get_real_time () / 1000);
  if (!g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
    {
      nz_error_convert (error);
      return FALSE;
    }
  return TRUE;
}

gboolean
nz_state_is_buried (const char *id)
{
  g_autofree char *state = nz_state_dir (NULL);
  g_autofree char *path = NULL;
  struct stat st;

  if (state == NULL || !nz_state_id_is_valid (id))
    return FALSE;
  path = tombstone_path (state, id);
  return lstat (path, &st) == 0 && S_ISREG (st.st_mode);
}
