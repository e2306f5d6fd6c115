#include "nz-kube-egress.h"

#include <string.h>

#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "nz-kube-error.h"

G_DEFINE_QUARK (nz - kube - egress - error - quark, nz_kube_egress_error)

static gboolean
is_cilium (JsonObject *manifest)
{
  return g_strcmp0 (json_object_get_string_member_with_default (manifest, "kind", ""),
                    "CiliumNetworkPolicy")
         == 0;
}

static const char *
kind_of (JsonObject *manifest)
{
  return is_cilium (manifest) ? "CiliumNetworkPolicy" : "NetworkPolicy";
}

char *
nz_kube_egress_policy_path (JsonObject *manifest)
{
  const char *kind = json_object_get_string_member_with_default (manifest, "kind", "");
  JsonObject *meta = json_object_get_object_member (manifest, "metadata");
  const char *ns, *name;

  if (meta == NULL)
    return NULL;
  ns = json_object_get_string_member_with_default (meta, "namespace", NULL);
  name = json_object_get_string_member_with_default (meta, "name", NULL);
  if (ns == NULL || name == NULL)
    return NULL;
  if (g_str_equal (kind, "NetworkPolicy"))
    return nz_kube_path ("networking.k8s.io", "v1", ns, "networkpolicies", name);
  if (g_str_equal (kind, "CiliumNetworkPolicy"))
    return nz_kube_path ("cilium.io", "v2", ns, "ciliumnetworkpolicies", name);
  return NULL;
}

static JsonNode *
member (JsonObject *o, const char *name)
{
  return o != NULL && json_object_has_member (o, name) ? json_object_get_member (o, name) : NULL;
}

static JsonObject *
object_member (JsonObject *o, const char *name)
{
  JsonNode *n = member (o, name);

  return n != NULL && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

static gboolean
nodes_equal (JsonNode *a, JsonNode *b)
{
  if (a == NULL || b == NULL)
    return a == b;
  return json_node_equal (a, b);
}

static gboolean
mismatch (GError **error, JsonObject *expected, const char *path, const char *reason)
{
  g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH,
               "KubernetesEgressPolicyMismatchError: %s %s %s; it must be exactly the "
               "translation of the configured egress policy. Re-apply the manifest the backend "
               "expects (namzu-egress profile --to k8s|cilium prints one) and retry",
               kind_of (expected), path, reason);
  return FALSE;
}

static gboolean
has_owner (JsonArray *actual, JsonNode *want)
{
  for (guint i = 0; actual != NULL && i < json_array_get_length (actual); i++)
    if (json_node_equal (json_array_get_element (actual, i), want))
      return TRUE;
  return FALSE;
}

gboolean
nz_kube_egress_check_applied (JsonObject *expected, JsonObject *actual, const char *path,
                              GError **error)
{
  gboolean cilium = is_cilium (expected);
  const char *sel = cilium ? "endpointSelector" : "podSelector";
  JsonObject *want = object_member (expected, "spec");
  JsonObject *got = object_member (actual, "spec");
  JsonNode *want_owners = member (object_member (expected, "metadata"), "ownerReferences");
  JsonNode *got_owners = member (object_member (actual, "metadata"), "ownerReferences");

  if (got == NULL)
    return mismatch (error, expected, path, "has no spec");
  if (member (got, "specs") != NULL)
    return mismatch (error, expected, path,
                     "carries `specs`, whose rules this check does not read as the policy");
  if (!nodes_equal (member (want, sel), member (got, sel)))
    return mismatch (error, expected, path,
                     cilium ? "selects other endpoints (endpointSelector)"
                            : "selects other pods (podSelector)");
  if (!cilium)
    {
      JsonNode *types = member (got, "policyTypes");
      gboolean egress = FALSE;

      if (types != NULL && JSON_NODE_HOLDS_ARRAY (types))
        for (guint i = 0; i < json_array_get_length (json_node_get_array (types)); i++)
          if (g_strcmp0 (json_array_get_string_element (json_node_get_array (types), i), "Egress")
              == 0)
            egress = TRUE;
      if (!egress)
        return mismatch (error, expected, path, "has no Egress in policyTypes");
    }
  if (!nodes_equal (member (want, "egress"), member (got, "egress")))
    return mismatch (error, expected, path, "has other egress rules");
  /* Cilium: a policy with enableDefaultDeny.egress false only adds; the pods would keep every
   * other destination. (Anything but exactly false leaves the default, deny.) */
  if (cilium)
    {
      JsonNode *deny = member (object_member (got, "enableDefaultDeny"), "egress");

      if (deny != NULL && JSON_NODE_HOLDS_VALUE (deny)
          && json_node_get_value_type (deny) == G_TYPE_BOOLEAN && !json_node_get_boolean (deny))
        return mismatch (error, expected, path,
                         "sets enableDefaultDeny.egress false, so it denies nothing else");
    }
  if (want_owners != NULL && JSON_NODE_HOLDS_ARRAY (want_owners))
    {
      JsonArray *w = json_node_get_array (want_owners);
      JsonArray *g = got_owners != NULL && JSON_NODE_HOLDS_ARRAY (got_owners)
                         ? json_node_get_array (got_owners)
                         : NULL;

      for (guint i = 0; i < json_array_get_length (w); i++)
        if (!has_owner (g, json_array_get_element (w, i)))
          return mismatch (error, expected, path,
                           "lacks an ownerReference the backend expects (or it differs)");
    }
  return TRUE;
}

gboolean
nz_kube_egress_verify_applied (NzKubeClient *client, JsonObject *expected, GError **error)
{
  g_autofree char *path = nz_kube_egress_policy_path (expected);
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonObject) actual = NULL;

  g_return_val_if_fail (path != NULL, FALSE);
  actual = nz_kube_get (client, path, &local);
  if (actual == NULL && g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
    return (g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_NOT_APPLIED,
                         "KubernetesEgressPolicyNotAppliedError: %s %s is not applied; the "
                         "backend never creates it. Apply it (namzu-egress profile --to "
                         "k8s|cilium prints the manifest) before creating sandboxes",
                         kind_of (expected), path),
            FALSE);
  if (actual == NULL)
    return (g_propagate_error (error, g_steal_pointer (&local)), FALSE);
  return nz_kube_egress_check_applied (expected, actual, path, error);
}

JsonObject *
nz_kube_egress_per_sandbox_policy (const char *namespace_, const char *label_key,
                                   gboolean owner_is_claim, const char *owner_name,
                                   const char *owner_uid, const char *const *hosts,
                                   const NzEgressK8sNarrowing *narrowing, GError **error)
{
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) node = NULL;
  g_autofree char *name = NULL;
  JsonObject *owner, *meta;
  JsonArray *owners;

  if (owner_uid == NULL || *owner_uid == '\0')
    return (g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING,
                         "KubernetesOwnerUidMissingError: %s %s in namespace %s has no "
                         "metadata.uid, so no per-sandbox policy can be owned by it; re-read "
                         "the object and retry",
                         owner_is_claim ? "SandboxClaim" : "Sandbox", owner_name, namespace_),
            NULL);
  name = g_strconcat (NZ_KUBE_EGRESS_PER_SANDBOX_PREFIX, owner_uid, NULL);
  json_object_set_string_member (sel, label_key, owner_name);
  node = nz_egress_k8s_translate_narrowed (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hosts,
                                           narrowing, name, namespace_, sel, error);
  if (node == NULL)
    return NULL;
  owner = json_object_new ();
  json_object_set_string_member (
      owner, "apiVersion",
      owner_is_claim ? NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION
                     : NZ_KUBE_SANDBOX_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION);
  json_object_set_string_member (owner, "kind", owner_is_claim ? "SandboxClaim" : "Sandbox");
  json_object_set_string_member (owner, "name", owner_name);
  json_object_set_string_member (owner, "uid", owner_uid);
  owners = json_array_new ();
  json_array_add_object_element (owners, owner);
  meta = json_object_get_object_member (json_node_get_object (node), "metadata");
  json_object_set_array_member (meta, "ownerReferences", owners);
  return json_object_ref (json_node_get_object (node));
}

static const char *
label_of (JsonObject *labels, const char *key)
{
  JsonNode *n = member (labels, key);

  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
             ? json_node_get_string (n)
             : NULL;
}

/* One matchExpressions entry: 1 matches, 0 does not, -1 unreadable. */
static int
expression_matches (JsonNode *e, JsonObject *labels)
{
  JsonObject *o = e != NULL && JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
  const char *key = label_of (o, "key");
  const char *op = label_of (o, "operator");
  JsonNode *vn = member (o, "values");
  JsonArray *values = vn != NULL && JSON_NODE_HOLDS_ARRAY (vn) ? json_node_get_array (vn) : NULL;
  const char *have;
  gboolean in = FALSE;

  if (key == NULL || op == NULL)
    return -1;
  have = label_of (labels, key);
  if (g_str_equal (op, "Exists"))
    return have != NULL;
  if (g_str_equal (op, "DoesNotExist"))
    return have == NULL;
  if (values == NULL || (!g_str_equal (op, "In") && !g_str_equal (op, "NotIn")))
    return -1;
  for (guint i = 0; i < json_array_get_length (values); i++)
    {
      JsonNode *v = json_array_get_element (values, i);

      if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
        return -1;
      if (have != NULL && g_str_equal (json_node_get_string (v), have))
        in = TRUE;
    }
  return g_str_equal (op, "In") ? in : !in;
}

gboolean
nz_kube_egress_selector_matches (JsonObject *selector, JsonObject *labels)
{
  JsonNode *ml = member (selector, "matchLabels");
  JsonNode *me = member (selector, "matchExpressions");

  if (ml != NULL && !JSON_NODE_HOLDS_NULL (ml))
    {
      JsonObjectIter it;
      const char *k;
      JsonNode *v;

      if (!JSON_NODE_HOLDS_OBJECT (ml))
        return TRUE;
      json_object_iter_init (&it, json_node_get_object (ml));
      while (json_object_iter_next (&it, &k, &v))
        {
          const char *have = label_of (labels, k);

          if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
            return TRUE;
          if (have == NULL || !g_str_equal (have, json_node_get_string (v)))
            return FALSE;
        }
    }
  if (me != NULL && !JSON_NODE_HOLDS_NULL (me))
    {
      if (!JSON_NODE_HOLDS_ARRAY (me))
        return TRUE;
      for (guint i = 0; i < json_array_get_length (json_node_get_array (me)); i++)
        {
          int r = expression_matches (json_array_get_element (json_node_get_array (me), i), labels);

          if (r < 0)
            return TRUE;
          if (r == 0)
            return FALSE;
        }
    }
  return TRUE;
}

#define POD_NAMESPACE_KEY "io.kubernetes.pod.namespace"

/* The pod label a Cilium selector key names (without its k8s:/any: source), NULL when it names
 * something the pod's own labels do not show: another source, or a label Cilium derives. */
static const char *
cilium_pod_key (const char *key)
{
  const char *colon = strchr (key, ':');

  if (colon != NULL)
    {
      if (!g_str_has_prefix (key, "k8s:") && !g_str_has_prefix (key, "any:"))
        return NULL;
      key = colon + 1;
    }
  if (g_str_equal (key, POD_NAMESPACE_KEY))
    return key;
  if (g_str_has_prefix (key, "io.cilium.") || g_str_has_prefix (key, "io.kubernetes."))
    return NULL;
  return key;
}

gboolean
nz_kube_egress_endpoint_selector_matches (JsonObject *selector, JsonObject *labels, const char *ns)
{
  g_autoptr (JsonObject) plain = json_object_new ();
  g_autoptr (JsonObject) have = json_object_new ();
  JsonArray *exprs = json_array_new ();
  JsonNode *ml = member (selector, "matchLabels");
  JsonNode *me = member (selector, "matchExpressions");
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  /* Rewritten as matchExpressions on the pod's label keys (a key may appear twice: k8s:app and
   * any:app), then judged like a Kubernetes selector. */
  json_object_set_array_member (plain, "matchExpressions", exprs);
  if (selector == NULL
      || nz_json_unknown_member (selector,
                                 (const char *const[]){ "matchLabels", "matchExpressions", NULL })
             != NULL)
    return TRUE;
  if (ml != NULL && !JSON_NODE_HOLDS_NULL (ml))
    {
      if (!JSON_NODE_HOLDS_OBJECT (ml))
        return TRUE;
      json_object_iter_init (&it, json_node_get_object (ml));
      while (json_object_iter_next (&it, &k, &v))
        {
          const char *key = cilium_pod_key (k);
          JsonObject *e;
          JsonArray *values;

          if (key == NULL)
            continue;
          e = json_object_new ();
          values = json_array_new ();
          json_array_add_element (values, json_node_copy (v));
          json_object_set_string_member (e, "key", key);
          json_object_set_string_member (e, "operator", "In");
          json_object_set_array_member (e, "values", values);
          json_array_add_object_element (exprs, e);
        }
    }
  if (me != NULL && !JSON_NODE_HOLDS_NULL (me))
    {
      if (!JSON_NODE_HOLDS_ARRAY (me))
        return TRUE;
      for (guint i = 0; i < json_array_get_length (json_node_get_array (me)); i++)
        {
          JsonNode *e = json_array_get_element (json_node_get_array (me), i);
          JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
          const char *key = label_of (o, "key");
          JsonObject *copy;
          JsonObjectIter eit;
          const char *ek;
          JsonNode *ev;

          if (key == NULL)
            return TRUE;
          if ((key = cilium_pod_key (key)) == NULL)
            continue;
          /* A new object: json_node_copy would share (and this would rewrite) the policy's. */
          copy = json_object_new ();
          json_object_iter_init (&eit, o);
          while (json_object_iter_next (&eit, &ek, &ev))
            if (!g_str_equal (ek, "key"))
              json_object_set_member (copy, ek, json_node_copy (ev));
          json_object_set_string_member (copy, "key", key);
          json_array_add_object_element (exprs, copy);
        }
    }
  if (labels != NULL)
    {
      json_object_iter_init (&it, labels);
      while (json_object_iter_next (&it, &k, &v))
        json_object_set_member (have, k, json_node_copy (v));
    }
  if (ns != NULL)
    json_object_set_string_member (have, POD_NAMESPACE_KEY, ns);
  return nz_kube_egress_selector_matches (plain, have);
}
