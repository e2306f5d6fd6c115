/* Unit tests of lib/kube/nz-kube-egress (reference-agent D.10.7): the named-object judgement
 * of verifyEgressPolicyApplied on manifests from nz-egress-k8s, one row per mismatch reason,
 * and the API path of each kind. */
#include <string.h>

#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "nz-kube-egress.h"
#include "../nz-test.h"

static JsonObject *
parse (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();

  g_assert (json_parser_load_from_data (p, json, -1, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (p)));
}

static JsonObject *
manifest (NzEgressK8sKind kind)
{
  const char *hosts[] = { "api.example.com", NULL };
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) n = NULL;

  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  n = nz_egress_k8s_translate (kind, NZ_EGRESS_K8S_CILIUM, NULL, hosts, "t-egress", "ns", sel,
                               NULL);
  return json_object_ref (json_node_get_object (n));
}

/* @edit applied to a copy of the translation, then judged against it. */
static char *
judge (NzEgressK8sKind kind, void (*edit) (JsonObject *spec))
{
  g_autoptr (JsonObject) want = manifest (kind);
  g_autoptr (JsonObject) got = manifest (kind);
  g_autoptr (GError) error = NULL;

  if (edit != NULL)
    edit (json_object_get_object_member (got, "spec"));
  if (nz_kube_egress_check_applied (want, got, "/p", &error))
    return NULL;
  ck_assert (g_error_matches (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH));
  ck_assert (g_str_has_prefix (error->message, "KubernetesEgressPolicyMismatchError: "));
  return g_strdup (error->message);
}

static void
add_specs (JsonObject *spec)
{
  json_object_set_array_member (spec, "specs", json_array_new ());
}

static void
other_selector (JsonObject *spec)
{
  JsonObject *sel = json_object_get_object_member (spec, "podSelector");

  json_object_set_object_member (sel, "matchLabels", json_object_new ());
}

static void
other_cilium_selector (JsonObject *spec)
{
  json_object_remove_member (spec, "endpointSelector");
}

static void
ingress_only (JsonObject *spec)
{
  JsonArray *t = json_array_new ();

  json_array_add_string_element (t, "Ingress");
  json_object_set_array_member (spec, "policyTypes", t);
}

static void
wider_egress (JsonObject *spec)
{
  json_array_add_object_element (json_object_get_array_member (spec, "egress"), json_object_new ());
}

static void
reordered (JsonObject *spec)
{
  /* The same rules with their keys in another order: deep-equal, not byte-equal. */
  g_autoptr (JsonObject) copy
      = parse ("{\"policyTypes\":[\"Egress\"],\"egress\":[{\"ports\":[{\"port\":53,\"protocol\":"
               "\"UDP\"},{\"port\":53,\"protocol\":\"TCP\"}],\"to\":[{\"namespaceSelector\":{"
               "\"matchLabels\":{\"kubernetes.io/metadata.name\":\"kube-system\"}}}]}]}");

  json_object_set_member (spec, "egress", json_node_copy (json_object_get_member (copy, "egress")));
}

static void
no_default_deny (JsonObject *spec)
{
  json_object_set_object_member (spec, "enableDefaultDeny", parse ("{\"egress\":false}"));
}

static void
default_deny_kept (JsonObject *spec)
{
  json_object_set_object_member (spec, "enableDefaultDeny",
                                 parse ("{\"egress\":true,\"ingress\":false}"));
}

START_TEST (test_named_object_judgement)
{
  g_autofree char *same = judge (NZ_EGRESS_K8S_DENY_ALL, NULL);
  g_autofree char *same_cil = judge (NZ_EGRESS_K8S_STATIC, NULL);
  g_autofree char *order = judge (NZ_EGRESS_K8S_DENY_ALL, reordered);
  g_autofree char *specs = judge (NZ_EGRESS_K8S_STATIC, add_specs);
  g_autofree char *sel = judge (NZ_EGRESS_K8S_DENY_ALL, other_selector);
  g_autofree char *csel = judge (NZ_EGRESS_K8S_STATIC, other_cilium_selector);
  g_autofree char *types = judge (NZ_EGRESS_K8S_DENY_ALL, ingress_only);
  g_autofree char *wide = judge (NZ_EGRESS_K8S_NO_NETWORK, wider_egress);
  g_autofree char *wide_cil = judge (NZ_EGRESS_K8S_STATIC, wider_egress);
  g_autofree char *additive = judge (NZ_EGRESS_K8S_STATIC, no_default_deny);
  g_autofree char *deny_kept = judge (NZ_EGRESS_K8S_STATIC, default_deny_kept);

  ck_assert (same == NULL && same_cil == NULL && order == NULL && deny_kept == NULL);
  ck_assert_msg (additive != NULL && strstr (additive, "enableDefaultDeny.egress false") != NULL,
                 "%s", additive ? additive : "(passed)");
  ck_assert_msg (strstr (specs, "CiliumNetworkPolicy /p carries `specs`") != NULL, "%s", specs);
  ck_assert_msg (strstr (sel, "NetworkPolicy /p selects other pods") != NULL, "%s", sel);
  ck_assert_msg (strstr (csel, "selects other endpoints") != NULL, "%s", csel);
  ck_assert_msg (strstr (types, "has no Egress in policyTypes") != NULL, "%s", types);
  ck_assert_msg (strstr (wide, "has other egress rules") != NULL, "%s", wide);
  ck_assert_msg (strstr (wide_cil, "has other egress rules") != NULL, "%s", wide_cil);
}
END_TEST

START_TEST (test_owner_references)
{
  g_autoptr (JsonObject) want = manifest (NZ_EGRESS_K8S_STATIC);
  g_autoptr (JsonObject) got = manifest (NZ_EGRESS_K8S_STATIC);
  g_autoptr (JsonObject) owner
      = parse ("{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\",\"name\":\"s\","
               "\"uid\":\"u-1\"}");
  g_autoptr (JsonObject) other
      = parse ("{\"apiVersion\":\"agents.x-k8s.io/v1beta1\",\"kind\":\"Sandbox\",\"name\":\"s\","
               "\"uid\":\"u-2\"}");
  JsonArray *w = json_array_new ();
  JsonArray *g = json_array_new ();
  g_autoptr (GError) e1 = NULL;

  json_array_add_object_element (w, json_object_ref (owner));
  json_object_set_array_member (json_object_get_object_member (want, "metadata"), "ownerReferences",
                                w);
  ck_assert (!nz_kube_egress_check_applied (want, got, "/p", &e1));
  ck_assert (strstr (e1->message, "lacks an ownerReference") != NULL);
  json_array_add_object_element (g, json_object_ref (other));
  json_object_set_array_member (json_object_get_object_member (got, "metadata"), "ownerReferences",
                                g);
  ck_assert (!nz_kube_egress_check_applied (want, got, "/p", NULL));
  json_array_add_object_element (g, json_object_ref (owner));
  ck_assert (nz_kube_egress_check_applied (want, got, "/p", NULL));
}
END_TEST

START_TEST (test_policy_path)
{
  g_autoptr (JsonObject) core = manifest (NZ_EGRESS_K8S_PUBLIC_INTERNET);
  g_autoptr (JsonObject) cil = manifest (NZ_EGRESS_K8S_STATIC);
  g_autoptr (JsonObject) pod = parse ("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
                                      "\"namespace\":\"b\"}}");
  g_autofree char *p1 = nz_kube_egress_policy_path (core);
  g_autofree char *p2 = nz_kube_egress_policy_path (cil);
  g_autofree char *p3 = nz_kube_egress_policy_path (pod);

  ck_assert_str_eq (p1, "/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies/t-egress");
  ck_assert_str_eq (p2, "/apis/cilium.io/v2/namespaces/ns/ciliumnetworkpolicies/t-egress");
  ck_assert (p3 == NULL);
}
END_TEST

/* D.10.8: the per-sandbox policy's name, selector and ownerReference, byte for byte. */
START_TEST (test_per_sandbox_policy)
{
  const char *hosts[] = { "api.example.com", NULL };
  const char *hostile[] = { "a.example\"}],\"toCIDR\":[\"0.0.0.0/0", NULL };
  g_autoptr (JsonObject) claim = nz_kube_egress_per_sandbox_policy (
      "ns", "sandbox.namzu.ai/per-sandbox-egress", TRUE, "c-1", "uid-1", hosts, NULL, NULL);
  g_autoptr (JsonObject) sbx = nz_kube_egress_per_sandbox_policy (
      "ns", "sandbox.namzu.ai/per-sandbox-egress", FALSE, "s-1", "uid-2", hosts, NULL, NULL);
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_autoptr (JsonObject) no_uid = nz_kube_egress_per_sandbox_policy (
      "ns", "sandbox.namzu.ai/per-sandbox-egress", TRUE, "c-1", "", hosts, NULL, &e1);
  g_autoptr (JsonObject) bad = nz_kube_egress_per_sandbox_policy (
      "ns", "sandbox.namzu.ai/per-sandbox-egress", TRUE, "c-1", "uid-1", hostile, NULL, &e2);
  g_autofree char *claim_s = nz_json_object_to_string (claim, NULL);
  g_autofree char *sbx_s = nz_json_object_to_string (sbx, NULL);

  ck_assert_str_eq (
      claim_s,
      "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{\"name\":"
      "\"namzu-sbx-uid-1\",\"namespace\":\"ns\",\"ownerReferences\":[{\"apiVersion\":"
      "\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxClaim\",\"name\":\"c-1\","
      "\"uid\":\"uid-1\"}]},\"spec\":{\"endpointSelector\":{\"matchLabels\":{"
      "\"sandbox.namzu.ai/per-sandbox-egress\":\"c-1\"}},\"egress\":[{\"toEndpoints\":[{"
      "\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"kube-system\",\"k8s:k8s-app\":"
      "\"kube-dns\"}}],\"toPorts\":[{\"ports\":[{\"port\":\"53\",\"protocol\":\"ANY\"}],"
      "\"rules\":{\"dns\":[{\"matchPattern\":\"*\"}]}}]},{\"toFQDNs\":[{\"matchName\":"
      "\"api.example.com\"}]}]}}");
  ck_assert (strstr (sbx_s, "\"ownerReferences\":[{\"apiVersion\":\"agents.x-k8s.io/v1beta1\","
                            "\"kind\":\"Sandbox\",\"name\":\"s-1\",\"uid\":\"uid-2\"}]")
             != NULL);
  ck_assert (strstr (sbx_s, "blockOwnerDeletion") == NULL);
  ck_assert (no_uid == NULL);
  ck_assert (g_error_matches (e1, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING));
  ck_assert (g_str_has_prefix (e1->message, "KubernetesOwnerUidMissingError: SandboxClaim c-1 "
                                            "in namespace ns"));
  ck_assert (bad == NULL);
  ck_assert (g_str_has_prefix (e2->message, "KubernetesNetworkPolicyHostError: "));
}
END_TEST

/* D.10.8 with perSandbox.narrowing: the same object, its egress narrowed, dnsNames' namespace
 * the sandbox's; a host the narrowing cannot express writes nothing. */
START_TEST (test_per_sandbox_narrowed)
{
  const char *hosts[] = { "API.example.com", NULL };
  const char *domain[] = { ".example.com", NULL };
  g_autoptr (JsonObject) cfg
      = parse ("{\"ports\":[443],\"dnsNames\":{\"clusterDomain\":\"c.local\"},"
               "\"tlsServerNames\":true}");
  g_autoptr (JsonNode) cfg_node = json_node_init_object (json_node_alloc (), cfg);
  g_autoptr (NzEgressK8sNarrowing) nw
      = nz_egress_k8s_narrowing_parse (cfg_node, "perSandbox.narrowing", NULL);
  g_autoptr (JsonObject) got = nz_kube_egress_per_sandbox_policy (
      "sbx-ns", "sandbox.namzu.ai/per-sandbox-egress", TRUE, "c-1", "uid-1", hosts, nw, NULL);
  g_autoptr (JsonObject) want = parse (
      "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{\"name\":"
      "\"namzu-sbx-uid-1\",\"namespace\":\"sbx-ns\",\"ownerReferences\":[{\"apiVersion\":"
      "\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxClaim\",\"name\":\"c-1\","
      "\"uid\":\"uid-1\"}]},\"spec\":{\"endpointSelector\":{\"matchLabels\":{"
      "\"sandbox.namzu.ai/per-sandbox-egress\":\"c-1\"}},\"egress\":[{\"toEndpoints\":[{"
      "\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"kube-system\",\"k8s:k8s-app\":"
      "\"kube-dns\"}}],\"toPorts\":[{\"ports\":[{\"port\":\"53\",\"protocol\":\"ANY\"}],"
      "\"rules\":{\"dns\":[{\"matchName\":\"API.example.com\"},{\"matchName\":"
      "\"API.example.com.sbx-ns.svc.c.local\"},{\"matchName\":\"API.example.com.svc.c.local\"},"
      "{\"matchName\":\"API.example.com.c.local\"}]}}]},{\"toFQDNs\":[{\"matchName\":"
      "\"API.example.com\"}],\"toPorts\":[{\"ports\":[{\"port\":\"443\",\"protocol\":"
      "\"TCP\"}],\"serverNames\":[\"API.example.com\"]}]}]}}");
  g_autofree char *got_s = nz_json_object_to_string (got, NULL);
  g_autofree char *want_s = nz_json_object_to_string (want, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) refused = nz_kube_egress_per_sandbox_policy (
      "sbx-ns", "sandbox.namzu.ai/per-sandbox-egress", TRUE, "c-1", "uid-1", domain, nw, &error);

  ck_assert (nw != NULL);
  ck_assert_str_eq (got_s, want_s);
  ck_assert (refused == NULL);
  ck_assert_msg (g_str_has_prefix (error->message, "KubernetesEgressPolicyConfigError: "
                                                   "backend.egress.perSandbox.narrowing."
                                                   "tlsServerNames cannot serve the domain entry"),
                 "%s", error->message);
}
END_TEST

/* The label-selector semantics the union and ingress checks rest on. */
START_TEST (test_selector_matches)
{
  struct
  {
    const char *selector;
    gboolean matches;
  } rows[] = {
    { "{}", TRUE },
    { "{\"matchLabels\":{}}", TRUE },
    { "{\"matchLabels\":{\"app\":\"sbx\"}}", TRUE },
    { "{\"matchLabels\":{\"app\":\"sbx\",\"tier\":\"x\"}}", FALSE },
    { "{\"matchLabels\":{\"app\":\"other\"}}", FALSE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"a\",\"sbx\"]}]}",
      TRUE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"a\"]}]}", FALSE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}",
      TRUE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"NotIn\",\"values\":[\"sbx\"]}]}",
      FALSE },
    { "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}",
      TRUE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"}]}", TRUE },
    { "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"Exists\"}]}", FALSE },
    { "{\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"DoesNotExist\"}]}", TRUE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"DoesNotExist\"}]}", FALSE },
    { "{\"matchLabels\":{\"app\":\"sbx\"},\"matchExpressions\":[{\"key\":\"app\",\"operator\":"
      "\"DoesNotExist\"}]}",
      FALSE },
    /* Unreadable selectors are taken to select the pod, so their rules get judged. */
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}", TRUE },
    { "{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\"}]}", TRUE },
    { "{\"matchLabels\":[]}", TRUE },
  };
  g_autoptr (JsonObject) labels = parse ("{\"app\":\"sbx\",\"namzu.ai/component\":\"sandbox\"}");

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autoptr (JsonObject) sel = parse (rows[i].selector);

      ck_assert_msg (nz_kube_egress_selector_matches (sel, labels) == rows[i].matches, "%s",
                     rows[i].selector);
    }
}
END_TEST

/* A CiliumNetworkPolicy's endpointSelector: source prefixes, the namespace label, and keys the
 * pod's own labels cannot show (taken as met). */
START_TEST (test_endpoint_selector_matches)
{
  struct
  {
    const char *selector;
    gboolean matches;
  } rows[] = {
    { "{}", TRUE },
    { "{\"matchLabels\":{\"app\":\"sbx\"}}", TRUE },
    { "{\"matchLabels\":{\"k8s:app\":\"sbx\"}}", TRUE },
    { "{\"matchLabels\":{\"any:app\":\"sbx\"}}", TRUE },
    { "{\"matchLabels\":{\"k8s:app\":\"other\"}}", FALSE },
    { "{\"matchLabels\":{\"k8s:app\":\"sbx\",\"any:app\":\"other\"}}", FALSE },
    { "{\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"ns\"}}", TRUE },
    { "{\"matchLabels\":{\"io.kubernetes.pod.namespace\":\"ns\"}}", TRUE },
    { "{\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"other\"}}", FALSE },
    { "{\"matchExpressions\":[{\"key\":\"k8s:app\",\"operator\":\"In\",\"values\":[\"sbx\"]}]}",
      TRUE },
    { "{\"matchExpressions\":[{\"key\":\"k8s:app\",\"operator\":\"NotIn\",\"values\":[\"sbx\"]}]}",
      FALSE },
    { "{\"matchExpressions\":[{\"key\":\"any:tier\",\"operator\":\"Exists\"}]}", FALSE },
    /* Derived labels and other sources: the pod's labels do not show them, so met. */
    { "{\"matchLabels\":{\"k8s:io.cilium.k8s.policy.serviceaccount\":\"default\"}}", TRUE },
    { "{\"matchLabels\":{\"io.kubernetes.pod.name\":\"x\"}}", TRUE },
    { "{\"matchLabels\":{\"reserved:init\":\"\"}}", TRUE },
    { "{\"matchExpressions\":[{\"key\":\"container:x\",\"operator\":\"Exists\"}]}", TRUE },
    /* Unreadable: selects. */
    { "{\"matchLabels\":{\"k8s:app\":1}}", TRUE },
    { "{\"matchLabels\":[]}", TRUE },
    { "{\"matchExpressions\":[{\"operator\":\"Exists\"}]}", TRUE },
    { "{\"matchLabels\":{\"k8s:app\":\"other\"},\"surprise\":1}", TRUE },
  };
  g_autoptr (JsonObject) labels = parse ("{\"app\":\"sbx\"}");

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autoptr (JsonObject) sel = parse (rows[i].selector);

      ck_assert_msg (nz_kube_egress_endpoint_selector_matches (sel, labels, "ns")
                         == rows[i].matches,
                     "%s", rows[i].selector);
    }
  ck_assert (nz_kube_egress_endpoint_selector_matches (NULL, labels, "ns"));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-egress");
  TCase *tc = tcase_create ("named");

  tcase_add_test (tc, test_named_object_judgement);
  tcase_add_test (tc, test_owner_references);
  tcase_add_test (tc, test_policy_path);
  tcase_add_test (tc, test_per_sandbox_policy);
  tcase_add_test (tc, test_per_sandbox_narrowed);
  tcase_add_test (tc, test_selector_matches);
  tcase_add_test (tc, test_endpoint_selector_matches);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
