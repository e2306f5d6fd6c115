/* Unit tests of lib/kube/nz-kube-union (spec D.10.7, the core engine): one row per way another
 * selecting NetworkPolicy can allow more (or no more) than the translation. */
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
  gboolean ok = nz_kube_union_check (json_node_get_array (list), json_node_get_object (labels),
                                     want, &error);

  ck_assert (ok == (error == NULL));
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

int
main (void)
{
  Suite *s = suite_create ("kube-union");
  TCase *tc = tcase_create ("union");

  tcase_add_test (tc, test_deny_all);
  tcase_add_test (tc, test_public_internet_cidrs);
  tcase_add_test (tc, test_allow_all_and_exempt);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
