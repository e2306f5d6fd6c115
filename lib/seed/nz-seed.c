/* nz-seed.c: the seed document: parsing, validation (spec G.2), digest, and the root rules. */
#include <string.h>

#include "nz-json.h"
#include "nz-seed.h"

G_DEFINE_QUARK (nz - seed - error - quark, nz_seed_error)

const char *
nz_seed_error_code_name (const GError *error)
{
  static const char *const names[] = {
    [NZ_SEED_ERROR_INVALID] = "invalid",
    [NZ_SEED_ERROR_TOOL_MISSING] = "tool-missing",
    [NZ_SEED_ERROR_CLONE_FAILED] = "clone-failed",
    [NZ_SEED_ERROR_DRIFT] = "drift",
  };

  if (error == NULL || error->domain != NZ_SEED_ERROR || error->code < 0
      || (gsize)error->code >= G_N_ELEMENTS (names))
    return NULL;
  return names[error->code];
}

static gboolean invalid (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
invalid (GError **error, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NZ_SEED_ERROR, NZ_SEED_ERROR_INVALID, NZ_SEED_MESSAGE_PREFIX "%s", msg);
  return FALSE;
}

static void
nz_seed_repo_free (NzSeedRepo *r)
{
  g_free (r->name);
  g_free (r->url);
  g_free (r->dir);
  g_free (r->ref);
  g_free (r->commit);
  g_free (r);
}

void
nz_seed_free (NzSeed *seed)
{
  if (seed == NULL)
    return;
  g_free (seed->name);
  g_clear_pointer (&seed->repos, g_ptr_array_unref);
  g_free (seed);
}

/* ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ — a name that is safe as a file name and a JSON key. */
static gboolean
is_dns_label (const char *s)
{
  gsize n = strlen (s);

  if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_islower (s[i]) || g_ascii_isdigit (s[i]) || s[i] == '-'))
      return FALSE;
  return TRUE;
}

/* ^(?:[0-9a-f]{40}|[0-9a-f]{64})$: a full object id, so it can never be read as an option or a
 * revision expression. */
gboolean
nz_seed_is_commit_id (const char *s)
{
  gsize n = s != NULL ? strlen (s) : 0;

  if (n != 40 && n != 64)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_isdigit (s[i]) || (s[i] >= 'a' && s[i] <= 'f')))
      return FALSE;
  return TRUE;
}

/* ^[A-Za-z0-9._][A-Za-z0-9._/-]*$ and no "..": never an option (no leading '-'), never a
 * revision range. */
static gboolean
is_ref (const char *s)
{
  if (*s == '\0' || strstr (s, "..") != NULL)
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    {
      gboolean word = g_ascii_isalnum (*p) || *p == '.' || *p == '_';

      if (!(word || (p != s && (*p == '/' || *p == '-'))))
        return FALSE;
    }
  return TRUE;
}

/* ^[A-Za-z0-9._-]+$ */
static gboolean
is_path_segment (const char *s)
{
  if (*s == '\0')
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    if (!(g_ascii_isalnum (*p) || *p == '.' || *p == '_' || *p == '-'))
      return FALSE;
  return TRUE;
}

static gboolean
has_space_or_control (const char *s)
{
  for (const char *p = s; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (g_unichar_isspace (c) || g_unichar_iscntrl (c) || c == 0xFEFF)
        return TRUE;
    }
  return FALSE;
}

gboolean
nz_seed_check_url (const char *url, const char *field, GError **error)
{
  const char *colon, *auth, *auth_end;
  g_autofree char *scheme = NULL;

  g_return_val_if_fail (field != NULL, FALSE);

  if (url == NULL || *url == '\0')
    return invalid (error, "%s: must be a non-empty string", field);
  if (!g_utf8_validate (url, -1, NULL))
    return invalid (error, "%s: is not valid UTF-8", field);
  /* scp-style "git@host:path" is SSH without saying so: refused like ssh:// (no key or agent
   * may be needed inside the guest). */
  if (strstr (url, "://") == NULL)
    {
      const char *at = strchr (url, '@');
      const char *slash = strchr (url, '/');

      if (at != NULL && (slash == NULL || at < slash) && strchr (at, ':') != NULL
          && (slash == NULL || strchr (at, ':') < slash))
        return invalid (error,
                        "%s: an scp-style SSH address (user@host:path) is refused; "
                        "use an https:// URL",
                        field);
    }
  colon = strchr (url, ':');
  if (colon == NULL || colon == url || !g_ascii_isalpha (url[0]))
    return invalid (error, "%s: is not a URL; use an https:// URL", field);
  for (const char *p = url; p < colon; p++)
    if (!(g_ascii_isalnum (*p) || *p == '+' || *p == '-' || *p == '.'))
      return invalid (error, "%s: is not a URL; use an https:// URL", field);
  scheme = g_ascii_strdown (url, colon - url);
  /* Only the schemes the egress boundary can see and broker: ssh, git, file and ext would
   * need keys in the guest, bypass the proxy, or run commands. */
  if (strcmp (scheme, "https") != 0 && strcmp (scheme, "http") != 0)
    return invalid (error,
                    "%s: the scheme '%s:' is refused; only https: and http: are "
                    "accepted",
                    field, scheme);
  /* "https:host/x" parses for a browser, but git would read it as an scp-style SSH address. */
  if (strncmp (colon, "://", 3) != 0)
    return invalid (error, "%s: must be an absolute %s:// URL", field, scheme);
  auth = colon + 3;
  auth_end = auth + strcspn (auth, "/?#\\");
  /* Credentials in the URL would be stored in the guest's .git/config and shown by every
   * `git remote -v`; a credential belongs in the egress proxy's broker. Never echoed. */
  if (memchr (auth, '@', auth_end - auth) != NULL)
    return invalid (error,
                    "%s: a URL with credentials (user or password) is refused; nothing "
                    "secret may enter the sandbox, broker the credential at the egress proxy",
                    field);
  if (auth_end == auth)
    return invalid (error, "%s: the URL names no host", field);
  if (has_space_or_control (url))
    return invalid (error, "%s: a URL with whitespace or control characters is refused", field);
  return TRUE;
}

/* Spec G.2 dir rules: relative, plain segments, not in .namzu, never our partial's name. */
static gboolean
check_dir (const char *dir, const char *field, GError **error)
{
  g_auto (GStrv) segs = NULL;

  if (*dir == '\0' || *dir == '/')
    return invalid (error, "%s: must be a relative path inside the root", field);
  segs = g_strsplit (dir, "/", -1);
  for (guint i = 0; segs[i] != NULL; i++)
    {
      if (*segs[i] == '\0' || strcmp (segs[i], ".") == 0 || strcmp (segs[i], "..") == 0
          || !is_path_segment (segs[i]))
        return invalid (error,
                        "%s: every segment must match [A-Za-z0-9._-]+ and not be . or "
                        "..",
                        field);
      if (strstr (segs[i], NZ_SEED_PARTIAL_INFIX) != NULL)
        return invalid (error,
                        "%s: a name containing '" NZ_SEED_PARTIAL_INFIX "' is reserved "
                        "for clones in progress",
                        field);
    }
  /* The marker lives in <root>/.namzu. */
  if (strcmp (segs[0], ".namzu") == 0)
    return invalid (error, "%s: .namzu is reserved for the seed marker", field);
  return TRUE;
}

static gboolean
is_nested (const char *outer, const char *inner)
{
  gsize n = strlen (outer);

  return strncmp (outer, inner, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

static NzSeedRepo *
parse_repo (JsonNode *node, guint i, GError **error)
{
  g_autofree char *f = g_strdup_printf ("repositories[%u]", i);
  g_autofree char *ff = NULL;
  NzSeedRepo *r;
  JsonObject *o;
  const char *dir, *path, *s;
  double depth;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return (invalid (error, "%s: must be an object", f), NULL);
  o = json_node_get_object (node);
  r = g_new0 (NzSeedRepo, 1);

  r->url = g_strdup (nz_json_get_string (o, "url"));
  ff = g_strdup_printf ("%s.url", f);
  if (!nz_seed_check_url (r->url, ff, error))
    return (nz_seed_repo_free (r), NULL);

  /* `dir` is the reference's name for it, `path` the one namzu's issue used: either, not both. */
  dir = nz_json_get_string (o, "dir");
  path = nz_json_get_string (o, "path");
  if ((json_object_has_member (o, "dir") && dir == NULL)
      || (json_object_has_member (o, "path") && path == NULL))
    return (invalid (error, "%s.dir: must be a string", f), nz_seed_repo_free (r), NULL);
  if (dir != NULL && path != NULL)
    return (invalid (error, "%s: give dir or path, not both", f), nz_seed_repo_free (r), NULL);
  r->dir = g_strdup (dir != NULL ? dir : path);
  if (r->dir != NULL)
    {
      g_free (ff);
      ff = g_strdup_printf ("%s.%s", f, dir != NULL ? "dir" : "path");
      if (!check_dir (r->dir, ff, error))
        return (nz_seed_repo_free (r), NULL);
    }

  s = nz_json_get_string (o, "name");
  if (s == NULL && json_object_has_member (o, "name"))
    return (invalid (error, "%s.name: must be a string", f), nz_seed_repo_free (r), NULL);
  /* Without a name, the directory's last segment names it, if that is a valid name. */
  if (s == NULL && r->dir != NULL)
    s = strrchr (r->dir, '/') != NULL ? strrchr (r->dir, '/') + 1 : r->dir;
  if (s == NULL || !is_dns_label (s))
    return (invalid (error,
                     "%s.name: must be a DNS-1123 label (lowercase letters, digits and "
                     "'-', at most 63)",
                     f),
            nz_seed_repo_free (r), NULL);
  r->name = g_strdup (s);
  if (r->dir == NULL)
    r->dir = g_strdup (r->name);

  if (json_object_has_member (o, "ref"))
    {
      s = nz_json_get_string (o, "ref");
      if (s == NULL || !is_ref (s))
        return (invalid (error, "%s.ref: must match [A-Za-z0-9._][A-Za-z0-9._/-]* without '..'", f),
                nz_seed_repo_free (r), NULL);
      r->ref = g_strdup (s);
    }
  if (json_object_has_member (o, "commit"))
    {
      s = nz_json_get_string (o, "commit");
      if (!nz_seed_is_commit_id (s))
        return (invalid (error,
                         "%s.commit: must be a full lowercase commit id (40 or 64 hex "
                         "digits)",
                         f),
                nz_seed_repo_free (r), NULL);
      r->commit = g_strdup (s);
    }
  if (json_object_has_member (o, "depth"))
    {
      if (!nz_json_get_number (o, "depth", &depth) || depth < 1 || depth > G_MAXINT32
          || depth != (double)(gint64)depth)
        return (invalid (error, "%s.depth: must be a positive integer", f), nz_seed_repo_free (r),
                NULL);
      /* A pinned commit needs the full history to be checked out and checked. */
      if (r->commit != NULL)
        return (invalid (error,
                         "%s.depth: cannot be given beside commit, which clones the "
                         "full history",
                         f),
                nz_seed_repo_free (r), NULL);
      r->depth = (gint64)depth;
    }
  return r;
}

NzSeed *
nz_seed_parse (const char *data, gssize len, GError **error)
{
  g_autoptr (NzSeed) seed = g_new0 (NzSeed, 1);
  g_autoptr (JsonObject) root = NULL;
  g_autoptr (GError) local = NULL;
  JsonArray *repos;
  const char *name;

  g_return_val_if_fail (data != NULL, NULL);

  root = nz_json_parse_object (data, len, &local);
  if (root == NULL)
    return (invalid (error, "the seed is not a JSON object: %s", local->message), NULL);
  name = nz_json_get_string (root, "name");
  if (name == NULL || !is_dns_label (name))
    return (invalid (error, "name: must be a DNS-1123 label (lowercase letters, digits and "
                            "'-', at most 63)"),
            NULL);
  seed->name = g_strdup (name);
  seed->repos = g_ptr_array_new_with_free_func ((GDestroyNotify)nz_seed_repo_free);
  repos = nz_json_get_array (root, "repositories");
  if (repos == NULL || json_array_get_length (repos) == 0)
    return (invalid (error, "repositories: must be a non-empty array"), NULL);
  for (guint i = 0; i < json_array_get_length (repos); i++)
    {
      NzSeedRepo *r = parse_repo (json_array_get_element (repos, i), i, error);

      if (r == NULL)
        return NULL;
      for (guint j = 0; j < seed->repos->len; j++)
        {
          NzSeedRepo *o = seed->repos->pdata[j];

          if (strcmp (o->name, r->name) == 0)
            return (invalid (error,
                             "repositories[%u].name: '%s' is already used by "
                             "repositories[%u]",
                             i, r->name, j),
                    nz_seed_repo_free (r), NULL);
          /* One checkout inside another would be checked and cloned through each other. */
          if (is_nested (o->dir, r->dir) || is_nested (r->dir, o->dir))
            return (invalid (error,
                             "repositories[%u].dir: '%s' overlaps '%s' of "
                             "repositories[%u]",
                             i, r->dir, o->dir, j),
                    nz_seed_repo_free (r), NULL);
        }
      g_ptr_array_add (seed->repos, r);
    }
  return g_steal_pointer (&seed);
}

/* JSON.stringify's string form: the digest must equal the reference's byte for byte. */
static void
append_js_string (GString *out, const char *s)
{
  if (s == NULL)
    {
      g_string_append (out, "null");
      return;
    }
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
    nz_json_append_escaped_byte (out, *p);
  g_string_append_c (out, '"');
}

char *
nz_seed_digest (const NzSeed *seed)
{
  g_autoptr (GString) s = g_string_new ("{\"name\":");

  g_return_val_if_fail (seed != NULL, NULL);

  append_js_string (s, seed->name);
  g_string_append (s, ",\"repositories\":[");
  for (guint i = 0; i < seed->repos->len; i++)
    {
      const NzSeedRepo *r = seed->repos->pdata[i];

      if (i > 0)
        g_string_append_c (s, ',');
      g_string_append_c (s, '[');
      append_js_string (s, r->name);
      g_string_append_c (s, ',');
      append_js_string (s, r->url);
      g_string_append_c (s, ',');
      append_js_string (s, r->ref);
      g_string_append_c (s, ',');
      append_js_string (s, r->commit);
      g_string_append_c (s, ',');
      append_js_string (s, r->dir);
      g_string_append_c (s, ',');
      if (r->depth > 0)
        g_string_append_printf (s, "%" G_GINT64_FORMAT, r->depth);
      else
        g_string_append (s, "null");
      g_string_append_c (s, ']');
    }
  g_string_append (s, "]}");
  return g_compute_checksum_for_string (G_CHECKSUM_SHA256, s->str, s->len);
}

gboolean
nz_seed_check_root (const char *root, GError **error)
{
  g_auto (GStrv) segs = NULL;

  if (root == NULL || root[0] != '/')
    return invalid (error, "root must be an absolute path in the sandbox");
  if (!g_utf8_validate (root, -1, NULL) || has_space_or_control (root))
    return invalid (error, "root must not contain whitespace or control characters");
  segs = g_strsplit (root, "/", -1);
  for (guint i = 0; segs[i] != NULL; i++)
    if (strcmp (segs[i], "..") == 0)
      return invalid (error, "root must not contain a '..' segment");
  return TRUE;
}

/* @path as the kernel resolves it lexically: empty and "." segments dropped, so runs of '/',
 * trailing slashes and "/./" cannot hide a path from the outputs rule ("/" stays "/"). ".." is
 * refused before this runs. */
static char *
normalise_path (const char *path)
{
  g_auto (GStrv) segs = g_strsplit (path, "/", -1);
  GString *s = g_string_new (NULL);

  for (guint i = 0; segs[i] != NULL; i++)
    if (segs[i][0] != '\0' && strcmp (segs[i], ".") != 0)
      g_string_append_printf (s, "/%s", segs[i]);
  if (s->len == 0)
    g_string_append_c (s, '/');
  return g_string_free (s, FALSE);
}

gboolean
nz_seed_check_root_layout (const char *root, const char *collected_dir,
                           const char *collected_name, GError **error)
{
  g_autofree char *r = NULL;
  g_autofree char *outputs = NULL;

  g_return_val_if_fail (root != NULL, FALSE);

  if (collected_dir == NULL)
    return TRUE;
  outputs = normalise_path (collected_dir);
  r = normalise_path (root);
  /* What the host collects as the task's result (docker: the outputs bind, the worker's
   * workspace): a seed there would be shipped back as output and die with the task. */
  if (is_nested (outputs, r))
    return invalid (error, "root %s is on the %s (%s); put the seed on layout.scratch instead",
                    root, collected_name != NULL ? collected_name : "collected outputs", outputs);
  return TRUE;
}
