/* The ingress verification of spec D.9 (nz-kube-ingress.h). */
#include "nz-kube-ingress.h"

#include <string.h>

#include "nz-json.h"
#include "nz-kube-egress.h"

G_DEFINE_QUARK (nz - kube - ingress - error - quark, nz_kube_ingress_error)

static JsonObject *
obj_member (JsonObject *o, const char *name)
{
  JsonNode *n = o != NULL ? json_object_get_member (o, name) : NULL;

  return n != NULL && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

static JsonArray *
arr_member (JsonObject *o, const char *name)
{
  JsonNode *n = o != NULL ? json_object_get_member (o, name) : NULL;

  return n != NULL && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
}

static const char *
policy_name (JsonObject *policy)
{
  const char *name = nz_json_get_string (obj_member (policy, "metadata"), "name");

  return name != NULL ? name : "(unnamed)";
}

/* Whether @policy isolates its pods for ingress: Ingress in policyTypes, or no policyTypes
 * (Kubernetes then always includes Ingress). */
static gboolean
has_ingress_type (JsonObject *spec)
{
  JsonNode *n = json_object_get_member (spec, "policyTypes");
  JsonArray *types;

  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (n))
    return FALSE;
  types = json_node_get_array (n);
  for (guint i = 0; i < json_array_get_length (types); i++)
    {
      JsonNode *t = json_array_get_element (types, i);

      if (JSON_NODE_HOLDS_VALUE (t) && json_node_get_value_type (t) == G_TYPE_STRING
          && g_str_equal (json_node_get_string (t), "Ingress"))
        return TRUE;
    }
  return FALSE;
}

/* Whether one ports entry can admit TCP @port: another protocol cannot (a CiliumNetworkPolicy,
 * @cilium, may also say ANY); no port, a named port (it may name the agent's), the number
 * itself or a range over it can, and under @cilium the string of that number or "0" (every
 * port). Unreadable: it can. */
static gboolean
port_entry_reaches (JsonNode *e, guint port, gboolean cilium)
{
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
  const char *proto = o != NULL ? nz_json_get_string (o, "protocol") : NULL;
  JsonNode *p = o != NULL ? json_object_get_member (o, "port") : NULL;
  const char *text = nz_json_node_string (p);
  guint64 n = 0;
  double v = 0, end = 0;

  if (o == NULL)
    return TRUE; /* unreadable: judged as reaching */
  if (proto != NULL && !g_str_equal (proto, "TCP") && !(cilium && g_str_equal (proto, "ANY")))
    return FALSE;
  if (cilium && text != NULL && g_ascii_string_to_unsigned (text, 10, 1, 65535, &n, NULL))
    v = (double)n;
  else if (p == NULL || JSON_NODE_HOLDS_NULL (p) || !JSON_NODE_HOLDS_VALUE (p) || text != NULL)
    return TRUE;
  else
    v = json_node_get_double (p);
  if (nz_json_get_number (o, "endPort", &end))
    return v <= port && port <= end;
  return v == port;
}

/* Whether a rule with @ports (a ports list; none: every port) can admit TCP @port. */
static gboolean
ports_reach (JsonArray *ports, guint port, gboolean cilium)
{
  if (ports == NULL || json_array_get_length (ports) == 0)
    return TRUE;
  for (guint i = 0; i < json_array_get_length (ports); i++)
    if (port_entry_reaches (json_array_get_element (ports, i), port, cilium))
      return TRUE;
  return FALSE;
}

/* Whether every pod @selector selects carries namzu.ai/component=host. */
static gboolean
selects_only_hosts (JsonObject *selector)
{
  JsonObject *ml = obj_member (selector, "matchLabels");
  JsonArray *me = arr_member (selector, "matchExpressions");

  if (g_strcmp0 (nz_json_get_string (ml, NZ_KUBE_HOST_COMPONENT_LABEL_KEY),
                 NZ_KUBE_HOST_COMPONENT_LABEL_VALUE)
      == 0)
    return TRUE;
  for (guint i = 0; me != NULL && i < json_array_get_length (me); i++)
    {
      JsonNode *n = json_array_get_element (me, i);
      JsonObject *e = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      JsonArray *values = arr_member (e, "values");
      JsonNode *v0 = values != NULL && json_array_get_length (values) == 1
                         ? json_array_get_element (values, 0)
                         : NULL;

      if (g_strcmp0 (nz_json_get_string (e, "key"), NZ_KUBE_HOST_COMPONENT_LABEL_KEY) == 0
          && g_strcmp0 (nz_json_get_string (e, "operator"), "In") == 0 && v0 != NULL
          && JSON_NODE_HOLDS_VALUE (v0) && json_node_get_value_type (v0) == G_TYPE_STRING
          && g_str_equal (json_node_get_string (v0), NZ_KUBE_HOST_COMPONENT_LABEL_VALUE))
        return TRUE;
    }
  return FALSE;
}

/* NULL when every peer of @rule is a host pod of this namespace, else why not. */
static const char *
rule_too_wide (JsonObject *rule)
{
  JsonArray *from = arr_member (rule, "from");

  if (from == NULL || json_array_get_length (from) == 0)
    return "an ingress rule with no 'from' admits every peer";
  for (guint i = 0; i < json_array_get_length (from); i++)
    {
      JsonNode *n = json_array_get_element (from, i);
      JsonObject *peer = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      JsonObject *pods = obj_member (peer, "podSelector");

      if (peer == NULL || json_object_has_member (peer, "ipBlock"))
        return "an ingress rule admits an ipBlock";
      if (json_object_has_member (peer, "namespaceSelector"))
        return "an ingress rule admits pods of other namespaces (namespaceSelector)";
      if (pods == NULL || !selects_only_hosts (pods))
        return "an ingress rule admits pods without namzu.ai/component=host";
    }
  return NULL;
}

static gboolean
too_wide (GError **error, const char *kind, const char *name, int specs, guint port,
          const char *why)
{
  g_autofree char *at = specs >= 0 ? g_strdup_printf (" specs[%d]", specs) : NULL;

  g_set_error (error, NZ_KUBE_INGRESS_ERROR, NZ_KUBE_INGRESS_ERROR_TOO_WIDE,
               "kubernetes: %s %s%s does not keep the agent port %u private: %s (spec D.9: only "
               "pods labelled namzu.ai/component=host may reach it; see "
               "deploy/k8s/networkpolicy.yaml, or set backend.ingress: 'unverified')",
               kind, name, at != NULL ? at : "", port, why);
  return FALSE;
}

/* ---- CiliumNetworkPolicies ---- */

#define POD_NAMESPACE_KEY "io.kubernetes.pod.namespace"
/* A selector on namespace labels may reach pods of other namespaces. */
#define NAMESPACE_LABELS_PREFIX "io.cilium.k8s.namespace.labels."

/* @key without a k8s: or any: source prefix (another source is kept whole). */
static const char *
cilium_key (const char *key)
{
  if (g_str_has_prefix (key, "k8s:") || g_str_has_prefix (key, "any:"))
    return key + 4;
  return key;
}

/* Whether a CiliumNetworkPolicy rule can admit TCP @port: no toPorts, or a PortRule whose
 * ports can (none: every port). */
static gboolean
cilium_rule_reaches (JsonObject *rule, guint port)
{
  JsonArray *to_ports = arr_member (rule, "toPorts");

  if (to_ports == NULL || json_array_get_length (to_ports) == 0)
    return TRUE;
  for (guint i = 0; i < json_array_get_length (to_ports); i++)
    {
      JsonNode *n = json_array_get_element (to_ports, i);

      if (ports_reach (JSON_NODE_HOLDS_OBJECT (n) ? arr_member (json_node_get_object (n), "ports")
                                                  : NULL,
                       port, TRUE))
        return TRUE;
    }
  return FALSE;
}

/* NULL when the fromEndpoints selector @n selects only host pods of namespace @ns, else why.
 * Requirements are ANDed, so any the check does not weigh only narrow the selection; one on
 * the namespace other than equality with @ns may widen it. */
static const char *
cilium_peer_too_wide (JsonNode *n, const char *ns)
{
  JsonObject *sel = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
  JsonObject *ml = obj_member (sel, "matchLabels");
  JsonArray *me = arr_member (sel, "matchExpressions");
  gboolean host = FALSE;
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  if (sel == NULL)
    return "a fromEndpoints entry is not an object";
  if ((json_object_has_member (sel, "matchLabels") && ml == NULL)
      || (json_object_has_member (sel, "matchExpressions") && me == NULL)
      || nz_json_unknown_member (sel,
                                 (const char *const[]){ "matchLabels", "matchExpressions", NULL })
             != NULL)
    return "a fromEndpoints entry this check cannot read";
  if (ml != NULL)
    {
      json_object_iter_init (&it, ml);
      while (json_object_iter_next (&it, &k, &v))
        {
          const char *val = nz_json_node_string (v);

          if ((g_str_equal (cilium_key (k), POD_NAMESPACE_KEY) && g_strcmp0 (val, ns) != 0)
              || g_str_has_prefix (cilium_key (k), NAMESPACE_LABELS_PREFIX))
            return "an ingress rule admits endpoints of other namespaces";
          if (g_str_equal (cilium_key (k), NZ_KUBE_HOST_COMPONENT_LABEL_KEY)
              && g_strcmp0 (val, NZ_KUBE_HOST_COMPONENT_LABEL_VALUE) == 0)
            host = TRUE;
        }
    }
  for (guint i = 0; me != NULL && i < json_array_get_length (me); i++)
    {
      JsonNode *en = json_array_get_element (me, i);
      JsonObject *e = JSON_NODE_HOLDS_OBJECT (en) ? json_node_get_object (en) : NULL;
      const char *key = nz_json_get_string (e, "key");
      JsonArray *values = arr_member (e, "values");

      if (key != NULL
          && (g_str_equal (cilium_key (key), POD_NAMESPACE_KEY)
              || g_str_has_prefix (cilium_key (key), NAMESPACE_LABELS_PREFIX)))
        return "an ingress rule admits endpoints of other namespaces";
      if (key != NULL && g_str_equal (cilium_key (key), NZ_KUBE_HOST_COMPONENT_LABEL_KEY)
          && g_strcmp0 (nz_json_get_string (e, "operator"), "In") == 0 && values != NULL
          && json_array_get_length (values) == 1
          && g_strcmp0 (nz_json_node_string (json_array_get_element (values, 0)),
                        NZ_KUBE_HOST_COMPONENT_LABEL_VALUE)
                 == 0)
        host = TRUE;
    }
  return host ? NULL : "an ingress rule admits endpoints without namzu.ai/component=host";
}

/* NULL when the CiliumNetworkPolicy ingress rule @rule admits only host pods of @ns to @port,
 * else why (new). */
static char *
cilium_rule_too_wide (JsonObject *rule, const char *ns, guint port)
{
  JsonArray *from = arr_member (rule, "fromEndpoints");
  const char *k;

  if (json_object_get_size (rule) == 0 || !cilium_rule_reaches (rule, port))
    return NULL; /* {} is Cilium's default deny: it admits nothing */
  if ((k = nz_json_unknown_member (rule, (const char *const[]){ "fromEndpoints", "toPorts", NULL }))
      != NULL)
    return g_strdup_printf ("an ingress rule admits %s, which only host pods may", k);
  if (from == NULL || json_array_get_length (from) == 0)
    return g_strdup ("an ingress rule with no fromEndpoints admits every peer");
  for (guint i = 0; i < json_array_get_length (from); i++)
    {
      const char *why = cilium_peer_too_wide (json_array_get_element (from, i), ns);

      if (why != NULL)
        return g_strdup (why);
    }
  return NULL;
}

/* One CiliumNetworkPolicy rule (`spec`, or `specs[@specs]`) of @name. */
static gboolean
cilium_rule_ok (JsonNode *n, const char *name, int specs, const char *ns, JsonObject *pod_labels,
                guint port, const char **isolating, GError **error)
{
  JsonObject *r = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
  JsonObject *sel = obj_member (r, "endpointSelector");
  JsonNode *ingress = r != NULL ? json_object_get_member (r, "ingress") : NULL;
  JsonObject *dd = obj_member (r, "enableDefaultDeny");
  JsonArray *rules;

  if (r == NULL)
    return too_wide (error, "CiliumNetworkPolicy", name, specs, port, "a rule is not an object");
  /* No endpointSelector (a nodeSelector rule) or one it cannot read: judged as selecting. */
  if (!nz_kube_egress_endpoint_selector_matches (sel, pod_labels, ns))
    return TRUE;
  if (ingress == NULL || JSON_NODE_HOLDS_NULL (ingress))
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (ingress))
    return too_wide (error, "CiliumNetworkPolicy", name, specs, port, "its ingress is not a list");
  if (dd == NULL || nz_json_get_bool (dd, "ingress", TRUE))
    *isolating = *isolating != NULL ? *isolating : name;
  rules = json_node_get_array (ingress);
  for (guint i = 0; i < json_array_get_length (rules); i++)
    {
      JsonNode *rn = json_array_get_element (rules, i);
      g_autofree char *why = JSON_NODE_HOLDS_OBJECT (rn)
                                 ? cilium_rule_too_wide (json_node_get_object (rn), ns, port)
                                 : g_strdup ("an ingress rule is not an object");

      if (why != NULL)
        return too_wide (error, "CiliumNetworkPolicy", name, specs, port, why);
    }
  return TRUE;
}

/* ---- both ---- */

gboolean
nz_kube_ingress_check (JsonArray *policies, JsonArray *cilium_policies, const char *ns,
                       JsonObject *pod_labels, guint port, GError **error)
{
  const char *isolating = NULL;

  for (guint i = 0; policies != NULL && i < json_array_get_length (policies); i++)
    {
      JsonNode *n = json_array_get_element (policies, i);
      JsonObject *policy = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      JsonObject *spec = obj_member (policy, "spec");
      JsonObject *selector = obj_member (spec, "podSelector");
      JsonArray *rules;

      if (spec == NULL || !has_ingress_type (spec)
          || !nz_kube_egress_selector_matches (selector != NULL ? selector : NULL, pod_labels))
        continue;
      isolating = isolating != NULL ? isolating : policy_name (policy);
      rules = arr_member (spec, "ingress");
      for (guint j = 0; rules != NULL && j < json_array_get_length (rules); j++)
        {
          JsonNode *r = json_array_get_element (rules, j);
          JsonObject *rule = JSON_NODE_HOLDS_OBJECT (r) ? json_node_get_object (r) : NULL;
          const char *why = rule != NULL ? NULL : "an ingress rule is not an object";

          if (rule != NULL && ports_reach (arr_member (rule, "ports"), port, FALSE))
            why = rule_too_wide (rule);
          if (why != NULL)
            return too_wide (error, "NetworkPolicy", policy_name (policy), -1, port, why);
        }
    }
  for (guint i = 0; cilium_policies != NULL && i < json_array_get_length (cilium_policies); i++)
    {
      JsonNode *n = json_array_get_element (cilium_policies, i);
      JsonObject *policy = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
      JsonNode *spec = policy != NULL ? json_object_get_member (policy, "spec") : NULL;
      JsonNode *specs = policy != NULL ? json_object_get_member (policy, "specs") : NULL;
      const char *name = policy_name (policy);

      if (policy == NULL)
        return too_wide (error, "CiliumNetworkPolicy", name, -1, port, "it is not an object");
      if (spec != NULL && !JSON_NODE_HOLDS_NULL (spec)
          && !cilium_rule_ok (spec, name, -1, ns, pod_labels, port, &isolating, error))
        return FALSE;
      if (specs != NULL && !JSON_NODE_HOLDS_NULL (specs) && !JSON_NODE_HOLDS_ARRAY (specs))
        return too_wide (error, "CiliumNetworkPolicy", name, -1, port, "its specs is not a list");
      for (guint s = 0; specs != NULL && JSON_NODE_HOLDS_ARRAY (specs)
                        && s < json_array_get_length (json_node_get_array (specs));
           s++)
        if (!cilium_rule_ok (json_array_get_element (json_node_get_array (specs), s), name, (int)s,
                             ns, pod_labels, port, &isolating, error))
          return FALSE;
    }
  if (isolating == NULL)
    return (g_set_error (error, NZ_KUBE_INGRESS_ERROR, NZ_KUBE_INGRESS_ERROR_NOT_ISOLATED,
                         "kubernetes: no NetworkPolicy with Ingress selects the sandbox's pods, "
                         "so their agent port %u is open to every pod of the cluster (spec D.9; "
                         "apply deploy/k8s/networkpolicy.yaml, or set backend.ingress: "
                         "'unverified')",
                         port),
            FALSE);
  return TRUE;
}

gboolean
nz_kube_ingress_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels, guint port,
                        NzEgressK8sEngine engine, GError **error)
{
  g_autofree char *path = nz_kube_path ("networking.k8s.io", "v1", ns, "networkpolicies", NULL);
  g_autofree char *cpath = NULL;
  g_autoptr (JsonObject) list = NULL;
  g_autoptr (JsonObject) clist = NULL;

  g_return_val_if_fail (client != NULL && ns != NULL, FALSE);
  if ((list = nz_kube_get (client, path, error)) == NULL)
    return FALSE;
  if (engine == NZ_EGRESS_K8S_CILIUM)
    {
      cpath = nz_kube_path ("cilium.io", "v2", ns, "ciliumnetworkpolicies", NULL);
      if ((clist = nz_kube_get (client, cpath, error)) == NULL)
        return FALSE;
    }
  return nz_kube_ingress_check (arr_member (list, "items"),
                                clist != NULL ? arr_member (clist, "items") : NULL, ns, pod_labels,
                                port, error);
}
