/* Integration tests of lib/kube/nz-kube-persandbox against tests/fakes/fake-kube-apiserver.py
 * (no cluster runs here): the admission fence (spec D.10.8) read over real HTTPS, missing (404)
 * and unreadable (403, the fake's /fake/forbid-resource) with nothing written, memoised only
 * once proven; then the per-sandbox policy's POST, its 409 -> PATCH, a pre-existing object the
 * PATCH cannot make exact refused on read-back, and the DELETE of an empty list. The fake's
 * user here is not the host's service account, so its own admission enforcement stays out of
 * the way: these are the host's checks. */
#include <stdlib.h>
#include <string.h>

#include "nz-json.h"
#include "nz-kube-client.h"
#include "nz-kube-error.h"
#include "nz-kube-persandbox.h"
#include "../nz-test.h"
#include "kube-fake.h"

#define NS "namzu-sandboxes"
#define FENCE "namzu-per-sandbox-egress"
#define CNPS "/apis/cilium.io/v2/namespaces/" NS "/ciliumnetworkpolicies"

static char *dir;
static char *ca_pem;
static guint16 port;
static GPid fake_pid;

static NzKubeClient *
client (void)
{
  return kube_fake_client (port, ca_pem, "fence-token");
}

static void
request (NzKubeClient *c, const char *method, const char *path, const char *json)
{
  g_autoptr (JsonNode) body = NULL;
  g_autoptr (JsonNode) answer = NULL;
  g_autoptr (GError) error = NULL;

  if (json != NULL)
    {
      body = json_node_new (JSON_NODE_OBJECT);
      json_node_take_object (body, nz_json_parse_object (json, -1, NULL));
    }
  answer = nz_kube_client_request (c, method, path, NZ_KUBE_CONTENT_JSON, body, &error);
  ck_assert_msg (answer != NULL, "%s %s: %s", method, path, error ? error->message : "");
}

static void
fence_apply (NzKubeClient *c)
{
  request (c, "POST", NZ_KUBE_ADMISSION_API_PREFIX "/" NZ_KUBE_ADMISSION_POLICIES,
           "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
           "\"ValidatingAdmissionPolicy\",\"metadata\":{\"name\":\"" FENCE "\"},\"spec\":{}}");
  request (c, "POST", NZ_KUBE_ADMISSION_API_PREFIX "/" NZ_KUBE_ADMISSION_BINDINGS,
           "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
           "\"ValidatingAdmissionPolicyBinding\",\"metadata\":{\"name\":\"" FENCE "-binding\"},"
           "\"spec\":{\"policyName\":\"" FENCE "\",\"validationActions\":[\"Deny\"]}}");
}

static void
fence_remove (NzKubeClient *c)
{
  request (c, "DELETE", NZ_KUBE_ADMISSION_API_PREFIX "/" NZ_KUBE_ADMISSION_POLICIES "/" FENCE,
           NULL);
  request (c, "DELETE",
           NZ_KUBE_ADMISSION_API_PREFIX "/" NZ_KUBE_ADMISSION_BINDINGS "/" FENCE "-binding", NULL);
}

static int
fence_code (NzKubeClient *c)
{
  g_autoptr (GError) error = NULL;

  if (nz_kube_admission_fence_check (c, FENCE, FENCE "-binding", &error))
    return -1;
  ck_assert_msg (error->domain == NZ_KUBE_EGRESS_ERROR, "%s", error->message);
  return error->code;
}

START_TEST (test_fence)
{
  g_autoptr (NzKubeClient) c = client ();
  g_autoptr (GError) missing = NULL;
  g_autoptr (GError) unreadable = NULL;

  nz_kube_admission_fence_forget ();
  ck_assert (!nz_kube_admission_fence_check (c, FENCE, FENCE "-binding", &missing));
  ck_assert (g_error_matches (missing, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_FENCE_MISSING));
  ck_assert_msg (g_str_has_prefix (missing->message,
                                   "KubernetesAdmissionFenceMissingError: "
                                   "ValidatingAdmissionPolicy " FENCE
                                   " (/apis/admissionregistration.k8s.io/v1/"
                                   "validatingadmissionpolicies/" FENCE ") is not applied"),
                 "%s", missing->message);
  /* A failure is not remembered: once applied, the next read proves it. */
  fence_apply (c);
  request (c, "POST", "/fake/forbid-resource/" NZ_KUBE_ADMISSION_BINDINGS, "{}");
  ck_assert (!nz_kube_admission_fence_check (c, FENCE, FENCE "-binding", &unreadable));
  ck_assert (
      g_error_matches (unreadable, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_FENCE_UNREADABLE));
  ck_assert_msg (g_str_has_prefix (unreadable->message,
                                   "KubernetesAdmissionFenceUnreadableError: "
                                   "ValidatingAdmissionPolicyBinding " FENCE "-binding")
                     && strstr (unreadable->message, "HTTP 403") != NULL
                     && strstr (unreadable->message, "Nothing was written.") != NULL,
                 "%s", unreadable->message);
  request (c, "DELETE", "/fake/forbid-resource/" NZ_KUBE_ADMISSION_BINDINGS, NULL);
  ck_assert_int_eq (fence_code (c), -1);
  /* Proven once: remembered for the process (per server and names), until forgotten. */
  fence_remove (c);
  ck_assert_int_eq (fence_code (c), -1);
  nz_kube_admission_fence_forget ();
  ck_assert_int_eq (fence_code (c), NZ_KUBE_EGRESS_ERROR_FENCE_MISSING);
}
END_TEST

static JsonObject *
read_policy (NzKubeClient *c, const char *uid, GError **error)
{
  g_autofree char *path = g_strdup_printf (CNPS "/namzu-sbx-%s", uid);

  return nz_kube_get (c, path, error);
}

START_TEST (test_write)
{
  g_autoptr (NzKubeClient) c = client ();
  const char *first[] = { "api.example.com", NULL };
  const char *second[] = { "b.example.org", ".c.example", NULL };
  const char *none[] = { NULL };
  NzKubePerSandbox ps = {
    NS, "sandbox.namzu.ai/per-sandbox-egress", FENCE, FENCE "-binding", FALSE, "namzu-task-1", "u-1"
  };
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_autoptr (GError) e3 = NULL;
  g_autoptr (GError) gone = NULL;
  g_autoptr (JsonObject) got = NULL;
  g_autoptr (JsonObject) again = NULL;
  g_autoptr (JsonObject) after = NULL;
  g_autofree char *s = NULL;
  gboolean changed = FALSE;

  nz_kube_admission_fence_forget ();
  fence_apply (c);
  ck_assert_msg (nz_kube_per_sandbox_set (c, &ps, first, &changed, &e1), "%s",
                 e1 ? e1->message : "");
  ck_assert (changed);
  got = read_policy (c, "u-1", NULL);
  s = nz_json_object_to_string (json_object_get_object_member (got, "spec"), NULL);
  ck_assert_str_eq (s, "{\"endpointSelector\":{\"matchLabels\":{\"sandbox.namzu.ai/"
                       "per-sandbox-egress\":\"namzu-task-1\"}},\"egress\":[{\"toEndpoints\":[{"
                       "\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"kube-system\","
                       "\"k8s:k8s-app\":\"kube-dns\"}}],\"toPorts\":[{\"ports\":[{\"port\":\"53\","
                       "\"protocol\":\"ANY\"}],\"rules\":{\"dns\":[{\"matchPattern\":\"*\"}]}}]},{"
                       "\"toFQDNs\":[{\"matchName\":\"api.example.com\"}]}]}");
  /* The same list: the POST's 409, the PATCH, nothing different. */
  ck_assert (nz_kube_per_sandbox_set (c, &ps, first, &changed, NULL));
  ck_assert (!changed);
  /* Another list: the same object, PATCHed. */
  ck_assert (nz_kube_per_sandbox_set (c, &ps, second, &changed, NULL));
  ck_assert (changed);
  again = read_policy (c, "u-1", NULL);
  ck_assert_str_eq (
      json_object_get_string_member (json_object_get_object_member (again, "metadata"), "uid"),
      json_object_get_string_member (json_object_get_object_member (got, "metadata"), "uid"));
  g_free (s);
  s = nz_json_object_to_string (json_object_get_object_member (again, "spec"), NULL);
  ck_assert (strstr (s, "{\"matchPattern\":\"*.c.example\"}") != NULL);
  /* An empty list deletes it; once gone, again is done and changes nothing. */
  ck_assert (nz_kube_per_sandbox_set (c, &ps, none, &changed, NULL));
  ck_assert (changed);
  ck_assert (read_policy (c, "u-1", &gone) == NULL);
  ck_assert (g_error_matches (gone, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE));
  ck_assert (nz_kube_per_sandbox_set (c, &ps, none, &changed, NULL));
  ck_assert (!changed);
  /* An object under its name that a merge patch cannot make exact (an ingress member the
   * host never sends): written over, then refused on read-back. */
  request (c, "POST", CNPS,
           "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{"
           "\"name\":\"namzu-sbx-u-2\"},\"spec\":{\"ingress\":[{}]}}");
  ps.owner_uid = "u-2";
  ck_assert (!nz_kube_per_sandbox_set (c, &ps, first, &changed, &e2));
  ck_assert (g_error_matches (e2, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH));
  ck_assert_msg (strstr (e2->message, "has spec members the write did not send") != NULL, "%s",
                 e2->message);
  /* No fence, no write: not even a DELETE. */
  fence_remove (c);
  nz_kube_admission_fence_forget ();
  ck_assert (!nz_kube_per_sandbox_set (c, &ps, none, &changed, &e3));
  ck_assert (g_error_matches (e3, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_FENCE_MISSING));
  after = read_policy (c, "u-2", NULL);
  ck_assert (after != NULL);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-persandbox-api");
  TCase *tc = tcase_create ("fence");
  const char *extra[] = { "--token", "fence=fence-token", NULL };
  int rc;

  nz_test_require_program ("python3", "python3 (scripts/install-deps)");
  nz_test_require_program ("certtool", "certtool (gnutls-bin, scripts/install-deps)");
  port = kube_fake_start_self_signed ("nz-kube-persandbox-XXXXXX", extra, &dir, &ca_pem, &fake_pid);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_fence);
  tcase_add_test (tc, test_write);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);
  if (!kube_fake_stop_self_signed (fake_pid, dir))
    rc = EXIT_FAILURE;
  g_free (ca_pem);
  return rc;
}
