/* Unit tests of lib/kube/nz-kube-union (spec D.10.7): one row per way another selecting
 * NetworkPolicy (core engine), or NetworkPolicy or CiliumNetworkPolicy (cilium engine), can
 * allow more (or no more) than the translation. */
#include <string.h>

#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "nz-kube-union.h"
#include "../nz-test.h"

#define LABELS "{\"sandbox.namzu.ai/template\":\"t\"}"

static JsonNode *
parse (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();

  ck_assert_msg (json_parser_load_from_data (p, json, -1, NULL), "%s", json);
  return json_node_copy (json_parser_get_root (p));
}

/* The translation of @kind for template t, as the backend judges against. */
static JsonObject *
translation (NzEgressK8sKind kind)
{
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) n = NULL;

  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  n = nz_egress_k8s_translate (kind, NZ_EGRESS_K8S_CORE, NULL, NULL, "t-egress", "ns", sel, NULL);
  ck_assert_ptr_nonnull (n);
  return json_node_dup_object (n);
}

/* Whether a policy selecting the pods with @egress (a JSON array of rules) passes. */
static gboolean
judge (NzEgressK8sKind kind, const char *egress, const char *selector)
{
  g_autoptr (JsonObject) want = translation (kind);
  g_autofree char *json
      = g_strdup_printf ("[{\"metadata\":{\"name\":\"other\"},\"spec\":{\"podSelector\":%s,"
                         "\"policyTypes\":[\"Egress\"],\"egress\":%s}}]",
                         selector != NULL ? selector : "{}", egress);
  g_autoptr (JsonNode) list = parse (json);
  g_autoptr (JsonNode) labels = parse (LABELS);
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) cerror = NULL;
  gboolean ok = nz_kube_union_check (json_node_get_array (list), json_node_get_object (labels),
                                     want, &error);
  /* A NetworkPolicy under the cilium engine is judged alike against a core translation. */
  gboolean cok = nz_kube_union_check_cilium (json_node_get_array (list), NULL, "ns",
                                             json_node_get_object (labels), want, &cerror);

  ck_assert (ok == (error == NULL));
  ck_assert_msg (cok == ok, "%s: core %d, cilium %d (%s)", egress, ok, cok,
                 cerror != NULL ? cerror->message : "");
  if (!ok)
    ck_assert_msg (strstr (error->message, "policy-widens-egress") != NULL
                       && strstr (error->message, "NetworkPolicy other") != NULL,
                   "%s", error->message);
  return ok;
}

#define DNS_TO                                                                                     \
  "{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"kube-system\"}}}"
#define DNS_POD_TO                                                                                 \
  "{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"kube-system\"}},"    \
  "\"podSelector\":{\"matchLabels\":{\"k8s-app\":\"kube-dns\"}}}"
#define P53 "[{\"protocol\":\"UDP\",\"port\":53},{\"protocol\":\"TCP\",\"port\":53}]"

START_TEST (test_deny_all)
{
  /* The same rule, a narrower peer, fewer ports: inside. */
  ck_assert (judge (NZ_EGRESS_K8S_DENY_ALL, "[{\"to\":[" DNS_TO "],\"ports\":" P53 "}]", NULL));
  ck_assert (judge (NZ_EGRESS_K8S_DENY_ALL, "[{\"to\":[" DNS_POD_TO "],\"ports\":" P53 "}]", NULL));
  ck_assert (judge (NZ_EGRESS_K8S_DENY_ALL,
                    "[{\"to\":[" DNS_TO "],\"ports\":[{\"protocol\":\"UDP\",\"port\":53}]}]",
                    NULL));
  ck_assert (judge (NZ_EGRESS_K8S_DENY_ALL, "[]", NULL));
  /* Every port, another port, a range over it, everywhere, a cidr, another namespace: wider. */
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL, "[{\"to\":[" DNS_TO "]}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL,
                     "[{\"to\":[" DNS_TO "],\"ports\":[{\"protocol\":\"TCP\",\"port\":443}]}]",
                     NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL,
                     "[{\"to\":[" DNS_TO "],\"ports\":[{\"port\":50,\"endPort\":60}]}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL, "[{\"ports\":" P53 "}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL, "[{}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL,
                     "[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\"}}],\"ports\":" P53 "}]",
                     NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL,
                     "[{\"to\":[{\"namespaceSelector\":{}}],\"ports\":" P53 "}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_DENY_ALL,
                     "[{\"to\":[{\"podSelector\":{\"matchLabels\":{\"k8s-app\":\"kube-dns\"}}}],"
                     "\"ports\":" P53 "}]",
                     NULL));
  /* A policy that selects other pods is not judged. */
  ck_assert (judge (NZ_EGRESS_K8S_DENY_ALL, "[{}]", "{\"matchLabels\":{\"app\":\"x\"}}"));
}
END_TEST

START_TEST (test_public_internet_cidrs)
{
  /* Inside 0.0.0.0/0 and clear of the private exceptions. */
  ck_assert (judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                    "[{\"to\":[{\"ipBlock\":{\"cidr\":\"203.0.113.0/24\"}}]}]", NULL));
  ck_assert (judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                    "[{\"to\":[{\"ipBlock\":{\"cidr\":\"2001:db8::/32\"}}],\"ports\":[{\"port\":"
                    "443}]}]",
                    NULL));
  /* A private range the translation excepts, a block around one, every address. */
  ck_assert (!judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                     "[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.1.0.0/16\"}}]}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                     "[{\"to\":[{\"ipBlock\":{\"cidr\":\"168.0.0.0/8\"}}]}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                     "[{\"to\":[{\"ipBlock\":{\"cidr\":\"0.0.0.0/0\"}}]}]", NULL));
  ck_assert (!judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                     "[{\"to\":[{\"ipBlock\":{\"cidr\":\"fd00::/8\"}}]}]", NULL));
  /* The same block with the same exceptions is inside. */
  ck_assert (judge (NZ_EGRESS_K8S_PUBLIC_INTERNET,
                    "[{\"to\":[{\"ipBlock\":{\"cidr\":\"0.0.0.0/0\",\"except\":[\"10.0.0.0/8\","
                    "\"172.16.0.0/12\",\"192.168.0.0/16\",\"100.64.0.0/10\",\"169.254.0.0/16\","
                    "\"127.0.0.0/8\",\"168.63.129.16/32\"]}}]}]",
                    NULL));
}
END_TEST

START_TEST (test_allow_all_and_exempt)
{
  g_autoptr (JsonObject) want = translation (NZ_EGRESS_K8S_DENY_ALL);
  g_autoptr (JsonNode) list = parse ("[{\"metadata\":{\"name\":\"t-egress\"},\"spec\":{"
                                     "\"podSelector\":{},\"policyTypes\":[\"Egress\"],"
                                     "\"egress\":[{}]}},{\"metadata\":{\"name\":\"ingress-only\"},"
                                     "\"spec\":{\"podSelector\":{},\"policyTypes\":[\"Ingress\"],"
                                     "\"egress\":[{}]}}]");
  g_autoptr (JsonNode) labels = parse (LABELS);

  /* allow-all's translation covers anything. */
  ck_assert (judge (NZ_EGRESS_K8S_ALLOW_ALL, "[{}]", NULL));
  /* The named object is judged by the named check, and an Ingress-only policy adds no egress. */
  ck_assert (
      nz_kube_union_check (json_node_get_array (list), json_node_get_object (labels), want, NULL));
}
END_TEST

/* ---- the cilium engine ---- */

/* @json with ' for ", so the rows below stay readable. Returns a new node. */
static JsonNode *
sq (const char *json)
{
  g_autofree char *text = g_strdelimit (g_strdup (json), "'", '"');

  return parse (text);
}

/* The cilium engine's translation of @kind (static: @hosts) for template t. */
static JsonObject *
cilium_translation (NzEgressK8sKind kind, const char *const *hosts)
{
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) n = NULL;

  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  n = nz_egress_k8s_translate (kind, NZ_EGRESS_K8S_CILIUM, NULL, hosts, "t-egress", "ns", sel,
                               NULL);
  ck_assert_ptr_nonnull (n);
  return json_node_dup_object (n);
}

#define KUBE_DNS "{'k8s:io.kubernetes.pod.namespace':'kube-system','k8s:k8s-app':'kube-dns'}"
#define SEL_T "{'matchLabels':{'k8s:sandbox.namzu.ai/template':'t'}}"

/* A narrowed translation (spec D.10.5: dnsNames, tlsServerNames, hostPorts), written out: one
 * toFQDNs rule per host with toPorts, and a DNS rule listing names instead of `*`. */
static JsonObject *
narrowed (void)
{
  g_autoptr (JsonNode) n = sq (
      "{'apiVersion':'cilium.io/v2','kind':'CiliumNetworkPolicy','metadata':{'name':'t-egress',"
      "'namespace':'ns'},'spec':{'endpointSelector':{'matchLabels':{'sandbox.namzu.ai/template':"
      "'t'}},'egress':["
      "{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{'port':'53',"
      "'protocol':'ANY'}],'rules':{'dns':[{'matchName':'api.example.com'},{'matchName':"
      "'api.example.com.ns.svc.cluster.local'},{'matchName':'example.org'},{'matchPattern':"
      "'*.example.org'}]}}]},"
      "{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{'port':'443',"
      "'protocol':'TCP'}],'serverNames':['api.example.com']},{'ports':[{'port':'80','protocol':"
      "'TCP'}]}]},"
      "{'toFQDNs':[{'matchName':'example.org'},{'matchPattern':'*.example.org'}],'toPorts':[{"
      "'ports':[{'port':'8000','endPort':8100,'protocol':'TCP'}]}]}]}}");

  return json_node_dup_object (n);
}

/* Whether @nps and @cnps (JSON lists, ' for ") pass against @want; a refusal must name
 * @refused (a substring such as "CiliumNetworkPolicy other specs[1]"). */
static gboolean
judge_with (JsonObject *want, const char *nps, const char *cnps, const char *refused)
{
  g_autoptr (JsonNode) np = sq (nps);
  g_autoptr (JsonNode) cnp = sq (cnps);
  g_autoptr (JsonNode) labels = parse (LABELS);
  g_autoptr (GError) error = NULL;
  gboolean ok = nz_kube_union_check_cilium (json_node_get_array (np), json_node_get_array (cnp),
                                            "ns", json_node_get_object (labels), want, &error);

  ck_assert (ok == (error == NULL));
  if (!ok)
    ck_assert_msg (g_error_matches (error, NZ_KUBE_UNION_ERROR, NZ_KUBE_UNION_ERROR_WIDENS)
                       && g_str_has_prefix (error->message, "KubernetesEgressPolicyUnionError: "
                                                            "policy-widens-egress: ")
                       && strstr (error->message, refused) != NULL
                       && strstr (error->message, "configured policy t-egress") != NULL,
                   "%s", error->message);
  return ok;
}

/* Whether one CiliumNetworkPolicy "other" selecting the pods, with @egress, passes. */
static gboolean
cnp (JsonObject *want, const char *egress)
{
  g_autofree char *list = g_strdup_printf (
      "[{'metadata':{'name':'other'},'spec':{'endpointSelector':" SEL_T ",'egress':%s}}]", egress);

  return judge_with (want, "[]", list, "CiliumNetworkPolicy other also selects");
}

/* Whether one NetworkPolicy "other" selecting the pods, with @egress, passes. */
static gboolean
np (JsonObject *want, const char *egress)
{
  g_autofree char *list = g_strdup_printf (
      "[{'metadata':{'name':'other'},'spec':{'podSelector':{},'policyTypes':['Egress'],"
      "'egress':%s}}]",
      egress);

  return judge_with (want, list, "[]", "NetworkPolicy other also selects");
}

static const char *const hosts[] = { "api.example.com", ".example.org", NULL };

START_TEST (test_cilium_fqdns)
{
  g_autoptr (JsonObject) want = cilium_translation (NZ_EGRESS_K8S_STATIC, hosts);

  /* Within: the same names (any case, a trailing dot), a subdomain one label below a pattern,
   * the pattern itself, a pattern without *, fewer ports, the translation's own rules. */
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'API.Example.com.'}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchPattern':'*.example.org'}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchPattern':'api.example.com'}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchPattern':'w*.example.org'}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                        "'port':'443','protocol':'TCP'}]}]}]"));
  ck_assert (cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                        "'port':'53','protocol':'ANY'}],'rules':{'dns':[{'matchPattern':'*'}]}}]},"
                        "{'toFQDNs':[{'matchName':'example.org'}]}]"));
  ck_assert (cnp (want, "[{}]"));
  ck_assert (cnp (want, "[]"));
  /* The unnarrowed DNS rule allows every name: any DNS rule is within it. */
  ck_assert (cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                        "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchName':"
                        "'anything.example.net'},{'matchPattern':'*.a.b'}]}}]}]"));
  /* Wider: another name, a deeper subdomain (Cilium's * stays within one label), a wider
   * pattern, every name, an entry this cannot read. */
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'evil.example.net'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'a.b.example.org'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'example.com'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchPattern':'*.a.example.org'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchPattern':'**.example.org'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchPattern':'*.org'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchPattern':'*'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'},{'matchName':'x.io'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':1}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com','matchPattern':'*'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':{'matchName':'api.example.com'}}]"));
}
END_TEST

START_TEST (test_cilium_narrowed)
{
  g_autoptr (JsonObject) want = narrowed ();

  /* DNS: names the expected DNS rule lists, on fewer ports, are within. */
  ck_assert (cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                        "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchName':"
                        "'api.example.com'},{'matchName':'www.example.org'}]}}]}]"));
  /* No rules on the DNS port: every name (only `*` covers that); `*`; another name; another
   * L7 parser on the DNS port. */
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'ANY'}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'ANY'}],'rules':{'dns':[{'matchPattern':'*'}]}}]}"
                         "]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53'}],'rules':{'dns':[{'matchName':'evil.example.net'}]}}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53'}],'rules':{'http':[{}]}}]}]"));
  /* The same kube-dns rule as a NetworkPolicy: no L7 DNS rule, so every name. */
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':'kube-dns'"
                        "}}}],'ports':[{'protocol':'UDP','port':53}]}]"));
  /* TLS: the same serverNames on the TLS port, any on the other port. */
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                        "'port':'443','protocol':'TCP'}],'serverNames':['API.example.com']}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                        "'port':'80','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'443','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'443','protocol':'TCP'}],'serverNames':['evil.example.net']}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'443','protocol':'TCP'}],'serverNames':[]}]}]"));
  /* Ports: ANY is wider than TCP, no toPorts is every port, "0" too; a range inside the
   * range; a name is not a number; a host's ports are its own. */
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'80'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'0','protocol':'TCP'}]}]}]"));
  ck_assert (cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                        "'port':'8050','protocol':'TCP'},{'port':'8000','endPort':8100,"
                        "'protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'8050','endPort':8200,'protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'http','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                         "'port':'8050','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'8050','protocol':'TCP'}],'terminatingTLS':{}}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'99999','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'8050','protocol':'TCP'},{'port':'99999','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toFQDNs':[{'matchName':'www.example.org'}],'toPorts':[{'ports':[{"
                         "'port':'8050','protocol':'TCP'}]},'junk']}]"));
}
END_TEST

START_TEST (test_cilium_destinations)
{
  g_autoptr (JsonObject) want = cilium_translation (NZ_EGRESS_K8S_STATIC, hosts);
  g_autoptr (JsonObject) pub = cilium_translation (NZ_EGRESS_K8S_PUBLIC_INTERNET, NULL);
  g_autoptr (JsonObject) all = cilium_translation (NZ_EGRESS_K8S_ALLOW_ALL, NULL);

  /* Every other kind of destination widens a static translation. */
  ck_assert (!cnp (want, "[{'toCIDR':['10.0.0.0/8']}]"));
  ck_assert (!cnp (want, "[{'toCIDRSet':[{'cidr':'0.0.0.0/0','except':['10.0.0.0/8']}]}]"));
  ck_assert (!cnp (want, "[{'toEntities':['world']}]"));
  ck_assert (!cnp (want, "[{'toServices':[{'k8sService':{'serviceName':'s','namespace':'ns'}}]}]"));
  ck_assert (!cnp (want, "[{'toGroups':[{'aws':{'securityGroupsIds':['sg-1']}}]}]"));
  ck_assert (!cnp (want, "[{'toNodes':[{}]}]"));
  ck_assert (!cnp (want, "[{'toRequires':[{'matchLabels':{'k8s:app':'x'}}]}]"));
  ck_assert (!cnp (want, "[{'toPorts':[{'ports':[{'port':'443','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'icmps':[{'fields':[{'type':8}]}]}]"));
  ck_assert (!cnp (want, "[{'toSomethingNew':[{}]}]"));
  ck_assert (!cnp (want, "['not a rule']"));
  ck_assert (!cnp (want, "{'not':'a list'}"));
  /* toEndpoints: the kube-dns entry (or narrower) on the DNS port; not all pods here, not
   * another namespace, not the same labels from any source. */
  ck_assert (cnp (want,
                  "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                  "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchPattern':'*'}]}}]}]"));
  ck_assert (cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS ",'matchExpressions':[{'key':"
                        "'k8s:x','operator':'Exists'}]}],'toPorts':[{'ports':[{'port':'53'}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'443','protocol':'TCP'}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{}],'toPorts':[{'ports':[{'port':'53'}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':{'k8s:k8s-app':'kube-dns'}}],"
                         "'toPorts':[{'ports':[{'port':'53'}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':{'io.kubernetes.pod.namespace':"
                         "'kube-system','k8s-app':'kube-dns'}}],'toPorts':[{'ports':[{'port':'53'"
                         "}]}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':{'k8s:io.kubernetes.pod.namespace':"
                         "'kube-system'}}],'toPorts':[{'ports':[{'port':'53'}]}]}]"));
  /* matchExpressions In reads like matchLabels; an operator a selector cannot have is not
   * read, not even as a narrowing beside the kube-dns labels. */
  ck_assert (cnp (want, "[{'toEndpoints':[{'matchExpressions':[{'key':'k8s:io.kubernetes.pod."
                        "namespace','operator':'In','values':['kube-system']},{'key':'k8s:k8s-app',"
                        "'operator':'In','values':['kube-dns']}]}],'toPorts':[{'ports':[{'port':"
                        "'53'}],'rules':{'dns':[{'matchPattern':'*'}]}}]}]"));
  ck_assert (!cnp (want, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS ",'matchExpressions':[{'key':"
                         "'k8s:x','operator':'Gt','values':['1']}]}],'toPorts':[{'ports':[{'port':"
                         "'53'}],'rules':{'dns':[{'matchPattern':'*'}]}}]}]"));
  /* public-internet (a core translation under cilium): CIDRs inside it and clear of its
   * exceptions; a private range, a CIDR group or a name is not. */
  ck_assert (cnp (pub, "[{'toCIDR':['203.0.113.0/24']}]"));
  ck_assert (cnp (pub, "[{'toCIDRSet':[{'cidr':'2001:db8::/32'}]}]"));
  ck_assert (cnp (pub, "[{'toCIDRSet':[{'cidr':'0.0.0.0/0','except':['10.0.0.0/8',"
                       "'172.16.0.0/12','192.168.0.0/16','100.64.0.0/10','169.254.0.0/16',"
                       "'127.0.0.0/8','168.63.129.16/32']}],'toPorts':[{'ports':[{'port':'443'}"
                       "]}]}]"));
  ck_assert (!cnp (pub, "[{'toCIDR':['10.1.0.0/16']}]"));
  ck_assert (!cnp (pub, "[{'toCIDR':['not a cidr']}]"));
  ck_assert (!cnp (pub, "[{'toCIDRSet':[{'cidr':'0.0.0.0/0'}]}]"));
  ck_assert (!cnp (pub, "[{'toCIDRSet':[{'cidrGroupRef':'g'}]}]"));
  ck_assert (!cnp (pub, "[{'toFQDNs':[{'matchName':'api.example.com'}]}]"));
  ck_assert (!cnp (pub, "[{'toEntities':['world']}]"));
  /* allow-all covers anything it can read. */
  ck_assert (cnp (all, "[{'toEntities':['all']},{'toFQDNs':[{'matchPattern':'*'}]},{'toCIDR':"
                       "['0.0.0.0/0']},{'toPorts':[{'ports':[{'port':'0'}]}]}]"));
  ck_assert (!cnp (all, "[{'toEntities':['all'],'icmps':[{}]}]"));
  /* An expected manifest with other members (judged generically): equal entries only. */
  {
    g_autoptr (JsonNode) other
        = sq ("{'kind':'CiliumNetworkPolicy','metadata':{'name':'t-egress'},'spec':{'egress':[{"
              "'toEntities':['cluster']},{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{"
              "'ports':[{'port':'80','protocol':'TCP'}],'rules':{'http':[{'method':'GET'}]}}]}]}}");
    JsonObject *o = json_node_get_object (other);

    ck_assert (cnp (o, "[{'toEntities':['cluster']}]"));
    ck_assert (!cnp (o, "[{'toEntities':['world']}]"));
    ck_assert (!cnp (o, "[{'toServices':['cluster']}]"));
    ck_assert (cnp (o, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                       "'port':'80','protocol':'TCP'}],'rules':{'http':[{'method':'GET'}]}}]}]"));
    ck_assert (!cnp (o, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                        "'port':'80','protocol':'TCP'}],'rules':{'http':[{'method':'POST'}]}}]}]"));
    ck_assert (!cnp (o, "[{'toFQDNs':[{'matchName':'api.example.com'}],'toPorts':[{'ports':[{"
                        "'port':'80','protocol':'TCP'}]}]}]"));
  }
  /* Deny rules add nothing; ingress is not egress. */
  ck_assert (judge_with (want, "[]",
                         "[{'metadata':{'name':'other'},'spec':{'endpointSelector':" SEL_T ","
                         "'egressDeny':[{'toEntities':['world']}],'ingress':[{'fromEntities':["
                         "'world']}]}}]",
                         ""));
}
END_TEST

START_TEST (test_cilium_core_translations)
{
  g_autoptr (JsonObject) deny = cilium_translation (NZ_EGRESS_K8S_DENY_ALL, NULL);
  g_autoptr (JsonObject) none = cilium_translation (NZ_EGRESS_K8S_NO_NETWORK, NULL);

  /* deny-all stays core under cilium: DNS to kube-system on UDP/TCP 53. */
  ck_assert_str_eq (nz_json_get_string (deny, "kind"), "NetworkPolicy");
  ck_assert (cnp (deny,
                  "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                  "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchPattern':'*'}]}}]}]"));
  ck_assert (cnp (deny,
                  "[{'toEndpoints':[{'matchLabels':{'k8s:io.kubernetes.pod.namespace':"
                  "'kube-system'}}],'toPorts':[{'ports':[{'port':'53','protocol':'TCP'}]}]}]"));
  /* ANY may carry SCTP, which the translation's UDP and TCP do not name. */
  ck_assert (!cnp (deny, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'ANY'}]}]}]"));
  ck_assert (!cnp (deny, "[{'toFQDNs':[{'matchName':'api.example.com'}]}]"));
  /* L7 rules narrow a port the translation allows whole, unless they cannot be read. */
  ck_assert (cnp (deny,
                  "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                  "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchName':'a.b'}]}}]}]"));
  ck_assert (!cnp (deny, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'UDP'}],'rules':{'dns':[{'matchName':1}]}}]}]"));
  ck_assert (cnp (deny, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                        "'port':'53','protocol':'UDP'}],'rules':{'l7proto':'x','l7':[{}]}}]}]"));
  ck_assert (!cnp (deny, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'UDP'}],'rules':{'surprise':[{}]}}]}]"));
  ck_assert (!cnp (deny, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'UDP'}],'serverNames':[{}]}]}]"));
  ck_assert (!np (deny, "[{'to':[{'ipBlock':{'cidr':'10.0.0.0/8'}}]}]"));
  /* no-network: nothing but Cilium's empty default-deny rule. */
  ck_assert (cnp (none, "[{}]"));
  ck_assert (!cnp (none, "[{'toEndpoints':[{'matchLabels':" KUBE_DNS "}],'toPorts':[{'ports':[{"
                         "'port':'53','protocol':'UDP'}]}]}]"));
  ck_assert (!np (none, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}}}],'ports':[{'protocol':'UDP','port':53}]}]"));
}
END_TEST

/* NetworkPolicies under the cilium engine, against a CiliumNetworkPolicy translation. */
START_TEST (test_cilium_network_policies)
{
  g_autoptr (JsonObject) want = cilium_translation (NZ_EGRESS_K8S_STATIC, hosts);

  /* The baseline's kube-dns rule equals the DNS-visibility rule less its L7 rule, which allows
   * `*`: within. */
  ck_assert (np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                       "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':"
                       "'kube-dns'}}}],'ports':[{'protocol':'UDP','port':53},{'protocol':'TCP',"
                       "'port':53}]}]"));
  /* ... but not with a member or a peer this check cannot read beside it. */
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':"
                        "'kube-dns'}}}],'ports':[{'protocol':'UDP','port':53}],'surprise':1}]"));
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':"
                        "'kube-dns'}}},{}],'ports':[{'protocol':'UDP','port':53}]}]"));
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':"
                        "'kube-dns'}}}],'ports':[{'protocol':'UDP','port':53},{'port':-1}]}]"));
  /* Every pod of kube-system, every port, any address, everywhere, unreadable shapes. */
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}}}],'ports':[{'protocol':'UDP','port':53}]}]"));
  ck_assert (!np (want, "[{'to':[{'namespaceSelector':{'matchLabels':{'kubernetes.io/metadata."
                        "name':'kube-system'}},'podSelector':{'matchLabels':{'k8s-app':"
                        "'kube-dns'}}}]}]"));
  ck_assert (!np (want, "[{'to':[{'ipBlock':{'cidr':'203.0.113.0/24'}}],'ports':[{'port':443}]}]"));
  ck_assert (!np (want, "[{}]"));
  ck_assert (!np (want, "[{'to':[{}]}]"));
  ck_assert (!np (want, "[{'to':[{'ipBlock':{'cidr':'10.0.0.0/8'},'podSelector':{}}]}]"));
  ck_assert (!np (want, "[{'to':[{'podSelector':{}}],'surprise':1}]"));
  ck_assert (!np (want, "[{'to':[{'podSelector':{}}],'ports':[{'port':53,'protocol':'ICMP'}]}]"));
  /* A selector peer without a namespace is the policy's own namespace, on either side. */
  {
    g_autoptr (JsonNode) db = sq ("{'kind':'NetworkPolicy','metadata':{'name':'t-egress'},'spec':{"
                                  "'egress':[{'to':[{'podSelector':{'matchLabels':{'app':'db'}}}]"
                                  "}]}}");
    JsonObject *o = json_node_get_object (db);

    ck_assert (cnp (o, "[{'toEndpoints':[{'matchLabels':{'k8s:app':'db'}}]}]"));
    ck_assert (cnp (o, "[{'toEndpoints':[{'matchLabels':{'k8s:app':'db','k8s:io.kubernetes.pod."
                       "namespace':'ns'}}]}]"));
    ck_assert (np (o, "[{'to':[{'podSelector':{'matchLabels':{'app':'db','tier':'x'}}}]}]"));
    ck_assert (!cnp (o, "[{'toEndpoints':[{'matchLabels':{'k8s:app':'db','k8s:io.kubernetes.pod."
                        "namespace':'other'}}]}]"));
    ck_assert (!np (o, "[{'to':[{'namespaceSelector':{},'podSelector':{'matchLabels':{'app':'db'"
                       "}}}]}]"));
    ck_assert (!cnp (o, "[{'toEndpoints':[{'matchLabels':{'any:app':'db'}}]}]"));
    /* A selector on namespace labels (or another source) is not confined to this namespace. */
    ck_assert (!cnp (o, "[{'toEndpoints':[{'matchLabels':{'k8s:app':'db','k8s:io.cilium.k8s."
                        "namespace.labels.team':'a'}}]}]"));
    ck_assert (!np (o, "[{'to':[{'namespaceSelector':{'matchLabels':{'team':'a'}},'podSelector':{"
                       "'matchLabels':{'app':'db'}}}]}]"));
    ck_assert (!cnp (o, "[{'toEndpoints':[{'matchLabels':{'k8s:app':'db','reserved:host':''}}]}]"));
  }
  /* Not judged: another selector, Ingress only, no egress rules. */
  ck_assert (judge_with (want,
                         "[{'metadata':{'name':'a'},'spec':{'podSelector':{'matchLabels':{'app':"
                         "'x'}},'policyTypes':['Egress'],'egress':[{}]}},{'metadata':{'name':'b'},"
                         "'spec':{'podSelector':{},'policyTypes':['Ingress'],'egress':[{}]}},"
                         "{'metadata':{'name':'c'},'spec':{'podSelector':{},'policyTypes':["
                         "'Egress']}}]",
                         "[]", ""));
  ck_assert (!judge_with (want, "['not a policy']", "[]", "NetworkPolicy (unnamed)"));
}
END_TEST

/* Which CiliumNetworkPolicies are judged: selection with Cilium's keys, `specs`, the exempt
 * named object (by kind and name), shapes the check cannot read. */
START_TEST (test_cilium_selection)
{
  g_autoptr (JsonObject) want = cilium_translation (NZ_EGRESS_K8S_STATIC, hosts);
  g_autoptr (JsonObject) deny = cilium_translation (NZ_EGRESS_K8S_DENY_ALL, NULL);
  struct
  {
    const char *selector;
    gboolean judged;
  } rows[] = {
    { "{}", TRUE },
    { "{'matchLabels':{'sandbox.namzu.ai/template':'t'}}", TRUE },
    { "{'matchLabels':{'any:sandbox.namzu.ai/template':'t'}}", TRUE },
    { "{'matchLabels':{'k8s:io.kubernetes.pod.namespace':'ns'}}", TRUE },
    { "{'matchLabels':{'k8s:io.kubernetes.pod.namespace':'other'}}", FALSE },
    { "{'matchLabels':{'k8s:app':'x'}}", FALSE },
    { "{'matchExpressions':[{'key':'k8s:sandbox.namzu.ai/template','operator':'NotIn','values':"
      "['t']}]}",
      FALSE },
    { "{'matchLabels':{'k8s:io.cilium.k8s.policy.serviceaccount':'default'}}", TRUE },
    { "{'matchLabels':{'reserved:init':''}}", TRUE },
    { "{'matchLabels':{'k8s:app':'x'},'surprise':1}", TRUE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *list = g_strdup_printf (
          "[{'metadata':{'name':'other'},'spec':{'endpointSelector':%s,'egress':[{'toEntities':["
          "'world']}]}}]",
          rows[i].selector);

      ck_assert_msg (judge_with (want, "[]", list, "CiliumNetworkPolicy other also selects")
                         == !rows[i].judged,
                     "%s", rows[i].selector);
    }
  /* specs: each entry on its own, named in the refusal. */
  ck_assert (!judge_with (want, "[]",
                          "[{'metadata':{'name':'other'},'specs':[{'endpointSelector':{"
                          "'matchLabels':{'k8s:app':'x'}},'egress':[{'toEntities':['world']}]},"
                          "{'endpointSelector':" SEL_T ",'egress':[{'toFQDNs':[{'matchName':"
                          "'api.example.com'}]},{'toCIDR':['10.0.0.0/8']}]}]}]",
                          "CiliumNetworkPolicy other specs[1] also selects the sandbox's pods "
                          "and its egress rule 2 (toCIDR 10.0.0.0/8 on every port and protocol"));
  ck_assert (judge_with (want, "[]",
                         "[{'metadata':{'name':'other'},'spec':{'endpointSelector':" SEL_T ","
                         "'egress':[{'toFQDNs':[{'matchName':'api.example.com'}]}]},'specs':[{"
                         "'endpointSelector':{'matchLabels':{'k8s:app':'x'}},'egress':[{}]}]}]",
                         ""));
  ck_assert (!judge_with (want, "[]",
                          "[{'metadata':{'name':'other'},'spec':{'endpointSelector':" SEL_T ","
                          "'egress':[]},'specs':{'not':'a list'}}]",
                          "CiliumNetworkPolicy other also selects"));
  ck_assert (!judge_with (want, "[]", "[{'metadata':{'name':'other'},'specs':['not a rule']}]",
                          "CiliumNetworkPolicy other specs[0]"));
  ck_assert (!judge_with (want, "[]",
                          "[{'metadata':{'name':'other'},'spec':{'endpointSelector':" SEL_T ","
                          "'egressAllowEverything':true}}]",
                          "its egress (member egressAllowEverything"));
  /* No endpointSelector (a nodeSelector rule): judged. */
  ck_assert (!judge_with (want, "[]",
                          "[{'metadata':{'name':'other'},'spec':{'nodeSelector':{},'egress':[{"
                          "'toEntities':['world']}]}}]",
                          "CiliumNetworkPolicy other also selects"));
  /* The named object is exempt only as the kind the translation is. */
  ck_assert (judge_with (want, "[]",
                         "[{'metadata':{'name':'t-egress'},'spec':{'endpointSelector':" SEL_T
                         ",'egress':[{'toEntities':['world']}]}}]",
                         ""));
  ck_assert (!judge_with (want,
                          "[{'metadata':{'name':'t-egress'},'spec':{'podSelector':{},"
                          "'policyTypes':['Egress'],'egress':[{}]}}]",
                          "[]", "NetworkPolicy t-egress also selects"));
  ck_assert (judge_with (deny,
                         "[{'metadata':{'name':'t-egress'},'spec':{'podSelector':{},"
                         "'policyTypes':['Egress'],'egress':[{}]}}]",
                         "[]", ""));
  ck_assert (!judge_with (deny, "[]",
                          "[{'metadata':{'name':'t-egress'},'spec':{'endpointSelector':" SEL_T
                          ",'egress':[{'toEntities':['world']}]}}]",
                          "CiliumNetworkPolicy t-egress also selects"));
}
END_TEST

/* Every translation's own rules, in a policy of another name, pass against it: the judgement
 * is never stricter than the translation itself. */
START_TEST (test_cilium_translation_passes_itself)
{
  const NzEgressK8sKind kinds[]
      = { NZ_EGRESS_K8S_DENY_ALL, NZ_EGRESS_K8S_NO_NETWORK, NZ_EGRESS_K8S_PUBLIC_INTERNET,
          NZ_EGRESS_K8S_ALLOW_ALL, NZ_EGRESS_K8S_STATIC };

  for (guint i = 0; i <= G_N_ELEMENTS (kinds); i++)
    {
      g_autoptr (JsonObject) want
          = i < G_N_ELEMENTS (kinds) ? cilium_translation (kinds[i], hosts) : narrowed ();
      g_autoptr (JsonNode) egress = json_node_copy (
          json_object_get_member (json_object_get_object_member (want, "spec"), "egress"));
      g_autofree char *rules = json_to_string (egress, FALSE);
      g_autofree char *quoted = g_strdelimit (g_strdup (rules), "\"", '\'');

      if (g_strcmp0 (nz_json_get_string (want, "kind"), "CiliumNetworkPolicy") == 0)
        ck_assert_msg (cnp (want, quoted), "%s", rules);
      else
        ck_assert_msg (np (want, quoted), "%s", rules);
    }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-union");
  TCase *tc = tcase_create ("union");
  TCase *tcc = tcase_create ("union-cilium");

  tcase_add_test (tc, test_deny_all);
  tcase_add_test (tc, test_public_internet_cidrs);
  tcase_add_test (tc, test_allow_all_and_exempt);
  tcase_add_test (tcc, test_cilium_fqdns);
  tcase_add_test (tcc, test_cilium_narrowed);
  tcase_add_test (tcc, test_cilium_destinations);
  tcase_add_test (tcc, test_cilium_core_translations);
  tcase_add_test (tcc, test_cilium_network_policies);
  tcase_add_test (tcc, test_cilium_selection);
  tcase_add_test (tcc, test_cilium_translation_passes_itself);
  suite_add_tcase (s, tc);
  suite_add_tcase (s, tcc);
  return nz_test_run (s);
}
