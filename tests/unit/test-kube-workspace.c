/* Unit tests for lib/kube's workspace objects (spec D.5, D.8): id and naming, the Block disk
 * rule, the pod-template hash (vectors computed with node's JSON.stringify and crypto), the
 * holder-epoch parse and rule, and the exact JSON Patch / merge-patch documents. Nothing here
 * talks to a server (test-kube-workspace-api does). */
#include <string.h>

#include "nz-json.h"
#include "nz-kube-workspace.h"
#include "../nz-test.h"

static JsonNode *
parse (const char *text)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  g_autoptr (GError) error = NULL;

  ck_assert_msg (json_parser_load_from_data (p, text, -1, &error), "%s: %s", text,
                 error ? error->message : "");
  return json_node_copy (json_parser_get_root (p));
}

static JsonObject *
parse_object (const char *text)
{
  g_autoptr (JsonNode) n = parse (text);

  return json_object_ref (json_node_get_object (n));
}

/* @ops as compact JSON, compared with @expected (itself re-serialised, so spacing is free). */
static void
assert_json_eq (JsonNode *got, const char *expected)
{
  g_autoptr (JsonNode) want = parse (expected);
  g_autofree char *a = nz_kube_canonical_json (got);
  g_autofree char *b = nz_kube_canonical_json (want);

  ck_assert_str_eq (a, b);
}

static void
assert_ops (JsonArray *ops, const char *expected)
{
  g_autoptr (JsonNode) n = json_node_new (JSON_NODE_ARRAY);
  g_autoptr (JsonNode) want = parse (expected);
  g_autofree char *a = NULL;
  g_autofree char *b = NULL;

  json_node_take_array (n, ops);
  /* Order matters in a patch: compare the arrays element by element, as text. */
  a = nz_json_to_string (n, NULL);
  b = nz_json_to_string (want, NULL);
  ck_assert_str_eq (a, b);
}

START_TEST (test_id_and_name)
{
  static const char *const good[] = { "a", "0", "abc-123", "a-b", "w1" };
  static const char *const bad[] = { "", "-a", "a-", "A", "a_b", "a.b", "é", "a b", "a\n" };
  g_autofree char *max = g_strnfill (54, 'a');
  g_autofree char *over = g_strnfill (55, 'a');
  g_autoptr (GError) error = NULL;
  g_autofree char *name = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (good); i++)
    ck_assert_msg (nz_kube_workspace_check_id (good[i], NULL), "%s", good[i]);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (!nz_kube_workspace_check_id (bad[i], NULL), "%s", bad[i]);
  ck_assert (!nz_kube_workspace_check_id (NULL, NULL));
  ck_assert (nz_kube_workspace_check_id (max, NULL));
  ck_assert (!nz_kube_workspace_check_id (over, &error));
  ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_INVALID_ID));
  g_clear_error (&error);
  /* Refused, never sanitised. */
  ck_assert (nz_kube_workspace_name ("My-WS", &error) == NULL);
  ck_assert (error != NULL);
  name = nz_kube_workspace_name ("ws-1", NULL);
  ck_assert_str_eq (name, "namzu-ws-ws-1");
  g_free (name);
  name = nz_kube_workspace_name (max, NULL);
  ck_assert_uint_eq (strlen (name), 63);
}
END_TEST

/* A template spec with one VCT "disk" of @mode, referenced as @devices / @mounts. */
static JsonObject *
disk_spec (const char *vcts, const char *containers)
{
  g_autofree char *text = g_strdup_printf (
      "{\"volumeClaimTemplates\":%s,\"podTemplate\":{\"spec\":{\"containers\":%s}}}", vcts,
      containers);

  return parse_object (text);
}

START_TEST (test_block_disk_rule)
{
  static const struct
  {
    const char *vcts, *containers, *why; /* why NULL: accepted */
  } rows[] = {
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{\"volumeMode\":\"Block\"}}]",
      "[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"disk\",\"devicePath\":\"/dev/x\"}]}]",
      NULL },
    { "[]", "[]", "missing or empty" },
    { "[{\"spec\":{\"volumeMode\":\"Block\"}}]", "[]", "has no metadata.name" },
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{\"volumeMode\":\"Filesystem\"}}]",
      "[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"disk\"}]}]",
      "must have spec.volumeMode Block" },
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{}}]",
      "[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"disk\"}]}]",
      "must have spec.volumeMode Block" },
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{\"volumeMode\":\"Block\"}}]",
      "[{\"name\":\"c\"}]", "not referenced by any container" },
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{\"volumeMode\":\"Block\"}}]",
      "[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"disk\"}],\"volumeMounts\":[{\"name\":"
      "\"disk\",\"mountPath\":\"/d\"}]}]",
      "referenced by volumeMounts" },
    /* Two VCTs, the second unreferenced. */
    { "[{\"metadata\":{\"name\":\"disk\"},\"spec\":{\"volumeMode\":\"Block\"}},{\"metadata\":{"
      "\"name\":\"other\"},\"spec\":{\"volumeMode\":\"Block\"}}]",
      "[{\"name\":\"c\",\"volumeDevices\":[{\"name\":\"disk\"}]}]", "other is not referenced" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autoptr (JsonObject) spec = disk_spec (rows[i].vcts, rows[i].containers);
      g_autoptr (GError) error = NULL;
      gboolean ok = nz_kube_workspace_assert_block_disk ("sandboxtemplate t", spec, &error);

      if (rows[i].why == NULL)
        {
          ck_assert_msg (ok, "row %u: %s", i, error ? error->message : "");
          continue;
        }
      ck_assert_msg (!ok, "row %u accepted", i);
      ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_DISK));
      ck_assert_msg (g_str_has_prefix (error->message, "sandboxtemplate t: "), "%s",
                     error->message);
      ck_assert_msg (strstr (error->message, rows[i].why) != NULL, "row %u: %s", i, error->message);
    }
  /* An initContainer's volumeDevices counts. */
  {
    g_autoptr (JsonObject) spec = parse_object (
        "{\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"d\"},\"spec\":{\"volumeMode\":"
        "\"Block\"}}],\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"c\"}],"
        "\"initContainers\":[{\"name\":\"i\",\"volumeDevices\":[{\"name\":\"d\"}]}]}}}");

    ck_assert (nz_kube_workspace_assert_block_disk ("s", spec, NULL));
  }
  ck_assert (!nz_kube_workspace_assert_block_disk ("s", NULL, NULL));
}
END_TEST

/* Vectors from node: JSON.stringify of the recursively key-sorted value, and its sha256. */
START_TEST (test_pod_template_hash_vectors)
{
  static const struct
  {
    const char *in, *canon, *hash;
  } v[] = {
    { "{\"b\":1,\"a\":[0.1,1e21,-0,1e-7,123456789012,1.5e300,5e-324]}",
      "{\"a\":[0.1,1e+21,0,1e-7,123456789012,1.5e+300,5e-324],\"b\":1}",
      "sha256:ccda1981655bf68b6f2001c9a65e5617013e82c0020d83a058e2833c6dc8063b" },
    /* UTF-16 order: U+00E9 < U+1F600 (D83D..) < U+FFFF, not UTF-8 byte order. */
    { "{\"\\ud83d\\ude00\":1,\"\\uffff\":2,\"\xc3\xa9\":3,\"z\":4,\"A\":5}",
      "{\"A\":5,\"z\":4,\"\xc3\xa9\":3,\"\xf0\x9f\x98\x80\":1,\"\xef\xbf\xbf\":2}",
      "sha256:2d9a8b13a7f659cc505befeb2ccc42264e76f4a86518fd1df85d458e2719cb0f" },
    { "{\"s\":\"q\\\"\\\\\\n\\t\\u0001\\u001f\\u007f \xc3\xa9 \xf0\x9f\x98\x80 </script>\","
      "\"n\":null,\"t\":true,\"f\":false,\"e\":{},\"l\":[]}",
      "{\"e\":{},\"f\":false,\"l\":[],\"n\":null,\"s\":\"q\\\"\\\\\\n\\t\\u0001\\u001f\x7f "
      "\xc3\xa9 \xf0\x9f\x98\x80 </script>\",\"t\":true}",
      "sha256:5f226f6ec0ca61ff7a563f5dff1e53267935b47f3f458c87a26615533b674c56" },
    { "{\"metadata\":{\"labels\":{\"sandbox.namzu.ai/template\":\"t\"}},\"spec\":{"
      "\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}",
      "{\"metadata\":{\"labels\":{\"sandbox.namzu.ai/template\":\"t\"}},\"spec\":{"
      "\"containers\":[{\"image\":\"i\",\"name\":\"c\"}]}}",
      "sha256:99f000c9bf1eff791f935e0ab9f0b0fd9f880f86cfcb0a5852c93621342fbd9b" },
    { "[1e20,1e-6,100,2.5,-3.75e-10,0.000001234,9007199254740993]",
      "[100000000000000000000,0.000001,100,2.5,-3.75e-10,0.000001234,9007199254740992]",
      "sha256:73682f4810356741d477e0f21f86c24ba4a2ae8c5922b4f8015820d8b95fad05" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (v); i++)
    {
      g_autoptr (JsonNode) n = parse (v[i].in);
      g_autofree char *canon = nz_kube_canonical_json (n);
      g_autofree char *hash = nz_kube_pod_template_hash (n);

      ck_assert_str_eq (canon, v[i].canon);
      ck_assert_str_eq (hash, v[i].hash);
    }
}
END_TEST

START_TEST (test_epoch_parse_and_rule)
{
  static const char *const bad[] = { "",
                                     "01",
                                     "00",
                                     "-1",
                                     "+1",
                                     "1.0",
                                     "1e3",
                                     " 1",
                                     "1 ",
                                     "0x1",
                                     "9007199254740992",
                                     "99999999999999999999" };
  guint64 e = 42;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) at5 = parse_object (
      "{\"metadata\":{\"name\":\"namzu-ws-w\",\"annotations\":{\"sandbox.namzu.ai/holder-epoch\""
      ":\"5\"}}}");
  g_autoptr (JsonObject) junk = parse_object (
      "{\"metadata\":{\"name\":\"namzu-ws-w\",\"annotations\":{\"sandbox.namzu.ai/holder-epoch\""
      ":\"05\"}}}");
  g_autoptr (JsonObject) none = parse_object ("{\"metadata\":{\"name\":\"namzu-ws-w\"}}");

  ck_assert (nz_kube_holder_epoch_parse (NULL, &e) && e == 0);
  ck_assert (nz_kube_holder_epoch_parse ("0", &e) && e == 0);
  ck_assert (nz_kube_holder_epoch_parse ("17", &e) && e == 17);
  ck_assert (nz_kube_holder_epoch_parse ("9007199254740991", &e) && e == 9007199254740991ULL);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (!nz_kube_holder_epoch_parse (bad[i], &e), "%s", bad[i]);

  ck_assert (nz_kube_workspace_check_epoch (at5, "suspend", "w", 5, NULL));
  ck_assert (nz_kube_workspace_check_epoch (at5, "suspend", "w", 6, NULL));
  ck_assert (nz_kube_workspace_check_epoch (none, "suspend", "w", 0, NULL));
  ck_assert (!nz_kube_workspace_check_epoch (at5, "suspend", "w", 4, &error));
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION));
  ck_assert_str_eq (error->message, "kubernetes workspace w: suspend refused: holder epoch 4 is "
                                    "behind the stored epoch 5 of namzu-ws-w");
  g_clear_error (&error);
  ck_assert (!nz_kube_workspace_check_epoch (junk, "resume", "w", 100, &error));
  ck_assert_str_eq (error->message,
                    "kubernetes workspace w: resume refused: the stored "
                    "sandbox.namzu.ai/holder-epoch annotation \"05\" of namzu-ws-w is unreadable");
}
END_TEST

#define NOW "2026-12-03T07:11:11.000Z"

START_TEST (test_fenced_patch_documents)
{
  g_autoptr (JsonObject) with_ann = parse_object (
      "{\"metadata\":{\"name\":\"namzu-ws-w\",\"resourceVersion\":\"7\",\"annotations\":{"
      "\"sandbox.namzu.ai/holder-epoch\":\"5\",\"x\":\"y\"}},\"spec\":{\"operatingMode\":"
      "\"Running\"}}");
  g_autoptr (JsonObject) ann_no_epoch = parse_object (
      "{\"metadata\":{\"name\":\"namzu-ws-w\",\"resourceVersion\":\"7\",\"annotations\":{"
      "\"x\":\"y\"}},\"spec\":{}}");
  g_autoptr (JsonObject) no_ann
      = parse_object ("{\"metadata\":{\"name\":\"namzu-ws-w\",\"resourceVersion\":\"8\"},\"spec\":{"
                      "\"operatingMode\":\"Suspended\"}}");
  g_autoptr (JsonNode) tmpl = parse ("{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
  g_autofree char *hash = nz_kube_pod_template_hash (tmpl);
  g_autofree char *expected = NULL;
  NzKubeWorkspaceWrite suspend = { .operating_mode = "Suspended", .now = NOW };
  NzKubeWorkspaceWrite stamp = { .now = NOW };
  NzKubeWorkspaceWrite running = { .operating_mode = "Running", .now = NOW };
  NzKubeWorkspaceWrite refresh = {
    .operating_mode = "Running", .pod_template = tmpl, .require_suspended = TRUE, .now = NOW
  };

  /* The annotation exists: its test, then per-key adds, then the mode. */
  assert_ops (nz_kube_workspace_fenced_patch (with_ann, 6, &suspend),
              "[{\"op\":\"test\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
              "\"value\":\"5\"},"
              "{\"op\":\"add\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
              "\"value\":\"6\"},"
              "{\"op\":\"add\",\"path\":\"/metadata/annotations/"
              "sandbox.namzu.ai~1operating-mode-changed-at\",\"value\":\"" NOW "\"},"
              "{\"op\":\"add\",\"path\":\"/spec/operatingMode\",\"value\":\"Suspended\"}]");
  /* A stamp-only write: the epoch alone. */
  assert_ops (nz_kube_workspace_fenced_patch (with_ann, 5, &stamp),
              "[{\"op\":\"test\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
              "\"value\":\"5\"},"
              "{\"op\":\"add\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
              "\"value\":\"5\"}]");
  /* Running onto Running (absent mode is Running too): no stamp, no mode op. */
  assert_ops (nz_kube_workspace_fenced_patch (ann_no_epoch, 1, &running),
              "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"7\"},"
              "{\"op\":\"add\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
              "\"value\":\"1\"}]");
  /* No annotations map: the RV test, the whole map. */
  assert_ops (nz_kube_workspace_fenced_patch (no_ann, 2, &running),
              "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"8\"},"
              "{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{"
              "\"sandbox.namzu.ai/holder-epoch\":\"2\","
              "\"sandbox.namzu.ai/operating-mode-changed-at\":\"" NOW "\"}},"
              "{\"op\":\"add\",\"path\":\"/spec/operatingMode\",\"value\":\"Running\"}]");
  /* A refresh: fence test, caller test, the keys, the template, the mode. */
  expected = g_strdup_printf (
      "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"8\"},"
      "{\"op\":\"test\",\"path\":\"/spec/operatingMode\",\"value\":\"Suspended\"},"
      "{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{"
      "\"sandbox.namzu.ai/holder-epoch\":\"3\","
      "\"sandbox.namzu.ai/operating-mode-changed-at\":\"" NOW "\","
      "\"sandbox.namzu.ai/pod-template-hash\":\"%s\"}},"
      "{\"op\":\"add\",\"path\":\"/spec/podTemplate\",\"value\":{\"spec\":{\"containers\":[{"
      "\"name\":\"c\"}]}}},"
      "{\"op\":\"add\",\"path\":\"/spec/operatingMode\",\"value\":\"Running\"}]",
      hash);
  assert_ops (nz_kube_workspace_fenced_patch (no_ann, 3, &refresh), expected);
  g_free (expected);
  {
    g_autoptr (JsonObject) s = parse_object (
        "{\"metadata\":{\"resourceVersion\":\"9\",\"annotations\":{"
        "\"sandbox.namzu.ai/holder-epoch\":\"3\"}},\"spec\":{\"operatingMode\":\"Suspended\"}}");

    expected = g_strdup_printf (
        "[{\"op\":\"test\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
        "\"value\":\"3\"},"
        "{\"op\":\"test\",\"path\":\"/spec/operatingMode\",\"value\":\"Suspended\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1holder-epoch\","
        "\"value\":\"4\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/"
        "sandbox.namzu.ai~1operating-mode-changed-at\",\"value\":\"" NOW "\"},"
        "{\"op\":\"add\",\"path\":\"/metadata/annotations/sandbox.namzu.ai~1pod-template-hash\","
        "\"value\":\"%s\"},"
        "{\"op\":\"add\",\"path\":\"/spec/podTemplate\",\"value\":{\"spec\":{\"containers\":[{"
        "\"name\":\"c\"}]}}},"
        "{\"op\":\"add\",\"path\":\"/spec/operatingMode\",\"value\":\"Running\"}]",
        hash);
    assert_ops (nz_kube_workspace_fenced_patch (s, 4, &refresh), expected);
  }
}
END_TEST

START_TEST (test_merge_patch_body)
{
  g_autoptr (JsonObject) running = parse_object ("{\"spec\":{}}");
  g_autoptr (JsonObject) suspended = parse_object ("{\"spec\":{\"operatingMode\":\"Suspended\"}}");
  g_autoptr (JsonNode) a = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonNode) b = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonObject) live = NULL;
  const char *at;

  json_node_take_object (a, nz_kube_workspace_merge_patch_body (running, "Suspended", NOW));
  assert_json_eq (a, "{\"metadata\":{\"annotations\":{"
                     "\"sandbox.namzu.ai/operating-mode-changed-at\":\"" NOW "\"}},"
                     "\"spec\":{\"operatingMode\":\"Suspended\"}}");
  /* Unchanged mode: no stamp. */
  json_node_take_object (b, nz_kube_workspace_merge_patch_body (suspended, "Suspended", NOW));
  assert_json_eq (b, "{\"spec\":{\"operatingMode\":\"Suspended\"}}");
  /* The host clock, RFC 3339 with milliseconds. */
  live = nz_kube_workspace_merge_patch_body (suspended, "Running", NULL);
  at = json_object_get_string_member (
      json_object_get_object_member (json_object_get_object_member (live, "metadata"),
                                     "annotations"),
      NZ_KUBE_MODE_CHANGED_AT_ANNOTATION);
  ck_assert (g_regex_match_simple ("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\."
                                   "[0-9]{3}Z$",
                                   at, 0, 0));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-workspace");
  TCase *tc = tcase_create ("objects");

  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_id_and_name);
  tcase_add_test (tc, test_block_disk_rule);
  tcase_add_test (tc, test_pod_template_hash_vectors);
  tcase_add_test (tc, test_epoch_parse_and_rule);
  tcase_add_test (tc, test_fenced_patch_documents);
  tcase_add_test (tc, test_merge_patch_body);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
