#include "nz-agent-fs.h"

#include <fnmatch.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-json.h"

G_DEFINE_QUARK (nz - agent - fs - error - quark, nz_agent_fs_error)

#define DEFAULT_MAX_ENTRIES 1000
#define MAX_MAX_ENTRIES 100000
#define MAX_DEPTH 128
#define DEFAULT_MAX_VISITED 20000
/* Bounds what a fallback command's stderr may make us hold for its message. */
#define STDERR_KEEP_BYTES 4096
/* A fallback command is bounded in time like any exec; a huge tree costs the walk, not us. */
#define FALLBACK_TIMEOUT_MS 120000

/* One record of the fallback find: "<type> <mode> <size> <mtime>" NUL "<path>" NUL
 * "<link target>" NUL; a pruned hidden name prints "H" NUL NUL NUL (it still counts as
 * examined). NUL is the one byte no path can hold. */
#define FIND_RECORD "%y %m %s %T@\\0%p\\0%l\\0"
#define FIND_HIDDEN "H\\0\\0\\0"

/* ---- checking what the agent sent ---- */

static const char *
checked_type (const char *type)
{
  static const char *const types[] = { "file", "directory", "symlink", "other", NULL };

  for (guint i = 0; types[i] != NULL; i++)
    if (g_strcmp0 (type, types[i]) == 0)
      return types[i];
  return NULL;
}

/* A copy of @e with only the members we know, each checked. NULL when it is malformed. */
static JsonObject *
checked_entry (JsonObject *e)
{
  const char *path = e != NULL ? nz_json_get_string (e, "path") : NULL;
  const char *type = e != NULL ? checked_type (nz_json_get_string (e, "type")) : NULL;
  const char *target = e != NULL ? nz_json_get_string (e, "target") : NULL;
  guint64 size = 0, mode = 0, mtime = 0;
  JsonObject *out;

  if (path == NULL || *path == '\0' || type == NULL || !nz_agent_reply_count (e, "size", &size)
      || !nz_agent_reply_count (e, "mode", &mode) || mode > 07777)
    return NULL;
  /* mtimeMs is informative: absent or odd is 0. */
  if (!nz_agent_reply_count (e, "mtimeMs", &mtime))
    mtime = 0;
  out = json_object_new ();
  json_object_set_string_member (out, "path", path);
  json_object_set_string_member (out, "type", type);
  json_object_set_int_member (out, "size", (gint64)size);
  json_object_set_int_member (out, "mode", (gint64)mode);
  json_object_set_int_member (out, "mtimeMs", (gint64)mtime);
  if (g_str_equal (type, "symlink") && target != NULL)
    json_object_set_string_member (out, "target", target);
  return out;
}

/* The agent's error string as our error: its own words, a code that says what kind. */
static gboolean
throw_agent (JsonObject *reply, const char *op, GError **error)
{
  const char *err = nz_json_get_string (reply, "error");

  if (err == NULL)
    err = "(no error)";
  if (g_str_has_prefix (err, "file_walk_limit: "))
    {
      /* The reference's code in front of the agent's words. */
      g_set_error (error, NZ_AGENT_FS_ERROR, NZ_AGENT_FS_ERROR_WALK_LIMIT, "%s: %s",
                   NZ_AGENT_FS_WALK_LIMIT_CODE, err + strlen ("file_walk_limit: "));
      return FALSE;
    }
  if (nz_agent_error_class (err) != NZ_ERROR_FAILED)
    return nz_throw (error, nz_agent_error_class (err), "%s", err);
  return nz_throw (error, NZ_ERROR_FAILED, "%s refused: %s", op, err);
}

static gboolean
use_op (NzAgentClient *c, GCancellable *cancellable, GError **error)
{
  if (nz_agent_client_get_features (c) == NULL)
    {
      g_autoptr (JsonObject) h = nz_agent_client_healthz (c, cancellable, error);

      if (h == NULL)
        return FALSE;
    }
  return TRUE;
}

/* One file-ops reply op: the reply when ok (new reference), else the agent's error. */
static JsonObject *
call_op (NzAgentClient *c, const char *op, JsonObject *body, GCancellable *cancellable,
         GError **error)
{
  g_autoptr (JsonObject) reply = nz_agent_client_call (c, op, body, cancellable, error);

  if (reply == NULL)
    return NULL;
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      throw_agent (reply, op, error);
      return NULL;
    }
  return g_steal_pointer (&reply);
}

/* ---- the execute fallback ---- */

typedef struct
{
  GString *out; /* stdout not parsed yet */
  GString *err; /* the first STDERR_KEEP_BYTES of stderr */
  gsize parsed; /* bytes of out consumed */
  GCancellable *stop;
  /* walk state */
  gboolean files_only, include_hidden;
  const char *pattern;
  gint64 max_entries, max_visited, visited;
  gboolean truncated, limit_hit;
  JsonArray *entries;
  const char *prefix; /* entries outside it are not ours: dropped */
} Fallback;

/* "<type> <mode> <size> <mtime>", @path, @target as one entry, or NULL. */
static JsonObject *
record_entry (const char *head, const char *path, const char *target)
{
  g_auto (GStrv) f = g_strsplit (head, " ", -1);
  static const struct
  {
    char y;
    const char *type;
  } types[] = { { 'f', "file" }, { 'd', "directory" }, { 'l', "symlink" } };
  const char *type = "other";
  guint64 mode, size;
  double mtime;
  char *end;
  JsonObject *e;

  if (g_strv_length (f) != 4 || strlen (f[0]) != 1 || *path == '\0'
      || !g_utf8_validate (path, -1, NULL))
    return NULL;
  for (guint i = 0; i < G_N_ELEMENTS (types); i++)
    if (f[0][0] == types[i].y)
      type = types[i].type;
  mode = g_ascii_strtoull (f[1], &end, 8);
  if (*end != '\0' || mode > 07777)
    return NULL;
  size = g_ascii_strtoull (f[2], &end, 10);
  if (*end != '\0')
    return NULL;
  mtime = g_ascii_strtod (f[3], &end);
  e = json_object_new ();
  json_object_set_string_member (e, "path", path);
  json_object_set_string_member (e, "type", type);
  json_object_set_int_member (e, "size", (gint64)size);
  json_object_set_int_member (e, "mode", (gint64)mode);
  json_object_set_int_member (e, "mtimeMs", mtime > 0 && mtime < 1e13 ? (gint64)(mtime * 1000) : 0);
  if (g_str_equal (type, "symlink") && g_utf8_validate (target, -1, NULL))
    json_object_set_string_member (e, "target", target);
  return e;
}

static gboolean
under_prefix (const char *path, const char *prefix)
{
  gsize n = strlen (prefix);

  return g_str_equal (prefix, "/")
             ? path[0] == '/'
             : strncmp (path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static void
fallback_record (Fallback *f, const char *head, const char *path, const char *target)
{
  g_autoptr (JsonObject) e = NULL;
  const char *type;
  g_autofree char *name = NULL;

  if (f->limit_hit || f->truncated)
    return;
  if (++f->visited > f->max_visited)
    {
      f->limit_hit = TRUE;
      g_cancellable_cancel (f->stop);
      return;
    }
  if (g_str_equal (head, "H"))
    return;
  if ((e = record_entry (head, path, target)) == NULL
      || (f->prefix != NULL && !under_prefix (path, f->prefix)))
    return;
  type = nz_json_get_string (e, "type");
  if (f->files_only && !g_str_equal (type, "file"))
    return;
  name = g_path_get_basename (path);
  if (f->pattern != NULL && fnmatch (f->pattern, name, 0) != 0)
    return;
  if ((gint64)json_array_get_length (f->entries) >= f->max_entries)
    {
      f->truncated = TRUE;
      g_cancellable_cancel (f->stop);
      return;
    }
  json_array_add_object_element (f->entries, g_steal_pointer (&e));
}

static void
fallback_output (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  Fallback *f = user_data;

  if (stream == NZ_EXEC_STDERR)
    {
      if (f->err->len < STDERR_KEEP_BYTES)
        g_string_append_len (f->err, data, MIN (len, STDERR_KEEP_BYTES - f->err->len));
      return;
    }
  if (f->entries == NULL)
    {
      /* Not a walk: keep it (a stat's one record, rm -v's lines), bounded. */
      if (f->out->len < 1024 * 1024)
        g_string_append_len (f->out, data, MIN (len, 1024 * 1024 - f->out->len));
      return;
    }
  g_string_append_len (f->out, data, len);
  /* Whole records only: three NUL-terminated fields. */
  for (;;)
    {
      const char *p = f->out->str + f->parsed, *end = f->out->str + f->out->len;
      const char *fields[3];
      const char *q = p;
      guint k;

      for (k = 0; k < 3; k++)
        {
          const char *nul = memchr (q, '\0', end - q);

          if (nul == NULL)
            break;
          fields[k] = q;
          q = nul + 1;
        }
      if (k < 3)
        break;
      fallback_record (f, fields[0], fields[1], fields[2]);
      f->parsed = q - f->out->str;
    }
  /* Drop what was parsed so a long walk holds one record at a time. */
  if (f->parsed > 65536)
    {
      g_string_erase (f->out, 0, f->parsed);
      f->parsed = 0;
    }
}

static void
fallback_clear (Fallback *f)
{
  if (f->out != NULL)
    g_string_free (f->out, TRUE);
  if (f->err != NULL)
    g_string_free (f->err, TRUE);
  g_clear_object (&f->stop);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Fallback, fallback_clear)

static void
forward_cancel (GCancellable *from, gpointer stop)
{
  g_cancellable_cancel (stop);
}

/* Runs @argv (argv[0] the program) through execute; *@out_status gets its exit status.
 * Stopping early on purpose (@f->stop fired by us) is not an error. */
static gboolean
fallback_run (NzAgentClient *c, const char *const *argv, Fallback *f, int *out_status,
              GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) result = NULL;
  g_autoptr (GError) local = NULL;
  JsonArray *args = json_array_new ();
  gulong handler = 0;
  double status = -1;

  json_object_set_string_member (body, "command", argv[0]);
  for (guint i = 1; argv[i] != NULL; i++)
    json_array_add_string_element (args, argv[i]);
  json_object_set_array_member (body, "args", args);
  json_object_set_int_member (body, "timeoutMs", FALLBACK_TIMEOUT_MS);
  f->out = g_string_new (NULL);
  f->err = g_string_new (NULL);
  f->stop = g_cancellable_new ();
  if (cancellable != NULL)
    handler = g_cancellable_connect (cancellable, G_CALLBACK (forward_cancel), f->stop, NULL);
  result = nz_agent_client_exec (c, body, fallback_output, f, NULL, f->stop, &local);
  if (cancellable != NULL)
    g_cancellable_disconnect (cancellable, handler);
  if (result == NULL)
    {
      if ((f->limit_hit || f->truncated) && !g_cancellable_is_cancelled (cancellable)
          && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          *out_status = 0;
          return TRUE;
        }
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (!nz_json_get_number (result, "exitCode", &status))
    status = -1;
  *out_status = (int)status;
  return TRUE;
}

static gboolean
fallback_failed (Fallback *f, const char *what, GError **error)
{
  g_autofree char *msg = g_strstrip (g_strdup (f->err->str));

  g_strdelimit (msg, "\n", ' ');
  if (strstr (msg, "No such file or directory") != NULL)
    return nz_throw (error, NZ_ERROR_NOT_FOUND, "%s: %s", what, msg);
  if (strstr (msg, "Permission denied") != NULL)
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, "%s: %s", what, msg);
  return nz_throw (error, NZ_ERROR_FAILED, "%s failed: %s", what,
                   *msg != '\0' ? msg : "(no message)");
}

/* @path made absolute the way the agent would (relative to the workspace, the command's
 * default cwd), lexically; the workspace itself in *@out_workspace. */
static char *
fallback_abs (NzAgentClient *c, const char *path, char **out_workspace, GCancellable *cancellable,
              GError **error)
{
  static const char *const pwd[] = { "pwd", NULL };
  g_auto (Fallback) f = { 0 };
  g_autofree char *ws = NULL;
  int status = -1;

  /* An absolute path needs no round trip (a directory copy sends thousands of them). */
  if (out_workspace == NULL && g_path_is_absolute (path))
    return g_canonicalize_filename (path, "/");
  if (!fallback_run (c, pwd, &f, &status, cancellable, error))
    return NULL;
  ws = g_strstrip (g_strdup (f.out->str));
  if (status != 0 || ws[0] != '/' || strchr (ws, '\n') != NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "pwd in the sandbox did not name a directory");
      return NULL;
    }
  if (out_workspace != NULL)
    *out_workspace = g_canonicalize_filename (ws, "/");
  return g_canonicalize_filename (path, ws);
}

/* Runs one fallback command @argv whose only output of interest is its exit status. */
static gboolean
fallback_simple (NzAgentClient *c, const char *const *argv, const char *what,
                 GCancellable *cancellable, GError **error)
{
  g_auto (Fallback) f = { 0 };
  int status = -1;

  if (!fallback_run (c, argv, &f, &status, cancellable, error))
    return FALSE;
  return status == 0 || fallback_failed (&f, what, error);
}

static JsonObject *
fallback_walk (NzAgentClient *c, gboolean files_only, const NzAgentFsWalkOptions *o,
               gint64 max_entries, gint max_depth, gint64 max_visited, GCancellable *cancellable,
               GError **error)
{
  g_auto (Fallback) f = { 0 };
  g_autofree char *root = fallback_abs (c, o->root, NULL, cancellable, error);
  g_autofree char *depth = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (JsonObject) out = NULL;
  int status = -1;

  if (root == NULL)
    return NULL;
  depth = g_strdup_printf ("%d", max_depth);
  /* -H: the root itself may be a link to a directory (the op follows it when it stays in the
   * jail); below it nothing is followed (-P, find's default). */
  g_ptr_array_add (argv, "find");
  g_ptr_array_add (argv, "-H");
  g_ptr_array_add (argv, root);
  g_ptr_array_add (argv, "-mindepth");
  g_ptr_array_add (argv, "1");
  g_ptr_array_add (argv, "-maxdepth");
  g_ptr_array_add (argv, depth);
  if (!o->include_hidden)
    {
      static const char *const prune[]
          = { "-name", ".*", "-prune", "-printf", FIND_HIDDEN, "-o", NULL };

      for (guint i = 0; prune[i] != NULL; i++)
        g_ptr_array_add (argv, (gpointer)prune[i]);
    }
  g_ptr_array_add (argv, "-printf");
  g_ptr_array_add (argv, FIND_RECORD);
  g_ptr_array_add (argv, NULL);
  f.files_only = files_only;
  f.include_hidden = o->include_hidden;
  f.pattern = o->pattern;
  f.max_entries = max_entries;
  f.max_visited = max_visited;
  f.prefix = root;
  f.entries = json_array_new ();
  out = json_object_new ();
  json_object_set_string_member (out, "root", root);
  json_object_set_array_member (out, "entries", f.entries);
  if (!fallback_run (c, (const char *const *)argv->pdata, &f, &status, cancellable, error))
    return NULL;
  if (f.limit_hit)
    {
      g_set_error (error, NZ_AGENT_FS_ERROR, NZ_AGENT_FS_ERROR_WALK_LIMIT,
                   "%s: examined more than %" G_GINT64_FORMAT " entries (maxVisitedEntries)",
                   NZ_AGENT_FS_WALK_LIMIT_CODE, max_visited);
      return NULL;
    }
  /* The reference's listFiles: a failing find (a root that is not there) is an empty
   * listing. What it printed before failing (an unreadable subdirectory) is kept. */
  json_object_set_boolean_member (out, "truncated", f.truncated);
  json_object_set_string_member (out, "via", "execute");
  return g_steal_pointer (&out);
}

/* ---- the verbs ---- */

JsonObject *
nz_agent_fs_walk (NzAgentClient *c, gboolean files_only, const NzAgentFsWalkOptions *o,
                  GCancellable *cancellable, GError **error)
{
  gint64 max_entries, max_visited;
  gint max_depth;
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;
  g_autoptr (JsonObject) out = NULL;
  JsonArray *entries, *checked;
  const char *root;

  g_return_val_if_fail (c != NULL && o != NULL && o->root != NULL, NULL);
  max_entries = o->max_entries > 0 ? o->max_entries : DEFAULT_MAX_ENTRIES;
  max_depth = o->max_depth > 0 ? o->max_depth : (files_only ? MAX_DEPTH : 1);
  max_visited = o->max_visited > 0 ? o->max_visited : DEFAULT_MAX_VISITED;
  if (*o->root == '\0' || max_entries > MAX_MAX_ENTRIES || max_depth > MAX_DEPTH)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "a walk wants a root, at most %d entries and a depth of at most %d",
                MAX_MAX_ENTRIES, MAX_DEPTH);
      return NULL;
    }
  if (!use_op (c, cancellable, error))
    return NULL;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_FEATURE))
    return fallback_walk (c, files_only, o, max_entries, max_depth, max_visited, cancellable,
                          error);
  body = json_object_new ();
  json_object_set_string_member (body, "root", o->root);
  json_object_set_int_member (body, "maxEntries", max_entries);
  json_object_set_int_member (body, "maxDepth", max_depth);
  json_object_set_int_member (body, "maxVisitedEntries", max_visited);
  json_object_set_boolean_member (body, "includeHidden", o->include_hidden);
  if (o->pattern != NULL)
    json_object_set_string_member (body, "pattern", o->pattern);
  reply = call_op (c, files_only ? "walk-files" : "list-files", body, cancellable, error);
  if (reply == NULL)
    return NULL;
  root = nz_json_get_string (reply, "root");
  entries = nz_json_get_array (reply, "entries");
  if (root == NULL || entries == NULL || json_array_get_length (entries) > (guint)max_entries)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "the agent's listing is malformed");
      return NULL;
    }
  out = json_object_new ();
  json_object_set_string_member (out, "root", root);
  checked = json_array_new ();
  json_object_set_array_member (out, "entries", checked);
  for (guint i = 0; i < json_array_get_length (entries); i++)
    {
      JsonNode *n = json_array_get_element (entries, i);
      JsonObject *e = JSON_NODE_HOLDS_OBJECT (n) ? checked_entry (json_node_get_object (n)) : NULL;

      if (e == NULL)
        {
          nz_throw (error, NZ_ERROR_PROTOCOL, "the agent's listing has a malformed entry");
          return NULL;
        }
      json_array_add_object_element (checked, e);
    }
  json_object_set_boolean_member (out, "truncated", nz_json_get_bool (reply, "truncated", FALSE));
  json_object_set_string_member (out, "via", NZ_AGENT_FS_FEATURE);
  return g_steal_pointer (&out);
}

JsonObject *
nz_agent_fs_stat (NzAgentClient *c, const char *path, GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;
  JsonObject *e;

  g_return_val_if_fail (c != NULL && path != NULL, NULL);
  if (!use_op (c, cancellable, error))
    return NULL;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_FEATURE))
    {
      g_auto (Fallback) f = { 0 };
      g_autofree char *abs = fallback_abs (c, path, NULL, cancellable, error);
      int status = -1;
      const char *fields[3];
      const char *p, *end;

      if (abs == NULL)
        return NULL;
      {
        const char *const argv[] = { "find", abs, "-maxdepth", "0", "-printf", FIND_RECORD, NULL };

        if (!fallback_run (c, argv, &f, &status, cancellable, error))
          return NULL;
      }
      if (status != 0)
        {
          fallback_failed (&f, "stat", error);
          return NULL;
        }
      p = f.out->str;
      end = p + f.out->len;
      for (guint k = 0; k < 3; k++)
        {
          const char *nul = p < end ? memchr (p, '\0', end - p) : NULL;

          if (nul == NULL)
            {
              nz_throw (error, NZ_ERROR_PROTOCOL, "stat in the sandbox printed no record");
              return NULL;
            }
          fields[k] = p;
          p = nul + 1;
        }
      if ((e = record_entry (fields[0], fields[1], fields[2])) == NULL)
        nz_throw (error, NZ_ERROR_PROTOCOL, "stat in the sandbox printed a malformed record");
      return e;
    }
  body = json_object_new ();
  json_object_set_string_member (body, "path", path);
  reply = call_op (c, "stat-file", body, cancellable, error);
  if (reply == NULL)
    return NULL;
  if ((e = checked_entry (nz_json_get_object (reply, "entry"))) == NULL)
    nz_throw (error, NZ_ERROR_PROTOCOL, "the agent's stat-file reply is malformed");
  return e;
}

gboolean
nz_agent_fs_remove (NzAgentClient *c, const char *path, gboolean recursive, gboolean *out_removed,
                    GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;
  gboolean removed;

  g_return_val_if_fail (c != NULL && path != NULL, FALSE);
  if (!use_op (c, cancellable, error))
    return FALSE;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_FEATURE))
    {
      g_auto (Fallback) f = { 0 };
      g_autofree char *ws = NULL;
      g_autofree char *abs = fallback_abs (c, path, &ws, cancellable, error);
      int status = -1;

      if (abs == NULL)
        return FALSE;
      /* As the op: never the workspace (nor /, which rm refuses anyway). */
      if (g_str_equal (abs, ws) || g_str_equal (abs, "/"))
        return nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                         "remove_refused: a root of the workspace jail cannot be removed");
      {
        /* -v says whether anything was there; -d takes an empty directory, like the op. */
        const char *const argv[] = { "rm", "-f", recursive ? "-r" : "-d", "-v", "--", abs, NULL };

        if (!fallback_run (c, argv, &f, &status, cancellable, error))
          return FALSE;
      }
      if (status != 0)
        return fallback_failed (&f, "remove", error);
      if (out_removed != NULL)
        *out_removed = f.out->len > 0;
      return TRUE;
    }
  body = json_object_new ();
  json_object_set_string_member (body, "path", path);
  json_object_set_boolean_member (body, "recursive", recursive);
  if ((reply = call_op (c, "remove-file", body, cancellable, error)) == NULL)
    return FALSE;
  removed = nz_json_get_bool (reply, "removed", FALSE);
  if (out_removed != NULL)
    *out_removed = removed;
  return TRUE;
}

gboolean
nz_agent_fs_move (NzAgentClient *c, const char *from, const char *to, GCancellable *cancellable,
                  GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;

  g_return_val_if_fail (c != NULL && from != NULL && to != NULL, FALSE);
  if (!use_op (c, cancellable, error))
    return FALSE;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_FEATURE))
    {
      g_autofree char *ws = NULL;
      g_autofree char *abs_from = fallback_abs (c, from, &ws, cancellable, error);
      g_autofree char *abs_to = NULL;

      if (abs_from == NULL)
        return FALSE;
      abs_to = g_canonicalize_filename (to, ws);
      if (g_str_equal (abs_from, ws) || g_str_equal (abs_to, ws))
        return nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                         "move_refused: a root of the workspace jail cannot be moved or replaced");
      {
        /* -T: @to is the new name, never a directory to move into (rename(2), as the op). */
        const char *const argv[] = { "mv", "-T", "--", abs_from, abs_to, NULL };

        return fallback_simple (c, argv, "move", cancellable, error);
      }
    }
  body = json_object_new ();
  json_object_set_string_member (body, "from", from);
  json_object_set_string_member (body, "to", to);
  reply = call_op (c, "move-file", body, cancellable, error);
  return reply != NULL;
}

/* ---- file-tree-ops: make-directory, make-symlink, set-file-mode ---- */

char *
nz_agent_fs_make_directory (NzAgentClient *c, const char *path, gint mode,
                            GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;
  const char *made;

  g_return_val_if_fail (c != NULL && path != NULL && mode <= 0777, NULL);
  if (!use_op (c, cancellable, error))
    return NULL;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_TREE_FEATURE))
    {
      g_autofree char *abs = fallback_abs (c, path, NULL, cancellable, error);
      g_autofree char *octal = g_strdup_printf ("%o", mode >= 0 ? mode : 0755);

      if (abs == NULL)
        return NULL;
      {
        /* install -d: mkdir -p, and the mode set on the last directory even when it was
         * there already (mkdir -m would leave an existing one as it is). */
        const char *const with_mode[] = { "install", "-d", "-m", octal, "--", abs, NULL };
        const char *const plain[] = { "mkdir", "-p", "--", abs, NULL };

        if (!fallback_simple (c, mode >= 0 ? with_mode : plain, "mkdir", cancellable, error))
          return NULL;
      }
      return g_steal_pointer (&abs);
    }
  body = json_object_new ();
  json_object_set_string_member (body, "path", path);
  if (mode >= 0)
    json_object_set_int_member (body, "mode", mode);
  if ((reply = call_op (c, "make-directory", body, cancellable, error)) == NULL)
    return NULL;
  made = nz_json_get_string (reply, "path");
  if (made == NULL || made[0] != '/')
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "the agent's make-directory reply is malformed");
      return NULL;
    }
  return g_strdup (made);
}

gboolean
nz_agent_fs_make_symlink (NzAgentClient *c, const char *path, const char *target,
                          GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;

  g_return_val_if_fail (c != NULL && path != NULL && target != NULL, FALSE);
  if (!use_op (c, cancellable, error))
    return FALSE;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_TREE_FEATURE))
    {
      g_autofree char *abs = fallback_abs (c, path, NULL, cancellable, error);

      if (abs == NULL)
        return FALSE;
      {
        /* -T: @path is the link's name, never a directory to put it in; -n -f: a link or a
         * file there is replaced, not written through (a directory is refused). */
        const char *const argv[] = { "ln", "-s", "-f", "-n", "-T", "--", target, abs, NULL };

        return fallback_simple (c, argv, "symlink", cancellable, error);
      }
    }
  body = json_object_new ();
  json_object_set_string_member (body, "path", path);
  json_object_set_string_member (body, "target", target);
  reply = call_op (c, "make-symlink", body, cancellable, error);
  return reply != NULL;
}

gboolean
nz_agent_fs_set_mode (NzAgentClient *c, const char *path, gint mode, GCancellable *cancellable,
                      GError **error)
{
  g_autoptr (JsonObject) body = NULL;
  g_autoptr (JsonObject) reply = NULL;

  g_return_val_if_fail (c != NULL && path != NULL && mode >= 0 && mode <= 0777, FALSE);
  if (!use_op (c, cancellable, error))
    return FALSE;
  if (!nz_agent_client_has_feature (c, NZ_AGENT_FS_TREE_FEATURE))
    {
      g_autofree char *abs = fallback_abs (c, path, NULL, cancellable, error);
      g_autofree char *octal = g_strdup_printf ("%o", mode);

      if (abs == NULL)
        return FALSE;
      {
        const char *const argv[] = { "chmod", octal, "--", abs, NULL };

        return fallback_simple (c, argv, "chmod", cancellable, error);
      }
    }
  body = json_object_new ();
  json_object_set_string_member (body, "path", path);
  json_object_set_int_member (body, "mode", mode);
  reply = call_op (c, "set-file-mode", body, cancellable, error);
  return reply != NULL;
}
