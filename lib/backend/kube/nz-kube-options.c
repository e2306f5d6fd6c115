/* microvm:kubernetes's keys of the reference config's backend section (spec D.4). */
#include "nz-kube-options.h"

#include <string.h>

#include "nz-backend-config.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"

const char *const nz_kube_config_keys[] = {
  "access",
  "kubeconfig",
  "context",
  "namespace",
  "sandboxTemplateName",
  "warmPoolName",
  "agentPort",
  "agentAddress",
  "readyPollIntervalMs",
  "readyTimeoutMs",
  "claimTtlSeconds",
  "runtimeClassName",
  "egress",
  "ingress",
  "apiRequestTimeoutMs",
  "streamHeartbeatMs",
  "claimLabels",
  /* namzu's own: a workspace (spec D.8) instead of a task sandbox */
  "workspaceId",
  "holderEpoch",
  "refreshPodTemplate",
  NULL,
};

/* The explicit access's token is a secret: wiped before it is freed. */
static void
wipe_free (char *secret)
{
  if (secret != NULL)
    explicit_bzero (secret, strlen (secret));
  g_free (secret);
}

static NzKubeOptions *
kube_options_new (void)
{
  NzKubeOptions *k = g_new0 (NzKubeOptions, 1);

  k->heartbeat_ms = -1;
  k->holder_epoch = -1;
  return k;
}

static void
kube_options_free (gpointer data)
{
  NzKubeOptions *k = data;

  g_free (k->kubeconfig);
  g_free (k->context);
  g_free (k->server);
  g_free (k->ca_pem);
  wipe_free (k->token);
  g_free (k->namespace);
  g_free (k->template_name);
  g_free (k->warm_pool);
  g_free (k->workspace_id);
  g_free (k->runtime_class);
  g_clear_pointer (&k->claim_labels, json_object_unref);
  g_clear_pointer (&k->egress, json_object_unref);
  g_free (k);
}

const NzKubeOptions *
nz_kube_options (const NzCreateOptions *opts)
{
  static gsize defaults;

  if (opts->backend_opts != NULL && g_strcmp0 (opts->backend_opts_for, NZ_KUBE_OPTIONS_FOR) == 0)
    return opts->backend_opts;
  if (g_once_init_enter (&defaults))
    g_once_init_leave (&defaults, (gsize)kube_options_new ());
  return (const NzKubeOptions *)defaults;
}

static NzKubeOptions *
kube_options_ensure (NzCreateOptions *opts)
{
  if (opts->backend_opts == NULL)
    {
      opts->backend_opts = kube_options_new ();
      opts->backend_opts_free = kube_options_free;
      opts->backend_opts_for = NZ_KUBE_OPTIONS_FOR;
    }
  g_return_val_if_fail (g_strcmp0 (opts->backend_opts_for, NZ_KUBE_OPTIONS_FOR) == 0, NULL);
  return opts->backend_opts;
}

static gboolean
is_string (JsonNode *n)
{
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING;
}

/* A non-empty string member into *@into (replacing it); refused naming backend.<member>. */
static void
string_into (JsonObject *b, const char *member, char **into, GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, member);

  if (n == NULL)
    return;
  if (!is_string (n) || *json_node_get_string (n) == '\0')
    {
      nz_config_refuse (reasons, "backend.%s: must be a non-empty string", member);
      return;
    }
  g_free (*into);
  *into = g_strdup (json_node_get_string (n));
}

/* A Kubernetes object name (DNS-1123 subdomain): refused rather than escaped into a path. */
static gboolean
is_dns1123_subdomain (const char *s)
{
  gsize n = strlen (s);

  if (n == 0 || n > 253 || !g_ascii_isalnum (s[0]) || !g_ascii_isalnum (s[n - 1]))
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_islower (s[i]) || g_ascii_isdigit (s[i]) || s[i] == '-' || s[i] == '.'))
      return FALSE;
  return TRUE;
}

static void
name_into (JsonObject *b, const char *member, char **into, GPtrArray *reasons)
{
  g_autofree char *v = NULL;

  string_into (b, member, &v, reasons);
  if (v == NULL)
    return;
  if (!is_dns1123_subdomain (v))
    {
      nz_config_refuse (reasons,
                        "backend.%s: '%s' is not a Kubernetes object name (lowercase "
                        "letters, digits, '-' and '.', at most 253)",
                        member, v);
      return;
    }
  g_free (*into);
  *into = g_steal_pointer (&v);
}

/* A label key or value as Kubernetes accepts it (prefix/name, each part checked loosely:
 * the API server has the last word; here only what could break a selector or a path). */
static gboolean
is_label_text (const char *s, gsize max)
{
  gsize n = strlen (s);

  if (n > max)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_isalnum (s[i]) || s[i] == '-' || s[i] == '_' || s[i] == '.' || s[i] == '/'))
      return FALSE;
  return TRUE;
}

static void
parse_access (JsonObject *b, NzKubeOptions *k, GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, "access");
  JsonObject *a;
  JsonNode *ic;

  if (n == NULL)
    return;
  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      nz_config_refuse (reasons, "backend.access: must be {inCluster: true} or {server, ca?, "
                                 "token}");
      return;
    }
  a = json_node_get_object (n);
  ic = json_object_get_member (a, "inCluster");
  if (ic != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (ic) || json_node_get_value_type (ic) != G_TYPE_BOOLEAN
          || !json_node_get_boolean (ic) || json_object_get_size (a) != 1)
        nz_config_refuse (reasons, "backend.access.inCluster: must be true, alone");
      else
        k->access_kind = NZ_KUBE_ACCESS_IN_CLUSTER;
      return;
    }
  if (json_object_has_member (a, "getToken"))
    {
      nz_config_refuse (reasons, "backend.access.getToken: takes a function and cannot be "
                                 "written in a JSON config; use token, or a kubeconfig (its exec "
                                 "plugin runs a command for the token)");
      return;
    }
  for (GList *l = json_object_get_members (a), *m = l; m != NULL || (g_list_free (l), FALSE);
       m = m->next)
    if (strcmp (m->data, "server") != 0 && strcmp (m->data, "ca") != 0
        && strcmp (m->data, "token") != 0)
      nz_config_refuse (reasons, "backend.access.%s: unknown field", (const char *)m->data);
  if (!is_string (json_object_get_member (a, "server"))
      || !g_str_has_prefix (json_object_get_string_member (a, "server"), "https://"))
    nz_config_refuse (reasons, "backend.access.server: must be an https:// URL");
  else if (!is_string (json_object_get_member (a, "token"))
           || *json_object_get_string_member (a, "token") == '\0')
    nz_config_refuse (reasons, "backend.access.token: must be a non-empty string (the bearer "
                               "token)");
  else if (json_object_has_member (a, "ca") && !is_string (json_object_get_member (a, "ca")))
    nz_config_refuse (reasons, "backend.access.ca: must be the CA certificate in PEM");
  else
    {
      k->access_kind = NZ_KUBE_ACCESS_EXPLICIT;
      g_free (k->server);
      k->server = g_strdup (json_object_get_string_member (a, "server"));
      g_free (k->ca_pem);
      k->ca_pem = g_strdup (nz_json_get_string (a, "ca"));
      wipe_free (k->token);
      k->token = g_strdup (json_object_get_string_member (a, "token"));
    }
}

static guint
ms_member (JsonObject *b, const char *member, gint64 floor, GPtrArray *reasons)
{
  g_autofree char *field = g_strconcat ("backend.", member, NULL);
  gint64 v = nz_config_positive_int (reasons, b, member, field, G_MAXINT32);

  if (v > 0 && v < floor)
    {
      nz_config_refuse (reasons, "%s: must be at least %" G_GINT64_FORMAT, field, floor);
      return 0;
    }
  return (guint)v;
}

/* @member, when present, a JSON number that is a non-negative safe integer into *@into; else
 * refused with @refusal. */
static void
count_into (JsonObject *b, const char *member, gint64 *into, const char *refusal,
            GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, member);
  double d;

  if (n == NULL)
    return;
  d = JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) != G_TYPE_STRING
              && json_node_get_value_type (n) != G_TYPE_BOOLEAN
          ? json_node_get_double (n)
          : -1;
  if (!nz_is_safe_integer (d) || d < 0)
    nz_config_refuse (reasons, "%s", refusal);
  else
    *into = (gint64)d;
}

void
nz_kube_parse_config (JsonObject *b, NzCreateOptions *opts, GPtrArray *reasons)
{
  NzKubeOptions *k = kube_options_ensure (opts);
  g_autofree char *addr = NULL;
  g_autofree char *ingress = NULL;
  JsonNode *n;
  gint64 v;

  parse_access (b, k, reasons);
  string_into (b, "kubeconfig", &k->kubeconfig, reasons);
  string_into (b, "context", &k->context, reasons);
  if ((k->kubeconfig != NULL || k->context != NULL) && k->access_kind != NZ_KUBE_ACCESS_KUBECONFIG)
    nz_config_refuse (reasons, "backend.access: a kubeconfig or context and an explicit access "
                               "are two ways to reach a cluster; name one");
  name_into (b, "namespace", &k->namespace, reasons);
  name_into (b, "sandboxTemplateName", &k->template_name, reasons);
  name_into (b, "warmPoolName", &k->warm_pool, reasons);
  name_into (b, "runtimeClassName", &k->runtime_class, reasons);
  v = nz_config_positive_int (reasons, b, "agentPort", "backend.agentPort", 65535);
  if (v > 0)
    k->agent_port = (guint)v;
  string_into (b, "agentAddress", &addr, reasons);
  if (addr != NULL && strcmp (addr, "service") != 0 && strcmp (addr, "pod-ip") != 0)
    nz_config_refuse (reasons, "backend.agentAddress: must be 'service' or 'pod-ip'");
  else if (addr != NULL)
    k->pod_ip = strcmp (addr, "pod-ip") == 0;
  if (json_object_has_member (b, "readyPollIntervalMs"))
    k->ready_poll_ms = ms_member (b, "readyPollIntervalMs", 1, reasons);
  if (json_object_has_member (b, "readyTimeoutMs"))
    k->ready_timeout_ms = ms_member (b, "readyTimeoutMs", 1, reasons);
  /* spec D.4: apiRequestTimeoutMs has a floor of 1000; below it is raised, as the reference
   * does (nz_kube_client_new), so only its type is judged here. */
  if (json_object_has_member (b, "apiRequestTimeoutMs"))
    k->api_timeout_ms = ms_member (b, "apiRequestTimeoutMs", 1, reasons);
  v = nz_config_positive_int (reasons, b, "claimTtlSeconds", "backend.claimTtlSeconds", G_MAXINT32);
  if (v > 0)
    k->claim_ttl_s = v;
  /* spec D.4: a non-negative safe integer, else refused naming streamHeartbeatMs. */
  count_into (b, "streamHeartbeatMs", &k->heartbeat_ms,
              "backend.streamHeartbeatMs: streamHeartbeatMs must be a non-negative safe "
              "integer (0 turns heartbeats off)",
              reasons);
  string_into (b, "ingress", &ingress, reasons);
  if (ingress != NULL && strcmp (ingress, "unverified") != 0)
    nz_config_refuse (reasons, "backend.ingress: the only value is 'unverified' (leave it out "
                               "to verify)");
  else if (ingress != NULL)
    k->ingress_unverified = TRUE;
  n = json_object_get_member (b, "claimLabels");
  if (n != NULL)
    {
      JsonObject *labels = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      g_autoptr (GList) keys = labels != NULL ? json_object_get_members (labels) : NULL;
      gboolean ok = labels != NULL;

      if (labels == NULL)
        nz_config_refuse (reasons, "backend.claimLabels: must be an object of strings");
      for (GList *l = keys; l != NULL; l = l->next)
        {
          JsonNode *e = json_object_get_member (labels, l->data);

          if (!is_string (e) || !is_label_text (l->data, 316) || *(char *)l->data == '\0'
              || !is_label_text (json_node_get_string (e), 63))
            {
              nz_config_refuse (reasons,
                                "backend.claimLabels.%s: must be a label key with a "
                                "string value (letters, digits, '-', '_', '.')",
                                (const char *)l->data);
              ok = FALSE;
            }
        }
      if (ok)
        {
          g_clear_pointer (&k->claim_labels, json_object_unref);
          k->claim_labels = json_object_ref (labels);
        }
    }
  string_into (b, "workspaceId", &k->workspace_id, reasons);
  /* spec D.8.3: the epoch is a non-negative safe integer. */
  count_into (b, "holderEpoch", &k->holder_epoch,
              "backend.holderEpoch: must be a non-negative safe integer", reasons);
  n = json_object_get_member (b, "refreshPodTemplate");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        nz_config_refuse (reasons, "backend.refreshPodTemplate: must be true or false");
      else
        k->refresh_pod_template = json_node_get_boolean (n);
    }
  n = json_object_get_member (b, "egress");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_OBJECT (n))
        nz_config_refuse (reasons, "backend.egress: must be an object ({policy, engine?, ...})");
      else
        {
          g_clear_pointer (&k->egress, json_object_unref);
          k->egress = json_object_ref (json_node_get_object (n));
        }
    }
}

JsonObject *
nz_kube_access_spec (const NzKubeOptions *k)
{
  JsonObject *o = json_object_new ();

  switch (k->access_kind)
    {
    case NZ_KUBE_ACCESS_IN_CLUSTER:
      json_object_set_string_member (o, "kind", "in-cluster");
      break;
    case NZ_KUBE_ACCESS_EXPLICIT:
      json_object_set_string_member (o, "kind", "explicit");
      json_object_set_string_member (o, "server", k->server);
      if (k->ca_pem != NULL)
        json_object_set_string_member (o, "ca", k->ca_pem);
      json_object_set_string_member (o, "token", k->token);
      break;
    case NZ_KUBE_ACCESS_KUBECONFIG:
    default:
      json_object_set_string_member (o, "kind", "kubeconfig");
      if (k->kubeconfig != NULL)
        {
          g_autofree char *abs = g_canonicalize_filename (k->kubeconfig, NULL);

          json_object_set_string_member (o, "kubeconfig", abs);
        }
      if (k->context != NULL)
        json_object_set_string_member (o, "context", k->context);
      break;
    }
  return o;
}

NzKubeAccess *
nz_kube_access_open (JsonObject *spec, GError **error)
{
  const char *kind = nz_json_get_string (spec, "kind");

  if (g_strcmp0 (kind, "in-cluster") == 0)
    return nz_kube_access_in_cluster (error);
  if (g_strcmp0 (kind, "explicit") == 0)
    return nz_kube_access_new_explicit (nz_json_get_string (spec, "server"),
                                        nz_json_get_string (spec, "ca"),
                                        nz_json_get_string (spec, "token"), error);
  if (g_strcmp0 (kind, "kubeconfig") == 0)
    return nz_kube_access_from_kubeconfig (nz_json_get_string (spec, "kubeconfig"),
                                           nz_json_get_string (spec, "context"), error);
  return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "the handle names no cluster access"), NULL);
}
