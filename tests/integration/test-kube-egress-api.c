/* Integration tests of lib/kube/nz-kube-egress against tests/fakes/fake-kube-apiserver.py
 * (no cluster runs here): verifyEgressPolicyApplied (D.10.7) GETs the named policy over real
 * HTTPS and refuses one that is absent or that an operator (or an attacker with write access
 * to the namespace) widened. The server's certificate is self-signed and is the cluster CA. */
#include <glib/gstdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"
#include "nz-kube-egress.h"
#include "nz-kube-error.h"
#include "../nz-test.h"
#include "kube-fake.h"

static char *dir; /* key, certificate, template */
static char *ca_pem;
static guint16 port;
static GPid fake_pid;

static NzKubeClient *
client (void)
{
  return kube_fake_client (port, ca_pem, "egress-token");
}

static JsonObject *
translation (NzEgressK8sKind kind, const char *name)
{
  const char *hosts[] = { "api.example.com", NULL };
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) n = NULL;

  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  n = nz_egress_k8s_translate (kind, NZ_EGRESS_K8S_CILIUM, NULL, hosts, name, "namzu-sandboxes",
                               sel, NULL);
  return json_object_ref (json_node_get_object (n));
}

static void
apply (NzKubeClient *c, JsonObject *manifest)
{
  g_autofree char *path = nz_kube_egress_policy_path (manifest);
  g_autofree char *collection = g_path_get_dirname (path);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) made = nz_kube_create (c, collection, manifest, &error);

  ck_assert_msg (made != NULL, "%s", error ? error->message : "");
}

START_TEST (test_named_object_against_api)
{
  g_autoptr (NzKubeClient) c = client ();
  g_autoptr (JsonObject) want = translation (NZ_EGRESS_K8S_DENY_ALL, "t-egress");
  g_autoptr (JsonObject) want_cil = translation (NZ_EGRESS_K8S_STATIC, "t-cil-egress");
  g_autoptr (JsonObject) wide = translation (NZ_EGRESS_K8S_ALLOW_ALL, "t-wide-egress");
  g_autoptr (JsonObject) want_wide = translation (NZ_EGRESS_K8S_DENY_ALL, "t-wide-egress");
  g_autoptr (GError) absent = NULL;
  g_autoptr (GError) widened = NULL;
  g_autoptr (GError) ok = NULL;
  g_autoptr (GError) ok_cil = NULL;

  ck_assert (!nz_kube_egress_verify_applied (c, want, &absent));
  ck_assert (g_error_matches (absent, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_NOT_APPLIED));
  ck_assert_msg (g_str_has_prefix (absent->message,
                                   "KubernetesEgressPolicyNotAppliedError: NetworkPolicy "
                                   "/apis/networking.k8s.io/v1/namespaces/namzu-sandboxes/"
                                   "networkpolicies/t-egress is not applied"),
                 "%s", absent->message);
  apply (c, want);
  apply (c, want_cil);
  ck_assert_msg (nz_kube_egress_verify_applied (c, want, &ok), "%s", ok ? ok->message : "");
  ck_assert_msg (nz_kube_egress_verify_applied (c, want_cil, &ok_cil), "%s",
                 ok_cil ? ok_cil->message : "");
  /* An allow-all object under the name the backend expects to be deny-all is refused. */
  apply (c, wide);
  ck_assert (!nz_kube_egress_verify_applied (c, want_wide, &widened));
  ck_assert (g_error_matches (widened, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH));
  ck_assert (strstr (widened->message, "has other egress rules") != NULL);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-egress-api");
  TCase *tc = tcase_create ("named");
  const char *extra[] = { "--token", "egress=egress-token", NULL };
  int rc;

  nz_test_require_program ("python3", "python3 (scripts/install-deps)");
  nz_test_require_program ("certtool", "certtool (gnutls-bin, scripts/install-deps)");
  port = kube_fake_start_self_signed ("nz-kube-egress-XXXXXX", extra, &dir, &ca_pem, &fake_pid);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_named_object_against_api);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);
  if (!kube_fake_stop_self_signed (fake_pid, dir))
    rc = EXIT_FAILURE;
  g_free (ca_pem);
  return rc;
}
