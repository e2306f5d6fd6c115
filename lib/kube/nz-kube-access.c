/* nz-kube-access.c: in-cluster, kubeconfig and explicit cluster access (nz-kube-access.h). */
#include "nz-kube-access.h"

#include <string.h>

#include "nz-base64.h"

struct _NzKubeExec
{
  char *api_version;
  char *command; /* resolved against the kubeconfig's directory when relative with a '/' */
  char **args;
  char **env; /* NAME=value pairs added to the plugin's environment */
  /* The cached answer and when it expires (real time, µs; G_MAXINT64: until a 401). */
  NzKubeCredential *cached;
  gint64 expires;
};

static void
nz_kube_exec_free (NzKubeExec *exec)
{
  if (exec == NULL)
    return;
  g_free (exec->api_version);
  g_free (exec->command);
  g_strfreev (exec->args);
  g_strfreev (exec->env);
  nz_kube_credential_free (exec->cached);
  g_free (exec);
}

void
nz_kube_credential_free (NzKubeCredential *cred)
{
  if (cred == NULL)
    return;
  if (cred->token != NULL)
    memset (cred->token, 0, strlen (cred->token));
  g_free (cred->token);
  g_free (cred->client_cert_pem);
  if (cred->client_key_pem != NULL)
    memset (cred->client_key_pem, 0, strlen (cred->client_key_pem));
  g_free (cred->client_key_pem);
  g_free (cred);
}

void
nz_kube_access_free (NzKubeAccess *access)
{
  if (access == NULL)
    return;
  g_free (access->server);
  g_free (access->ca_pem);
  g_free (access->tls_server_name);
  if (access->token != NULL)
    memset (access->token, 0, strlen (access->token));
  g_free (access->token);
  g_free (access->token_file);
  g_free (access->client_cert_pem);
  if (access->client_key_pem != NULL)
    memset (access->client_key_pem, 0, strlen (access->client_key_pem));
  g_free (access->client_key_pem);
  nz_kube_exec_free (access->exec);
  g_free (access->namespace);
  g_free (access->context);
  g_clear_pointer (&access->warnings, g_ptr_array_unref);
  g_free (access);
}

static NzKubeAccess *
access_new (void)
{
  NzKubeAccess *a = g_new0 (NzKubeAccess, 1);

  a->warnings = g_ptr_array_new_with_free_func (g_free);
  return a;
}

static gboolean throw_config (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static gboolean
throw_config (GError **error, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_set_error_literal (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "");
  if (error != NULL && *error != NULL)
    {
      g_free ((*error)->message);
      (*error)->message = g_strdup_vprintf (fmt, ap);
    }
  va_end (ap);
  return FALSE;
}

/* A file's contents for a credential or CA; an empty file is refused (never a blank token). */
static char *
read_file (const char *path, const char *what, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *text = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, &local))
    return throw_config (error, "%s: %s", what, local->message), NULL;
  if (len == 0 || strlen (text) != len)
    return throw_config (error, "%s '%s' is empty or not text", what, path), NULL;
  return g_steal_pointer (&text);
}

/* Bearer tokens are read with surrounding whitespace trimmed, as client-go does. */
static char *
read_token_file (const char *path, GError **error)
{
  g_autofree char *text = read_file (path, "token file", error);

  if (text == NULL)
    return NULL;
  g_strstrip (text);
  if (*text == '\0')
    return throw_config (error, "token file '%s' is empty", path), NULL;
  return g_steal_pointer (&text);
}

NzKubeAccess *
nz_kube_access_new_explicit (const char *server, const char *ca_pem, const char *token,
                             GError **error)
{
  g_autoptr (NzKubeAccess) a = access_new ();

  g_return_val_if_fail (server != NULL, NULL);
  if (!g_str_has_prefix (server, "https://"))
    return throw_config (error, "server '%s' is not an https:// URL", server), NULL;
  if (token == NULL || *token == '\0')
    return throw_config (error, "server '%s': no bearer token", server), NULL;
  a->server = g_strdup (server);
  while (g_str_has_suffix (a->server, "/"))
    a->server[strlen (a->server) - 1] = '\0';
  a->ca_pem = g_strdup (ca_pem);
  a->token = g_strdup (token);
  return g_steal_pointer (&a);
}

NzKubeAccess *
nz_kube_access_in_cluster (GError **error)
{
  const char *dir = g_getenv (NZ_KUBE_SERVICEACCOUNT_DIR_ENV);
  const char *host = g_getenv ("KUBERNETES_SERVICE_HOST");
  const char *port = g_getenv ("KUBERNETES_SERVICE_PORT");
  g_autoptr (NzKubeAccess) a = access_new ();
  g_autofree char *ca = NULL, *ns = NULL, *ns_text = NULL, *token = NULL;
  guint64 port_n = 0;

  if (dir == NULL || *dir == '\0')
    dir = NZ_KUBE_SERVICEACCOUNT_DIR;
  /* client-go's rule: both must be set, else this is not a pod. */
  if (host == NULL || *host == '\0' || port == NULL || *port == '\0')
    return throw_config (error, "in-cluster access: KUBERNETES_SERVICE_HOST and "
                                "KUBERNETES_SERVICE_PORT must be defined (not running in a "
                                "pod?)"),
           NULL;
  if (!g_ascii_string_to_unsigned (port, 10, 1, 65535, &port_n, NULL))
    return throw_config (error, "in-cluster access: KUBERNETES_SERVICE_PORT '%s' is not a port",
                         port),
           NULL;
  a->token_file = g_build_filename (dir, "token", NULL);
  token = read_token_file (a->token_file, error);
  if (token == NULL)
    return g_prefix_error (error, "in-cluster access: "), NULL;
  ca = g_build_filename (dir, "ca.crt", NULL);
  a->ca_pem = read_file (ca, "in-cluster CA", error);
  if (a->ca_pem == NULL)
    return g_prefix_error (error, "in-cluster access: "), NULL;
  ns = g_build_filename (dir, "namespace", NULL);
  if (g_file_get_contents (ns, &ns_text, NULL, NULL))
    {
      g_strstrip (ns_text);
      if (*ns_text != '\0')
        a->namespace = g_steal_pointer (&ns_text);
    }
  /* An IPv6 service address needs brackets in a URL. */
  a->server = strchr (host, ':') != NULL
                  ? g_strdup_printf ("https://[%s]:%" G_GUINT64_FORMAT, host, port_n)
                  : g_strdup_printf ("https://%s:%" G_GUINT64_FORMAT, host, port_n);
  return g_steal_pointer (&a);
}

/* ---- kubeconfig ---------------------------------------------------------------------- */

typedef struct
{
  /* The merged view (kubectl's rule: for every map key the first file that sets it wins;
   * current-context likewise). Each named entry remembers its file's directory, against which
   * its relative paths resolve. */
  char *current_context;
  GHashTable *contexts, *clusters, *users; /* name -> Entry */
} Merged;

typedef struct
{
  JsonObject *body; /* the `context`, `cluster` or `user` object */
  char *dir;
} Entry;

static void
entry_free (gpointer p)
{
  Entry *e = p;

  json_object_unref (e->body);
  g_free (e->dir);
  g_free (e);
}

static void
merged_clear (Merged *m)
{
  g_free (m->current_context);
  g_clear_pointer (&m->contexts, g_hash_table_unref);
  g_clear_pointer (&m->clusters, g_hash_table_unref);
  g_clear_pointer (&m->users, g_hash_table_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Merged, merged_clear)

/* A member that must be a string when present. */
static gboolean
get_string (JsonObject *o, const char *member, const char *where, const char **out, GError **error)
{
  JsonNode *n = json_object_get_member (o, member);

  *out = NULL;
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return throw_config (error, "%s: '%s' is not a string", where, member);
  *out = json_node_get_string (n);
  return TRUE;
}

/* YAML's booleans as sigs.k8s.io/yaml reads them (YAML 1.1 words). */
static gboolean
get_bool (JsonObject *o, const char *member, const char *where, gboolean *out, GError **error)
{
  static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "on", "On", NULL };
  static const char *const no[] = { "false", "False", "FALSE", "no", "No", "off", "Off", NULL };
  const char *s = NULL;

  *out = FALSE;
  if (!get_string (o, member, where, &s, error))
    return FALSE;
  if (s == NULL || g_strv_contains (no, s))
    return TRUE;
  if (g_strv_contains (yes, s))
    return *out = TRUE;
  return throw_config (error, "%s: '%s' is not a boolean: '%s'", where, member, s);
}

/* Adds one file's named list (`contexts`, `clusters`, `users`) to @into; first name wins. */
static gboolean
merge_list (JsonObject *root, const char *list, const char *inner, const char *path,
            GHashTable *into, GError **error)
{
  JsonNode *n = json_object_get_member (root, list);
  JsonArray *arr;

  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (n))
    return throw_config (error, "kubeconfig '%s': '%s' is not a list", path, list);
  arr = json_node_get_array (n);
  for (guint i = 0; i < json_array_get_length (arr); i++)
    {
      JsonNode *item = json_array_get_element (arr, i);
      JsonNode *body;
      const char *name = NULL;
      Entry *e;

      if (!JSON_NODE_HOLDS_OBJECT (item))
        return throw_config (error, "kubeconfig '%s': %s[%u] is not a mapping", path, list, i);
      if (!get_string (json_node_get_object (item), "name", path, &name, error))
        return FALSE;
      if (name == NULL || *name == '\0')
        return throw_config (error, "kubeconfig '%s': %s[%u] has no name", path, list, i);
      body = json_object_get_member (json_node_get_object (item), inner);
      if (body != NULL && !JSON_NODE_HOLDS_OBJECT (body) && !JSON_NODE_HOLDS_NULL (body))
        return throw_config (error, "kubeconfig '%s': %s '%s': '%s' is not a mapping", path, list,
                             name, inner);
      if (g_hash_table_contains (into, name))
        continue;
      e = g_new0 (Entry, 1);
      e->body = body != NULL && JSON_NODE_HOLDS_OBJECT (body)
                    ? json_object_ref (json_node_get_object (body))
                    : json_object_new ();
      e->dir = g_path_get_dirname (path);
      g_hash_table_insert (into, g_strdup (name), e);
    }
  return TRUE;
}

static gboolean
merge_file (Merged *m, const char *path, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonNode) root = NULL;
  g_autofree char *text = NULL;
  g_autofree char *what = g_strdup_printf ("kubeconfig '%s'", path);
  JsonObject *o;
  const char *cc = NULL;
  gsize len = 0;

  if (!g_file_get_contents (path, &text, &len, &local))
    return throw_config (error, "kubeconfig: %s", local->message);
  root = nz_kube_yaml_parse (text, len, what, error);
  if (root == NULL)
    return FALSE;
  if (JSON_NODE_HOLDS_NULL (root))
    return TRUE; /* an empty file adds nothing, as with kubectl */
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return throw_config (error, "%s is not a mapping", what);
  o = json_node_get_object (root);
  if (!get_string (o, "current-context", what, &cc, error))
    return FALSE;
  if (m->current_context == NULL && cc != NULL && *cc != '\0')
    m->current_context = g_strdup (cc);
  return merge_list (o, "contexts", "context", path, m->contexts, error)
         && merge_list (o, "clusters", "cluster", path, m->clusters, error)
         && merge_list (o, "users", "user", path, m->users, error);
}

/* A path from the kubeconfig: relative ones are relative to the file that named them. */
static char *
resolve_path (const Entry *e, const char *p)
{
  return g_path_is_absolute (p) ? g_strdup (p) : g_build_filename (e->dir, p, NULL);
}

/* `<key>-data` (base64 PEM) or `<key>` (a file); -data wins, as in client-go. */
static gboolean
read_pem (const Entry *e, const char *where, const char *key, char **out, GError **error)
{
  g_autofree char *data_key = g_strdup_printf ("%s-data", key);
  const char *data = NULL, *file = NULL;

  *out = NULL;
  if (!get_string (e->body, data_key, where, &data, error)
      || !get_string (e->body, key, where, &file, error))
    return FALSE;
  if (data != NULL && *data != '\0')
    {
      gsize n = strlen (data);
      g_autofree guint8 *raw = g_malloc (NZ_BASE64_DECODED_MAX (n) + 1);
      gssize len = nz_base64_decode (data, n, raw);

      /* Strict: a kubeconfig's -data is one unbroken base64 string. */
      if (len <= 0 || memchr (raw, '\0', (gsize)len) != NULL)
        return throw_config (error, "%s: '%s' is not base64 PEM", where, data_key);
      *out = g_strndup ((const char *)raw, (gsize)len);
      return TRUE;
    }
  if (file != NULL && *file != '\0')
    {
      g_autofree char *path = resolve_path (e, file);

      *out = read_file (path, key, error);
      return *out != NULL;
    }
  return TRUE;
}

static gboolean
read_cluster (NzKubeAccess *a, const Entry *e, const char *name, GError **error)
{
  g_autofree char *where = g_strdup_printf ("kubeconfig cluster '%s'", name);
  const char *server = NULL, *tls_name = NULL, *proxy = NULL;

  if (!get_string (e->body, "server", where, &server, error)
      || !get_string (e->body, "tls-server-name", where, &tls_name, error)
      || !get_string (e->body, "proxy-url", where, &proxy, error)
      || !get_bool (e->body, "insecure-skip-tls-verify", where, &a->insecure, error)
      || !read_pem (e, where, "certificate-authority", &a->ca_pem, error))
    return FALSE;
  if (server == NULL || *server == '\0')
    return throw_config (error, "%s has no server", where);
  /* Plain http would send the bearer token in the clear. */
  if (!g_str_has_prefix (server, "https://"))
    return throw_config (error, "%s: server '%s' is not an https:// URL", where, server);
  if (proxy != NULL)
    return throw_config (error, "%s: 'proxy-url' is not supported", where);
  if (a->insecure && a->ca_pem != NULL)
    return throw_config (error,
                         "%s: 'insecure-skip-tls-verify' together with a "
                         "certificate authority is refused (which one is meant?)",
                         where);
  if (a->insecure)
    g_ptr_array_add (a->warnings,
                     g_strdup_printf ("%s: insecure-skip-tls-verify is set: the API server's "
                                      "certificate is not verified",
                                      where));
  a->server = g_strdup (server);
  while (g_str_has_suffix (a->server, "/"))
    a->server[strlen (a->server) - 1] = '\0';
  a->tls_server_name = tls_name != NULL && *tls_name != '\0' ? g_strdup (tls_name) : NULL;
  return TRUE;
}

static gboolean
read_exec (NzKubeAccess *a, const Entry *e, JsonNode *node, const char *where, GError **error)
{
  g_autofree char *ewhere = g_strdup_printf ("%s: exec", where);
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) env = g_ptr_array_new_with_free_func (g_free);
  JsonObject *o;
  JsonNode *list;
  const char *api = NULL, *command = NULL, *mode = NULL;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    return throw_config (error, "%s is not a mapping", ewhere);
  o = json_node_get_object (node);
  if (!get_string (o, "apiVersion", ewhere, &api, error)
      || !get_string (o, "command", ewhere, &command, error)
      || !get_string (o, "interactiveMode", ewhere, &mode, error))
    return FALSE;
  if (g_strcmp0 (api, NZ_KUBE_EXEC_V1) != 0 && g_strcmp0 (api, NZ_KUBE_EXEC_V1BETA1) != 0)
    return throw_config (error, "%s: apiVersion '%s' is not %s or %s", ewhere,
                         api != NULL ? api : "", NZ_KUBE_EXEC_V1, NZ_KUBE_EXEC_V1BETA1);
  if (command == NULL || *command == '\0')
    return throw_config (error, "%s has no command", ewhere);
  /* namzu never hands a plugin a terminal: one that needs one cannot run here. */
  if (g_strcmp0 (mode, "Always") == 0)
    return throw_config (error,
                         "%s: interactiveMode 'Always' is not supported (namzu gives "
                         "a credential plugin no terminal)",
                         ewhere);
  list = json_object_get_member (o, "args");
  if (list != NULL && JSON_NODE_HOLDS_ARRAY (list))
    for (guint i = 0; i < json_array_get_length (json_node_get_array (list)); i++)
      {
        JsonNode *arg = json_array_get_element (json_node_get_array (list), i);

        if (!JSON_NODE_HOLDS_VALUE (arg) || json_node_get_value_type (arg) != G_TYPE_STRING)
          return throw_config (error, "%s: args[%u] is not a string", ewhere, i);
        g_ptr_array_add (args, g_strdup (json_node_get_string (arg)));
      }
  else if (list != NULL && !JSON_NODE_HOLDS_NULL (list))
    return throw_config (error, "%s: 'args' is not a list", ewhere);
  list = json_object_get_member (o, "env");
  if (list != NULL && JSON_NODE_HOLDS_ARRAY (list))
    for (guint i = 0; i < json_array_get_length (json_node_get_array (list)); i++)
      {
        JsonNode *item = json_array_get_element (json_node_get_array (list), i);
        const char *name = NULL, *value = NULL;

        if (!JSON_NODE_HOLDS_OBJECT (item))
          return throw_config (error, "%s: env[%u] is not a mapping", ewhere, i);
        if (!get_string (json_node_get_object (item), "name", ewhere, &name, error)
            || !get_string (json_node_get_object (item), "value", ewhere, &value, error))
          return FALSE;
        if (name == NULL || *name == '\0' || strchr (name, '=') != NULL)
          return throw_config (error, "%s: env[%u] has no usable name", ewhere, i);
        g_ptr_array_add (env, g_strdup_printf ("%s=%s", name, value != NULL ? value : ""));
      }
  else if (list != NULL && !JSON_NODE_HOLDS_NULL (list))
    return throw_config (error, "%s: 'env' is not a list", ewhere);
  g_ptr_array_add (args, NULL);
  g_ptr_array_add (env, NULL);
  a->exec = g_new0 (NzKubeExec, 1);
  a->exec->api_version = g_strdup (api);
  /* client-go: a command with a path separator is relative to the kubeconfig; a bare name is
   * looked up on $PATH. */
  a->exec->command = strchr (command, '/') != NULL ? resolve_path (e, command) : g_strdup (command);
  a->exec->args = (char **)g_ptr_array_steal (args, NULL);
  a->exec->env = (char **)g_ptr_array_steal (env, NULL);
  return TRUE;
}

static gboolean
read_user (NzKubeAccess *a, const Entry *e, const char *name, GError **error)
{
  /* What we would have to honour to authenticate as the kubeconfig means, and do not. */
  static const char *const refused[] = { "auth-provider", "username",  "password",      "as",
                                         "as-uid",        "as-groups", "as-user-extra", NULL };
  g_autofree char *where = g_strdup_printf ("kubeconfig user '%s'", name);
  const char *token = NULL, *token_file = NULL;
  JsonNode *exec = json_object_get_member (e->body, "exec");
  int kinds = 0;

  for (guint i = 0; refused[i] != NULL; i++)
    if (json_object_has_member (e->body, refused[i]))
      return throw_config (error,
                           "%s: '%s' is not supported (use a token, a client "
                           "certificate or an exec credential plugin)",
                           where, refused[i]);
  if (!get_string (e->body, "token", where, &token, error)
      || !get_string (e->body, "tokenFile", where, &token_file, error)
      || !read_pem (e, where, "client-certificate", &a->client_cert_pem, error)
      || !read_pem (e, where, "client-key", &a->client_key_pem, error))
    return FALSE;
  if ((a->client_cert_pem == NULL) != (a->client_key_pem == NULL))
    return throw_config (error,
                         "%s: a client certificate needs both client-certificate and "
                         "client-key",
                         where);
  if (token != NULL && *token != '\0')
    a->token = g_strdup (token), kinds++;
  else if (token_file != NULL && *token_file != '\0')
    a->token_file = resolve_path (e, token_file), kinds++;
  if (exec != NULL && !JSON_NODE_HOLDS_NULL (exec))
    {
      if (!read_exec (a, e, exec, where, error))
        return FALSE;
      kinds++;
    }
  /* client-go would send a token and a plugin's answer both ways at once; we pick none. */
  if (kinds > 1)
    return throw_config (error, "%s: more than one of token/tokenFile and exec is set", where);
  if (a->token_file != NULL)
    {
      g_autofree char *check = read_token_file (a->token_file, error);

      if (check == NULL)
        return g_prefix_error (error, "%s: ", where), FALSE;
    }
  return TRUE;
}

static GPtrArray *
kubeconfig_paths (const char *path, GError **error)
{
  GPtrArray *paths = g_ptr_array_new_with_free_func (g_free);
  const char *env = g_getenv ("KUBECONFIG");

  if (path != NULL)
    {
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        {
          g_ptr_array_unref (paths);
          return throw_config (error, "kubeconfig '%s' does not exist", path), NULL;
        }
      g_ptr_array_add (paths, g_strdup (path));
      return paths;
    }
  if (env != NULL && *env != '\0')
    {
      g_auto (GStrv) parts = g_strsplit (env, G_SEARCHPATH_SEPARATOR_S, -1);

      /* kubectl skips empty entries and files that do not exist. */
      for (guint i = 0; parts[i] != NULL; i++)
        if (*parts[i] != '\0' && g_file_test (parts[i], G_FILE_TEST_EXISTS))
          g_ptr_array_add (paths, g_strdup (parts[i]));
      if (paths->len == 0)
        {
          g_ptr_array_unref (paths);
          return throw_config (error, "no file named in KUBECONFIG exists ('%s')", env), NULL;
        }
      return paths;
    }
  g_ptr_array_add (paths, g_build_filename (g_get_home_dir (), ".kube", "config", NULL));
  if (!g_file_test (paths->pdata[0], G_FILE_TEST_EXISTS))
    {
      g_autofree char *p = g_strdup (paths->pdata[0]);

      g_ptr_array_unref (paths);
      return throw_config (error, "no kubeconfig: KUBECONFIG is unset and '%s' does not exist", p),
             NULL;
    }
  return paths;
}

NzKubeAccess *
nz_kube_access_from_kubeconfig (const char *path, const char *context, GError **error)
{
  g_auto (Merged) m = { 0 };
  g_autoptr (GPtrArray) paths = kubeconfig_paths (path, error);
  g_autoptr (NzKubeAccess) a = NULL;
  const char *cluster_name = NULL, *user_name = NULL, *ns = NULL, *ctx_name;
  g_autofree char *where = NULL;
  Entry *ctx, *cluster, *user;

  if (paths == NULL)
    return NULL;
  m.contexts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, entry_free);
  m.clusters = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, entry_free);
  m.users = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, entry_free);
  for (guint i = 0; i < paths->len; i++)
    if (!merge_file (&m, paths->pdata[i], error))
      return NULL;
  ctx_name = context != NULL ? context : m.current_context;
  if (ctx_name == NULL || *ctx_name == '\0')
    return throw_config (error, "kubeconfig: no current-context is set and no context was "
                                "named"),
           NULL;
  ctx = g_hash_table_lookup (m.contexts, ctx_name);
  if (ctx == NULL)
    return throw_config (error, "kubeconfig: context '%s' does not exist", ctx_name), NULL;
  where = g_strdup_printf ("kubeconfig context '%s'", ctx_name);
  if (!get_string (ctx->body, "cluster", where, &cluster_name, error)
      || !get_string (ctx->body, "user", where, &user_name, error)
      || !get_string (ctx->body, "namespace", where, &ns, error))
    return NULL;
  if (cluster_name == NULL || *cluster_name == '\0')
    return throw_config (error, "%s names no cluster", where), NULL;
  cluster = g_hash_table_lookup (m.clusters, cluster_name);
  if (cluster == NULL)
    return throw_config (error, "%s: cluster '%s' does not exist", where, cluster_name), NULL;
  a = access_new ();
  a->context = g_strdup (ctx_name);
  a->namespace = ns != NULL && *ns != '\0' ? g_strdup (ns) : NULL;
  if (!read_cluster (a, cluster, cluster_name, error))
    return NULL;
  if (user_name != NULL && *user_name != '\0')
    {
      user = g_hash_table_lookup (m.users, user_name);
      if (user == NULL)
        return throw_config (error, "%s: user '%s' does not exist", where, user_name), NULL;
      if (!read_user (a, user, user_name, error))
        return NULL;
    }
  return g_steal_pointer (&a);
}

/* ---- credentials --------------------------------------------------------------------- */

/* kubectl's RFC 3339 expirationTimestamp; NULL or unreadable: cache until a 401. */
static gint64
parse_expiry (const char *ts)
{
  g_autoptr (GDateTime) dt = ts != NULL ? g_date_time_new_from_iso8601 (ts, NULL) : NULL;

  return dt != NULL ? g_date_time_to_unix (dt) * G_USEC_PER_SEC + g_date_time_get_microsecond (dt)
                    : G_MAXINT64;
}

static gboolean throw_plugin (GError **error, const NzKubeExec *exec, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

static gboolean
throw_plugin (GError **error, const NzKubeExec *exec, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CREDENTIAL, "exec credential plugin '%s': %s",
               exec->command, msg);
  return FALSE;
}

typedef struct
{
  GCancellable *cancel;
  GAsyncResult *result;
} PluginWait;

static gboolean
on_plugin_timeout (gpointer data)
{
  g_cancellable_cancel (((PluginWait *)data)->cancel);
  return G_SOURCE_REMOVE;
}

static void
on_plugin_done (GObject *source, GAsyncResult *res, gpointer data)
{
  ((PluginWait *)data)->result = g_object_ref (res);
}

/* communicate, bounded: the sync variant iterates a context of its own that no timer reaches. */
static gboolean
communicate_bounded (GSubprocess *proc, GCancellable *cancel, GBytes **out, GError **error)
{
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  g_autoptr (GSource) timer = g_timeout_source_new (NZ_KUBE_EXEC_TIMEOUT_MS);
  PluginWait w = { .cancel = cancel };
  gboolean ok;

  g_main_context_push_thread_default (ctx);
  g_source_set_callback (timer, on_plugin_timeout, &w, NULL);
  g_source_attach (timer, ctx);
  g_subprocess_communicate_async (proc, NULL, cancel, on_plugin_done, &w);
  while (w.result == NULL)
    g_main_context_iteration (ctx, TRUE);
  g_source_destroy (timer);
  ok = g_subprocess_communicate_finish (proc, w.result, out, NULL, error);
  g_object_unref (w.result);
  g_main_context_pop_thread_default (ctx);
  return ok;
}

/* Runs the plugin (client-go's protocol: KUBERNETES_EXEC_INFO in, an ExecCredential of the
 * same apiVersion on stdout; stderr passes through to ours for its messages). */
static NzKubeCredential *
run_plugin (NzKubeExec *exec, GError **error)
{
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE); /* stdin: /dev/null */
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GCancellable) cancel = g_cancellable_new ();
  g_autoptr (GBytes) out = NULL;
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (NzKubeCredential) cred = g_new0 (NzKubeCredential, 1);
  g_autofree char *info = g_strdup_printf (
      "{\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}",
      exec->api_version);
  JsonObject *root, *status;
  JsonNode *sn;
  const char *api, *kind, *expiry;
  gsize len;

  for (guint i = 0; exec->env[i] != NULL; i++)
    {
      g_auto (GStrv) kv = g_strsplit (exec->env[i], "=", 2);

      g_subprocess_launcher_setenv (launcher, kv[0], kv[1], TRUE);
    }
  g_subprocess_launcher_setenv (launcher, "KUBERNETES_EXEC_INFO", info, TRUE);
  g_ptr_array_add (argv, exec->command);
  for (guint i = 0; exec->args[i] != NULL; i++)
    g_ptr_array_add (argv, exec->args[i]);
  g_ptr_array_add (argv, NULL);
  proc = g_subprocess_launcher_spawnv (launcher, (const char *const *)argv->pdata, &local);
  if (proc == NULL)
    return throw_plugin (error, exec, "%s", local->message), NULL;
  /* A plugin that hangs must not hang the tool: kill it at the bound. */
  if (!communicate_bounded (proc, cancel, &out, &local))
    {
      g_subprocess_force_exit (proc);
      g_subprocess_wait (proc, NULL, NULL);
      return throw_plugin (error, exec, "%s", local->message), NULL;
    }
  if (!g_subprocess_wait (proc, NULL, &local))
    return throw_plugin (error, exec, "%s", local->message), NULL;
  if (!g_subprocess_get_if_exited (proc) || g_subprocess_get_exit_status (proc) != 0)
    return throw_plugin (error, exec, "exited with status %d",
                         g_subprocess_get_if_exited (proc)
                             ? g_subprocess_get_exit_status (proc)
                             : 128 + g_subprocess_get_term_sig (proc)),
           NULL;
  len = out != NULL ? g_bytes_get_size (out) : 0;
  if (len == 0 || len > NZ_KUBE_EXEC_MAX_OUTPUT)
    return throw_plugin (error, exec, "wrote %s on stdout", len == 0 ? "nothing" : "too much"),
           NULL;
  if (!json_parser_load_from_data (parser, g_bytes_get_data (out, NULL), (gssize)len, NULL)
      || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return throw_plugin (error, exec, "stdout is not an ExecCredential JSON object"), NULL;
  root = json_node_get_object (json_parser_get_root (parser));
  api = json_object_get_string_member_with_default (root, "apiVersion", "");
  kind = json_object_get_string_member_with_default (root, "kind", "");
  if (g_strcmp0 (api, exec->api_version) != 0 || g_strcmp0 (kind, "ExecCredential") != 0)
    return throw_plugin (error, exec,
                         "answered apiVersion '%s' kind '%s', not %s "
                         "ExecCredential",
                         api, kind, exec->api_version),
           NULL;
  sn = json_object_get_member (root, "status");
  if (sn == NULL || !JSON_NODE_HOLDS_OBJECT (sn))
    return throw_plugin (error, exec, "the ExecCredential has no status"), NULL;
  status = json_node_get_object (sn);
  cred->token = g_strdup (json_object_get_string_member_with_default (status, "token", NULL));
  cred->client_cert_pem = g_strdup (
      json_object_get_string_member_with_default (status, "clientCertificateData", NULL));
  cred->client_key_pem
      = g_strdup (json_object_get_string_member_with_default (status, "clientKeyData", NULL));
  if ((cred->client_cert_pem == NULL) != (cred->client_key_pem == NULL))
    return throw_plugin (error, exec,
                         "status has only one of clientCertificateData and "
                         "clientKeyData"),
           NULL;
  if ((cred->token == NULL || *cred->token == '\0') && cred->client_cert_pem == NULL)
    return throw_plugin (error, exec, "status has neither a token nor a client certificate"), NULL;
  expiry = json_object_get_string_member_with_default (status, "expirationTimestamp", NULL);
  exec->expires = parse_expiry (expiry);
  return g_steal_pointer (&cred);
}

static NzKubeCredential *
credential_copy (const NzKubeCredential *c)
{
  NzKubeCredential *n = g_new0 (NzKubeCredential, 1);

  n->token = g_strdup (c->token);
  n->client_cert_pem = g_strdup (c->client_cert_pem);
  n->client_key_pem = g_strdup (c->client_key_pem);
  return n;
}

NzKubeCredential *
nz_kube_access_credential (NzKubeAccess *access, GError **error)
{
  NzKubeCredential *cred;

  g_return_val_if_fail (access != NULL, NULL);
  if (access->exec != NULL)
    {
      if (access->exec->cached == NULL || g_get_real_time () >= access->exec->expires)
        {
          g_clear_pointer (&access->exec->cached, nz_kube_credential_free);
          access->exec->cached = run_plugin (access->exec, error);
          if (access->exec->cached == NULL)
            return NULL;
        }
      cred = credential_copy (access->exec->cached);
    }
  else
    cred = g_new0 (NzKubeCredential, 1);
  if (access->token != NULL)
    cred->token = g_strdup (access->token);
  else if (access->token_file != NULL)
    {
      cred->token = read_token_file (access->token_file, error);
      if (cred->token == NULL)
        {
          nz_kube_credential_free (cred);
          return NULL;
        }
    }
  if (cred->client_cert_pem == NULL && access->client_cert_pem != NULL)
    {
      cred->client_cert_pem = g_strdup (access->client_cert_pem);
      cred->client_key_pem = g_strdup (access->client_key_pem);
    }
  return cred;
}

void
nz_kube_access_forget_credential (NzKubeAccess *access)
{
  g_return_if_fail (access != NULL);
  if (access->exec != NULL)
    g_clear_pointer (&access->exec->cached, nz_kube_credential_free);
}
