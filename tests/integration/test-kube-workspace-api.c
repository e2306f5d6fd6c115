/* Integration tests for lib/kube's workspace objects (spec D.8) against
 * tests/fakes/fake-kube-apiserver.py over HTTPS: create, 409 -> adopt and its mismatch
 * refusals, holder-epoch races (exactly one writer wins), the 422 retry when only the
 * resourceVersion moved, the fenced DELETE with a stale resourceVersion, suspend/resume. The
 * fake runs no controller: the test plays it through the API (it deletes and re-creates the
 * pod, which gets a new uid). */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "nz-json.h"
#include "nz-kube-workspace.h"
#include "../nz-test.h"
#include "kube-fake.h"

#define NS "namzu-sandboxes"

static char *pki;
static char *ca_pem;
static guint16 port;
static GPid fake_pid;
static const char token[] = "token-of-the-host";
static NzKubeClient *client;

static guint16
start_fake (void)
{
  g_autofree char *tok = g_strdup_printf ("host=%s", token);
  const char *extra[] = { "--token", tok, NULL };

  return kube_fake_start (pki, "server", extra, &fake_pid);
}

static JsonObject *
parse_object (const char *text)
{
  g_autoptr (GError) error = NULL;
  JsonObject *o = nz_json_parse_object (text, -1, &error);

  ck_assert_msg (o != NULL, "%s: %s", text, error ? error->message : "");
  return o;
}

static JsonObject *
post (const char *group, const char *resource, const char *text)
{
  g_autofree char *path = nz_kube_path (group, group ? "v1beta1" : "v1", NS, resource, NULL);
  g_autoptr (JsonObject) o = parse_object (text);
  g_autoptr (GError) error = NULL;
  JsonObject *res = nz_kube_create (client, path, o, &error);

  ck_assert_msg (res != NULL, "POST %s: %s", path, error ? error->message : "");
  return res;
}

#define TEMPLATE_FMT                                                                               \
  "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxTemplate\","           \
  "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"volumeClaimTemplates\":[{\"metadata\":{\"name\":"    \
  "\"disk\"},\"spec\":{\"volumeMode\":\"%s\"}}],\"podTemplate\":{\"spec\":{"                       \
  "\"runtimeClassName\":\"%s\",\"containers\":[{\"name\":\"agent\",\"image\":\"i\","               \
  "\"volumeDevices\":[{\"name\":\"disk\",\"devicePath\":\"/dev/ws\"}]}]}}}}"

static void
make_template (const char *name, const char *mode, const char *rc)
{
  g_autofree char *t = g_strdup_printf (TEMPLATE_FMT, name, mode, rc);

  json_object_unref (post ("extensions.agents.x-k8s.io", "sandboxtemplates", t));
}

static NzKubeWorkspaceSpec
spec_for (const char *id, const char *tmpl)
{
  NzKubeWorkspaceSpec s
      = { .ns = NS, .workspace_id = id, .template_name = tmpl, .epoch = NZ_KUBE_NO_EPOCH };
  return s;
}

static JsonObject *
get_sandbox (const char *id)
{
  g_autofree char *path = nz_kube_workspace_path (NS, id, NULL);
  g_autoptr (GError) error = NULL;
  JsonObject *o = nz_kube_get (client, path, &error);

  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  return o;
}

static const char *
ann (JsonObject *o, const char *key)
{
  JsonObject *a = nz_json_get_object (nz_json_get_object (o, "metadata"), "annotations");

  return a ? nz_json_get_string (a, key) : NULL;
}

static const char *
mode (JsonObject *o)
{
  return nz_json_get_string (nz_json_get_object (o, "spec"), "operatingMode");
}

static gboolean
verify_labels (JsonObject *labels, gpointer data, GError **error)
{
  *(int *)data += 1;
  ck_assert_str_eq (json_object_get_string_member (labels, "sandbox.namzu.ai/egress-profile"),
                    "p1");
  return TRUE;
}

START_TEST (test_create_then_adopt_and_mismatches)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  g_autoptr (NzKubeWorkspaceOpened) again = NULL;
  g_autoptr (NzKubeWorkspaceMismatch) mm = NULL;
  g_autoptr (JsonObject) sb = NULL;
  g_autofree char *hash = NULL;
  NzKubeWorkspaceSpec s = spec_for ("w1", "tmpl-a");
  JsonObject *pt;
  int verified = 0;

  make_template ("tmpl-a", "Block", "gvisor");
  make_template ("tmpl-b", "Block", "gvisor");
  make_template ("tmpl-kata", "Block", "kata");
  make_template ("tmpl-fs", "Filesystem", "gvisor");
  s.egress_profile = "p1";
  s.epoch = 3;
  s.verify = verify_labels;
  s.verify_data = &verified;
  o = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (o->origin, "created");
  ck_assert_str_eq (o->sandbox_name, "namzu-ws-w1");
  ck_assert_int_eq (verified, 1);
  sb = get_sandbox ("w1");
  ck_assert_str_eq (mode (sb), "Running");
  ck_assert (json_object_get_boolean_member (nz_json_get_object (sb, "spec"), "service"));
  ck_assert (!json_object_has_member (nz_json_get_object (sb, "spec"), "shutdownTime"));
  ck_assert_str_eq (ann (sb, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "3");
  pt = nz_json_get_object (nz_json_get_object (sb, "spec"), "podTemplate");
  {
    g_autoptr (JsonNode) n = json_node_new (JSON_NODE_OBJECT);

    json_node_set_object (n, pt);
    hash = nz_kube_pod_template_hash (n);
  }
  ck_assert_str_eq (ann (sb, NZ_KUBE_POD_TEMPLATE_HASH_ANNOTATION), hash);
  ck_assert_str_eq (
      nz_json_get_string (nz_json_get_object (nz_json_get_object (pt, "metadata"), "labels"),
                          NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY),
      "tmpl-a");

  /* 409 -> adopt: Running with an epoch is a stamp-only write. */
  s.epoch = 4;
  again = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (again != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (again->origin, "adopted-running");
  g_clear_pointer (&sb, json_object_unref);
  sb = get_sandbox ("w1");
  ck_assert_str_eq (ann (sb, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "4");
  /* An older holder is refused. */
  s.epoch = 3;
  ck_assert (nz_kube_workspace_create (client, &s, NULL, &error) == NULL);
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION));
  g_clear_error (&error);
  s.epoch = NZ_KUBE_NO_EPOCH;

  /* Each mismatch field. */
  s.template_name = "tmpl-b";
  ck_assert (nz_kube_workspace_create (client, &s, &mm, &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_MISMATCH));
  ck_assert_str_eq (mm->field, "sandboxTemplateName");
  ck_assert_str_eq (mm->expected, "tmpl-b");
  ck_assert_str_eq (mm->actual, "tmpl-a");
  ck_assert_str_eq (mm->sandbox_name, "namzu-ws-w1");
  g_clear_error (&error);
  g_clear_pointer (&mm, nz_kube_workspace_mismatch_free);
  s.template_name = "tmpl-a";
  s.egress_profile = "p2";
  s.verify = NULL;
  ck_assert (nz_kube_workspace_create (client, &s, &mm, &error) == NULL);
  ck_assert_str_eq (mm->field, "egressProfile");
  ck_assert_str_eq (mm->expected, "p2");
  ck_assert_str_eq (mm->actual, "p1");
  g_clear_error (&error);
  g_clear_pointer (&mm, nz_kube_workspace_mismatch_free);
  s.egress_profile = NULL;
  /* runtimeClassName: the Sandbox was made from tmpl-a (gvisor); adopt it as if the template
   * now said kata, by creating w2 from tmpl-kata and adopting it with a tmpl-kata-labelled
   * spec whose template changed. */
  {
    NzKubeWorkspaceSpec k = spec_for ("w2", "tmpl-kata");
    g_autoptr (NzKubeWorkspaceOpened) ko = nz_kube_workspace_create (client, &k, NULL, &error);
    g_autofree char *tpath = nz_kube_path ("extensions.agents.x-k8s.io", "v1beta1", NS,
                                           "sandboxtemplates", "tmpl-kata");
    g_autoptr (JsonObject) patch = parse_object (
        "{\"spec\":{\"podTemplate\":{\"spec\":{\"runtimeClassName\":\"gvisor\"}}}}");
    g_autoptr (JsonObject) pres = NULL;

    ck_assert_msg (ko != NULL, "%s", error ? error->message : "");
    pres = nz_kube_merge_patch (client, tpath, patch, &error);
    ck_assert (pres != NULL);
    ck_assert (nz_kube_workspace_adopt (client, &k, &mm, &error) == NULL);
    ck_assert_str_eq (mm->field, "runtimeClassName");
    ck_assert_str_eq (mm->expected, "gvisor");
    ck_assert_str_eq (mm->actual, "kata");
    g_clear_error (&error);
    g_clear_pointer (&mm, nz_kube_workspace_mismatch_free);
  }
  /* The disk rule on the template: nothing is created. */
  {
    NzKubeWorkspaceSpec f = spec_for ("w3", "tmpl-fs");
    g_autofree char *path = nz_kube_workspace_path (NS, "w3", NULL);

    ck_assert (nz_kube_workspace_create (client, &f, NULL, &error) == NULL);
    ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_DISK));
    g_clear_error (&error);
    ck_assert (nz_kube_get (client, path, &error) == NULL);
    ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE));
    g_clear_error (&error);
    f.per_sandbox_egress = TRUE;
    f.template_name = "tmpl-a";
    ck_assert (nz_kube_workspace_create (client, &f, NULL, &error) == NULL);
    ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_CONFIG));
  }
}
END_TEST

/* Holder A (epoch 5) and holder B (epoch 6) read the same object; B writes first; A's write is
 * refused (the tested annotation moved and 5 < 6) and changes nothing. */
START_TEST (test_two_holders_race)
{
  g_autoptr (GError) error = NULL;
  NzKubeWorkspaceSpec s = spec_for ("race", "tmpl-a");
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  g_autoptr (JsonObject) read_a = NULL;
  g_autoptr (JsonObject) read_b = NULL;
  g_autoptr (JsonObject) res_b = NULL;
  g_autoptr (JsonObject) after = NULL;
  NzKubeWorkspaceWrite suspend = { .operating_mode = "Suspended" };
  NzKubeWorkspaceWrite stamp = { 0 };
  gboolean applied = FALSE;

  s.epoch = 5;
  o = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  read_a = get_sandbox ("race");
  read_b = get_sandbox ("race");
  res_b
      = nz_kube_workspace_write (client, NS, "race", "adopt", 6, &stamp, read_b, &applied, &error);
  ck_assert_msg (res_b != NULL && applied, "%s", error ? error->message : "");
  ck_assert (
      nz_kube_workspace_write (client, NS, "race", "suspend", 5, &suspend, read_a, &applied, &error)
      == NULL);
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION));
  ck_assert_msg (strstr (error->message, "holder epoch 5 is behind the stored epoch 6") != NULL,
                 "%s", error->message);
  after = get_sandbox ("race");
  ck_assert_str_eq (ann (after, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "6");
  ck_assert_str_eq (mode (after), "Running");
  g_clear_error (&error);
  /* The other interleaving: A first, then B (newer) still wins over A's epoch. */
  {
    g_autoptr (JsonObject) a2 = get_sandbox ("race");
    g_autoptr (JsonObject) b2 = get_sandbox ("race");
    g_autoptr (JsonObject) ra = NULL;
    g_autoptr (JsonObject) rb = NULL;

    ck_assert (
        nz_kube_workspace_write (client, NS, "race", "suspend", 5, &suspend, a2, NULL, &error)
        == NULL); /* 5 < 6 already at the local check */
    g_clear_error (&error);
    rb = nz_kube_workspace_write (client, NS, "race", "suspend", 7, &suspend, b2, NULL, &error);
    ck_assert_msg (rb != NULL, "%s", error ? error->message : "");
    ck_assert_str_eq (mode (rb), "Suspended");
    ck_assert_str_eq (ann (rb, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "7");
    ck_assert (ann (rb, NZ_KUBE_MODE_CHANGED_AT_ANNOTATION) != NULL);
    (void)ra;
  }
}
END_TEST

/* No epoch annotation: the fence tests the resourceVersion; a foreign label write moves only
 * the RV, so the write re-reads, re-checks (0 <= 1) and succeeds on the second attempt. With
 * the epoch annotation unchanged but a stale caller test, the 422 stands. */
START_TEST (test_422_retry_when_only_rv_moved)
{
  g_autoptr (GError) error = NULL;
  NzKubeWorkspaceSpec s = spec_for ("rv", "tmpl-a");
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  g_autoptr (JsonObject) stale = NULL;
  g_autoptr (JsonObject) res = NULL;
  g_autoptr (JsonObject) label = parse_object ("{\"metadata\":{\"labels\":{\"x\":\"y\"}}}");
  g_autoptr (JsonObject) lres = NULL;
  g_autofree char *path = nz_kube_workspace_path (NS, "rv", NULL);
  NzKubeWorkspaceWrite stamp = { 0 };
  gboolean applied = FALSE;

  o = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  stale = get_sandbox ("rv");
  ck_assert (ann (stale, NZ_KUBE_HOLDER_EPOCH_ANNOTATION) == NULL);
  lres = nz_kube_merge_patch (client, path, label, &error);
  ck_assert (lres != NULL);
  res = nz_kube_workspace_write (client, NS, "rv", "adopt", 1, &stamp, stale, &applied, &error);
  ck_assert_msg (res != NULL && applied, "%s", error ? error->message : "");
  ck_assert_str_eq (ann (res, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "1");
  ck_assert_str_ne (nz_json_get_string (nz_json_get_object (res, "metadata"), "resourceVersion"),
                    nz_json_get_string (nz_json_get_object (lres, "metadata"), "resourceVersion"));
  /* A refresh on a Running object: applied FALSE, no write. */
  {
    g_autoptr (JsonObject) cur = get_sandbox ("rv");
    g_autoptr (JsonObject) r2 = NULL;
    g_autoptr (JsonNode) tmpl = json_node_new (JSON_NODE_OBJECT);
    NzKubeWorkspaceWrite refresh
        = { .operating_mode = "Running", .pod_template = tmpl, .require_suspended = TRUE };

    json_node_take_object (tmpl, parse_object ("{\"spec\":{\"containers\":[]}}"));
    /* Tell the write it is Suspended (a stale read): the server's test says otherwise. */
    json_object_set_string_member (json_object_get_object_member (cur, "spec"), "operatingMode",
                                   "Suspended");
    r2 = nz_kube_workspace_write (client, NS, "rv", "resume", 1, &refresh, cur, &applied, &error);
    ck_assert_msg (r2 != NULL, "%s", error ? error->message : "");
    ck_assert (!applied);
    ck_assert_str_eq (mode (r2), "Running");
  }
}
END_TEST

START_TEST (test_fenced_delete)
{
  g_autoptr (GError) error = NULL;
  NzKubeWorkspaceSpec s = spec_for ("del", "tmpl-a");
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  g_autoptr (JsonObject) stale = NULL;
  g_autoptr (JsonObject) lres = NULL;
  g_autoptr (JsonObject) label = parse_object ("{\"metadata\":{\"labels\":{\"x\":\"z\"}}}");
  g_autofree char *path = nz_kube_workspace_path (NS, "del", NULL);

  s.epoch = 2;
  o = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  stale = get_sandbox ("del");
  lres = nz_kube_merge_patch (client, path, label, &error);
  ck_assert (lres != NULL);
  /* An older epoch is refused, the object stays. */
  ck_assert (!nz_kube_workspace_delete (client, NS, "del", 1, NULL, &error));
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION));
  g_clear_error (&error);
  /* The stale RV is 409, re-read and retried. */
  ck_assert_msg (nz_kube_workspace_delete (client, NS, "del", 2, stale, &error), "%s",
                 error ? error->message : "");
  ck_assert (nz_kube_get (client, path, &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE));
  g_clear_error (&error);
  /* Gone is done. */
  ck_assert (nz_kube_workspace_delete (client, NS, "del", 2, NULL, NULL));
  ck_assert (nz_kube_workspace_delete (client, NS, "del", NZ_KUBE_NO_EPOCH, NULL, NULL));
  ck_assert (!nz_kube_workspace_delete (client, NS, "Bad", 2, NULL, &error));
  ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_INVALID_ID));
}
END_TEST

/* The test as the controller: a pod named after the Sandbox, Running at @ip. */
static char *
make_pod (const char *name, const char *ip)
{
  g_autofree char *t = g_strdup_printf (
      "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},\"spec\":{},"
      "\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\"}}",
      name, ip);
  g_autoptr (JsonObject) p = post (NULL, "pods", t);

  return g_strdup (nz_json_get_string (nz_json_get_object (p, "metadata"), "uid"));
}

static void
delete_pod (const char *name)
{
  g_autofree char *path = nz_kube_path (NULL, "v1", NS, "pods", name);

  ck_assert (nz_kube_delete (client, path, NULL, NULL));
}

static gboolean
refuse_step (JsonObject *sb, gpointer data, GError **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "flush unconfirmed");
  return FALSE;
}

START_TEST (test_suspend_resume)
{
  g_autoptr (GError) error = NULL;
  NzKubeWorkspaceSpec s = spec_for ("sr", "tmpl-a");
  g_autoptr (NzKubeWorkspaceOpened) o = NULL;
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (GPtrArray) list = NULL;
  g_autofree char *uid1 = NULL;
  g_autofree char *uid2 = NULL;
  g_autofree char *got_uid = NULL;
  g_autofree char *got_ip = NULL;
  g_autoptr (NzKubeWorkspaceIdentity) ident = NULL;
  gboolean already = TRUE, woke = FALSE, found = FALSE;

  s.epoch = 1;
  o = nz_kube_workspace_create (client, &s, NULL, &error);
  ck_assert_msg (o != NULL, "%s", error ? error->message : "");
  uid1 = make_pod ("namzu-ws-sr", "127.0.9.1");

  /* A failing caller step: no patch. */
  ck_assert (!nz_kube_workspace_suspend (client, NS, "sr", 1, refuse_step, NULL, 10, 1000, &already,
                                         &error));
  ck_assert (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_FAILED));
  g_clear_error (&error);
  sb = get_sandbox ("sr");
  ck_assert_str_eq (mode (sb), "Running");
  g_clear_pointer (&sb, json_object_unref);
  /* The epoch gate refuses an older holder before the step runs. */
  ck_assert (
      !nz_kube_workspace_suspend (client, NS, "sr", 0, refuse_step, NULL, 10, 1000, NULL, &error));
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_PRECONDITION));
  g_clear_error (&error);

  /* No controller retires the pod: the patch lands, the suspend is unconfirmed. */
  ck_assert (
      !nz_kube_workspace_suspend (client, NS, "sr", 2, NULL, NULL, 10, 200, &already, &error));
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_SUSPEND_TIMEOUT));
  g_clear_error (&error);
  sb = get_sandbox ("sr");
  ck_assert_str_eq (mode (sb), "Suspended");
  ck_assert_str_eq (ann (sb, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "2");
  g_clear_pointer (&sb, json_object_unref);
  /* The controller retires it: now confirmed; a second suspend is "already". */
  delete_pod ("namzu-ws-sr");
  ck_assert (nz_kube_workspace_wait_pod_retired (client, NS, "sr", 10, 1000, &error));
  ck_assert (nz_kube_workspace_suspend (client, NS, "sr", 2, refuse_step, NULL, 10, 1000, &already,
                                        &error));
  ck_assert (already);

  /* The standalone list sees it. */
  list = nz_kube_workspace_list (client, NS, &error);
  ck_assert (list != NULL);
  for (guint i = 0; i < list->len; i++)
    {
      NzKubeWorkspaceInfo *info = list->pdata[i];

      ck_assert (!g_str_has_prefix (info->workspace_id, "namzu-ws-"));
      if (g_strcmp0 (info->workspace_id, "sr") == 0)
        {
          found = TRUE;
          ck_assert_str_eq (info->operating_mode, "Suspended");
          ck_assert_str_eq (info->template, "tmpl-a");
          ck_assert_int_eq (info->holder_epoch, 2);
          ck_assert (info->mode_changed_at != NULL && info->created_at != NULL);
        }
    }
  ck_assert (found);

  /* Resume while only the retired pod's uid is around: times out. */
  ck_assert (
      !nz_kube_workspace_wait_pod_ready (client, NS, "sr", uid1, 10, 100, NULL, NULL, &error));
  ck_assert (
      g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_RESUME_TIMEOUT));
  g_clear_error (&error);
  /* The controller brings the new pod (a new uid); resume returns it. */
  uid2 = make_pod ("namzu-ws-sr", "127.0.9.2");
  ck_assert_str_ne (uid1, uid2);
  ck_assert_msg (nz_kube_workspace_resume (client, NS, "sr", 3, NULL, uid1, 10, 1000, &got_uid,
                                           &got_ip, &woke, &error),
                 "%s", error ? error->message : "");
  ck_assert (woke);
  ck_assert_str_eq (got_uid, uid2);
  ck_assert_str_eq (got_ip, "127.0.9.2");
  sb = get_sandbox ("sr");
  ck_assert_str_eq (mode (sb), "Running");
  ck_assert_str_eq (ann (sb, NZ_KUBE_HOLDER_EPOCH_ANNOTATION), "3");

  /* Identity: the same uid reads; another expected uid is a replaced Sandbox. */
  ident = nz_kube_workspace_read_identity (
      client, NS, "sr", nz_json_get_string (nz_json_get_object (sb, "metadata"), "uid"), &error);
  ck_assert_msg (ident != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (ident->pod_uid, uid2);
  ck_assert (nz_kube_workspace_read_identity (client, NS, "sr", "some-other-uid", &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_REPLACED));
  g_clear_error (&error);
  ck_assert (nz_kube_workspace_delete (client, NS, "sr", 3, NULL, &error));
  ck_assert (nz_kube_workspace_read_identity (client, NS, "sr", "x", &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_REPLACED));
  ck_assert_msg (strstr (error->message, "found none") != NULL, "%s", error->message);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-workspace-api");
  TCase *tc = tcase_create ("fake");
  g_autofree char *url = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *ca_path = NULL;
  int rc;

  nz_test_require_program ("python3", "python3 (scripts/install-deps)");
  nz_test_require_program ("certtool", "certtool (gnutls-bin, scripts/install-deps)");
  pki = g_dir_make_tmp ("nz-kube-ws-pki-XXXXXX", NULL);
  NZ_TEST_REQUIRE (
      pki != NULL
          && kube_fake_make_cert (pki, "ca", NULL,
                                  "cn = namzu test CA\nca\ncert_signing_key\nexpiration_days = 2\n")
          && kube_fake_make_cert (pki, "server", "ca",
                                  "cn = kube-apiserver\nip_address = 127.0.0.1\ntls_www_server\n"
                                  "expiration_days = 2\n"),
      "certtool could not make the test PKI");
  ca_path = g_build_filename (pki, "ca.pem", NULL);
  NZ_TEST_REQUIRE (g_file_get_contents (ca_path, &ca_pem, NULL, NULL), "read the CA");
  port = start_fake ();
  url = g_strdup_printf ("https://127.0.0.1:%u", port);
  client = nz_kube_client_new (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 0, &error);
  NZ_TEST_REQUIRE (client != NULL, "client: %s", error ? error->message : "");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_create_then_adopt_and_mismatches);
  tcase_add_test (tc, test_two_holders_race);
  tcase_add_test (tc, test_422_retry_when_only_rv_moved);
  tcase_add_test (tc, test_fenced_delete);
  tcase_add_test (tc, test_suspend_resume);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);

  nz_kube_client_free (client);
  kill (fake_pid, SIGTERM);
  waitpid (fake_pid, NULL, 0);
  {
    g_autofree char *cmd = g_strdup_printf ("rm -rf %s", pki);

    (void)system (cmd);
  }
  g_free (pki);
  g_free (ca_pem);
  return rc;
}
