/* microvm:kubernetes: the network proofs of a create and their caches (nz-kube-net.h). */
#include "nz-kube-net.h"

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-kube-cache.h"
#include "nz-kube-egress.h"
#include "nz-kube-error.h"
#include "nz-kube-ingress.h"
#include "nz-kube-union.h"
#include "nz-kube-workspace.h"

void
nz_kube_net_clear (NzKubeNet *n)
{
  g_clear_pointer (&n->egress, nz_egress_k8s_config_free);
  g_clear_pointer (&n->expected, json_object_unref);
}

NzEgressK8sConfig *
nz_kube_net_egress_config (const NzKubeOptions *k, GError **error)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  GError *local = NULL;
  NzEgressK8sConfig *c;

  json_node_set_object (node, k->egress);
  c = nz_egress_k8s_config_parse (node, &local);
  if (c == NULL)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "backend.egress: %s", local->message);
      g_error_free (local);
    }
  return c;
}

static char *
canonical (JsonObject *o)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  if (o == NULL)
    return g_strdup ("null");
  json_node_set_object (node, o);
  return nz_kube_canonical_json (node);
}

/* Everything a verdict depends on besides the cluster's state: the API server, the namespace,
 * the pods' labels, the translation judged against, the agent port and the engine. */
static char *
cache_key (NzKubeNet *n, JsonObject *labels)
{
  g_autofree char *l = canonical (labels);
  g_autofree char *e = canonical (n->expected);

  return g_strdup_printf ("%s\n%s\n%s\n%s\n%u\n%d", nz_kube_client_get_access (n->client)->server,
                          n->ns, l, e,
                          n->k->agent_port != 0 ? n->k->agent_port : NZ_KUBE_AGENT_PORT_DEFAULT,
                          n->egress != NULL ? (int)n->egress->engine : -1);
}

/* A failure of the lib/kube checks, into the backend's domain with @prefix. Always FALSE. */
static gboolean
fail (GError **error, GError *local, const char *prefix)
{
  nz_kube_error_convert (&local);
  if (prefix != NULL)
    g_prefix_error (&local, "%s: ", prefix);
  g_propagate_error (error, local);
  return FALSE;
}

gboolean
nz_kube_net_begin (NzKubeNet *n, NzKubeClient *client, const NzKubeOptions *k, const char *ns,
                   const char *tpl, gboolean memo, GError **error)
{
  g_autoptr (JsonObject) selector = NULL;
  g_autoptr (JsonNode) expected = NULL;
  g_autofree char *name = NULL;
  NzEgressK8sConfig *c;

  *n = (NzKubeNet){ .client = client, .k = k, .ns = ns, .memo = memo };
  if (k->egress == NULL)
    return TRUE;
  if ((c = n->egress = nz_kube_net_egress_config (k, error)) == NULL)
    return FALSE;
  selector = nz_egress_k8s_selector (c, tpl);
  name = c->network_policy_name != NULL
             ? g_strdup (c->network_policy_name)
             : nz_egress_k8s_default_policy_name (tpl, c->profile, error);
  if (name == NULL)
    return FALSE;
  expected = nz_egress_k8s_translate_narrowed (
      c->kind, c->engine, (const char *const *)c->except_cidrs,
      (const char *const *)c->allowed_hosts, c->narrowing, name, ns, selector, error);
  if (expected == NULL)
    return FALSE;
  n->expected = json_node_dup_object (expected);
  return TRUE;
}

gboolean
nz_kube_net_verify_named (NzKubeNet *n, GError **error)
{
  g_autofree char *key = NULL;
  GError *local = NULL;

  if (n->expected == NULL)
    return TRUE;
  key = cache_key (n, NULL);
  if (nz_kube_cache_fresh ("egress-named", key))
    return TRUE;
  if (!nz_kube_egress_verify_applied (n->client, n->expected, &local))
    return fail (error, local, "backend.egress");
  nz_kube_cache_note ("egress-named", key);
  return TRUE;
}

gboolean
nz_kube_net_pods_ok (NzKubeNet *n, JsonObject *labels, GError **error)
{
  g_autoptr (JsonObject) none = json_object_new ();
  g_autofree char *key = NULL;
  JsonObject *l = labels != NULL ? labels : none;
  NzEgressK8sEngine engine = n->egress != NULL ? n->egress->engine : NZ_EGRESS_K8S_CORE;
  GError *local = NULL;

  if (n->memo)
    key = cache_key (n, l);
  if (!n->k->ingress_unverified && !(n->memo && nz_kube_cache_fresh ("ingress", key)))
    {
      if (!nz_kube_ingress_verify (n->client, n->ns, l,
                                   n->k->agent_port != 0 ? n->k->agent_port
                                                         : NZ_KUBE_AGENT_PORT_DEFAULT,
                                   engine, &local))
        return fail (error, local, NULL);
      if (n->memo)
        nz_kube_cache_note ("ingress", key);
    }
  if (n->egress == NULL || n->egress->named_object_only
      || (n->memo && nz_kube_cache_fresh ("egress-union", key)))
    return TRUE;
  if (!nz_kube_union_verify (n->client, n->ns, l, n->expected, engine, &local))
    return fail (error, local, NULL);
  if (n->memo)
    nz_kube_cache_note ("egress-union", key);
  return TRUE;
}
