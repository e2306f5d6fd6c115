#include "nz-egress-k8s.h"

#include "nz-allowlist.h"
#include "nz-json.h"

#include <gio/gio.h>
#include <string.h>

#define POLICY_CONFIG_ERROR "KubernetesEgressPolicyConfigError"

/* D.10.1's kind names, in NzEgressK8sKind's order. */
static const char *const kind_names[]
    = { "deny-all", "no-network", "public-internet", "allow-all", "static", NULL };

static gboolean config_error (GError **error, const char *klass, const char *field, const char *fmt,
                              ...) G_GNUC_PRINTF (4, 5);

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

/* KUBE_DNS_EGRESS_RULE: CLUSTER_DNS_EGRESS_RULE narrowed to the kube-dns pods. */
static JsonObject *
kube_dns_rule (void)
{
  JsonObject *rule = cluster_dns_rule ();
  JsonObject *peer = json_array_get_object_element (json_object_get_array_member (rule, "to"), 0);
  JsonObject *pod = json_object_new ();
  JsonObject *labels = json_object_new ();

  json_object_set_string_member (labels, "k8s-app", "kube-dns");
  json_object_set_object_member (pod, "matchLabels", labels);
  json_object_set_object_member (peer, "podSelector", pod);
  return rule;
}

static JsonNode *
core_manifest (JsonArray *egress, const char *name, const char *namespace_, JsonObject *selector)
{
  JsonObject *root = json_object_new ();
  JsonObject *spec = json_object_new ();
  JsonObject *pod = json_object_new ();
  JsonArray *types = json_array_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (root, "apiVersion", "networking.k8s.io/v1");
  json_object_set_string_member (root, "kind", "NetworkPolicy");
  json_object_set_object_member (root, "metadata", metadata (name, namespace_));
  json_object_set_object_member (pod, "matchLabels", copy_object (selector));
  json_object_set_object_member (spec, "podSelector", pod);
  json_array_add_string_element (types, "Egress");
  json_object_set_array_member (spec, "policyTypes", types);
  json_object_set_array_member (spec, "egress", egress);
  json_object_set_object_member (root, "spec", spec);
  json_node_take_object (node, root);
  return node;
}

JsonNode *
nz_egress_k8s_core_policy (gboolean allow_all, const char *name, const char *namespace_,
                           JsonObject *selector)
{
  JsonArray *egress = json_array_new ();

  json_array_add_object_element (egress, allow_all ? json_object_new () : cluster_dns_rule ());
  return core_manifest (egress, name, namespace_, selector);
}

/* publicInternetRule: every address but private, link-local, loopback and the cloud metadata
 * ranges; @extra adds the caller's exceptions to the family they belong to. */
static JsonObject *
public_internet_rule (const char *const *extra)
{
  static const char *v4[] = { "10.0.0.0/8",     "172.16.0.0/12", "192.168.0.0/16",  "100.64.0.0/10",
                              "169.254.0.0/16", "127.0.0.0/8",   "168.63.129.16/32" };
  static const char *v6[] = { "fc00::/7", "fe80::/10", "::1/128" };
  JsonObject *rule = json_object_new ();
  JsonArray *to = json_array_new ();

  for (int fam = 0; fam < 2; fam++)
    {
      JsonObject *peer = json_object_new ();
      JsonObject *block = json_object_new ();
      JsonArray *except = json_array_new ();
      const char **base = fam == 0 ? v4 : v6;
      guint n = fam == 0 ? G_N_ELEMENTS (v4) : G_N_ELEMENTS (v6);

      json_object_set_string_member (block, "cidr", fam == 0 ? "0.0.0.0/0" : "::/0");
      for (guint i = 0; i < n; i++)
        json_array_add_string_element (except, base[i]);
      for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
        if ((strchr (extra[i], ':') != NULL) == (fam == 1))
          json_array_add_string_element (except, extra[i]);
      json_object_set_array_member (block, "except", except);
      json_object_set_object_member (peer, "ipBlock", block);
      json_array_add_object_element (to, peer);
    }
  json_object_set_array_member (rule, "to", to);
  return rule;
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

static gboolean
port_in (GArray *ports, guint16 port)
{
  for (guint i = 0; i < ports->len; i++)
    if (g_array_index (ports, guint16, i) == port)
      return TRUE;
  return FALSE;
}

/* {port, protocol: 'TCP'} for each of @ports (Cilium takes the port as a string); with @tls, only
 * those in it (@in_tls) or only those not in it. Returns a new array. */
static JsonArray *
port_objects (GArray *ports, GArray *tls, gboolean in_tls)
{
  JsonArray *out = json_array_new ();

  for (guint k = 0; k < ports->len; k++)
    {
      guint16 port = g_array_index (ports, guint16, k);
      g_autofree char *s = NULL;
      JsonObject *po;

      if (tls != NULL && port_in (tls, port) != in_tls)
        continue;
      po = json_object_new ();
      s = g_strdup_printf ("%u", port);
      json_object_set_string_member (po, "port", s);
      json_object_set_string_member (po, "protocol", "TCP");
      json_array_add_object_element (out, po);
    }
  return out;
}

static JsonNode *
cilium_manifest (JsonArray *egress, const char *name, const char *namespace_, JsonObject *selector)
{
  JsonObject *root = json_object_new ();
  JsonObject *spec = json_object_new ();
  JsonObject *ep = json_object_new ();
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (root, "apiVersion", "cilium.io/v2");
  json_object_set_string_member (root, "kind", "CiliumNetworkPolicy");
  json_object_set_object_member (root, "metadata", metadata (name, namespace_));
  json_object_set_object_member (ep, "matchLabels", copy_object (selector));
  json_object_set_object_member (spec, "endpointSelector", ep);
  json_object_set_array_member (spec, "egress", egress);
  json_object_set_object_member (root, "spec", spec);
  json_node_take_object (node, root);
  return node;
}

JsonNode *
nz_egress_k8s_from_profile (const NzEgressProfile *profile, NzEgressK8sEngine engine,
                            const char *name, const char *namespace_, JsonObject *selector,
                            GError **error)
{
  JsonArray *egress;

  if (profile->rules->len == 0)
    return nz_egress_k8s_core_policy (FALSE, name, namespace_, selector);
  if (engine != NZ_EGRESS_K8S_CILIUM)
    return (nz_egress_profile_throw (error, NZ_EGRESS_ERROR_UNSUPPORTED, "hosts", "kubernetes",
                                     "needs engine: 'cilium'; core NetworkPolicy cannot allow "
                                     "a hostname"),
            NULL);
  egress = json_array_new ();
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

            json_object_set_array_member (tp, "ports", port_objects (r->ports, NULL, TRUE));
            json_array_add_object_element (to_ports, tp);
            json_object_set_array_member (rule, "toPorts", to_ports);
          }
        json_array_add_object_element (egress, rule);
      }
  return cilium_manifest (egress, name, namespace_, selector);
}

#define K8S_HOST_TAIL                                                                              \
  "Entries are hostnames: 'api.example.com' for one host, '.example.com' for that domain and "     \
  "its subdomains. Nothing was written."

/* Why @host is no usable entry (new), or NULL with *@lower set to its lower-cased form (new).
 * Whitespace or a trailing dot, which the allowlist would normalise away, would reach a manifest
 * verbatim, so they are refused here. */
static char *
k8s_host_reason (const char *host, char **lower)
{
  g_autofree char *down = g_ascii_strdown (host, -1);
  char *norm = NULL;
  char *reason = nz_egress_host_reason (host, &norm);

  if (reason == NULL && !g_str_equal (norm, down))
    reason = g_strdup ("carries whitespace or a trailing dot");
  if (reason != NULL)
    return (g_free (norm), reason);
  *lower = norm;
  return NULL;
}

char *
nz_egress_k8s_host_check (const char *host, GError **error)
{
  char *lower = NULL;
  g_autofree char *reason = NULL;
  g_autofree char *shown = NULL;

  if (host == NULL)
    return (
        g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_INVALID_HOST,
                     "KubernetesNetworkPolicyHostError: the host is not a string. " K8S_HOST_TAIL),
        NULL);
  reason = k8s_host_reason (host, &lower);
  if (reason == NULL)
    return lower;
  shown = g_strescape (host, NULL);
  g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_INVALID_HOST,
               "KubernetesNetworkPolicyHostError: host \"%s\" %s. " K8S_HOST_TAIL, shown, reason);
  return NULL;
}

static gboolean
cidr_ok (const char *cidr)
{
  g_autoptr (GInetAddressMask) m = g_inet_address_mask_new_from_string (cidr, NULL);

  return m != NULL && strchr (cidr, '/') != NULL;
}

static gboolean
narrowing_unsupported (GError **error, const char *field, NzEgressK8sKind kind,
                       NzEgressK8sEngine engine)
{
  g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_UNSUPPORTED,
               "KubernetesEgressNarrowingUnsupportedError: backend.egress.%s narrows the toFQDNs "
               "rules of a static host list under engine 'cilium', and policy kind '%s' with "
               "engine '%s' has none. Set policy.kind to 'static' and egress.engine to 'cilium', "
               "or remove %s; nothing was written",
               field, kind_names[kind], engine == NZ_EGRESS_K8S_CILIUM ? "cilium" : "core", field);
  return FALSE;
}

char **
nz_egress_k8s_narrowing_check_hosts (const NzEgressK8sNarrowing *narrowing,
                                     const char *const *hosts, GError **error)
{
  g_autoptr (GPtrArray) out = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; hosts != NULL && hosts[i] != NULL; i++)
    {
      char *lower = nz_egress_k8s_host_check (hosts[i], error);

      if (lower == NULL)
        return NULL;
      g_ptr_array_add (out, lower);
      if (narrowing != NULL && narrowing->tls_server_names && lower[0] == '.')
        {
          g_autofree char *field = g_strconcat (narrowing->field, ".tlsServerNames", NULL);

          return (config_error (error, POLICY_CONFIG_ERROR, field,
                                "cannot serve the domain entry \"%s\": a TLS server name is one "
                                "exact host (list the hosts one by one, or drop tlsServerNames)",
                                lower),
                  NULL);
        }
    }
  g_ptr_array_add (out, NULL);
  return (char **)g_ptr_array_free (g_steal_pointer (&out), FALSE);
}

static gboolean
narrowing_set (const NzEgressK8sNarrowing *n)
{
  return n != NULL
         && (n->ports != NULL || n->host_ports != NULL || n->dns_names || n->tls_server_names
             || n->tls_ports != NULL);
}

/* The DNS visibility rule answering only the hosts' names (dnsNames): each host as asked, and
 * under each suffix a pod's resolver tries first (its search path: <ns>.svc.<cd>, svc.<cd>,
 * <cd>, then the configured ones). */
static JsonObject *
narrowed_dns_rule (const NzEgressK8sNarrowing *n, const char *const *hosts, const char *namespace_)
{
  JsonObject *rule = cilium_dns_rule ();
  JsonObject *tp
      = json_array_get_object_element (json_object_get_array_member (rule, "toPorts"), 0);
  JsonArray *dns = json_array_new ();
  const char *cd = n->cluster_domain != NULL ? n->cluster_domain : "cluster.local";
  g_autoptr (GPtrArray) suffixes = g_ptr_array_new_with_free_func (g_free);

  g_ptr_array_add (
      suffixes,
      g_strdup_printf ("%s.svc.%s", n->dns_namespace != NULL ? n->dns_namespace : namespace_, cd));
  g_ptr_array_add (suffixes, g_strdup_printf ("svc.%s", cd));
  g_ptr_array_add (suffixes, g_strdup (cd));
  for (guint i = 0; n->search_suffixes != NULL && n->search_suffixes[i] != NULL; i++)
    g_ptr_array_add (suffixes, g_strdup (n->search_suffixes[i]));
  for (guint i = 0; hosts[i] != NULL; i++)
    {
      /* ".example.com" + ".svc.cluster.local" is the domain entry of the suffixed name. */
      append_all (dns, nz_egress_cilium_fqdn_entries (hosts[i]));
      for (guint k = 0; k < suffixes->len; k++)
        {
          g_autofree char *entry = g_strconcat (hosts[i], ".", suffixes->pdata[k], NULL);

          append_all (dns, nz_egress_cilium_fqdn_entries (entry));
        }
    }
  json_object_set_array_member (json_object_get_object_member (tp, "rules"), "dns", dns);
  return rule;
}

/* One toPorts entry {ports[, serverNames: [@server]]} onto @to_ports; none for an empty @ports,
 * which Cilium would read as every port. Takes @ports. */
static void
add_to_ports (JsonArray *to_ports, JsonArray *ports, const char *server)
{
  JsonObject *tp;

  if (json_array_get_length (ports) == 0)
    {
      json_array_unref (ports);
      return;
    }
  tp = json_object_new ();
  json_object_set_array_member (tp, "ports", ports);
  if (server != NULL)
    {
      JsonArray *names = json_array_new ();

      json_array_add_string_element (names, server);
      json_object_set_array_member (tp, "serverNames", names);
    }
  json_array_add_object_element (to_ports, tp);
}

/* @host's own toFQDNs rule (D.10.5); @lower is its lower-cased form, the hostPorts key. Ports:
 * hostPorts[host] ?? ports ?? (under tlsServerNames) tlsPorts ?? [443], else none. */
static JsonObject *
narrowed_rule (const NzEgressK8sNarrowing *n, const char *host, const char *lower)
{
  const guint16 https = 443;
  g_autoptr (GArray) tls = n->tls_ports != NULL ? g_array_ref (n->tls_ports)
                                                : g_array_new (FALSE, FALSE, sizeof (guint16));
  GArray *ports = n->host_ports != NULL ? g_hash_table_lookup (n->host_ports, lower) : NULL;
  JsonObject *rule = json_object_new ();
  JsonArray *to_ports;

  if (n->tls_ports == NULL)
    g_array_append_val (tls, https);
  if (ports == NULL)
    ports = n->ports;
  if (ports == NULL && n->tls_server_names)
    ports = tls;
  json_object_set_array_member (rule, "toFQDNs", nz_egress_cilium_fqdn_entries (host));
  if (ports == NULL)
    return rule;
  to_ports = json_array_new ();
  if (n->tls_server_names)
    {
      add_to_ports (to_ports, port_objects (ports, tls, TRUE), host);
      add_to_ports (to_ports, port_objects (ports, tls, FALSE), NULL);
    }
  else
    add_to_ports (to_ports, port_objects (ports, NULL, TRUE), NULL);
  json_object_set_array_member (rule, "toPorts", to_ports);
  return rule;
}

JsonNode *
nz_egress_k8s_translate (NzEgressK8sKind kind, NzEgressK8sEngine engine,
                         const char *const *except_cidrs, const char *const *hosts,
                         const char *name, const char *namespace_, JsonObject *selector,
                         GError **error)
{
  return nz_egress_k8s_translate_narrowed (kind, engine, except_cidrs, hosts, NULL, name,
                                           namespace_, selector, error);
}

JsonNode *
nz_egress_k8s_translate_narrowed (NzEgressK8sKind kind, NzEgressK8sEngine engine,
                                  const char *const *except_cidrs, const char *const *hosts,
                                  const NzEgressK8sNarrowing *narrowing, const char *name,
                                  const char *namespace_, JsonObject *selector, GError **error)
{
  g_auto (GStrv) lower = NULL;
  JsonArray *egress, *fqdns;
  JsonObject *rule;

  g_return_val_if_fail (narrowing == NULL || narrowing->field != NULL, NULL);
  if (narrowing != NULL && (kind != NZ_EGRESS_K8S_STATIC || engine != NZ_EGRESS_K8S_CILIUM))
    return (narrowing_unsupported (error, narrowing->field, kind, engine), NULL);
  switch (kind)
    {
    case NZ_EGRESS_K8S_DENY_ALL:
      return nz_egress_k8s_core_policy (FALSE, name, namespace_, selector);
    case NZ_EGRESS_K8S_ALLOW_ALL:
      return nz_egress_k8s_core_policy (TRUE, name, namespace_, selector);
    case NZ_EGRESS_K8S_NO_NETWORK:
      return core_manifest (json_array_new (), name, namespace_, selector);
    case NZ_EGRESS_K8S_PUBLIC_INTERNET:
      for (guint i = 0; except_cidrs != NULL && except_cidrs[i] != NULL; i++)
        if (!cidr_ok (except_cidrs[i]))
          return (g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_CONFIG,
                               "KubernetesEgressPolicyConfigError: exceptCidrs[%u] is not a CIDR "
                               "(write 10.1.0.0/16 or fd00::/8); nothing was written",
                               i),
                  NULL);
      egress = json_array_new ();
      json_array_add_object_element (egress, kube_dns_rule ());
      json_array_add_object_element (egress, public_internet_rule (except_cidrs));
      return core_manifest (egress, name, namespace_, selector);
    case NZ_EGRESS_K8S_STATIC:
    default:
      break;
    }
  if (engine != NZ_EGRESS_K8S_CILIUM)
    return (g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_UNSUPPORTED,
                         "KubernetesUnenforceableEgressPolicyError: egress policy kind 'static' "
                         "needs engine 'cilium'; a core NetworkPolicy cannot allow a hostname. "
                         "Set egress.engine to 'cilium' or use deny-all, no-network, "
                         "public-internet or allow-all"),
            NULL);
  lower = nz_egress_k8s_narrowing_check_hosts (narrowing, hosts, error);
  if (lower == NULL)
    return NULL;
  egress = json_array_new ();
  if (!narrowing_set (narrowing))
    {
      fqdns = json_array_new ();
      for (guint i = 0; lower[i] != NULL; i++)
        append_all (fqdns, nz_egress_cilium_fqdn_entries (hosts[i]));
      rule = json_object_new ();
      json_array_add_object_element (egress, cilium_dns_rule ());
      json_object_set_array_member (rule, "toFQDNs", fqdns);
      json_array_add_object_element (egress, rule);
      return cilium_manifest (egress, name, namespace_, selector);
    }
  /* No host: the narrowed DNS rule would list no name at all, a shape whose meaning to Cilium
   * (nothing, or every name) the spec does not settle; refused rather than guessed. */
  if (lower[0] == NULL)
    return (json_array_unref (egress),
            config_error (error, POLICY_CONFIG_ERROR, narrowing->field,
                          "has no host to narrow (the host list is empty)"),
            NULL);
  json_array_add_object_element (egress, narrowing->dns_names
                                             ? narrowed_dns_rule (narrowing, hosts, namespace_)
                                             : cilium_dns_rule ());
  for (guint i = 0; lower[i] != NULL; i++)
    json_array_add_object_element (egress, narrowed_rule (narrowing, hosts[i], lower[i]));
  return cilium_manifest (egress, name, namespace_, selector);
}

char *
nz_egress_k8s_default_policy_name (const char *tpl, const char *profile, GError **error)
{
  g_autofree char *name = profile != NULL ? g_strdup_printf ("%s-%s-egress", tpl, profile)
                                          : g_strdup_printf ("%s-egress", tpl);

  if (strlen (name) > 253)
    return (g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_CONFIG,
                         "KubernetesEgressPolicyConfigError: networkPolicyName \"%s-…-egress\" "
                         "would be longer than 253 characters; set egress.networkPolicyName",
                         tpl),
            NULL);
  return g_steal_pointer (&name);
}

void
nz_egress_k8s_config_free (NzEgressK8sConfig *config)
{
  if (config == NULL)
    return;
  g_strfreev (config->allowed_hosts);
  g_strfreev (config->except_cidrs);
  g_free (config->network_policy_name);
  g_free (config->profile);
  g_free (config->profile_label_key);
  g_free (config->admission_policy_name);
  g_free (config->admission_policy_binding_name);
  g_free (config->per_sandbox_label_key);
  nz_egress_k8s_narrowing_free (config->narrowing);
  nz_egress_k8s_narrowing_free (config->per_sandbox_narrowing);
  g_free (config);
}

void
nz_egress_k8s_narrowing_free (NzEgressK8sNarrowing *narrowing)
{
  if (narrowing == NULL)
    return;
  g_free (narrowing->field);
  g_clear_pointer (&narrowing->ports, g_array_unref);
  g_clear_pointer (&narrowing->host_ports, g_hash_table_unref);
  g_free (narrowing->dns_namespace);
  g_free (narrowing->cluster_domain);
  g_strfreev (narrowing->search_suffixes);
  g_clear_pointer (&narrowing->tls_ports, g_array_unref);
  g_free (narrowing);
}

#define LABEL_VALUE_RE "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#define LABEL_KEY_RE                                                                               \
  "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"                          \
  "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"

static gboolean
config_error (GError **error, const char *klass, const char *field, const char *fmt, ...)
{
  g_autofree char *reason = NULL;
  va_list ap;

  va_start (ap, fmt);
  reason = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NZ_EGRESS_ERROR, NZ_EGRESS_ERROR_CONFIG,
               "%s: backend.egress.%s %s. Fix the backend configuration; nothing was written.",
               klass, field, reason);
  return FALSE;
}

static gboolean
only_fields (JsonObject *o, const char *const *known, const char *klass, const char *prefix,
             GError **error)
{
  const char *k = nz_json_unknown_member (o, known);

  if (k != NULL)
    {
      g_autofree char *f = g_strdup_printf ("%s%s", prefix, k);
      g_autofree char *shown = g_strescape (k, NULL);

      return config_error (error, klass, f, "is not a known field (\"%s\")", shown);
    }
  return TRUE;
}

/* A string member, or NULL when absent; FALSE when present and not a non-empty string. */
static gboolean
string_field (JsonObject *o, const char *name, const char *klass, const char *prefix, char **out,
              GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  g_autofree char *f = g_strdup_printf ("%s%s", prefix, name);

  if (n == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING
      || *json_node_get_string (n) == '\0')
    return config_error (error, klass, f, "must be a non-empty string");
  *out = g_strdup (json_node_get_string (n));
  return TRUE;
}

/* A DNS name of the search path (clusterDomain, searchSuffixes): it is joined to hosts in
 * matchName entries, so it must be one too. */
#define DNS_NAME_RE "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#define DNS_NAME_REASON "is not a DNS name (labels of a-z, 0-9 and '-' joined by dots)"

static gboolean
dns_name_ok (const char *name)
{
  return strlen (name) <= 253 && g_regex_match_simple (DNS_NAME_RE, name, G_REGEX_CASELESS, 0);
}

typedef enum
{
  LIST_CIDRS,
  LIST_HOSTS, /* nz_egress_k8s_host_check, lower-cased */
  LIST_NAMES, /* dns_name_ok, and not empty: an empty list narrows nothing */
} ListKind;

static gboolean
string_list (JsonObject *o, const char *name, const char *field, ListKind kind, char ***out,
             GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  GPtrArray *list;
  JsonArray *a;

  if (n == NULL)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (n))
    return config_error (error, POLICY_CONFIG_ERROR, field, "must be a list");
  a = json_node_get_array (n);
  if (kind == LIST_NAMES && json_array_get_length (a) == 0)
    return config_error (error, POLICY_CONFIG_ERROR, field, "must not be empty");
  list = g_ptr_array_new_with_free_func (g_free);
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      const char *s = JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_STRING
                          ? json_node_get_string (e)
                          : NULL;
      char *v = kind == LIST_HOSTS ? nz_egress_k8s_host_check (s, error) : g_strdup (s);

      if (v == NULL || (kind == LIST_CIDRS && !cidr_ok (v))
          || (kind == LIST_NAMES && !dns_name_ok (v)))
        {
          g_autofree char *at = g_strdup_printf ("%s[%u]", field, i);

          g_ptr_array_unref (list);
          g_free (v);
          if (kind == LIST_HOSTS)
            return FALSE;
          return config_error (error, POLICY_CONFIG_ERROR, at, "%s",
                               kind == LIST_CIDRS
                                   ? "is not a CIDR (write 203.0.113.0/24 or 2001:db8::/32)"
                                   : DNS_NAME_REASON);
        }
      g_ptr_array_add (list, v);
    }
  g_ptr_array_add (list, NULL);
  *out = (char **)g_ptr_array_free (list, FALSE);
  return TRUE;
}

static gboolean
parse_policy (NzEgressK8sConfig *c, JsonNode *n, GError **error)
{
  static const char *const base[] = { "kind", NULL };
  static const char *const pub[] = { "kind", "exceptCidrs", NULL };
  static const char *const stat[] = { "kind", "allowedHosts", NULL };
  const char *klass = "KubernetesEgressPolicyConfigError";
  g_autofree char *kind = NULL;
  JsonObject *o;

  if (n == NULL || !JSON_NODE_HOLDS_OBJECT (n))
    return config_error (error, klass, "policy", "must be an object like {\"kind\":\"deny-all\"}");
  o = json_node_get_object (n);
  if (!string_field (o, "kind", klass, "policy.", &kind, error))
    return FALSE;
  for (c->kind = 0; kind_names[c->kind] != NULL; c->kind++)
    if (g_strcmp0 (kind, kind_names[c->kind]) == 0)
      break;
  if (kind_names[c->kind] == NULL)
    return config_error (error, klass, "policy.kind",
                         "must be deny-all, no-network, public-internet, allow-all or static");
  if (!only_fields (o,
                    c->kind == NZ_EGRESS_K8S_PUBLIC_INTERNET ? pub
                    : c->kind == NZ_EGRESS_K8S_STATIC        ? stat
                                                             : base,
                    klass, "policy.", error))
    return FALSE;
  if (c->kind == NZ_EGRESS_K8S_STATIC && !json_object_has_member (o, "allowedHosts"))
    return config_error (error, klass, "policy.allowedHosts", "is required for kind static");
  return string_list (o, "exceptCidrs", "policy.exceptCidrs", LIST_CIDRS, &c->except_cidrs, error)
         && string_list (o, "allowedHosts", "policy.allowedHosts", LIST_HOSTS, &c->allowed_hosts,
                         error);
}

/* A list of ports at @field: integers in 1..65535, and not empty, which would narrow to no port
 * (or read as every port). Returns it in *@out (new). */
static gboolean
port_list (JsonNode *n, const char *field, GArray **out, GError **error)
{
  g_autoptr (GArray) ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  JsonArray *a = JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;

  if (a == NULL || json_array_get_length (a) == 0)
    return config_error (error, POLICY_CONFIG_ERROR, field,
                         "must be a non-empty list of ports (integers in 1..65535)");
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      gint64 v = JSON_NODE_HOLDS_VALUE (e) && json_node_get_value_type (e) == G_TYPE_INT64
                     ? json_node_get_int (e)
                     : 0;
      guint16 port = (guint16)v;

      if (v < 1 || v > 65535)
        {
          g_autofree char *at = g_strdup_printf ("%s[%u]", field, i);

          return config_error (error, POLICY_CONFIG_ERROR, at,
                               "is not a port (an integer in 1..65535)");
        }
      g_array_append_val (ports, port);
    }
  *out = g_steal_pointer (&ports);
  return TRUE;
}

/* The member @name of @o, when present, as a port list at <prefix><name>. */
static gboolean
optional_ports (JsonObject *o, const char *name, const char *prefix, GArray **out, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  g_autofree char *field = g_strconcat (prefix, name, NULL);

  return n == NULL || port_list (n, field, out, error);
}

/* hostPorts: {<host entry>: [ports]}, keyed by the lower-cased entry the translation looks up. */
static gboolean
parse_host_ports (NzEgressK8sNarrowing *nw, JsonNode *n, const char *field, GError **error)
{
  JsonObjectIter it;
  const char *key;
  JsonNode *v;

  if (!JSON_NODE_HOLDS_OBJECT (n) || json_object_get_size (json_node_get_object (n)) == 0)
    return config_error (error, POLICY_CONFIG_ERROR, field,
                         "must be a non-empty object of host entries to lists of ports");
  nw->host_ports
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_array_unref);
  json_object_iter_init (&it, json_node_get_object (n));
  while (json_object_iter_next (&it, &key, &v))
    {
      g_autofree char *shown = g_strescape (key, NULL);
      g_autofree char *at = g_strdup_printf ("%s[\"%s\"]", field, shown);
      g_autofree char *lower = NULL;
      g_autofree char *reason = k8s_host_reason (key, &lower);
      GArray *ports = NULL;

      if (reason != NULL)
        return config_error (error, POLICY_CONFIG_ERROR, at, "is not a usable host (the key %s)",
                             reason);
      /* "A.example" and "a.example" are one host: which list applies would be a guess. */
      if (g_hash_table_contains (nw->host_ports, lower))
        return config_error (error, POLICY_CONFIG_ERROR, at, "repeats the host entry \"%s\"",
                             lower);
      if (!port_list (v, at, &ports, error))
        return FALSE;
      g_hash_table_insert (nw->host_ports, g_steal_pointer (&lower), ports);
    }
  return TRUE;
}

/* dnsNames: true, false, or {namespace?, clusterDomain?, searchSuffixes?} (which is true). */
static gboolean
parse_dns_names (NzEgressK8sNarrowing *nw, JsonNode *n, const char *field, GError **error)
{
  static const char *const known[] = { "namespace", "clusterDomain", "searchSuffixes", NULL };
  g_autofree char *prefix = g_strconcat (field, ".", NULL);
  g_autofree char *suffixes = g_strconcat (prefix, "searchSuffixes", NULL);
  JsonObject *o;

  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    {
      nw->dns_names = json_node_get_boolean (n);
      return TRUE;
    }
  if (!JSON_NODE_HOLDS_OBJECT (n))
    return config_error (error, POLICY_CONFIG_ERROR, field,
                         "must be true, false or {namespace?, clusterDomain?, searchSuffixes?}");
  o = json_node_get_object (n);
  nw->dns_names = TRUE;
  if (!only_fields (o, known, POLICY_CONFIG_ERROR, prefix, error)
      || !string_field (o, "namespace", POLICY_CONFIG_ERROR, prefix, &nw->dns_namespace, error)
      || !string_field (o, "clusterDomain", POLICY_CONFIG_ERROR, prefix, &nw->cluster_domain, error)
      || !string_list (o, "searchSuffixes", suffixes, LIST_NAMES, &nw->search_suffixes, error))
    return FALSE;
  if (nw->dns_namespace != NULL
      && (strlen (nw->dns_namespace) > 63
          || !g_regex_match_simple (LABEL_VALUE_RE, nw->dns_namespace, 0, 0)))
    {
      g_autofree char *at = g_strconcat (prefix, "namespace", NULL);

      return config_error (error, POLICY_CONFIG_ERROR, at,
                           "is not a namespace name (a DNS-1123 label)");
    }
  if (nw->cluster_domain != NULL && !dns_name_ok (nw->cluster_domain))
    {
      g_autofree char *at = g_strconcat (prefix, "clusterDomain", NULL);

      return config_error (error, POLICY_CONFIG_ERROR, at, DNS_NAME_REASON);
    }
  return TRUE;
}

NzEgressK8sNarrowing *
nz_egress_k8s_narrowing_parse (JsonNode *node, const char *field, GError **error)
{
  static const char *const known[]
      = { "ports", "hostPorts", "dnsNames", "tlsServerNames", "tlsPorts", NULL };
  g_autoptr (NzEgressK8sNarrowing) nw = g_new0 (NzEgressK8sNarrowing, 1);
  g_autofree char *prefix = NULL;
  JsonObject *o;
  JsonNode *n;

  g_return_val_if_fail (field != NULL, NULL);
  nw->field = g_strdup (field);
  prefix = g_strconcat (field, ".", NULL);
  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return (config_error (error, POLICY_CONFIG_ERROR, field,
                          "must be an object {ports?, hostPorts?, dnsNames?, tlsServerNames?, "
                          "tlsPorts?}"),
            NULL);
  o = json_node_get_object (node);
  if (!only_fields (o, known, POLICY_CONFIG_ERROR, prefix, error)
      || !optional_ports (o, "ports", prefix, &nw->ports, error))
    return NULL;
  if ((n = json_object_get_member (o, "hostPorts")) != NULL)
    {
      g_autofree char *at = g_strconcat (prefix, "hostPorts", NULL);

      if (!parse_host_ports (nw, n, at, error))
        return NULL;
    }
  if ((n = json_object_get_member (o, "dnsNames")) != NULL)
    {
      g_autofree char *at = g_strconcat (prefix, "dnsNames", NULL);

      if (!parse_dns_names (nw, n, at, error))
        return NULL;
    }
  if ((n = json_object_get_member (o, "tlsServerNames")) != NULL)
    {
      g_autofree char *at = g_strconcat (prefix, "tlsServerNames", NULL);

      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        return (config_error (error, POLICY_CONFIG_ERROR, at, "must be true or false"), NULL);
      nw->tls_server_names = json_node_get_boolean (n);
    }
  if (!optional_ports (o, "tlsPorts", prefix, &nw->tls_ports, error))
    return NULL;
  if (nw->cluster_domain == NULL)
    nw->cluster_domain = g_strdup ("cluster.local");
  return g_steal_pointer (&nw);
}

/* ciliumNarrowing narrows the named policy's toFQDNs rules, which only a static host list
 * under cilium has; a hostPorts key naming none of its hosts would never apply. */
static gboolean
parse_cilium_narrowing (NzEgressK8sConfig *c, JsonNode *n, GError **error)
{
  g_auto (GStrv) hosts = NULL;
  GHashTableIter it;
  gpointer key;

  if (c->kind != NZ_EGRESS_K8S_STATIC || c->engine != NZ_EGRESS_K8S_CILIUM)
    return narrowing_unsupported (error, "ciliumNarrowing", c->kind, c->engine);
  c->narrowing = nz_egress_k8s_narrowing_parse (n, "ciliumNarrowing", error);
  if (c->narrowing == NULL)
    return FALSE;
  if (c->narrowing->host_ports != NULL)
    {
      g_hash_table_iter_init (&it, c->narrowing->host_ports);
      while (g_hash_table_iter_next (&it, &key, NULL))
        if (!g_strv_contains ((const char *const *)c->allowed_hosts, key))
          {
            g_autofree char *at
                = g_strdup_printf ("ciliumNarrowing.hostPorts[\"%s\"]", (const char *)key);

            return config_error (error, POLICY_CONFIG_ERROR, at,
                                 "names a host that is not in policy.allowedHosts (add it there, "
                                 "or drop the key)");
          }
    }
  hosts = nz_egress_k8s_narrowing_check_hosts (c->narrowing, (const char *const *)c->allowed_hosts,
                                               error);
  return hosts != NULL;
}

static gboolean
parse_per_sandbox (NzEgressK8sConfig *c, JsonNode *n, GError **error)
{
  static const char *const known[]
      = { "engine",   "admissionPolicyName", "admissionPolicyBindingName",
          "labelKey", "narrowing",           NULL };
  const char *klass = "KubernetesPerSandboxEgressConfigError";
  g_autofree char *engine = NULL;
  JsonObject *o;

  if (!JSON_NODE_HOLDS_OBJECT (n))
    return config_error (error, klass, "perSandbox", "must be an object");
  o = json_node_get_object (n);
  if (!only_fields (o, known, klass, "perSandbox.", error)
      || !string_field (o, "engine", klass, "perSandbox.", &engine, error)
      || !string_field (o, "admissionPolicyName", klass, "perSandbox.", &c->admission_policy_name,
                        error)
      || !string_field (o, "admissionPolicyBindingName", klass, "perSandbox.",
                        &c->admission_policy_binding_name, error)
      || !string_field (o, "labelKey", klass, "perSandbox.", &c->per_sandbox_label_key, error))
    return FALSE;
  if (g_strcmp0 (engine, "cilium") != 0)
    return config_error (error, klass, "perSandbox.engine",
                         "must be 'cilium' (per-sandbox policies are CiliumNetworkPolicies)");
  /* The per-sandbox label would replace the template label the baseline policies select,
   * leaving the pods outside them. */
  if (g_strcmp0 (c->per_sandbox_label_key, NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY) == 0)
    return config_error (error, klass, "perSandbox.labelKey",
                         "must not be " NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY
                         ", the label the baseline policies select");
  if (c->admission_policy_name == NULL)
    return config_error (error, klass, "perSandbox.admissionPolicyName",
                         "is required: the ValidatingAdmissionPolicy that fences the host's "
                         "writes (deploy/k8s validatingadmissionpolicy-cilium.yaml)");
  if (c->per_sandbox_label_key != NULL
      && !g_regex_match_simple (LABEL_KEY_RE, c->per_sandbox_label_key, 0, 0))
    return config_error (error, klass, "perSandbox.labelKey", "is not a label key");
  if (json_object_has_member (o, "narrowing")
      && (c->per_sandbox_narrowing = nz_egress_k8s_narrowing_parse (
              json_object_get_member (o, "narrowing"), "perSandbox.narrowing", error))
             == NULL)
    return FALSE;
  if (c->admission_policy_binding_name == NULL)
    c->admission_policy_binding_name = g_strconcat (c->admission_policy_name, "-binding", NULL);
  if (c->per_sandbox_label_key == NULL)
    c->per_sandbox_label_key = g_strdup (NZ_EGRESS_K8S_PER_SANDBOX_LABEL_KEY);
  c->per_sandbox = TRUE;
  return TRUE;
}

NzEgressK8sConfig *
nz_egress_k8s_config_parse (JsonNode *node, GError **error)
{
  static const char *const known[]
      = { "policy",  "networkPolicyName", "engine",     "verify", "ciliumNarrowing",
          "profile", "profileLabelKey",   "perSandbox", NULL };
  const char *klass = "KubernetesEgressPolicyConfigError";
  g_autoptr (NzEgressK8sConfig) c = g_new0 (NzEgressK8sConfig, 1);
  g_autofree char *engine = NULL;
  g_autofree char *verify = NULL;
  JsonObject *o;

  if (node == NULL || !JSON_NODE_HOLDS_OBJECT (node))
    return (config_error (error, klass, "", "must be an object"), NULL);
  o = json_node_get_object (node);
  if (!only_fields (o, known, klass, "", error)
      || !parse_policy (c, json_object_get_member (o, "policy"), error)
      || !string_field (o, "networkPolicyName", klass, "", &c->network_policy_name, error)
      || !string_field (o, "engine", klass, "", &engine, error)
      || !string_field (o, "verify", klass, "", &verify, error)
      || !string_field (o, "profile", "KubernetesEgressProfileConfigError", "", &c->profile, error)
      || !string_field (o, "profileLabelKey", "KubernetesEgressProfileConfigError", "",
                        &c->profile_label_key, error))
    return NULL;
  if (engine == NULL || g_str_equal (engine, "core"))
    c->engine = NZ_EGRESS_K8S_CORE;
  else if (g_str_equal (engine, "cilium"))
    c->engine = NZ_EGRESS_K8S_CILIUM;
  else
    return (config_error (error, klass, "engine", "must be 'core' or 'cilium'"), NULL);
  if (verify != NULL && !g_str_equal (verify, "union")
      && !g_str_equal (verify, "named-object-only"))
    return (config_error (error, klass, "verify", "must be 'union' or 'named-object-only'"), NULL);
  c->named_object_only = verify != NULL && g_str_equal (verify, "named-object-only");
  if (c->network_policy_name != NULL
      && (strlen (c->network_policy_name) > 253
          || !g_regex_match_simple ("^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", c->network_policy_name, 0,
                                    0)))
    return (config_error (error, klass, "networkPolicyName", "is not a DNS-1123 object name"),
            NULL);
  if (c->profile != NULL
      && (strlen (c->profile) > 63 || !g_regex_match_simple (LABEL_VALUE_RE, c->profile, 0, 0)))
    return (config_error (error, "KubernetesEgressProfileConfigError", "profile",
                          "is not a DNS-1123 label value (a-z, 0-9, '-', at most 63)"),
            NULL);
  if (c->profile_label_key != NULL
      && !g_regex_match_simple (LABEL_KEY_RE, c->profile_label_key, 0, 0))
    return (config_error (error, "KubernetesEgressProfileConfigError", "profileLabelKey",
                          "is not a label key"),
            NULL);
  /* The profile label would replace the template label: the pods would leave the baseline
   * policies, and the named policy's selector would name the template key twice. */
  if (g_strcmp0 (c->profile_label_key, NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY) == 0)
    return (config_error (error, "KubernetesEgressProfileConfigError", "profileLabelKey",
                          "must not be " NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY
                          ", the label the baseline policies select"),
            NULL);
  if (c->profile_label_key == NULL)
    c->profile_label_key = g_strdup (NZ_EGRESS_K8S_PROFILE_LABEL_KEY);
  if (json_object_has_member (o, "ciliumNarrowing")
      && !parse_cilium_narrowing (c, json_object_get_member (o, "ciliumNarrowing"), error))
    return NULL;
  if (json_object_has_member (o, "perSandbox")
      && !parse_per_sandbox (c, json_object_get_member (o, "perSandbox"), error))
    return NULL;
  return g_steal_pointer (&c);
}

JsonObject *
nz_egress_k8s_selector (const NzEgressK8sConfig *config, const char *tpl)
{
  JsonObject *sel = json_object_new ();

  json_object_set_string_member (sel, NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY, tpl);
  if (config->profile != NULL)
    json_object_set_string_member (sel, config->profile_label_key, config->profile);
  return sel;
}

JsonObject *
nz_egress_k8s_compose_pod_labels (const NzEgressK8sConfig *config, JsonObject *base, GError **error)
{
  JsonObject *out = copy_object (base);
  const char *have;

  if (config->profile == NULL)
    return out;
  have = json_object_get_string_member_with_default (out, config->profile_label_key, NULL);
  if (json_object_has_member (out, config->profile_label_key)
      && g_strcmp0 (have, config->profile) != 0)
    {
      json_object_unref (out);
      config_error (error, "KubernetesEgressProfileConfigError", "profileLabelKey",
                    "collides with a pod label the configuration already sets (\"%s\"); "
                    "choose another profileLabelKey or drop that label",
                    config->profile_label_key);
      return NULL;
    }
  json_object_set_string_member (out, config->profile_label_key, config->profile);
  return out;
}
