#include "nz-egress-k8s.h"

#include "nz-allowlist.h"

JsonArray *
nz_egress_cilium_fqdn_entries (const char *entry)
{
  JsonArray *out = json_array_new ();
  JsonObject *o = json_object_new ();

  if (entry[0] == '.')
    {
      JsonObject *pat = json_object_new ();
      g_autofree char *pattern = g_strconcat ("*", entry, NULL);

      json_object_set_string_member (o, "matchName", entry + 1);
      json_array_add_object_element (out, o);
      json_object_set_string_member (pat, "matchPattern", pattern);
      json_array_add_object_element (out, pat);
    }
  else
    {
      json_object_set_string_member (o, "matchName", entry);
      json_array_add_object_element (out, o);
    }
  return out;
}

static JsonObject *
copy_object (JsonObject *src)
{
  JsonObject *dst = json_object_new ();
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  if (src == NULL)
    return dst;
  json_object_iter_init (&it, src);
  while (json_object_iter_next (&it, &k, &v))
    json_object_set_member (dst, k, json_node_copy (v));
  return dst;
}

static JsonObject *
metadata (const char *name, const char *namespace_)
{
  JsonObject *m = json_object_new ();

  json_object_set_string_member (m, "name", name);
  json_object_set_string_member (m, "namespace", namespace_);
  return m;
}

/* CLUSTER_DNS_EGRESS_RULE: deny-all still resolves names, which the kube-dns pods answer. */
static JsonObject *
cluster_dns_rule (void)
{
  JsonObject *rule = json_object_new ();
  JsonArray *to = json_array_new ();
  JsonObject *peer = json_object_new ();
  JsonObject *ns = json_object_new ();
  JsonObject *labels = json_object_new ();
  JsonArray *ports = json_array_new ();
  const char *protos[] = { "UDP", "TCP" };

  json_object_set_string_member (labels, "kubernetes.io/metadata.name", "kube-system");
  json_object_set_object_member (ns, "matchLabels", labels);
  json_object_set_object_member (peer, "namespaceSelector", ns);
  json_array_add_object_element (to, peer);
  json_object_set_array_member (rule, "to", to);
  for (guint i = 0; i < G_N_ELEMENTS (protos); i++)
    {
      JsonObject *p = json_object_new ();

      json_object_set_string_member (p, "protocol", protos[i]);
      json_object_set_int_member (p, "port", 53);
      json_array_add_object_element (ports, p);
    }
  json_object_set_array_member (rule, "ports", ports);
  return rule;
}

JsonNode *
nz_egress_k8s_core_policy (gboolean allow_all, const char *name, const char *namespace_,
                           JsonObject *selector)
{
  JsonObject *root = json_object_new ();
  JsonObject *spec = json_object_new ();
  JsonObject *pod = json_object_new ();
  JsonArray *types = json_array_new ();
  JsonArray *egress = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (root, "apiVersion", "networking.k8s.io/v1");
  json_object_set_string_member (root, "kind", "NetworkPolicy");
  json_object_set_object_member (root, "metadata", metadata (name, namespace_));
  json_object_set_object_member (pod, "matchLabels", copy_object (selector));
  json_object_set_object_member (spec, "podSelector", pod);
  json_array_add_string_element (types, "Egress");
  json_object_set_array_member (spec, "policyTypes", types);
  json_array_add_object_element (egress, allow_all ? json_object_new () : cluster_dns_rule ());
  json_object_set_array_member (spec, "egress", egress);
  json_object_set_object_member (root, "spec", spec);
  json_node_take_object (node, root);
  return node;
}

/* CILIUM_DNS_VISIBILITY_RULE: toFQDNs only learns addresses from DNS answers Cilium's proxy
 * saw, so this rule must come first. */
static JsonObject *
cilium_dns_rule (void)
{
  JsonObject *rule = json_object_new ();
  JsonArray *endpoints = json_array_new ();
  JsonObject *ep = json_object_new ();
  JsonObject *labels = json_object_new ();
  JsonArray *to_ports = json_array_new ();
  JsonObject *tp = json_object_new ();
  JsonArray *ports = json_array_new ();
  JsonObject *port = json_object_new ();
  JsonObject *rules = json_object_new ();
  JsonArray *dns = json_array_new ();
  JsonObject *pattern = json_object_new ();

  json_object_set_string_member (labels, "k8s:io.kubernetes.pod.namespace", "kube-system");
  json_object_set_string_member (labels, "k8s:k8s-app", "kube-dns");
  json_object_set_object_member (ep, "matchLabels", labels);
  json_array_add_object_element (endpoints, ep);
  json_object_set_array_member (rule, "toEndpoints", endpoints);
  json_object_set_string_member (port, "port", "53");
  json_object_set_string_member (port, "protocol", "ANY");
  json_array_add_object_element (ports, port);
  json_object_set_array_member (tp, "ports", ports);
  json_object_set_string_member (pattern, "matchPattern", "*");
  json_array_add_object_element (dns, pattern);
  json_object_set_array_member (rules, "dns", dns);
  json_object_set_object_member (tp, "rules", rules);
  json_array_add_object_element (to_ports, tp);
  json_object_set_array_member (rule, "toPorts", to_ports);
  return rule;
}

static void
append_all (JsonArray *dst, JsonArray *src)
{
  for (guint i = 0; i < json_array_get_length (src); i++)
    json_array_add_element (dst, json_node_copy (json_array_get_element (src, i)));
  json_array_unref (src);
}

JsonNode *
nz_egress_k8s_from_profile (const NzEgressProfile *profile, NzEgressK8sEngine engine,
                            const char *name, const char *namespace_, JsonObject *selector,
                            GError **error)
{
  JsonObject *root, *spec, *ep;
  JsonArray *egress;
  JsonNode *node;

  if (profile->rules->len == 0)
    return nz_egress_k8s_core_policy (FALSE, name, namespace_, selector);
  if (engine != NZ_EGRESS_K8S_CILIUM)
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_UNSUPPORTED, "hosts", "kubernetes",
                                     "needs engine: 'cilium'; core NetworkPolicy cannot allow "
                                     "a hostname"),
            NULL);
  root = json_object_new ();
  spec = json_object_new ();
  ep = json_object_new ();
  egress = json_array_new ();
  json_object_set_string_member (root, "apiVersion", "cilium.io/v2");
  json_object_set_string_member (root, "kind", "CiliumNetworkPolicy");
  json_object_set_object_member (root, "metadata", metadata (name, namespace_));
  json_object_set_object_member (ep, "matchLabels", copy_object (selector));
  json_object_set_object_member (spec, "endpointSelector", ep);
  json_array_add_object_element (egress, cilium_dns_rule ());
  if (!nz_egress_profile_has_ports (profile))
    {
      JsonObject *rule = json_object_new ();
      JsonArray *fqdns = json_array_new ();

      for (guint i = 0; i < profile->rules->len; i++)
        append_all (fqdns, nz_egress_cilium_fqdn_entries (
                               ((NzEgressRule *)profile->rules->pdata[i])->host));
      json_object_set_array_member (rule, "toFQDNs", fqdns);
      json_array_add_object_element (egress, rule);
    }
  else
    /* One rule per profile rule, so Cilium unions a host's ports as the proxy does. */
    for (guint i = 0; i < profile->rules->len; i++)
      {
        NzEgressRule *r = profile->rules->pdata[i];
        JsonObject *rule = json_object_new ();

        json_object_set_array_member (rule, "toFQDNs", nz_egress_cilium_fqdn_entries (r->host));
        if (r->ports != NULL)
          {
            JsonArray *to_ports = json_array_new ();
            JsonObject *tp = json_object_new ();
            JsonArray *ports = json_array_new ();

            for (guint k = 0; k < r->ports->len; k++)
              {
                JsonObject *po = json_object_new ();
                g_autofree char *s = g_strdup_printf ("%u", g_array_index (r->ports, guint16, k));

                json_object_set_string_member (po, "port", s);
                json_object_set_string_member (po, "protocol", "TCP");
                json_array_add_object_element (ports, po);
              }
            json_object_set_array_member (tp, "ports", ports);
            json_array_add_object_element (to_ports, tp);
            json_object_set_array_member (rule, "toPorts", to_ports);
          }
        json_array_add_object_element (egress, rule);
      }
  json_object_set_array_member (spec, "egress", egress);
  json_object_set_object_member (root, "spec", spec);
  node = json_node_new (JSON_NODE_OBJECT);
  json_node_take_object (node, root);
  return node;
}
