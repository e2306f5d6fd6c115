/* microvm:kubernetes's bulk release and capacity read (spec D.6.3), nz-kube-release.h. */
#include "nz-kube-release.h"

#include <string.h>

#include "nz-backend.h"
#include "nz-errors.h"

void
nz_kube_bulk_add_entries (GOptionContext *ctx, NzKubeBulkFlags *flags, gboolean warm_pool)
{
  /* Copied by GOption; the descriptions are static. namzu-create's flags, same meanings. */
  const GOptionEntry entries[] = {
    { "backend", 0, 0, G_OPTION_ARG_STRING, &flags->backend,
      "The backend: microvm:kubernetes (or --config's backend)", "NAME" },
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &flags->config,
      "Provider config (reference JSON) whose backend section names the cluster (access, "
      "kubeconfig, context, namespace, warmPoolName); flags win",
      "FILE" },
    { "kubeconfig", 0, 0, G_OPTION_ARG_FILENAME, &flags->kubeconfig,
      "microvm:kubernetes: the kubeconfig (default $KUBECONFIG, then ~/.kube/config)", "FILE" },
    { "context", 0, 0, G_OPTION_ARG_STRING, &flags->context,
      "microvm:kubernetes: the kubeconfig context (default its current-context)", "NAME" },
    { "namespace", 0, 0, G_OPTION_ARG_STRING, &flags->namespace,
      "microvm:kubernetes: the namespace (default the context's)", "NS" },
    { "warm-pool", 0, 0, G_OPTION_ARG_STRING, &flags->warm_pool,
      "microvm:kubernetes: the SandboxWarmPool (default --config's warmPoolName)", "NAME" },
    { NULL },
  };
  GOptionEntry copy[G_N_ELEMENTS (entries)];

  memcpy (copy, entries, sizeof entries);
  if (!warm_pool)
    memset (&copy[G_N_ELEMENTS (entries) - 2], 0, sizeof copy[0]);
  g_option_context_add_main_entries (ctx, copy, NULL);
}

const char *
nz_kube_bulk_flags_given (const NzKubeBulkFlags *flags)
{
  return flags->backend != NULL      ? "--backend"
         : flags->config != NULL     ? "--config"
         : flags->kubeconfig != NULL ? "--kubeconfig"
         : flags->context != NULL    ? "--context"
         : flags->namespace != NULL  ? "--namespace"
         : flags->warm_pool != NULL  ? "--warm-pool"
                                     : NULL;
}

gboolean
nz_kube_selector_is_blank (const char *selector)
{
  if (selector == NULL)
    return TRUE;
  for (const char *p = selector; *p != '\0'; p++)
    if (!g_ascii_isspace (*p))
      return FALSE;
  return TRUE;
}

#ifdef NZ_HAVE_KUBE

#include "nz-json.h"
#include "nz-kube-internal.h"

/* The cluster and namespace a bulk verb acts on. */
typedef struct
{
  NzCreateOptions *opts;
  NzKubeClient *client;
  char *ns;
  char *server;
} NzKubeBulk;

static void
bulk_free (NzKubeBulk *bulk)
{
  if (bulk == NULL)
    return;
  g_clear_pointer (&bulk->client, nz_kube_client_free);
  g_clear_pointer (&bulk->opts, nz_create_options_free);
  g_free (bulk->ns);
  g_free (bulk->server);
  g_free (bulk);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeBulk, bulk_free)

/* --config, then the flags over it, as namzu-create reads them (nz-backend.h). */
static NzCreateOptions *
bulk_options (const NzKubeBulkFlags *flags, const char *verb, GError **error)
{
  static const char *const flag_of[]
      = { "kubeconfig",  "--kubeconfig", "context",     "--context", "namespace",
          "--namespace", "warmPoolName", "--warm-pool", NULL };
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (JsonObject) keys = json_object_new ();

  if (flags->config != NULL)
    {
      g_autofree char *data = NULL;
      gsize len = 0;

      if (!g_file_get_contents (flags->config, &data, &len, error))
        {
          nz_error_convert (error);
          return (nz_prefix_error (error, "--config"), NULL);
        }
      if (!nz_create_options_load_config (opts, data, (gssize)len, error))
        return NULL;
    }
  if (flags->backend != NULL)
    {
      g_free (opts->backend);
      opts->backend = g_strdup (flags->backend);
    }
  if (g_strcmp0 (opts->backend, NZ_KUBE_BACKEND_NAME) != 0)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "%s is a microvm:kubernetes option, not %s's: give --backend "
                      "microvm:kubernetes (or a --config whose backend is {tier: 'microvm', "
                      "service: 'kubernetes'})",
                      verb, opts->backend != NULL ? opts->backend : NZ_BACKEND_DEFAULT),
            NULL);
  if (flags->kubeconfig != NULL)
    json_object_set_string_member (keys, "kubeconfig", flags->kubeconfig);
  if (flags->context != NULL)
    json_object_set_string_member (keys, "context", flags->context);
  if (flags->namespace != NULL)
    json_object_set_string_member (keys, "namespace", flags->namespace);
  if (flags->warm_pool != NULL)
    json_object_set_string_member (keys, "warmPoolName", flags->warm_pool);
  if (json_object_get_size (keys) > 0
      && !nz_create_options_set_backend_flags (opts, keys, flag_of, error))
    return NULL;
  return g_steal_pointer (&opts);
}

static NzKubeBulk *
bulk_open (const NzKubeBulkFlags *flags, const char *verb, GError **error)
{
  g_autoptr (NzKubeBulk) bulk = g_new0 (NzKubeBulk, 1);
  g_autoptr (JsonObject) spec = NULL;
  const NzKubeOptions *k;
  NzKubeAccess *access;
  GError *local = NULL;

  bulk->opts = bulk_options (flags, verb, error);
  if (bulk->opts == NULL)
    return NULL;
  k = nz_kube_options (bulk->opts);
  spec = nz_kube_access_spec (k);
  bulk->client = nz_kube_client_for (spec, NULL, k->api_timeout_ms, &local);
  if (bulk->client == NULL)
    {
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return NULL;
    }
  access = nz_kube_client_get_access (bulk->client);
  bulk->ns = g_strdup (k->namespace != NULL ? k->namespace : access->namespace);
  bulk->server = g_strdup (access->server);
  if (bulk->ns == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "--namespace (backend.namespace): is required (the kubeconfig context "
                      "names none)"),
            NULL);
  return g_steal_pointer (&bulk);
}

/* A NZ_KUBE_ERROR into NZ_ERROR, prefixed. Always FALSE. */
static gboolean
fail (GError **error, GError *local, const char *prefix)
{
  nz_kube_error_convert (&local);
  g_prefix_error (&local, "%s: ", prefix);
  g_propagate_error (error, local);
  return FALSE;
}

/* A LIST of @resource in the namespace, @query (may be NULL) appended: its items. */
static JsonObject *
list (NzKubeBulk *bulk, const char *group, const char *resource, const char *query,
      JsonArray **items, GError **error)
{
  g_autofree char *base = nz_kube_path (group, group != NULL ? NZ_KUBE_SANDBOX_API_VERSION : "v1",
                                        bulk->ns, resource, NULL);
  g_autofree char *path = query != NULL ? g_strconcat (base, "?", query, NULL) : g_strdup (base);
  JsonObject *l = nz_kube_get (bulk->client, path, error);

  *items = l != NULL ? nz_json_get_array (l, "items") : NULL;
  if (l != NULL && *items == NULL)
    {
      json_object_unref (l);
      return (g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PROTOCOL,
                           "kubernetes: GET %s: the answer is not a List (no items)", path),
              NULL);
    }
  return l;
}

/* Member @a of item @i of a List, when both are objects. */
static JsonObject *
item_member (JsonArray *items, guint i, const char *a)
{
  JsonNode *n = json_array_get_element (items, i);

  return JSON_NODE_HOLDS_OBJECT (n) ? nz_json_get_object (json_node_get_object (n), a) : NULL;
}

static const char *
item_string (JsonArray *items, guint i, const char *a, const char *b)
{
  return nz_json_get_string (item_member (items, i, a), b);
}

/* The handles of the claims just released, removed with a tombstone (nz_backend_destroy's
 * result, without a second DELETE): only those made on this API server, in this namespace. */
static void
forget_handles (NzKubeBulk *bulk, GHashTable *released)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GPtrArray) handles = nz_state_list (NULL, &local);

  if (handles == NULL)
    {
      g_printerr ("namzu: warning: the released sandboxes' handles are kept: %s\n", local->message);
      return;
    }
  for (guint i = 0; i < handles->len; i++)
    {
      NzHandle *h = handles->pdata[i];
      g_autoptr (GError) rm = NULL;

      if (g_strcmp0 (h->backend, NZ_KUBE_BACKEND_NAME) != 0
          || g_strcmp0 (nz_json_get_string (h->priv, "objectKind"), "SandboxClaim") != 0
          || g_strcmp0 (nz_json_get_string (h->priv, "server"), bulk->server) != 0
          || g_strcmp0 (nz_json_get_string (h->priv, "namespace"), bulk->ns) != 0
          || nz_json_get_string (h->priv, "object") == NULL
          || !g_hash_table_contains (released, nz_json_get_string (h->priv, "object")))
        continue;
      if (!nz_handle_remove_dir (h, &rm))
        {
          g_printerr ("namzu: warning: sandbox '%s' was released, but its handle is kept: %s\n",
                      h->id, rm->message);
          continue;
        }
      if (!nz_state_bury (h->id, &rm))
        g_debug ("sandbox %s: no tombstone: %s", h->id, rm->message);
    }
}

JsonObject *
nz_kube_release_task_sandboxes (const NzKubeBulkFlags *flags, const char *selector, GError **error)
{
  g_autoptr (NzKubeBulk) bulk = NULL;
  g_autofree char *esc = NULL;
  g_autofree char *query = NULL;
  g_autofree char *what = NULL;
  g_autoptr (JsonObject) l = NULL;
  g_autoptr (GHashTable) released = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr (GString) failed = g_string_new (NULL);
  JsonArray *items = NULL;
  JsonArray *names = json_array_new ();
  JsonObject *out = json_object_new ();
  GError *local = NULL;
  guint n;

  json_object_set_array_member (out, "names", names);
  if (nz_kube_selector_is_blank (selector))
    {
      json_object_unref (out);
      return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                        "releaseKubernetesTaskSandboxes: an empty label selector would release "
                        "every claim of the namespace; name the labels (e.g. team=a,run=42)"),
              NULL);
    }
  bulk = bulk_open (flags, "--selector", error);
  if (bulk == NULL)
    {
      json_object_unref (out);
      return NULL;
    }
  esc = g_uri_escape_string (selector, NULL, FALSE);
  query = g_strconcat ("labelSelector=", esc, NULL);
  what = g_strdup_printf ("release of the claims of %s matching '%s'", bulk->ns, selector);
  l = list (bulk, NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, "sandboxclaims", query, &items, &local);
  if (l == NULL)
    {
      json_object_unref (out);
      /* The API server parses the selector (kubectl's grammar); its 400 is a usage error. */
      if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED)
          && strstr (local->message, ": HTTP 400 ") != NULL)
        {
          nz_throw (error, NZ_ERROR_INVALID_ARGS,
                    "--selector '%s': the API server refused the label selector (%s)", selector,
                    local->message);
          g_error_free (local);
          return NULL;
        }
      return (fail (error, local, what), NULL);
    }
  n = json_array_get_length (items);
  /* Every item named before anything is deleted: a malformed List releases nothing. */
  for (guint i = 0; i < n; i++)
    if (item_string (items, i, "metadata", "name") == NULL
        || *item_string (items, i, "metadata", "name") == '\0')
      {
        json_object_unref (out);
        return (nz_throw (error, NZ_ERROR_PROTOCOL, "%s: item %u of the List has no name", what, i),
                NULL);
      }
  /* One after another on one connection (the reference sends them at once). */
  for (guint i = 0; i < n; i++)
    {
      const char *name = item_string (items, i, "metadata", "name");
      g_autofree char *path
          = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION,
                          bulk->ns, "sandboxclaims", name);
      g_autoptr (GError) del = NULL;

      /* spec D.6.3: 404/410 count as done. */
      if (nz_kube_delete (bulk->client, path, NULL, &del)
          || g_error_matches (del, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
        {
          json_array_add_string_element (names, name);
          g_hash_table_add (released, (gpointer)name);
        }
      else
        g_string_append_printf (failed, "%s%s", failed->len > 0 ? "; " : "", del->message);
    }
  json_object_set_int_member (out, "deleted", json_array_get_length (names));
  forget_handles (bulk, released);
  if (failed->len > 0)
    {
      g_autofree char *done = nz_json_to_string (json_object_get_member (out, "names"), NULL);

      json_object_unref (out);
      return (nz_throw (error, NZ_ERROR_FAILED, "%s: %u of %u released (%s); not released: %s",
                        what, (guint)g_hash_table_size (released), n, done, failed->str),
              NULL);
    }
  return out;
}

static gint64
int_at (JsonObject *o, const char *a, const char *b)
{
  double v = 0;

  if (!nz_json_get_number (nz_json_get_object (o, a), b, &v) || !(v >= 0))
    return 0;
  return (gint64)MIN (v, (double)G_MAXINT32);
}

JsonObject *
nz_kube_read_task_capacity (const NzKubeBulkFlags *flags, GError **error)
{
  g_autoptr (NzKubeBulk) bulk = bulk_open (flags, "--capacity", error);
  const char *warm_pool;
  g_autofree char *path = NULL;
  g_autofree char *what = NULL;
  g_autoptr (JsonObject) pool = NULL;
  g_autoptr (JsonObject) claims = NULL;
  g_autoptr (JsonObject) pods = NULL;
  JsonArray *items = NULL;
  JsonObject *out;
  GError *local = NULL;
  gint64 bound = 0, pending = 0;

  if (bulk == NULL)
    return NULL;
  warm_pool = nz_kube_options (bulk->opts)->warm_pool;
  if (warm_pool == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "--capacity needs --warm-pool NAME (or backend.warmPoolName in --config)"),
            NULL);
  what = g_strdup_printf ("capacity of warm pool %s/%s", bulk->ns, warm_pool);
  path = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, bulk->ns,
                       "sandboxwarmpools", warm_pool);
  pool = nz_kube_get (bulk->client, path, &local);
  if (pool == NULL)
    return (fail (error, local, what), NULL);
  claims = list (bulk, NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, "sandboxclaims", NULL, &items, &local);
  if (claims == NULL)
    return (fail (error, local, what), NULL);
  for (guint i = 0; i < json_array_get_length (items); i++)
    {
      JsonObject *ref = nz_json_get_object (item_member (items, i, "spec"), "warmPoolRef");

      bound += g_strcmp0 (nz_json_get_string (ref, "name"), warm_pool) == 0;
    }
  /* The server filters by phase; counted again here, so a server that ignores the field
   * selector cannot inflate it. */
  pods = list (bulk, NULL, "pods", "fieldSelector=status.phase%3DPending", &items, &local);
  if (pods == NULL)
    return (fail (error, local, what), NULL);
  for (guint i = 0; i < json_array_get_length (items); i++)
    pending += g_strcmp0 (item_string (items, i, "status", "phase"), "Pending") == 0;
  out = json_object_new ();
  json_object_set_string_member (out, "warmPool", warm_pool);
  json_object_set_int_member (out, "readyReplicas", int_at (pool, "status", "readyReplicas"));
  json_object_set_int_member (out, "replicas", int_at (pool, "spec", "replicas"));
  json_object_set_int_member (out, "claims", bound);
  json_object_set_int_member (out, "pendingPods", pending);
  return out;
}

#else /* a build without the Kubernetes client: refused like the backend */

static JsonObject *
unavailable (const char *verb, GError **error)
{
  if (nz_backend_lookup ("microvm:kubernetes", error) != NULL)
    nz_throw (error, NZ_ERROR_UNSUPPORTED, "%s: not available in this build", verb);
  return NULL;
}

JsonObject *
nz_kube_release_task_sandboxes (const NzKubeBulkFlags *flags, const char *selector, GError **error)
{
  if (nz_kube_selector_is_blank (selector))
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "releaseKubernetesTaskSandboxes: an empty label selector"),
            NULL);
  return unavailable ("--selector", error);
}

JsonObject *
nz_kube_read_task_capacity (const NzKubeBulkFlags *flags, GError **error)
{
  return unavailable ("--capacity", error);
}

#endif
