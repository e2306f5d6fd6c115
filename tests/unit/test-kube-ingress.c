/* Unit tests of lib/kube/nz-kube-ingress (spec D.9): which NetworkPolicies and, under the
 * cilium engine, CiliumNetworkPolicies prove the agent port reachable only from the host's
 * pods, and which let another peer reach it. */
#include <string.h>

#include "nz-kube-ingress.h"
#include "../nz-test.h"

#define PORT 1024

/* @json with ' for ". Returns a new node. */
static JsonNode *
sq (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  g_autofree char *text = g_strdelimit (g_strdup (json), "'", '"');

  ck_assert_msg (json_parser_load_from_data (p, text, -1, NULL), "%s", text);
  return json_node_copy (json_parser_get_root (p));
}

/* deploy/k8s/networkpolicy.yaml's ingress: host pods on TCP 1024. */
#define BASELINE                                                                                   \
  "{'metadata':{'name':'baseline'},'spec':{'podSelector':{},'policyTypes':['Ingress'],"            \
  "'ingress':[{'from':[{'podSelector':{'matchLabels':{'namzu.ai/component':'host'}}}],"            \
  "'ports':[{'protocol':'TCP','port':1024}]}]}}"
#define SEL_T "{'matchLabels':{'k8s:app':'sbx'}}"
#define FROM_HOST "{'matchLabels':{'k8s:namzu.ai/component':'host'}}"

/* nz_kube_ingress_check on @nps and @cnps (JSON lists, ' for "; @cnps NULL: the core engine):
 * 0 when it passes, else the error code, whose message must hold @named. */
static int
judge (const char *nps, const char *cnps, const char *named)
{
  g_autoptr (JsonNode) np = sq (nps);
  g_autoptr (JsonNode) cnp = cnps != NULL ? sq (cnps) : NULL;
  g_autoptr (JsonNode) labels = sq ("{'app':'sbx'}");
  g_autoptr (GError) error = NULL;
  gboolean ok = nz_kube_ingress_check (json_node_get_array (np),
                                       cnp != NULL ? json_node_get_array (cnp) : NULL, "ns",
                                       json_node_get_object (labels), PORT, &error);

  ck_assert (ok == (error == NULL));
  if (ok)
    return 0;
  ck_assert_msg (error->domain == NZ_KUBE_INGRESS_ERROR && strstr (error->message, named) != NULL,
                 "%s", error->message);
  return error->code + 1;
}

#define OK 0
#define NOT_ISOLATED (NZ_KUBE_INGRESS_ERROR_NOT_ISOLATED + 1)
#define TOO_WIDE (NZ_KUBE_INGRESS_ERROR_TOO_WIDE + 1)

/* One CiliumNetworkPolicy "c" selecting the pods, with @ingress, beside the baseline. */
static int
cnp (const char *ingress)
{
  g_autofree char *list = g_strdup_printf (
      "[{'metadata':{'name':'c'},'spec':{'endpointSelector':" SEL_T ",'ingress':%s}}]", ingress);

  return judge ("[" BASELINE "]", list,
                "CiliumNetworkPolicy c does not keep the agent port 1024 private");
}

START_TEST (test_network_policies)
{
  ck_assert_int_eq (judge ("[" BASELINE "]", NULL, ""), OK);
  ck_assert_int_eq (judge ("[]", NULL, "no NetworkPolicy with Ingress"), NOT_ISOLATED);
  ck_assert_int_eq (judge ("[" BASELINE ",{'metadata':{'name':'w'},'spec':{'podSelector':{},"
                           "'ingress':[{}]}}]",
                           NULL, "NetworkPolicy w does not keep the agent port 1024 private"),
                    TOO_WIDE);
  ck_assert_int_eq (judge ("[" BASELINE ",{'metadata':{'name':'w'},'spec':{'podSelector':{},"
                           "'ingress':[{'ports':[{'port':8080}]}]}}]",
                           NULL, ""),
                    OK);
}
END_TEST

START_TEST (test_cilium_policies)
{
  /* Under the core engine CiliumNetworkPolicies are not listed (NULL), so not read. */
  ck_assert_int_eq (judge ("[" BASELINE "]", NULL, ""), OK);
  /* Host pods (key with or without a source), in this namespace, on the agent port. */
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[" FROM_HOST "],'toPorts':[{'ports':[{'port':'1024',"
                         "'protocol':'TCP'}]}]}]"),
                    OK);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{'matchLabels':{'any:namzu.ai/component':'host',"
                         "'k8s:io.kubernetes.pod.namespace':'ns'}}]}]"),
                    OK);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{'matchExpressions':[{'key':'namzu.ai/component',"
                         "'operator':'In','values':['host']}]}]}]"),
                    OK);
  /* Rules that cannot reach TCP 1024, Cilium's default-deny {}, deny rules. */
  ck_assert_int_eq (cnp ("[{'toPorts':[{'ports':[{'port':'8080','protocol':'TCP'}]}]}]"), OK);
  ck_assert_int_eq (cnp ("[{'fromEntities':['world'],'toPorts':[{'ports':[{'port':'1024',"
                         "'protocol':'UDP'}]}]}]"),
                    OK);
  ck_assert_int_eq (cnp ("[{'fromEntities':['world'],'toPorts':[{'ports':[{'port':'2000',"
                         "'endPort':3000}]}]}]"),
                    OK);
  ck_assert_int_eq (cnp ("[{}]"), OK);
  ck_assert_int_eq (judge ("[" BASELINE "]",
                           "[{'metadata':{'name':'c'},'spec':{'endpointSelector':" SEL_T ","
                           "'ingressDeny':[{'fromEntities':['world']}]}}]",
                           ""),
                    OK);
  /* From anywhere: no peer, every pod, another namespace, a CIDR, an entity, a member this
   * check does not know; on the port, a range over it, every port, a named port. */
  ck_assert_int_eq (cnp ("[{'toPorts':[{'ports':[{'port':'1024','protocol':'TCP'}]}]}]"), TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{}]}]"), TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{'matchLabels':{'k8s:namzu.ai/component':'host',"
                         "'k8s:io.kubernetes.pod.namespace':'other'}}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{'matchLabels':{'k8s:namzu.ai/component':'host'},"
                         "'matchExpressions':[{'key':'k8s:io.kubernetes.pod.namespace',"
                         "'operator':'Exists'}]}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[{'matchLabels':{'k8s:namzu.ai/component':'host',"
                         "'k8s:io.cilium.k8s.namespace.labels.team':'a'}}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromCIDR':['10.0.0.0/8'],'toPorts':[{'ports':[{'port':'1000',"
                         "'endPort':2000}]}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEntities':['world'],'toPorts':[{'ports':[{'port':'0'}]}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[" FROM_HOST "],'fromCIDRSet':[{'cidr':'0.0.0.0/0'}],"
                         "'toPorts':[{'ports':[{'port':'agent','protocol':'ANY'}]}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("[{'fromEndpoints':[" FROM_HOST ",{'matchLabels':{'k8s:app':'x'}}]}]"),
                    TOO_WIDE);
  ck_assert_int_eq (cnp ("['not a rule']"), TOO_WIDE);
  ck_assert_int_eq (cnp ("{'not':'a list'}"), TOO_WIDE);
  /* specs, each on its own; a policy selecting other pods is not judged. */
  ck_assert_int_eq (judge ("[" BASELINE "]",
                           "[{'metadata':{'name':'c'},'specs':[{'endpointSelector':{'matchLabels'"
                           ":{'k8s:app':'x'}},'ingress':[{'fromEntities':['world']}]},{"
                           "'endpointSelector':" SEL_T ",'ingress':[{'fromEntities':['world']}]"
                           "}]}]",
                           "CiliumNetworkPolicy c specs[1] does not keep"),
                    TOO_WIDE);
  /* Isolation from a CiliumNetworkPolicy alone, unless it turns default deny off. */
  ck_assert_int_eq (judge ("[]",
                           "[{'metadata':{'name':'c'},'spec':{'endpointSelector':" SEL_T ","
                           "'ingress':[{'fromEndpoints':[" FROM_HOST "]}]}}]",
                           ""),
                    OK);
  ck_assert_int_eq (
      judge ("[]",
             "[{'metadata':{'name':'c'},'spec':{'endpointSelector':" SEL_T ","
             "'enableDefaultDeny':{'ingress':false},'ingress':[{'fromEndpoints':[" FROM_HOST
             "]}]}}]",
             "no NetworkPolicy with Ingress"),
      NOT_ISOLATED);
  ck_assert_int_eq (judge ("[]",
                           "[{'metadata':{'name':'c'},'spec':{'endpointSelector':{'matchLabels':"
                           "{'k8s:app':'x'}},'ingress':[{'fromEndpoints':[" FROM_HOST "]}]}}]",
                           "no NetworkPolicy with Ingress"),
                    NOT_ISOLATED);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-ingress");
  TCase *tc = tcase_create ("ingress");

  tcase_add_test (tc, test_network_policies);
  tcase_add_test (tc, test_cilium_policies);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
