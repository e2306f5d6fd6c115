/* tree.c: namzu-cp -r. A directory goes in as make-directory / write-file parts /
 * make-symlink / set-file-mode calls (file-tree-ops, or their `execute` fallback), and comes
 * out as one list-files walk plus one read-file-stream per file. Locally every entry is made
 * or opened with *at() under directory fds opened with O_NOFOLLOW, so neither a host symlink
 * nor an agent's reply can steer a copy outside its source or destination. */
#define _GNU_SOURCE /* O_PATH */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-agent-fs.h"
#include "nz-autofd.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"

/* As deep as the agent walks (NZ_FSOPS_MAX_DEPTH); deeper trees are refused, not cut. */
#define TREE_MAX_DEPTH 128
/* The most entries one listing may carry (the agent's maxEntries bound). */
#define TREE_MAX_ENTRIES 100000
/* Every entry the agent examines counts, hidden or not; a tree this big is refused. */
#define TREE_MAX_VISITED 1000000
/* Only the permission bits travel: set-user-ID, set-group-ID and sticky never do. */
#define TREE_MODE_MASK 0777

void
nz_cp_tree_clear (NzCpTree *t)
{
  g_clear_pointer (&t->source, g_free);
  g_clear_pointer (&t->destination, g_free);
}

/* ---- progress across files ---- */

typedef struct
{
  NzAgentProgressFunc func;
  gpointer user_data;
  gint64 before; /* bytes of the files already copied */
  gint64 total;
} Progress;

static void
progress_file (gint64 done, gint64 total, gpointer user_data)
{
  Progress *p = user_data;

  if (p->func != NULL)
    p->func (p->before + done, MAX (p->total, p->before + done), p->user_data);
}

/* ---- local paths, never through a symlink ---- */

/* Opens @rel (components separated by '/') beneath @rootfd: every directory on the way with
 * O_NOFOLLOW, the last component with @flags | O_NOFOLLOW. "" is @rootfd itself (duplicated). */
static int
open_beneath (int rootfd, const char *rel, int flags)
{
  g_auto (GStrv) comps = NULL;
  nz_autofd int fd = -1;
  guint n;

  if (*rel == '\0')
    return fcntl (rootfd, F_DUPFD_CLOEXEC, 0);
  comps = g_strsplit (rel, "/", -1);
  n = g_strv_length (comps);
  for (guint i = 0; i < n; i++)
    {
      int at = fd >= 0 ? fd : rootfd;
      int next = openat (at, comps[i],
                         (i + 1 < n ? O_PATH | O_DIRECTORY : flags) | O_NOFOLLOW | O_CLOEXEC);

      if (next < 0)
        return -1;
      if (fd >= 0)
        close (fd);
      fd = next;
    }
  return nz_steal_fd (&fd);
}

static char *
child_rel (const char *rel, const char *name)
{
  return *rel == '\0' ? g_strdup (name) : g_strconcat (rel, "/", name, NULL);
}

/* "<dir>/.namzu-cp-<random>": a name beside the entry, made with O_EXCL. */
static char *
temp_name (void)
{
  return g_strdup_printf (".namzu-cp-%08x%08x", g_random_int (), g_random_int ());
}

/* A symlink @name -> @target in @dirfd, replacing a file or link there (never a directory). */
static gboolean
symlink_at (int dirfd, const char *name, const char *target, const char *shown, GError **error)
{
  g_autofree char *tmp = temp_name ();

  if (symlinkat (target, dirfd, tmp) != 0)
    return nz_throw_errno_prefix (error, "symlink '%s'", shown);
  if (renameat (dirfd, tmp, dirfd, name) != 0)
    {
      int errsv = errno;

      unlinkat (dirfd, tmp, 0);
      errno = errsv;
      return nz_throw_errno_prefix (error, "symlink '%s'", shown);
    }
  return TRUE;
}

/* mkdir @name in @dirfd (0700 until the copy is done); an existing directory is reused, any
 * other entry there (a symlink above all) is refused. */
static gboolean
mkdir_at (int dirfd, const char *name, const char *shown, GError **error)
{
  struct stat st;

  if (mkdirat (dirfd, name, 0700) == 0)
    return TRUE;
  if (errno != EEXIST)
    return nz_throw_errno_prefix (error, "mkdir '%s'", shown);
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode))
    return TRUE;
  return nz_throw (error, NZ_ERROR_FAILED, "'%s' exists and is not a directory (not followed)",
                   shown);
}

/* ---- copy in ---- */

typedef struct
{
  char *rel;
  char type; /* 'd', 'f', 'l' */
  guint mode;
  gint64 size;
  char *target;
} LocalEntry;

static void
local_entry_free (gpointer p)
{
  LocalEntry *e = p;

  g_free (e->rel);
  g_free (e->target);
  g_free (e);
}

static int
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *)a, *(char *const *)b);
}

static char *
read_link_at (int dirfd, const char *name, const char *shown, GError **error)
{
  char buf[4096];
  ssize_t n = readlinkat (dirfd, name, buf, sizeof buf - 1);

  if (n < 0)
    {
      nz_throw_errno_prefix (error, "readlink '%s'", shown);
      return NULL;
    }
  buf[n] = '\0';
  return g_strdup (buf);
}

typedef struct
{
  const char *src; /* for messages */
  GPtrArray *entries;
  gint64 total, skipped;
} Scan;

/* Lists @fd (the directory @rel of the source, taken over) into @s, pre-order, names sorted.
 * Everything is checked before anything is sent: a name the sandbox cannot carry (not UTF-8)
 * fails the copy here rather than half-way. */
static gboolean
scan_dir (Scan *s, int fd, const char *rel, guint depth, GError **error)
{
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  DIR *dir = fdopendir (fd);
  struct dirent *de;

  if (dir == NULL)
    {
      close (fd);
      return nz_throw_errno_prefix (error, "open '%s/%s'", s->src, rel);
    }
  errno = 0;
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") != 0 && strcmp (de->d_name, "..") != 0)
      g_ptr_array_add (names, g_strdup (de->d_name));
  g_ptr_array_sort (names, compare_names);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = names->pdata[i];
      g_autofree char *crel = child_rel (rel, name);
      g_autofree char *shown = g_build_filename (s->src, crel, NULL);
      LocalEntry *e;
      struct stat st;

      if (!g_utf8_validate (name, -1, NULL))
        {
          closedir (dir);
          return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                           "'%s' has a name that is not UTF-8; a sandbox path must be", shown);
        }
      if (fstatat (dirfd (dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        {
          closedir (dir);
          return nz_throw_errno_prefix (error, "stat '%s'", shown);
        }
      if (!S_ISDIR (st.st_mode) && !S_ISREG (st.st_mode) && !S_ISLNK (st.st_mode))
        {
          nz_cli_warn ("skipping '%s': not a file, directory or symlink", shown);
          s->skipped++;
          continue;
        }
      e = g_new0 (LocalEntry, 1);
      e->rel = g_strdup (crel);
      e->mode = st.st_mode & TREE_MODE_MASK;
      g_ptr_array_add (s->entries, e);
      if (S_ISREG (st.st_mode))
        {
          e->type = 'f';
          e->size = st.st_size;
          s->total += st.st_size;
        }
      else if (S_ISLNK (st.st_mode))
        {
          e->type = 'l';
          if ((e->target = read_link_at (dirfd (dir), name, shown, error)) == NULL)
            {
              closedir (dir);
              return FALSE;
            }
          if (!g_utf8_validate (e->target, -1, NULL))
            {
              closedir (dir);
              return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                               "the symlink '%s' has a target that is not UTF-8", shown);
            }
        }
      else
        {
          int sub;

          e->type = 'd';
          if (depth + 1 >= TREE_MAX_DEPTH)
            {
              closedir (dir);
              return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                               "'%s' is more than %d directories deep", shown, TREE_MAX_DEPTH);
            }
          sub = openat (dirfd (dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          if (sub < 0 || !scan_dir (s, sub, crel, depth + 1, error))
            {
              if (sub < 0)
                nz_throw_errno_prefix (error, "open '%s'", shown);
              closedir (dir);
              return FALSE;
            }
        }
    }
  closedir (dir);
  return TRUE;
}

/* Uploads the local regular file @rel beneath @rootfd to @remote with @mode. */
static gboolean
upload_file (NzAgentClient *c, int rootfd, const char *rel, const char *shown, const char *remote,
             guint mode, Progress *p, gint64 *out_bytes, GError **error)
{
  nz_autofd int fd = open_beneath (rootfd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  struct stat st;
  gint64 bytes = 0;

  if (fd < 0)
    return nz_throw_errno_prefix (error, "open '%s'", shown);
  /* Swapped for something else since the scan: not what was listed, not copied. */
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    return nz_throw (error, NZ_ERROR_FAILED, "'%s' is no longer a regular file", shown);
  if (!nz_agent_files_upload (c, fd, remote, 0, progress_file, p, &bytes, NULL, error)
      || !nz_agent_fs_set_mode (c, remote, (gint)mode, NULL, error))
    return FALSE;
  p->before += bytes;
  *out_bytes += bytes;
  return TRUE;
}

/* The sandbox path a local @src goes to: @dst/<basename> when @dst ends in '/' (or is empty)
 * or is a directory there, else @dst. */
static char *
upload_target (NzAgentClient *c, const char *src, const char *dst, GError **error)
{
  g_autofree char *base = g_path_get_basename (src);
  g_autoptr (JsonObject) st = NULL;
  g_autoptr (GError) local = NULL;

  if (*dst == '\0' || g_str_has_suffix (dst, "/"))
    return g_strconcat (dst, base, NULL);
  st = nz_agent_fs_stat (c, dst, NULL, &local);
  if (st == NULL)
    {
      if (g_error_matches (local, NZ_ERROR, NZ_ERROR_NOT_FOUND))
        return g_strdup (dst);
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  if (g_strcmp0 (nz_json_get_string (st, "type"), "directory") == 0)
    return g_build_filename (nz_json_get_string (st, "path"), base, NULL);
  return g_strdup (dst);
}

gboolean
nz_cp_tree_upload (NzAgentClient *c, const char *src, const char *dst, NzAgentProgressFunc progress,
                   gpointer user_data, NzCpTree *out, GError **error)
{
  g_autoptr (GPtrArray) entries = g_ptr_array_new_with_free_func (local_entry_free);
  g_autofree char *target = NULL;
  g_autofree char *root = NULL;
  Scan scan = { .src = src, .entries = entries };
  Progress p = { .func = progress, .user_data = user_data };
  nz_autofd int rootfd = -1;
  struct stat st;

  memset (out, 0, sizeof *out);
  out->source = g_strdup (src);
  if (lstat (src, &st) != 0)
    return nz_throw_errno_prefix (error, "stat '%s'", src);
  if ((target = upload_target (c, src, dst, error)) == NULL)
    return FALSE;
  if (S_ISLNK (st.st_mode))
    {
      /* The root too is copied as the link it is (cp -r's -P). */
      g_autofree char *link = read_link_at (AT_FDCWD, src, src, error);

      if (link == NULL || !nz_agent_fs_make_symlink (c, target, link, NULL, error))
        return FALSE;
      out->symlinks = 1;
      out->destination = g_steal_pointer (&target);
      return TRUE;
    }
  if (S_ISREG (st.st_mode))
    {
      g_autofree char *dir = g_path_get_dirname (src);
      g_autofree char *base = g_path_get_basename (src);

      rootfd = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
      p.total = st.st_size;
      if (rootfd < 0)
        return nz_throw_errno_prefix (error, "open '%s'", dir);
      if (!upload_file (c, rootfd, base, src, target, st.st_mode & TREE_MODE_MASK, &p, &out->bytes,
                        error))
        return FALSE;
      out->files = 1;
      out->destination = g_steal_pointer (&target);
      return TRUE;
    }
  if (!S_ISDIR (st.st_mode))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "'%s' is not a file, directory or symlink", src);
  rootfd = open (src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rootfd < 0)
    return nz_throw_errno_prefix (error, "open '%s'", src);
  if (!scan_dir (&scan, fcntl (rootfd, F_DUPFD_CLOEXEC, 0), "", 0, error))
    return FALSE;
  p.total = scan.total;
  out->skipped = scan.skipped;
  /* Writable by us until the end, whatever the source's bits; those are set last. */
  if ((root
       = nz_agent_fs_make_directory (c, target, (st.st_mode & TREE_MODE_MASK) | 0700, NULL, error))
      == NULL)
    return FALSE;
  out->directories = 1;
  for (guint i = 0; i < entries->len; i++)
    {
      LocalEntry *e = entries->pdata[i];
      g_autofree char *remote = g_strconcat (root, "/", e->rel, NULL);
      g_autofree char *shown = g_build_filename (src, e->rel, NULL);
      g_autofree char *made = NULL;

      switch (e->type)
        {
        case 'd':
          if ((made = nz_agent_fs_make_directory (c, remote, e->mode | 0700, NULL, error)) == NULL)
            return FALSE;
          out->directories++;
          break;
        case 'f':
          if (!upload_file (c, rootfd, e->rel, shown, remote, e->mode, &p, &out->bytes, error))
            return FALSE;
          out->files++;
          break;
        default:
          if (!nz_agent_fs_make_symlink (c, remote, e->target, NULL, error))
            return FALSE;
          out->symlinks++;
          break;
        }
    }
  /* Directories without owner rwx get their bits last, deepest first. */
  for (guint i = entries->len; i-- > 0;)
    {
      LocalEntry *e = entries->pdata[i];
      g_autofree char *remote = NULL;

      if (e->type != 'd' || (e->mode & 0700) == 0700)
        continue;
      remote = g_strconcat (root, "/", e->rel, NULL);
      if (!nz_agent_fs_set_mode (c, remote, (gint)e->mode, NULL, error))
        return FALSE;
    }
  if ((st.st_mode & 0700) != 0700
      && !nz_agent_fs_set_mode (c, root, (gint)(st.st_mode & TREE_MODE_MASK), NULL, error))
    return FALSE;
  out->destination = g_steal_pointer (&root);
  return TRUE;
}

/* ---- copy out ---- */

typedef struct
{
  const char *rel; /* into the entry's path, below the root */
  const char *type;
  guint mode;
  gint64 size;
  JsonObject *e;
} RemoteEntry;

static int
compare_remote (gconstpointer a, gconstpointer b)
{
  return strcmp (((const RemoteEntry *)a)->rel, ((const RemoteEntry *)b)->rel);
}

/* A relative path the agent sent: components that are names, nothing else. */
static gboolean
rel_is_clean (const char *rel)
{
  g_auto (GStrv) comps = NULL;

  if (*rel == '\0' || strlen (rel) >= 4096)
    return FALSE;
  comps = g_strsplit (rel, "/", -1);
  for (guint i = 0; comps[i] != NULL; i++)
    if (comps[i][0] == '\0' || strcmp (comps[i], ".") == 0 || strcmp (comps[i], "..") == 0
        || strlen (comps[i]) > 255)
      return FALSE;
  return TRUE;
}

/* Streams the sandbox file @remote to @name in @dirfd: a temp beside it, renamed when whole. */
static gboolean
download_file (NzAgentClient *c, const char *remote, int dirfd, const char *name, const char *shown,
               guint mode, Progress *p, gint64 *out_bytes, GError **error)
{
  g_autofree char *tmp = temp_name ();
  nz_autofd int fd
      = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  gint64 bytes = 0;

  if (fd < 0)
    return nz_throw_errno_prefix (error, "create '%s'", shown);
  if (!nz_agent_files_download (c, remote, fd, progress_file, p, &bytes, NULL, error)
      || fchmod (fd, mode & TREE_MODE_MASK) != 0 || close (nz_steal_fd (&fd)) != 0
      || renameat (dirfd, tmp, dirfd, name) != 0)
    {
      if (error != NULL && *error == NULL)
        nz_throw_errno_prefix (error, "write '%s'", shown);
      unlinkat (dirfd, tmp, 0);
      return FALSE;
    }
  p->before += bytes;
  *out_bytes += bytes;
  return TRUE;
}

/* The local path a sandbox @src goes to, and its parent opened (following: the user's own
 * choice of destination). */
static char *
download_target (const char *src_path, const char *dst, int *out_parent, char **out_base,
                 GError **error)
{
  g_autofree char *target = NULL;
  g_autofree char *dir = NULL;
  struct stat st;

  if (stat (dst, &st) == 0 && S_ISDIR (st.st_mode))
    {
      g_autofree char *base = g_path_get_basename (src_path);

      target = g_build_filename (dst, base, NULL);
    }
  else
    target = g_strdup (dst);
  dir = g_path_get_dirname (target);
  *out_base = g_path_get_basename (target);
  if (strcmp (*out_base, "/") == 0 || strcmp (*out_base, ".") == 0 || strcmp (*out_base, "..") == 0)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "'%s' cannot be a copy's name", target);
      return NULL;
    }
  if ((*out_parent = open (dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    {
      nz_throw_errno_prefix (error, "open '%s'", dir);
      return NULL;
    }
  return g_steal_pointer (&target);
}

/* Checks the listing of @root: every entry strictly below it, its path made of names, each
 * once, each parent a directory of the same listing. Returns the entries sorted so parents
 * come first (a parent's path is a prefix of its children's). */
static GArray *
checked_listing (JsonObject *walk, const char *root, GError **error)
{
  JsonArray *entries = nz_json_get_array (walk, "entries");
  g_autoptr (GArray) out = g_array_new (FALSE, TRUE, sizeof (RemoteEntry));
  g_autoptr (GHashTable) types = g_hash_table_new (g_str_hash, g_str_equal);
  gsize n = strcmp (root, "/") == 0 ? 1 : strlen (root) + 1;

  if (g_strcmp0 (nz_json_get_string (walk, "root"), root) != 0 || entries == NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "the agent listed another directory than '%s'", root);
      return NULL;
    }
  if (nz_json_get_bool (walk, "truncated", FALSE))
    {
      nz_throw (error, NZ_ERROR_FAILED,
                "'%s' holds more than %d entries (or its listing passed 16 MiB); copy it in "
                "parts",
                root, TREE_MAX_ENTRIES);
      return NULL;
    }
  for (guint i = 0; i < json_array_get_length (entries); i++)
    {
      JsonObject *e = json_array_get_object_element (entries, i);
      const char *path = nz_json_get_string (e, "path");
      RemoteEntry r = { .e = e, .type = nz_json_get_string (e, "type") };
      gint64 mode = 0;

      if (path == NULL || r.type == NULL
          || (strcmp (root, "/") != 0 && (strncmp (path, root, n - 1) != 0 || path[n - 1] != '/'))
          || (strcmp (root, "/") == 0 && path[0] != '/') || !rel_is_clean (path + n))
        {
          nz_throw (error, NZ_ERROR_PROTOCOL,
                    "the agent's listing of '%s' names a path outside it: '%s'", root,
                    path != NULL ? path : "(none)");
          return NULL;
        }
      r.rel = path + n;
      mode = json_object_get_int_member_with_default (e, "mode", 0);
      r.mode = (guint)mode & TREE_MODE_MASK;
      r.size = json_object_get_int_member_with_default (e, "size", 0);
      g_array_append_val (out, r);
    }
  g_array_sort (out, compare_remote);
  for (guint i = 0; i < out->len; i++)
    {
      RemoteEntry *r = &g_array_index (out, RemoteEntry, i);
      g_autofree char *parent = g_path_get_dirname (r->rel);

      if (g_hash_table_contains (types, r->rel))
        {
          nz_throw (error, NZ_ERROR_PROTOCOL, "the agent's listing names '%s' twice", r->rel);
          return NULL;
        }
      if (strcmp (parent, ".") != 0
          && g_strcmp0 (g_hash_table_lookup (types, parent), "directory") != 0)
        {
          nz_throw (error, NZ_ERROR_PROTOCOL,
                    "the agent's listing puts '%s' below '%s', which it does not list as a "
                    "directory",
                    r->rel, parent);
          return NULL;
        }
      g_hash_table_insert (types, (gpointer)r->rel, (gpointer)r->type);
    }
  return g_steal_pointer (&out);
}

/* A directory at the walk's last level whose children it could not list: too deep. */
static gboolean
check_depth (NzAgentClient *c, GArray *listing, GError **error)
{
  for (guint i = 0; i < listing->len; i++)
    {
      RemoteEntry *r = &g_array_index (listing, RemoteEntry, i);
      NzAgentFsWalkOptions o = { 0 };
      g_autoptr (JsonObject) below = NULL;
      guint depth = 1;

      if (strcmp (r->type, "directory") != 0)
        continue;
      for (const char *q = r->rel; *q != '\0'; q++)
        depth += *q == '/';
      if (depth < TREE_MAX_DEPTH)
        continue;
      o.root = nz_json_get_string (r->e, "path");
      o.max_entries = 1;
      o.include_hidden = TRUE;
      if ((below = nz_agent_fs_walk (c, FALSE, &o, NULL, error)) == NULL)
        return FALSE;
      if (json_array_get_length (nz_json_get_array (below, "entries")) > 0)
        return nz_throw (error, NZ_ERROR_FAILED, "'%s' is more than %d directories deep", o.root,
                         TREE_MAX_DEPTH);
    }
  return TRUE;
}

static gboolean
download_tree (NzAgentClient *c, const char *root, guint root_mode, int parentfd, const char *base,
               const char *target, Progress *p, NzCpTree *out, GError **error)
{
  NzAgentFsWalkOptions o = { .root = root,
                             .max_entries = TREE_MAX_ENTRIES,
                             .max_depth = TREE_MAX_DEPTH,
                             .max_visited = TREE_MAX_VISITED,
                             .include_hidden = TRUE };
  g_autoptr (JsonObject) walk = nz_agent_fs_walk (c, FALSE, &o, NULL, error);
  g_autoptr (GArray) listing = NULL;
  nz_autofd int rootfd = -1;

  if (walk == NULL || (listing = checked_listing (walk, root, error)) == NULL
      || !check_depth (c, listing, error))
    return FALSE;
  for (guint i = 0; i < listing->len; i++)
    if (strcmp (g_array_index (listing, RemoteEntry, i).type, "file") == 0)
      p->total += g_array_index (listing, RemoteEntry, i).size;
  if (!mkdir_at (parentfd, base, target, error))
    return FALSE;
  if ((rootfd = openat (parentfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return nz_throw_errno_prefix (error, "open '%s'", target);
  out->directories = 1;
  for (guint i = 0; i < listing->len; i++)
    {
      RemoteEntry *r = &g_array_index (listing, RemoteEntry, i);
      g_autofree char *dir = g_path_get_dirname (r->rel);
      g_autofree char *name = g_path_get_basename (r->rel);
      g_autofree char *shown = g_build_filename (target, r->rel, NULL);
      nz_autofd int dirfd
          = open_beneath (rootfd, strcmp (dir, ".") == 0 ? "" : dir, O_PATH | O_DIRECTORY);
      gboolean ok = TRUE;

      if (dirfd < 0)
        return nz_throw_errno_prefix (error, "open '%s'", shown);
      if (strcmp (r->type, "directory") == 0)
        {
          ok = mkdir_at (dirfd, name, shown, error);
          out->directories++;
        }
      else if (strcmp (r->type, "file") == 0)
        {
          ok = download_file (c, nz_json_get_string (r->e, "path"), dirfd, name, shown, r->mode, p,
                              &out->bytes, error);
          out->files++;
        }
      else if (strcmp (r->type, "symlink") == 0 && nz_json_get_string (r->e, "target") != NULL)
        {
          ok = symlink_at (dirfd, name, nz_json_get_string (r->e, "target"), shown, error);
          out->symlinks++;
        }
      else
        {
          nz_cli_warn ("skipping '%s': not a file, directory or symlink", shown);
          out->skipped++;
        }
      if (!ok)
        return FALSE;
    }
  /* Each directory's bits last, deepest first (a read-only one still received its files). */
  for (guint i = listing->len; i-- > 0;)
    {
      RemoteEntry *r = &g_array_index (listing, RemoteEntry, i);
      nz_autofd int fd = -1;

      if (strcmp (r->type, "directory") != 0)
        continue;
      fd = open_beneath (rootfd, r->rel, O_RDONLY | O_DIRECTORY);
      if (fd < 0 || fchmod (fd, r->mode) != 0)
        return nz_throw_errno_prefix (error, "chmod '%s/%s'", target, r->rel);
    }
  if (fchmod (rootfd, root_mode & TREE_MODE_MASK) != 0)
    return nz_throw_errno_prefix (error, "chmod '%s'", target);
  return TRUE;
}

gboolean
nz_cp_tree_download (NzAgentClient *c, const char *src, const char *dst,
                     NzAgentProgressFunc progress, gpointer user_data, NzCpTree *out,
                     GError **error)
{
  g_autoptr (JsonObject) st = nz_agent_fs_stat (c, src, NULL, error);
  Progress p = { .func = progress, .user_data = user_data };
  g_autofree char *base = NULL;
  g_autofree char *target = NULL;
  nz_autofd int parentfd = -1;
  const char *path, *type;
  guint mode;

  memset (out, 0, sizeof *out);
  if (st == NULL)
    return FALSE;
  path = nz_json_get_string (st, "path");
  type = nz_json_get_string (st, "type");
  mode = (guint)json_object_get_int_member_with_default (st, "mode", 0) & TREE_MODE_MASK;
  out->source = g_strdup (path);
  if ((target = download_target (path, dst, &parentfd, &base, error)) == NULL)
    return FALSE;
  out->destination = g_strdup (target);
  if (strcmp (type, "symlink") == 0)
    {
      const char *link = nz_json_get_string (st, "target");

      if (link == NULL)
        return nz_throw (error, NZ_ERROR_FAILED, "the symlink '%s' has no readable target", path);
      out->symlinks = 1;
      return symlink_at (parentfd, base, link, target, error);
    }
  if (strcmp (type, "file") == 0)
    {
      p.total = json_object_get_int_member_with_default (st, "size", 0);
      out->files = 1;
      return download_file (c, path, parentfd, base, target, mode, &p, &out->bytes, error);
    }
  if (strcmp (type, "directory") != 0)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "'%s' is not a file, directory or symlink",
                     path);
  return download_tree (c, path, mode, parentfd, base, target, &p, out, error);
}
