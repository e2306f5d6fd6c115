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

/* Whether one ports entry can admit TCP @port: another protocol cannot; no port, a named port
 * (it may name the agent's), the number itself or a range over it can. */
static gboolean
port_entry_reaches (JsonNode *e, guint port)
{
  JsonObject *o = JSON_NODE_HOLDS_OBJECT (e) ? json_node_get_object (e) : NULL;
  const char *proto = o != NULL ? nz_json_get_string (o, "protocol") : NULL;
  JsonNode *p = o != NULL ? json_object_get_member (o, "port") : NULL;
  double v = 0, end = 0;

  if (o == NULL)
    return TRUE; /* unreadable: judged as reaching */
  if (proto != NULL && !g_str_equal (proto, "TCP"))
    return FALSE;
  if (p == NULL || JSON_NODE_HOLDS_NULL (p) || !JSON_NODE_HOLDS_VALUE (p)
      || json_node_get_value_type (p) == G_TYPE_STRING)
    return TRUE;
  v = json_node_get_double (p);
  if (nz_json_get_number (o, "endPort", &end))
    return v <= port && port <= end;
  return v == port;
}

static gboolean
rule_reaches (JsonObject *rule, guint port)
{
  JsonArray *ports = arr_member (rule, "ports");

  if (ports == NULL || json_array_get_length (ports) == 0)
    return TRUE;
  for (guint i = 0; i < json_array_get_length (ports); i++)
    if (port_entry_reaches (json_array_get_element (ports, i), port))
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

gboolean
nz_kube_ingress_check (JsonArray *policies, JsonObject *pod_labels, guint port, GError **error)
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

          if (rule != NULL && rule_reaches (rule, port))
            why = rule_too_wide (rule);
          if (why != NULL)
            return (g_set_error (error, NZ_KUBE_INGRESS_ERROR, NZ_KUBE_INGRESS_ERROR_TOO_WIDE,
                                 "kubernetes: NetworkPolicy %s does not keep the agent port %u "
                                 "private: %s (spec D.9: only pods labelled "
                                 "namzu.ai/component=host may reach it; see "
                                 "deploy/k8s/networkpolicy.yaml, or set backend.ingress: "
                                 "'unverified')",
                                 policy_name (policy), port, why),
                    FALSE);
        }
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
                        GError **error)
{
  g_autofree char *path = nz_kube_path ("networking.k8s.io", "v1", ns, "networkpolicies", NULL);
  g_autoptr (JsonObject) list = nz_kube_get (client, path, error);

  if (list == NULL)
    return FALSE;
  return nz_kube_ingress_check (arr_member (list, "items"), pod_labels, port, error);
}
