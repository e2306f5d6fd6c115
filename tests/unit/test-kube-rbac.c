/* deploy/k8s's RBAC pinned to lib/kube/nz-kube-rbac.h (spec reference-agent.md D.5): each Role or
 * ClusterRole's rules in the YAML equal the constant's JSON, in order. A verb added to or taken
 * from either side fails here, so the manifests and the backend's needs move together. The YAML
 * is read with lib/kube's own parser (one document at a time: the files separate theirs with
 * "---" lines). */
#include <string.h>

#include "nz-kube-access.h"
#include "nz-kube-rbac.h"
#include "../nz-test.h"

/* The document of @kind @name in deploy/k8s/@file. */
static JsonNode *
manifest_object (const char *file, const char *kind, const char *name)
{
  const char *src = g_getenv ("NZ_SOURCE_DIR");
  g_autofree char *path = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) docs = NULL;
  g_autoptr (GError) error = NULL;

  ck_assert_msg (src != NULL, "NZ_SOURCE_DIR is not set");
  path = g_build_filename (src, "deploy", "k8s", file, NULL);
  ck_assert_msg (g_file_get_contents (path, &text, NULL, &error), "%s",
                 error ? error->message : "");
  docs = g_strsplit (text, "\n---\n", -1);
  for (guint i = 0; docs[i] != NULL; i++)
    {
      g_autoptr (JsonNode) doc = nz_kube_yaml_parse (docs[i], strlen (docs[i]), path, &error);
      JsonObject *o, *meta;

      ck_assert_msg (doc != NULL, "%s", error ? error->message : "");
      if (!JSON_NODE_HOLDS_OBJECT (doc))
        continue;
      o = json_node_get_object (doc);
      meta = json_object_get_object_member (o, "metadata");
      if (g_strcmp0 (json_object_get_string_member_with_default (o, "kind", ""), kind) == 0
          && meta != NULL
          && g_strcmp0 (json_object_get_string_member_with_default (meta, "name", ""), name) == 0)
        return g_steal_pointer (&doc);
    }
  ck_abort_msg ("%s has no %s %s", path, kind, name);
  return NULL;
}

static void
assert_rules (const char *file, const char *kind, const char *name, const char *want_json)
{
  g_autoptr (JsonNode) obj = manifest_object (file, kind, name);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) want = json_from_string (want_json, &error);
  JsonNode *rules = json_object_get_member (json_node_get_object (obj), "rules");
  g_autofree char *got = rules != NULL ? json_to_string (rules, FALSE) : g_strdup ("(none)");

  ck_assert_msg (want != NULL, "the constant is not JSON: %s", error ? error->message : "");
  ck_assert_msg (rules != NULL && json_node_equal (rules, want),
                 "%s %s %s: rules %s, the constant says %s", file, kind, name, got, want_json);
}

START_TEST (test_claimant)
{
  assert_rules ("rbac-claimant.yaml", "Role", "namzu-sandbox-claimant",
                NZ_KUBE_CLAIMANT_RBAC_RULES);
}
END_TEST

START_TEST (test_host)
{
  assert_rules ("rbac.yaml", "Role", "namzu-sandbox-host", NZ_KUBE_HOST_RBAC_RULES);
}
END_TEST

START_TEST (test_per_sandbox_egress)
{
  assert_rules ("rbac-per-sandbox-egress.yaml", "Role", "namzu-sandbox-host-per-sandbox-egress",
                NZ_KUBE_PER_SANDBOX_EGRESS_RBAC_RULES);
  assert_rules ("rbac-per-sandbox-egress.yaml", "ClusterRole",
                "namzu-sandbox-host-admission-fence-read", NZ_KUBE_ADMISSION_FENCE_READ_RBAC_RULES);
}
END_TEST

/* What D.5 says a pool-only host must never get, checked on the constant itself: no Sandbox
 * writes, no templates, no PVCs, no pods/exec. */
START_TEST (test_claimant_is_narrow)
{
  g_autoptr (JsonNode) rules = json_from_string (NZ_KUBE_CLAIMANT_RBAC_RULES, NULL);
  JsonArray *a = json_node_get_array (rules);

  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonObject *r = json_array_get_object_element (a, i);
      JsonArray *res = json_object_get_array_member (r, "resources");
      JsonArray *verbs = json_object_get_array_member (r, "verbs");

      for (guint j = 0; j < json_array_get_length (res); j++)
        {
          const char *x = json_array_get_string_element (res, j);

          ck_assert_str_ne (x, "sandboxtemplates");
          ck_assert_str_ne (x, "persistentvolumeclaims");
          ck_assert_str_ne (x, "pods/exec");
          if (strcmp (x, "sandboxes") == 0)
            {
              ck_assert_int_eq (json_array_get_length (verbs), 1);
              ck_assert_str_eq (json_array_get_string_element (verbs, 0), "get");
            }
        }
    }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-rbac");
  TCase *tc = tcase_create ("deploy/k8s");

  tcase_add_test (tc, test_claimant);
  tcase_add_test (tc, test_host);
  tcase_add_test (tc, test_per_sandbox_egress);
  tcase_add_test (tc, test_claimant_is_narrow);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
