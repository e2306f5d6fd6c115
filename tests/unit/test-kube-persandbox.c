/* Unit tests of lib/kube/nz-kube-persandbox (reference-agent D.10.8): the read-back judgement
 * of a per-sandbox policy (what a cluster could hand back that is not what the host wrote),
 * and the refusals that come before any request (no I/O: the client points at a port nothing
 * answers on, so a request would fail as a transport error, not as the refusal asserted). */
#include <string.h>

#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "nz-kube-error.h"
#include "nz-kube-persandbox.h"
#include "../nz-test.h"

/* What nz_kube_egress_per_sandbox_policy writes for claim c-1 (uid uid-1), api.example.com. */
#define WRITTEN                                                                                    \
  "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{\"name\":"      \
  "\"namzu-sbx-uid-1\",\"namespace\":\"ns\",\"ownerReferences\":[{\"apiVersion\":"                 \
  "\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxClaim\",\"name\":\"c-1\","             \
  "\"uid\":\"uid-1\"}]},\"spec\":{\"endpointSelector\":{\"matchLabels\":{"                         \
  "\"sandbox.namzu.ai/per-sandbox-egress\":\"c-1\"}},\"egress\":[{\"toEndpoints\":[{"              \
  "\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"kube-system\",\"k8s:k8s-app\":"          \
  "\"kube-dns\"}}],\"toPorts\":[{\"ports\":[{\"port\":\"53\",\"protocol\":\"ANY\"}],"              \
  "\"rules\":{\"dns\":[{\"matchPattern\":\"*\"}]}}]},{\"toFQDNs\":[{\"matchName\":"                \
  "\"api.example.com\"}]}]}}"

static JsonObject *
parse (const char *json)
{
  JsonObject *o = nz_json_parse_object (json, -1, NULL);

  g_assert (o != NULL);
  return o;
}

static JsonObject *
meta (JsonObject *o)
{
  return json_object_get_object_member (o, "metadata");
}

static JsonObject *
spec (JsonObject *o)
{
  return json_object_get_object_member (o, "spec");
}

static JsonObject *
owner0 (JsonObject *o)
{
  return json_array_get_object_element (json_object_get_array_member (meta (o), "ownerReferences"),
                                        0);
}

static void
ok_as_is (JsonObject *o)
{
  /* What the API server adds around it is not the policy. */
  json_object_set_string_member (meta (o), "uid", "x");
  json_object_set_string_member (meta (o), "resourceVersion", "7");
}
static void
extra_spec_member (JsonObject *o)
{
  json_object_set_array_member (spec (o), "egressDeny", json_array_new ());
}
static void
ingress (JsonObject *o)
{
  json_object_set_array_member (spec (o), "ingress", json_array_new ());
}
static void
second_owner (JsonObject *o)
{
  JsonArray *owners = json_object_get_array_member (meta (o), "ownerReferences");

  json_array_add_object_element (owners, parse ("{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
                                                "\"name\":\"p\",\"uid\":\"u\"}"));
}
static void
block_owner_deletion (JsonObject *o)
{
  json_object_set_boolean_member (owner0 (o), "blockOwnerDeletion", TRUE);
}
static void
other_sandbox (JsonObject *o)
{
  json_object_set_string_member (
      json_object_get_object_member (json_object_get_object_member (spec (o), "endpointSelector"),
                                     "matchLabels"),
      "sandbox.namzu.ai/per-sandbox-egress", "c-2");
}
static void
wider (JsonObject *o)
{
  json_array_add_object_element (json_object_get_array_member (spec (o), "egress"),
                                 parse ("{\"toEntities\":[\"world\"]}"));
}
static void
no_owner (JsonObject *o)
{
  json_object_remove_member (meta (o), "ownerReferences");
}

/* nz_kube_per_sandbox_check: the read-back must be what was written, and only that. */
START_TEST (test_read_back)
{
  static const struct
  {
    void (*edit) (JsonObject *o);
    const char *reason; /* NULL: accepted */
  } rows[] = {
    { ok_as_is, NULL },
    { extra_spec_member, "has spec members the write did not send" },
    { ingress, "has spec members the write did not send" },
    { second_owner, "has other ownerReferences than its one owner" },
    { block_owner_deletion, "lacks an ownerReference the backend expects" },
    { no_owner, "lacks an ownerReference the backend expects" },
    { other_sandbox, "selects other endpoints" },
    { wider, "has other egress rules" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autoptr (JsonObject) want = parse (WRITTEN);
      g_autoptr (JsonObject) got = parse (WRITTEN);
      g_autoptr (GError) error = NULL;
      gboolean ok;

      rows[i].edit (got);
      ok = nz_kube_per_sandbox_check (want, got, "/p", &error);
      if (rows[i].reason == NULL)
        {
          ck_assert_msg (ok, "row %zu: %s", i, error != NULL ? error->message : "");
          continue;
        }
      ck_assert_msg (!ok, "row %zu accepted", i);
      ck_assert (g_error_matches (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH));
      ck_assert_msg (g_str_has_prefix (error->message,
                                       "KubernetesEgressPolicyMismatchError: CiliumNetworkPolicy "
                                       "/p ")
                         && strstr (error->message, rows[i].reason) != NULL,
                     "row %zu: %s", i, error->message);
    }
}
END_TEST

/* Refused before the fence is read, so before any request. */
START_TEST (test_refused_before_io)
{
  static const struct
  {
    const char *owner, *uid, *host;
    GQuark (*domain) (void);
    int code;
  } rows[] = {
    { "namzu-task-1", "", "api.example.com", nz_kube_egress_error_quark,
      NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING },
    { "namzu-task-1", NULL, "api.example.com", nz_kube_egress_error_quark,
      NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING },
    { "namzu-task-1", "../x", "api.example.com", nz_kube_error_quark, NZ_KUBE_ERROR_PROTOCOL },
    { "namzu-task-1", "UID", "api.example.com", nz_kube_error_quark, NZ_KUBE_ERROR_PROTOCOL },
    { "Namzu_task", "u-1", "api.example.com", nz_kube_error_quark, NZ_KUBE_ERROR_PROTOCOL },
    { "namzu-task-1", "u-1", "*.example.com", nz_egress_error_quark, NZ_EGRESS_ERROR_INVALID_HOST },
  };
  g_autoptr (GError) cerr = NULL;
  g_autoptr (NzKubeClient) client = nz_kube_client_new (
      nz_kube_access_new_explicit ("https://127.0.0.1:1", NULL, "t", NULL), 0, &cerr);

  ck_assert_msg (client != NULL, "%s", cerr != NULL ? cerr->message : "");
  for (gsize i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      const char *hosts[] = { rows[i].host, NULL };
      NzKubePerSandbox ps = { "ns",       "sandbox.namzu.ai/per-sandbox-egress",
                              "fence",    "fence-binding",
                              TRUE,       rows[i].owner,
                              rows[i].uid };
      g_autoptr (GError) error = NULL;
      gboolean changed = TRUE;

      ck_assert (!nz_kube_per_sandbox_set (client, &ps, hosts, &changed, &error));
      ck_assert_msg (g_error_matches (error, rows[i].domain (), rows[i].code), "row %zu: %s", i,
                     error->message);
      ck_assert (!changed);
    }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-persandbox");
  TCase *tc = tcase_create ("persandbox");

  tcase_add_test (tc, test_read_back);
  tcase_add_test (tc, test_refused_before_io);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
