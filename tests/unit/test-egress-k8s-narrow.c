/* Unit tests of the Cilium egress narrowing of lib/egress/nz-egress-k8s (reference-agent
 * D.10.5): each field's translation against the egress the spec describes, written out by hand
 * in the spec's key order; every refusal, naming its field; the unnarrowed output unchanged;
 * and the host check of setNetworkPolicy (D.10.8). */
#include <string.h>

#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "../nz-test.h"

/* Expectations are written with ' for " (no host or field here has a quote). */
static char *
json_q (const char *single_quoted)
{
  return g_strdelimit (g_strdup (single_quoted), "'", '"');
}

static JsonNode *
parse (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();

  ck_assert_msg (json_parser_load_from_data (p, json, -1, NULL), "not JSON: %s", json);
  return json_node_copy (json_parser_get_root (p));
}

/* @single_quoted re-serialised: the hand-written expectation in the writer's spacing, its key
 * order kept, so comparing strings also compares key order. */
static char *
canon (const char *single_quoted)
{
  g_autofree char *json = json_q (single_quoted);
  g_autoptr (JsonNode) n = parse (json);

  return nz_json_to_string (n, NULL);
}

static NzEgressK8sNarrowing *
narrowing (const char *single_quoted, const char *field, GError **error)
{
  g_autofree char *json = json_q (single_quoted);
  g_autoptr (JsonNode) n = parse (json);

  return nz_egress_k8s_narrowing_parse (n, field, error);
}

/* The whole manifest of static policy t-egress for @hosts in namespace @ns narrowed by
 * @narrowing_q (NULL: none), or NULL with @error. */
static char *
translate_in (const char *ns, const char *const *hosts, const char *narrowing_q, GError **error)
{
  g_autoptr (NzEgressK8sNarrowing) nw
      = narrowing_q != NULL ? narrowing (narrowing_q, "ciliumNarrowing", NULL) : NULL;
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) out = NULL;

  ck_assert (narrowing_q == NULL || nw != NULL);
  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  out = nz_egress_k8s_translate_narrowed (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hosts,
                                          nw, "t-egress", ns, sel, error);
  return out != NULL ? nz_json_to_string (out, NULL) : NULL;
}

/* The CiliumNetworkPolicy envelope of t-egress in @ns around @egress. */
#define MANIFEST_Q                                                                                 \
  "{'apiVersion':'cilium.io/v2','kind':'CiliumNetworkPolicy',"                                     \
  "'metadata':{'name':'t-egress','namespace':'%s'},"                                               \
  "'spec':{'endpointSelector':{'matchLabels':{'sandbox.namzu.ai/template':'t'}},'egress':%s}}"

/* CILIUM_DNS_VISIBILITY_RULE with %s as its rules.dns list. */
#define DNS_RULE_Q                                                                                 \
  "{'toEndpoints':[{'matchLabels':{'k8s:io.kubernetes.pod.namespace':'kube-system',"               \
  "'k8s:k8s-app':'kube-dns'}}],"                                                                   \
  "'toPorts':[{'ports':[{'port':'53','protocol':'ANY'}],'rules':{'dns':[%s]}}]}"
#define DNS_ANY_Q "{'matchPattern':'*'}"

/* The translation of @hosts in @ns under @narrowing_q is exactly the manifest whose egress is
 * the DNS rule answering @dns_q, then @rules_q. */
static void
expect (const char *ns, const char *const *hosts, const char *narrowing_q, const char *dns_q,
        const char *rules_q)
{
  g_autofree char *got = translate_in (ns, hosts, narrowing_q, NULL);
  g_autofree char *dns_rule = g_strdup_printf (DNS_RULE_Q, dns_q);
  g_autofree char *egress = g_strdup_printf ("[%s,%s]", dns_rule, rules_q);
  g_autofree char *manifest = g_strdup_printf (MANIFEST_Q, ns, egress);
  g_autofree char *want = canon (manifest);

  ck_assert_msg (got != NULL, "refused %s", narrowing_q);
  ck_assert_str_eq (got, want);
}

/* No field set is the unnarrowed policy, byte for byte: one toFQDNs rule, the DNS rule open. */
START_TEST (test_unnarrowed_unchanged)
{
  const char *hosts[] = { "API.example.com", ".example.org", NULL };
  const char *one_rule = "{'toFQDNs':[{'matchName':'API.example.com'},"
                         "{'matchName':'example.org'},{'matchPattern':'*.example.org'}]}";
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) plain = NULL;
  g_autofree char *plain_s = NULL;
  g_autofree char *none = translate_in ("ns", hosts, NULL, NULL);

  expect ("ns", hosts, "{}", DNS_ANY_Q, one_rule);
  expect ("ns", hosts, "{'dnsNames':false,'tlsServerNames':false}", DNS_ANY_Q, one_rule);
  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  plain = nz_egress_k8s_translate (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hosts,
                                   "t-egress", "ns", sel, NULL);
  plain_s = nz_json_to_string (plain, NULL);
  ck_assert_str_eq (none, plain_s);
  expect ("ns", hosts, NULL, DNS_ANY_Q, one_rule);
}
END_TEST

/* ports: one rule per host, each with the ports (a domain entry keeps its two entries). */
START_TEST (test_ports)
{
  const char *hosts[] = { "api.example.com", ".example.org", NULL };

  expect ("ns", hosts, "{'ports':[443,8443]}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'},"
          "                      {'port':'8443','protocol':'TCP'}]}]},"
          "{'toFQDNs':[{'matchName':'example.org'},{'matchPattern':'*.example.org'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'},"
          "                      {'port':'8443','protocol':'TCP'}]}]}");
}
END_TEST

/* hostPorts[host] ?? ports; the key matches whatever the case, matchName keeps the caller's. */
START_TEST (test_host_ports)
{
  const char *hosts[] = { "Api.Example.com", "b.example", NULL };

  expect ("ns", hosts, "{'ports':[443],'hostPorts':{'API.example.com':[22,2222]}}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'Api.Example.com'}],"
          " 'toPorts':[{'ports':[{'port':'22','protocol':'TCP'},"
          "                      {'port':'2222','protocol':'TCP'}]}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}]}]}");
  /* Without ports, a host hostPorts does not name has no toPorts: every port. */
  expect ("ns", hosts, "{'hostPorts':{'b.example':[80]}}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'Api.Example.com'}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'80','protocol':'TCP'}]}]}");
}
END_TEST

/* dnsNames: the DNS rule answers each host, and each host under the pod's search path. */
START_TEST (test_dns_names)
{
  const char *hosts[] = { "api.example.com", ".example.org", NULL };
  const char *rules = "{'toFQDNs':[{'matchName':'api.example.com'}]},"
                      "{'toFQDNs':[{'matchName':'example.org'},{'matchPattern':'*.example.org'}]}";

  /* <ns> is the policy's namespace by default. */
  expect ("sbx", hosts, "{'dnsNames':true}",
          "{'matchName':'api.example.com'},"
          "{'matchName':'api.example.com.sbx.svc.cluster.local'},"
          "{'matchName':'api.example.com.svc.cluster.local'},"
          "{'matchName':'api.example.com.cluster.local'},"
          "{'matchName':'example.org'},{'matchPattern':'*.example.org'},"
          "{'matchName':'example.org.sbx.svc.cluster.local'},"
          "{'matchPattern':'*.example.org.sbx.svc.cluster.local'},"
          "{'matchName':'example.org.svc.cluster.local'},"
          "{'matchPattern':'*.example.org.svc.cluster.local'},"
          "{'matchName':'example.org.cluster.local'},"
          "{'matchPattern':'*.example.org.cluster.local'}",
          rules);
  /* namespace, clusterDomain and searchSuffixes, with a domain entry and ports. */
  expect ("sbx", hosts,
          "{'dnsNames':{'namespace':'team-a','clusterDomain':'k8s.internal',"
          "             'searchSuffixes':['corp.example','lan']},"
          " 'ports':[443]}",
          "{'matchName':'api.example.com'},"
          "{'matchName':'api.example.com.team-a.svc.k8s.internal'},"
          "{'matchName':'api.example.com.svc.k8s.internal'},"
          "{'matchName':'api.example.com.k8s.internal'},"
          "{'matchName':'api.example.com.corp.example'},"
          "{'matchName':'api.example.com.lan'},"
          "{'matchName':'example.org'},{'matchPattern':'*.example.org'},"
          "{'matchName':'example.org.team-a.svc.k8s.internal'},"
          "{'matchPattern':'*.example.org.team-a.svc.k8s.internal'},"
          "{'matchName':'example.org.svc.k8s.internal'},"
          "{'matchPattern':'*.example.org.svc.k8s.internal'},"
          "{'matchName':'example.org.k8s.internal'},"
          "{'matchPattern':'*.example.org.k8s.internal'},"
          "{'matchName':'example.org.corp.example'},"
          "{'matchPattern':'*.example.org.corp.example'},"
          "{'matchName':'example.org.lan'},{'matchPattern':'*.example.org.lan'}",
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}]}]},"
          "{'toFQDNs':[{'matchName':'example.org'},{'matchPattern':'*.example.org'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}]}]}");
}
END_TEST

/* tlsServerNames: the TLS ports carry serverNames [host]; the other ports go without. */
START_TEST (test_tls)
{
  const char *hosts[] = { "api.example.com", "b.example", NULL };

  /* tlsPorts ?? [443] when neither hostPorts nor ports name the host's ports. */
  expect ("ns", hosts, "{'tlsServerNames':true}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}],"
          "             'serverNames':['api.example.com']}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}],'serverNames':['b.example']}]}");
  expect ("ns", hosts, "{'tlsServerNames':true,'tlsPorts':[8443]}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'8443','protocol':'TCP'}],"
          "             'serverNames':['api.example.com']}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'8443','protocol':'TCP'}],'serverNames':['b.example']}]}");
  /* Split: 443 and 8443 are TLS, 80 is not (in the host's order); hostPorts overrides ports. */
  expect ("ns", hosts,
          "{'tlsServerNames':true,'ports':[80,443,8443],'tlsPorts':[8443,443],"
          " 'hostPorts':{'b.example':[443]}}",
          DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'},{'port':'8443','protocol':'TCP'}],"
          "             'serverNames':['api.example.com']},"
          "            {'ports':[{'port':'80','protocol':'TCP'}]}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}],'serverNames':['b.example']}]}");
  /* No TLS port among the host's: no serverNames entry, and never an empty port list. */
  expect ("ns", hosts, "{'tlsServerNames':true,'hostPorts':{'b.example':[80]}}", DNS_ANY_Q,
          "{'toFQDNs':[{'matchName':'api.example.com'}],"
          " 'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}],"
          "             'serverNames':['api.example.com']}]},"
          "{'toFQDNs':[{'matchName':'b.example'}],"
          " 'toPorts':[{'ports':[{'port':'80','protocol':'TCP'}]}]}");
}
END_TEST

/* D.10.5 validation: every refusal names its full field. */
START_TEST (test_parse_refusals)
{
  struct
  {
    const char *json, *message;
  } bad[] = {
    { "[]", "backend.egress.ciliumNarrowing must be an object" },
    { "{\"port\":[1]}", "backend.egress.ciliumNarrowing.port is not a known field" },
    { "{\"ports\":[]}", "backend.egress.ciliumNarrowing.ports must be a non-empty list" },
    { "{\"ports\":443}", "backend.egress.ciliumNarrowing.ports must be a non-empty list" },
    { "{\"ports\":[443,80,0]}", "backend.egress.ciliumNarrowing.ports[2] is not a port" },
    { "{\"ports\":[65536]}", "backend.egress.ciliumNarrowing.ports[0] is not a port" },
    { "{\"ports\":[65535,44.3]}", "backend.egress.ciliumNarrowing.ports[1] is not a port" },
    { "{\"ports\":[\"443\"]}", "backend.egress.ciliumNarrowing.ports[0] is not a port" },
    { "{\"ports\":[-1]}", "backend.egress.ciliumNarrowing.ports[0] is not a port" },
    { "{\"hostPorts\":{}}", "backend.egress.ciliumNarrowing.hostPorts must be a non-empty object" },
    { "{\"hostPorts\":[]}", "backend.egress.ciliumNarrowing.hostPorts must be a non-empty object" },
    { "{\"hostPorts\":{\"a.example\":[]}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"a.example\"] must be a non-empty list" },
    { "{\"hostPorts\":{\"a.example\":[1,70000]}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"a.example\"][1] is not a port" },
    { "{\"hostPorts\":{\"*.a.example\":[1]}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"*.a.example\"] is not a usable host" },
    { "{\"hostPorts\":{\"a.example.\":[1]}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"a.example.\"] is not a usable host (the key "
      "carries whitespace or a trailing dot)" },
    { "{\"hostPorts\":{\"a.example\":[1],\"A.example\":[2]}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"A.example\"] repeats the host entry "
      "\"a.example\"" },
    { "{\"dnsNames\":\"yes\"}", "backend.egress.ciliumNarrowing.dnsNames must be true, false or" },
    { "{\"dnsNames\":{\"ns\":\"a\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.ns is not a known field" },
    { "{\"dnsNames\":{\"clusterDomain\":\"\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.clusterDomain must be a non-empty string" },
    { "{\"dnsNames\":{\"clusterDomain\":\"a..b\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.clusterDomain is not a DNS name" },
    { "{\"dnsNames\":{\"namespace\":\"Team_A\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.namespace is not a namespace name" },
    { "{\"dnsNames\":{\"namespace\":\"\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.namespace must be a non-empty string" },
    { "{\"dnsNames\":{\"searchSuffixes\":[]}}",
      "backend.egress.ciliumNarrowing.dnsNames.searchSuffixes must not be empty" },
    { "{\"dnsNames\":{\"searchSuffixes\":\"corp\"}}",
      "backend.egress.ciliumNarrowing.dnsNames.searchSuffixes must be a list" },
    { "{\"dnsNames\":{\"searchSuffixes\":[\"corp\",\"\"]}}",
      "backend.egress.ciliumNarrowing.dnsNames.searchSuffixes[1] is not a DNS name" },
    { "{\"dnsNames\":{\"searchSuffixes\":[\"corp\",7]}}",
      "backend.egress.ciliumNarrowing.dnsNames.searchSuffixes[1] is not a DNS name" },
    { "{\"dnsNames\":{\"searchSuffixes\":[\".corp\"]}}",
      "backend.egress.ciliumNarrowing.dnsNames.searchSuffixes[0] is not a DNS name" },
    { "{\"tlsServerNames\":\"true\"}",
      "backend.egress.ciliumNarrowing.tlsServerNames must be true or false" },
    { "{\"tlsPorts\":[]}", "backend.egress.ciliumNarrowing.tlsPorts must be a non-empty list" },
    { "{\"tlsPorts\":[443,0]}", "backend.egress.ciliumNarrowing.tlsPorts[1] is not a port" },
  };
  g_autoptr (GError) ps = NULL;
  g_autoptr (NzEgressK8sNarrowing) per = narrowing ("{\"ports\":[0]}", "perSandbox.narrowing", &ps);
  g_autoptr (NzEgressK8sNarrowing) ok
      = narrowing ("{\"ports\":[1,65535],\"hostPorts\":{\"A.example\":[22]},\"dnsNames\":{},"
                   "\"tlsServerNames\":false,\"tlsPorts\":[443]}",
                   "ciliumNarrowing", NULL);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzEgressK8sNarrowing) n = narrowing (bad[i].json, "ciliumNarrowing", &error);

      ck_assert_msg (n == NULL, "accepted %s", bad[i].json);
      ck_assert_int_eq (error->code, NZ_EGRESS_ERROR_CONFIG);
      ck_assert_msg (g_str_has_prefix (error->message, "KubernetesEgressPolicyConfigError: "), "%s",
                     error->message);
      ck_assert_msg (strstr (error->message, bad[i].message) != NULL, "%s: %s", bad[i].json,
                     error->message);
    }
  /* The field is wherever the narrowing was found. */
  ck_assert (per == NULL);
  ck_assert_msg (strstr (ps->message, "backend.egress.perSandbox.narrowing.ports[0] is not a port")
                     != NULL,
                 "%s", ps->message);
  /* The bounds are accepted, dnsNames {} is on, clusterDomain defaults. */
  ck_assert (ok != NULL);
  ck_assert_int_eq (ok->ports->len, 2);
  ck_assert_int_eq (g_array_index (ok->ports, guint16, 1), 65535);
  ck_assert_ptr_nonnull (g_hash_table_lookup (ok->host_ports, "a.example"));
  ck_assert (ok->dns_names && !ok->tls_server_names);
  ck_assert_str_eq (ok->cluster_domain, "cluster.local");
  ck_assert (ok->dns_namespace == NULL && ok->search_suffixes == NULL);
}
END_TEST

static NzEgressK8sConfig *
config (const char *json, GError **error)
{
  g_autoptr (JsonNode) n = parse (json);

  return nz_egress_k8s_config_parse (n, error);
}

/* backend.egress: where narrowing may stand, and what it must agree with. */
START_TEST (test_config)
{
  struct
  {
    const char *json, *message;
    int code;
  } bad[] = {
    { "{\"policy\":{\"kind\":\"deny-all\"},\"ciliumNarrowing\":{\"ports\":[443]}}",
      "KubernetesEgressNarrowingUnsupportedError: backend.egress.ciliumNarrowing narrows the "
      "toFQDNs rules of a static host list under engine 'cilium', and policy kind 'deny-all' with "
      "engine 'core' has none. Set policy.kind to 'static' and egress.engine to 'cilium', or "
      "remove ciliumNarrowing",
      NZ_EGRESS_ERROR_UNSUPPORTED },
    { "{\"policy\":{\"kind\":\"public-internet\"},\"engine\":\"cilium\",\"ciliumNarrowing\":{}}",
      "policy kind 'public-internet' with engine 'cilium' has none", NZ_EGRESS_ERROR_UNSUPPORTED },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\"]},"
      "\"ciliumNarrowing\":{\"ports\":[443]}}",
      "policy kind 'static' with engine 'core' has none", NZ_EGRESS_ERROR_UNSUPPORTED },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\"]},\"engine\":\"cilium\","
      "\"ciliumNarrowing\":{\"ports\":[0]}}",
      "KubernetesEgressPolicyConfigError: backend.egress.ciliumNarrowing.ports[0] is not a port",
      NZ_EGRESS_ERROR_CONFIG },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\",\"b.example\"]},"
      "\"engine\":\"cilium\",\"ciliumNarrowing\":{\"hostPorts\":{\"a.example\":[1],"
      "\"C.example\":[2]}}}",
      "KubernetesEgressPolicyConfigError: backend.egress.ciliumNarrowing.hostPorts[\"c.example\"] "
      "names a host that is not in policy.allowedHosts",
      NZ_EGRESS_ERROR_CONFIG },
    /* A domain entry covers the domain itself, but the key must be the entry as listed. */
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\".example.com\"]},"
      "\"engine\":\"cilium\",\"ciliumNarrowing\":{\"hostPorts\":{\"example.com\":[1]}}}",
      "backend.egress.ciliumNarrowing.hostPorts[\"example.com\"] names a host that is not in "
      "policy.allowedHosts",
      NZ_EGRESS_ERROR_CONFIG },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\",\".Example.com\"]},"
      "\"engine\":\"cilium\",\"ciliumNarrowing\":{\"tlsServerNames\":true}}",
      "KubernetesEgressPolicyConfigError: backend.egress.ciliumNarrowing.tlsServerNames cannot "
      "serve the domain entry \".example.com\"",
      NZ_EGRESS_ERROR_CONFIG },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"f\",\"narrowing\":{\"dnsNames\":{\"clusterDomain\":\"-x\"}}}}",
      "KubernetesEgressPolicyConfigError: backend.egress.perSandbox.narrowing.dnsNames."
      "clusterDomain is not a DNS name",
      NZ_EGRESS_ERROR_CONFIG },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"f\",\"narrowing\":[]}}",
      "backend.egress.perSandbox.narrowing must be an object", NZ_EGRESS_ERROR_CONFIG },
  };
  g_autoptr (NzEgressK8sConfig) c = config (
      "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"A.example\",\".b.example\"]},"
      "\"engine\":\"cilium\",\"ciliumNarrowing\":{\"ports\":[443],\"hostPorts\":{\"a.example\":"
      "[22],\".B.example\":[80]}},\"perSandbox\":{\"engine\":\"cilium\",\"admissionPolicyName\":"
      "\"f\",\"narrowing\":{\"tlsServerNames\":true,\"hostPorts\":{\"x.example\":[443]}}}}",
      NULL);
  g_autoptr (NzEgressK8sConfig) plain
      = config ("{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"a.example\"]},"
                "\"engine\":\"cilium\"}",
                NULL);

  ck_assert (c != NULL);
  ck_assert_str_eq (c->narrowing->field, "ciliumNarrowing");
  ck_assert_int_eq (g_array_index (c->narrowing->ports, guint16, 0), 443);
  ck_assert_int_eq (g_hash_table_size (c->narrowing->host_ports), 2);
  ck_assert_str_eq (c->per_sandbox_narrowing->field, "perSandbox.narrowing");
  ck_assert (c->per_sandbox_narrowing->tls_server_names);
  ck_assert (plain != NULL && plain->narrowing == NULL && plain->per_sandbox_narrowing == NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzEgressK8sConfig) r = config (bad[i].json, &error);

      ck_assert_msg (r == NULL, "accepted %s", bad[i].json);
      ck_assert_int_eq (error->code, bad[i].code);
      ck_assert_msg (strstr (error->message, bad[i].message) != NULL, "%s: %s", bad[i].json,
                     error->message);
    }
}
END_TEST

/* The translation refuses what it cannot write, whoever built the narrowing. */
START_TEST (test_translate_refusals)
{
  const char *hosts[] = { "a.example", ".example.com", NULL };
  const char *none[] = { NULL };
  const char *hostile[] = { "a.example\"}],\"toCIDR\":[\"0.0.0.0/0", NULL };
  g_autoptr (NzEgressK8sNarrowing) tls
      = narrowing ("{\"tlsServerNames\":true}", "perSandbox.narrowing", NULL);
  g_autoptr (NzEgressK8sNarrowing) ports = narrowing ("{\"ports\":[443]}", "ciliumNarrowing", NULL);
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_autoptr (GError) e3 = NULL;
  g_autoptr (GError) e4 = NULL;
  g_autoptr (GError) e5 = NULL;
  g_autoptr (GError) e6 = NULL;
  g_autoptr (JsonNode) deny = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_DENY_ALL, NZ_EGRESS_K8S_CILIUM, NULL, NULL, ports, "p", "ns", sel, &e1);
  g_autoptr (JsonNode) core = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CORE, NULL, hosts, ports, "p", "ns", sel, &e2);
  g_autoptr (JsonNode) domain = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hosts, tls, "p", "ns", sel, &e3);
  g_autoptr (JsonNode) empty = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, none, ports, "p", "ns", sel, &e4);
  g_autoptr (JsonNode) bad = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hostile, ports, "p", "ns", sel, &e5);
  g_autoptr (JsonNode) null_hosts = nz_egress_k8s_translate_narrowed (
      NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, NULL, ports, "p", "ns", sel, &e6);

  ck_assert (deny == NULL && e1->code == NZ_EGRESS_ERROR_UNSUPPORTED);
  ck_assert_msg (strstr (e1->message, "KubernetesEgressNarrowingUnsupportedError: backend.egress."
                                      "ciliumNarrowing narrows")
                         != NULL
                     && strstr (e1->message, "policy kind 'deny-all' with engine 'cilium'") != NULL,
                 "%s", e1->message);
  /* Narrowing is named before the core engine's own refusal of a host list. */
  ck_assert (core == NULL && e2->code == NZ_EGRESS_ERROR_UNSUPPORTED);
  ck_assert_msg (strstr (e2->message, "policy kind 'static' with engine 'core'") != NULL, "%s",
                 e2->message);
  ck_assert (domain == NULL && e3->code == NZ_EGRESS_ERROR_CONFIG);
  ck_assert_msg (g_str_has_prefix (e3->message, "KubernetesEgressPolicyConfigError: backend.egress."
                                                "perSandbox.narrowing.tlsServerNames cannot serve "
                                                "the domain entry \".example.com\""),
                 "%s", e3->message);
  ck_assert (empty == NULL && e4->code == NZ_EGRESS_ERROR_CONFIG);
  ck_assert_msg (strstr (e4->message, "backend.egress.ciliumNarrowing has no host to narrow")
                     != NULL,
                 "%s", e4->message);
  ck_assert (bad == NULL && e5->code == NZ_EGRESS_ERROR_INVALID_HOST);
  ck_assert (g_str_has_prefix (e5->message, "KubernetesNetworkPolicyHostError: host "));
  ck_assert (null_hosts == NULL && e6->code == NZ_EGRESS_ERROR_CONFIG);
}
END_TEST

/* setNetworkPolicy's check (D.10.8): lower-cased, validated, and held to the narrowing. */
START_TEST (test_check_hosts)
{
  const char *hosts[] = { "API.example.com", ".Example.org", NULL };
  const char *exact[] = { "a.example", NULL };
  const char *bad[] = { "a.example", "*.b.example", NULL };
  const char *none[] = { NULL };
  g_autoptr (NzEgressK8sNarrowing) tls
      = narrowing ("{\"tlsServerNames\":true,\"hostPorts\":{\"gone.example\":[443]}}",
                   "perSandbox.narrowing", NULL);
  g_autoptr (NzEgressK8sNarrowing) dns
      = narrowing ("{\"dnsNames\":true,\"ports\":[443]}", "perSandbox.narrowing", NULL);
  g_auto (GStrv) plain = nz_egress_k8s_narrowing_check_hosts (NULL, hosts, NULL);
  g_auto (GStrv) with_dns = nz_egress_k8s_narrowing_check_hosts (dns, hosts, NULL);
  g_auto (GStrv) with_tls = nz_egress_k8s_narrowing_check_hosts (tls, exact, NULL);
  g_auto (GStrv) empty = nz_egress_k8s_narrowing_check_hosts (tls, none, NULL);
  g_auto (GStrv) null_list = nz_egress_k8s_narrowing_check_hosts (tls, NULL, NULL);
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_auto (GStrv) domain = nz_egress_k8s_narrowing_check_hosts (tls, hosts, &e1);
  g_auto (GStrv) invalid = nz_egress_k8s_narrowing_check_hosts (dns, bad, &e2);

  ck_assert_int_eq (g_strv_length (plain), 2);
  ck_assert_str_eq (plain[0], "api.example.com");
  ck_assert_str_eq (plain[1], ".example.org");
  ck_assert_int_eq (g_strv_length (with_dns), 2);
  /* A hostPorts key the list no longer names is no refusal. */
  ck_assert_int_eq (g_strv_length (with_tls), 1);
  ck_assert_str_eq (with_tls[0], "a.example");
  /* An empty list (a DELETE of the policy) passes. */
  ck_assert (empty != NULL && empty[0] == NULL);
  ck_assert (null_list != NULL && null_list[0] == NULL);
  ck_assert (domain == NULL && e1->code == NZ_EGRESS_ERROR_CONFIG);
  ck_assert_msg (strstr (e1->message, "backend.egress.perSandbox.narrowing.tlsServerNames cannot "
                                      "serve the domain entry \".example.org\"")
                     != NULL,
                 "%s", e1->message);
  ck_assert (invalid == NULL && e2->code == NZ_EGRESS_ERROR_INVALID_HOST);
  ck_assert_msg (strstr (e2->message, "host \"*.b.example\"") != NULL, "%s", e2->message);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("egress-k8s-narrow");
  TCase *tc = tcase_create ("narrowing");

  tcase_add_test (tc, test_unnarrowed_unchanged);
  tcase_add_test (tc, test_ports);
  tcase_add_test (tc, test_host_ports);
  tcase_add_test (tc, test_dns_names);
  tcase_add_test (tc, test_tls);
  tcase_add_test (tc, test_parse_refusals);
  tcase_add_test (tc, test_config);
  tcase_add_test (tc, test_translate_refusals);
  tcase_add_test (tc, test_check_hosts);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
