/* Integration tests for lib/kube's API client against tests/fakes/fake-kube-apiserver.py (a
 * fake Kubernetes API server: no cluster runs here) over real HTTPS with a test PKI made by
 * certtool: create/get/patch/delete of pods and a namespaced custom resource, the status
 * mapping (401/403 credential, 404/410 gone, 409 conflict, 422 patch not applied), the cluster
 * CA's verification (another CA, another name, tls-server-name, insecure), client
 * certificates, an exec credential plugin, in-cluster access, and the request timeout against
 * a stalled server (the error class is asserted, never a duration). */
#include <arpa/inet.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-kube-client.h"
#include "../nz-test.h"
#include "kube-fake.h"

static char *pki;    /* the test PKI directory */
static char *ca_pem; /* the cluster CA */
static guint16 port; /* the fake with the cluster CA's server certificate */
static GPid fake_pid;
static const char token[] = "token-of-the-host";

static char *
pki_path (const char *name)
{
  return g_build_filename (pki, name, NULL);
}

static gboolean
make_pki (void)
{
  static const char ca[] = "cn = namzu test cluster CA\nca\ncert_signing_key\n"
                           "expiration_days = 2\n";
  static const char server[] = "cn = kube-apiserver\nip_address = 127.0.0.1\n"
                               "dns_name = localhost\ndns_name = kubernetes.default.svc\n"
                               "tls_www_server\nexpiration_days = 2\n";

  return kube_fake_make_cert (pki, "ca", NULL, ca)
         && kube_fake_make_cert (pki, "other-ca", NULL, ca)
         && kube_fake_make_cert (pki, "server", "ca", server)
         && kube_fake_make_cert (pki, "other-server", "other-ca", server)
         && kube_fake_make_cert (pki, "alice", "ca",
                                 "cn = alice\ntls_www_client\nexpiration_days = 2\n")
         && kube_fake_make_cert (pki, "mallory", "other-ca",
                                 "cn = mallory\ntls_www_client\n"
                                 "expiration_days = 2\n");
}

/* Starts the fake with @server_cert and returns its port. */
static guint16
start_fake (const char *server_cert, GPid *pid)
{
  g_autofree char *client_ca = pki_path ("ca.pem");
  g_autofree char *tok = g_strdup_printf ("host=%s", token);
  const char *extra[] = { "--client-ca", client_ca, "--token", tok,       "--forbid", "locked",
                          "--stall",     "stall",   "--gone",  "expired", NULL };

  return kube_fake_start (pki, server_cert, extra, pid);
}

static char *
server_url (guint16 p)
{
  return g_strdup_printf ("https://127.0.0.1:%u", p);
}

static NzKubeClient *
client_with (NzKubeAccess *access, guint timeout_ms)
{
  g_autoptr (GError) error = NULL;
  NzKubeClient *c = nz_kube_client_new (access, timeout_ms, &error);

  ck_assert_msg (c != NULL, "%s", error ? error->message : "");
  return c;
}

static NzKubeClient *
token_client (const char *tok)
{
  g_autofree char *url = server_url (port);

  return client_with (nz_kube_access_new_explicit (url, ca_pem, tok, NULL), 0);
}

static JsonObject *
parse_object (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();

  ck_assert (json_parser_load_from_data (p, json, -1, NULL));
  return json_object_ref (json_node_get_object (json_parser_get_root (p)));
}

static void
assert_error (GError *error, NzKubeErrorCode code, const char *fragment)
{
  ck_assert_msg (error != NULL, "no error (expected '%s')", fragment);
  ck_assert_msg (g_error_matches (error, NZ_KUBE_ERROR, code), "code %d, not %d: %s", error->code,
                 code, error->message);
  ck_assert_msg (strstr (error->message, fragment) != NULL, "'%s' lacks '%s'", error->message,
                 fragment);
  ck_assert_msg (strstr (error->message, token) == NULL, "the token leaked: %s", error->message);
}

static const char *
meta_string (JsonObject *o, const char *member)
{
  return json_object_get_string_member (json_object_get_object_member (o, "metadata"), member);
}

START_TEST (test_pods_crud_and_status_mapping)
{
  g_autoptr (NzKubeClient) c = token_client (token);
  g_autofree char *pods = nz_kube_path (NULL, NULL, "team", "pods", NULL);
  g_autofree char *pod = nz_kube_path (NULL, NULL, "team", "pods", "agent-1");
  g_autoptr (JsonObject) body
      = parse_object ("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"agent-1\","
                      "\"labels\":{\"app\":\"namzu\"}},\"spec\":{\"containers\":[]}}");
  g_autoptr (JsonObject) created = NULL, got = NULL, list = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *sel = g_strconcat (pods, "?labelSelector=app%3Dnamzu", NULL);
  g_autofree char *nosel = g_strconcat (pods, "?labelSelector=app%3Dother", NULL);

  /* 404 before it exists, as gone. */
  ck_assert (nz_kube_get (c, pod, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_GONE, "HTTP 404 NotFound: pods \"agent-1\" not found");
  g_clear_error (&error);
  created = nz_kube_create (c, pods, body, &error);
  ck_assert_msg (created != NULL, "%s", error ? error->message : "");
  ck_assert (meta_string (created, "uid") != NULL);
  ck_assert (meta_string (created, "resourceVersion") != NULL);
  got = nz_kube_get (c, pod, &error);
  ck_assert_str_eq (meta_string (got, "uid"), meta_string (created, "uid"));
  list = nz_kube_get (c, sel, &error);
  ck_assert_uint_eq (json_array_get_length (json_object_get_array_member (list, "items")), 1);
  g_clear_pointer (&list, json_object_unref);
  list = nz_kube_get (c, nosel, &error);
  ck_assert_uint_eq (json_array_get_length (json_object_get_array_member (list, "items")), 0);
  /* 409 on a second create. */
  ck_assert (nz_kube_create (c, pods, body, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_CONFLICT, "HTTP 409 AlreadyExists");
  g_clear_error (&error);
  /* 422 for an object without a name. */
  json_object_remove_member (json_object_get_object_member (body, "metadata"), "name");
  ck_assert (nz_kube_create (c, pods, body, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_PATCH_NOT_APPLIED, "HTTP 422 Invalid");
  g_clear_error (&error);
  ck_assert_msg (nz_kube_delete (c, pod, NULL, &error), "%s", error ? error->message : "");
  ck_assert (!nz_kube_delete (c, pod, NULL, &error));
  assert_error (error, NZ_KUBE_ERROR_GONE, "HTTP 404");
  g_clear_error (&error);
  /* 410 is gone too. */
  {
    g_autofree char *expired = nz_kube_path (NULL, NULL, "expired", "pods", "agent-1");

    ck_assert (nz_kube_get (c, expired, &error) == NULL);
    assert_error (error, NZ_KUBE_ERROR_GONE, "HTTP 410 Gone");
  }
}
END_TEST

START_TEST (test_custom_resource_patches_and_preconditions)
{
  g_autoptr (NzKubeClient) c = token_client (token);
  g_autofree char *claims = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP,
                                          NZ_KUBE_SANDBOX_API_VERSION, "ns", "sandboxclaims", NULL);
  g_autofree char *claim
      = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, "ns",
                      "sandboxclaims", "namzu-task-1");
  g_autoptr (JsonObject) body = parse_object (
      "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":\"SandboxClaim\","
      "\"metadata\":{\"name\":\"namzu-task-1\"},\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"},"
      "\"lifecycle\":{\"shutdownTime\":\"2030-01-01T00:00:00Z\",\"shutdownPolicy\":"
      "\"Delete\"}}}");
  g_autoptr (JsonObject) created = NULL, patched = NULL, fenced = NULL;
  g_autoptr (JsonObject) merge
      = parse_object ("{\"spec\":{\"lifecycle\":{\"shutdownTime\":\"2031-01-01T00:00:00Z\"}}}");
  g_autoptr (JsonParser) ops_parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *rv1 = NULL;
  JsonArray *ops;

  created = nz_kube_create (c, claims, body, &error);
  ck_assert_msg (created != NULL, "%s", error ? error->message : "");
  rv1 = g_strdup (meta_string (created, "resourceVersion"));
  /* Merge patch (the lease renewal's shape). */
  patched = nz_kube_merge_patch (c, claim, merge, &error);
  ck_assert_msg (patched != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (json_object_get_string_member (
                        json_object_get_object_member (
                            json_object_get_object_member (patched, "spec"), "lifecycle"),
                        "shutdownTime"),
                    "2031-01-01T00:00:00Z");
  ck_assert_str_ne (meta_string (patched, "resourceVersion"), rv1);
  /* JSON Patch test + add (the holder-epoch fence): passes once, then its test fails: 422. */
  ck_assert (json_parser_load_from_data (
      ops_parser,
      "[{\"op\":\"test\",\"path\":\"/spec/warmPoolRef/name\",\"value\":\"pool\"},"
      "{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":"
      "{\"sandbox.namzu.ai/holder-epoch\":\"1\"}},"
      "{\"op\":\"add\",\"path\":\"/spec/warmPoolRef/name\",\"value\":\"pool-2\"}]",
      -1, NULL));
  ops = json_node_get_array (json_parser_get_root (ops_parser));
  fenced = nz_kube_json_patch (c, claim, ops, &error);
  ck_assert_msg (fenced != NULL, "%s", error ? error->message : "");
  ck_assert (nz_kube_json_patch (c, claim, ops, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_PATCH_NOT_APPLIED, "HTTP 422");
  g_clear_error (&error);
  /* DELETE with a stale resourceVersion precondition: 409; with the current one: done. */
  ck_assert (!nz_kube_delete (c, claim, rv1, &error));
  assert_error (error, NZ_KUBE_ERROR_CONFLICT, "Precondition failed");
  g_clear_error (&error);
  ck_assert_msg (nz_kube_delete (c, claim, meta_string (fenced, "resourceVersion"), &error), "%s",
                 error ? error->message : "");
  ck_assert (nz_kube_get (c, claim, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_GONE, "HTTP 404");
}
END_TEST

START_TEST (test_credentials_refused)
{
  g_autoptr (NzKubeClient) wrong = token_client ("not-the-token");
  g_autoptr (NzKubeClient) right = token_client (token);
  g_autofree char *p = nz_kube_path (NULL, NULL, "team", "pods", "x");
  g_autofree char *locked = nz_kube_path (NULL, NULL, "locked", "pods", "x");
  g_autoptr (GError) error = NULL;

  ck_assert (nz_kube_get (wrong, p, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_CREDENTIAL, "HTTP 401 Unauthorized");
  g_clear_error (&error);
  ck_assert (nz_kube_get (right, locked, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_CREDENTIAL, "HTTP 403 Forbidden");
}
END_TEST

static void
assert_tls_refused (NzKubeAccess *access, const char *what)
{
  g_autoptr (NzKubeClient) c = client_with (access, 0);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) got = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);

  ck_assert_msg (got == NULL, "%s: the server was trusted", what);
  assert_error (error, NZ_KUBE_ERROR_TLS, "certificate was refused");
}

/* One TLS setup per case: glib-networking resumes TLS sessions per host and port within a
 * process, and a resumed session is not verified anew (docs/kubernetes.md), so each trust
 * configuration gets a process of its own (Check forks every loop iteration). */
enum
{
  TLS_OTHER_CA,
  TLS_OTHER_SERVER,
  TLS_WRONG_NAME,
  TLS_SERVER_NAME,
  TLS_INSECURE,
  TLS_SYSTEM_TRUST,
  TLS_CASES
};

START_TEST (test_cluster_ca_verified)
{
  g_autofree char *other_ca = NULL;
  g_autofree char *url = server_url (port);
  g_autofree char *other_pem_path = pki_path ("other-ca.pem");
  GPid other_pid = 0;
  guint16 other_port = 0;
  g_autofree char *other_url = NULL;

  ck_assert (g_file_get_contents (other_pem_path, &other_ca, NULL, NULL));
  if (_i == TLS_OTHER_SERVER || _i == TLS_INSECURE || _i == TLS_SYSTEM_TRUST)
    {
      other_port = start_fake ("other-server", &other_pid);
      other_url = server_url (other_port);
    }
  switch (_i)
    {
    case TLS_OTHER_CA: /* our server, another CA named as the cluster's */
      assert_tls_refused (nz_kube_access_new_explicit (url, other_ca, token, NULL), "other CA");
      break;
    case TLS_OTHER_SERVER: /* a server whose certificate another CA signed */
      assert_tls_refused (nz_kube_access_new_explicit (other_url, ca_pem, token, NULL),
                          "other server");
      break;
    case TLS_WRONG_NAME: /* the right CA, a tls-server-name the certificate does not carry */
      {
        NzKubeAccess *a = nz_kube_access_new_explicit (url, ca_pem, token, NULL);

        a->tls_server_name = g_strdup ("api.elsewhere.example");
        assert_tls_refused (a, "tls-server-name elsewhere");
      }
      break;
    case TLS_SERVER_NAME: /* tls-server-name naming what the certificate carries */
    case TLS_INSECURE:    /* insecure-skip-tls-verify accepts the other CA's server */
      {
        NzKubeAccess *a = nz_kube_access_new_explicit (
            _i == TLS_INSECURE ? other_url : url, _i == TLS_INSECURE ? NULL : ca_pem, token, NULL);
        g_autoptr (NzKubeClient) c = NULL;
        g_autoptr (GError) error = NULL;
        g_autoptr (JsonObject) list = NULL;

        if (_i == TLS_INSECURE)
          a->insecure = TRUE;
        else
          a->tls_server_name = g_strdup ("kubernetes.default.svc");
        c = client_with (a, 0);
        list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
        ck_assert_msg (list != NULL, "%s", error ? error->message : "");
      }
      break;
    case TLS_SYSTEM_TRUST: /* no CA named: the system trust store, which lacks the test CA */
      {
        /* A client with the cluster CA first: it makes its database the TLS backend's
         * default, which the system-trust client after it must not inherit. (It asks another
         * server: a session with ours would be resumed, unverified; see docs/kubernetes.md.) */
        g_autoptr (NzKubeClient) first
            = client_with (nz_kube_access_new_explicit (other_url, ca_pem, token, NULL), 0);
        g_autoptr (JsonObject) list = nz_kube_get (first, "/api/v1/namespaces/team/pods", NULL);

        ck_assert (list == NULL);
        assert_tls_refused (nz_kube_access_new_explicit (url, NULL, token, NULL), "system trust");
      }
      break;
    default:
      g_assert_not_reached ();
    }
  if (other_pid != 0)
    {
      kill (other_pid, SIGTERM);
      waitpid (other_pid, NULL, 0);
    }
}
END_TEST

/* A kubeconfig for the fake with @user_block, written to the PKI dir. */
static char *
write_kubeconfig (const char *name, const char *user_block)
{
  g_autofree char *ca_b64 = g_base64_encode ((const guchar *)ca_pem, strlen (ca_pem));
  g_autofree char *text = g_strdup_printf ("apiVersion: v1\nkind: Config\n"
                                           "current-context: fake\n"
                                           "contexts:\n- name: fake\n"
                                           "  context: {cluster: fake, user: u}\n"
                                           "clusters:\n- name: fake\n  cluster:\n"
                                           "    server: https://127.0.0.1:%u\n"
                                           "    certificate-authority-data: %s\n"
                                           "users:\n- name: u\n  user:\n%s",
                                           port, ca_b64, user_block);
  char *path = pki_path (name);

  ck_assert (g_file_set_contents (path, text, -1, NULL));
  return path;
}

static NzKubeClient *
kubeconfig_client (const char *path)
{
  g_autoptr (GError) error = NULL;
  NzKubeAccess *a = nz_kube_access_from_kubeconfig (path, NULL, &error);

  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  return client_with (a, 0);
}

/* One identity per case (one process each, for the reason above). */
enum
{
  CERT_ALICE,
  CERT_OTHER_CA,
  CERT_NONE,
  CERT_CASES
};

START_TEST (test_client_certificate)
{
  static const char *const who[] = { "alice", "mallory", NULL };
  g_autofree char *block = who[_i] != NULL ? g_strdup_printf ("    client-certificate: %s/%s.pem\n"
                                                              "    client-key: %s/%s.key\n",
                                                              pki, who[_i], pki, who[_i])
                                           : g_strdup ("    {}\n");
  g_autofree char *path = write_kubeconfig ("kc-cert", block);
  g_autoptr (NzKubeClient) c = kubeconfig_client (path);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);

  if (_i == CERT_ALICE)
    {
      ck_assert_msg (list != NULL, "%s", error ? error->message : "");
      return;
    }
  /* A certificate from another CA authenticates nobody (the fake's TLS refuses it, or it is
   * not sent and the request is anonymous), and neither does no credential. */
  ck_assert (list == NULL);
  ck_assert (error != NULL && error->domain == NZ_KUBE_ERROR);
  if (_i == CERT_NONE)
    assert_error (error, NZ_KUBE_ERROR_CREDENTIAL, "HTTP 401");
  else /* TLS 1.3: the refusal comes as an alert or a reset, whichever the client reads first */
    ck_assert_msg (error->code == NZ_KUBE_ERROR_CREDENTIAL || error->code == NZ_KUBE_ERROR_FAILED,
                   "%s", error->message);
}
END_TEST

START_TEST (test_exec_plugin_and_retry_on_401)
{
  /* The plugin answers a stale token first and the right one after: the client's 401 runs it
   * once more and the request succeeds. */
  g_autofree char *count = pki_path ("plugin-count");
  g_autofree char *script_text
      = g_strdup_printf ("#!/bin/sh\n"
                         "n=$(cat '%s' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '%s'\n"
                         "if [ $n -eq 1 ]; then t=stale; else t='%s'; fi\n"
                         "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                         "\"ExecCredential\",\"status\":{\"token\":\"%%s\"}}' \"$t\"\n",
                         count, count, token);
  g_autofree char *script = pki_path ("plugin.sh");
  g_autofree char *block = g_strdup_printf ("    exec:\n"
                                            "      apiVersion: client.authentication.k8s.io/v1\n"
                                            "      command: %s\n",
                                            script);
  g_autofree char *path = NULL;
  g_autoptr (NzKubeClient) c = NULL;
  g_autoptr (JsonObject) list = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *n = NULL;

  g_unlink (count);
  ck_assert (g_file_set_contents_full (script, script_text, -1, G_FILE_SET_CONTENTS_CONSISTENT,
                                       0700, NULL));
  path = write_kubeconfig ("kc-exec", block);
  c = kubeconfig_client (path);
  list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
  ck_assert_msg (list != NULL, "%s", error ? error->message : "");
  ck_assert (g_file_get_contents (count, &n, NULL, NULL));
  ck_assert_str_eq (g_strstrip (n), "2");
  /* Cached now: no further run. */
  g_clear_pointer (&list, json_object_unref);
  list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
  ck_assert (list != NULL);
  g_clear_pointer (&n, g_free);
  ck_assert (g_file_get_contents (count, &n, NULL, NULL));
  ck_assert_str_eq (g_strstrip (n), "2");
}
END_TEST

START_TEST (test_in_cluster_against_fake)
{
  g_autofree char *sa = pki_path ("sa");
  g_autofree char *tok = g_build_filename (sa, "token", NULL);
  g_autofree char *ca = g_build_filename (sa, "ca.crt", NULL);
  g_autofree char *port_s = g_strdup_printf ("%u", port);
  g_autoptr (GError) error = NULL;
  g_autoptr (NzKubeClient) c = NULL;
  g_autoptr (JsonObject) list = NULL;
  NzKubeAccess *a;

  ck_assert_int_eq (g_mkdir_with_parents (sa, 0700), 0);
  ck_assert (g_file_set_contents (tok, token, -1, NULL));
  ck_assert (g_file_set_contents (ca, ca_pem, -1, NULL));
  g_setenv (NZ_KUBE_SERVICEACCOUNT_DIR_ENV, sa, TRUE);
  g_setenv ("KUBERNETES_SERVICE_HOST", "127.0.0.1", TRUE);
  g_setenv ("KUBERNETES_SERVICE_PORT", port_s, TRUE);
  a = nz_kube_access_in_cluster (&error);
  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  c = client_with (a, 0);
  list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
  ck_assert_msg (list != NULL, "%s", error ? error->message : "");
}
END_TEST

START_TEST (test_answer_too_large)
{
  /* An object whose answer is past NZ_KUBE_MAX_BODY is refused, not buffered whole. */
  g_autoptr (NzKubeClient) c = token_client (token);
  g_autofree char *pods = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION,
                                        "big", "sandboxes", NULL);
  g_autofree char *pod = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION,
                                       "big", "sandboxes", "huge");
  g_autoptr (JsonObject) body
      = parse_object ("{\"apiVersion\":\"agents.x-k8s.io/"
                      "v1beta1\",\"kind\":\"Sandbox\",\"metadata\":{\"name\":\"huge\","
                      "\"annotations\":{}},\"spec\":{}}");
  g_autofree char *blob = g_strnfill (NZ_KUBE_MAX_BODY + 1, 'x');
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) got = NULL;

  json_object_set_string_member (
      json_object_get_object_member (json_object_get_object_member (body, "metadata"),
                                     "annotations"),
      "blob", blob);
  ck_assert (nz_kube_create (c, pods, body, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_PROTOCOL, "the answer is larger than");
  g_clear_error (&error);
  ck_assert (nz_kube_get (c, pod, &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_PROTOCOL, "the answer is larger than");
  g_clear_error (&error);
  /* The client goes on working (a Sandbox DELETE answers a small Status). */
  ck_assert (nz_kube_delete (c, pod, NULL, &error));
  got = nz_kube_get (c, "/apis/agents.x-k8s.io/v1beta1/namespaces/big/sandboxes", &error);
  ck_assert_msg (got != NULL, "%s", error ? error->message : "");
}
END_TEST

START_TEST (test_request_timeout)
{
  g_autofree char *url = server_url (port);
  g_autoptr (NzKubeClient) c = NULL;
  g_autoptr (GError) error = NULL;

  /* The default, and the floor: a smaller value is raised to 1000 ms. */
  {
    g_autoptr (NzKubeClient) d = token_client (token);

    ck_assert_uint_eq (nz_kube_client_get_timeout_ms (d), NZ_KUBE_API_REQUEST_TIMEOUT_MS);
  }
  c = client_with (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 10);
  ck_assert_uint_eq (nz_kube_client_get_timeout_ms (c), NZ_KUBE_API_REQUEST_TIMEOUT_FLOOR_MS);
  ck_assert (nz_kube_get (c, "/api/v1/namespaces/stall/pods/p", &error) == NULL);
  assert_error (error, NZ_KUBE_ERROR_TIMED_OUT, "no answer within 1000ms");
  g_clear_error (&error);
  /* The client still works after a timed-out request. Its 1 s bound is short for a loaded
   * sanitized run, so a second timeout is asked again (a broken client fails every time). */
  for (int attempt = 0;; attempt++)
    {
      g_autoptr (JsonObject) list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);

      if (list != NULL)
        break;
      ck_assert_msg (attempt < 4 && g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_TIMED_OUT),
                     "%s", error->message);
      g_clear_error (&error);
    }
}
END_TEST

/* ---- HTTPS_PROXY: a CONNECT proxy of the test's own, in a thread ---- */

static GMutex proxy_lock;
static GPtrArray *proxy_seen; /* the CONNECT authorities the proxy was asked for */

static void
relay (int a, int b)
{
  struct pollfd fds[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
  char buf[16384];

  while (poll (fds, 2, 10000) > 0)
    for (int i = 0; i < 2; i++)
      if (fds[i].revents != 0)
        {
          ssize_t n = read (fds[i].fd, buf, sizeof buf);

          if (n <= 0 || write (fds[1 - i].fd, buf, n) != n)
            return;
        }
}

/* Every CONNECT HOST:PORT goes to 127.0.0.1:PORT (the name need not resolve here). */
static gpointer
proxy_thread (gpointer data)
{
  int lfd = GPOINTER_TO_INT (data);

  for (;;)
    {
      int cfd = accept (lfd, NULL, NULL);
      char head[4096] = "";
      size_t got = 0;
      char authority[256] = "";
      unsigned target = 0;
      int sfd;
      struct sockaddr_in to = { .sin_family = AF_INET };

      if (cfd < 0)
        return NULL;
      while (got < sizeof head - 1 && strstr (head, "\r\n\r\n") == NULL)
        {
          ssize_t n = read (cfd, head + got, sizeof head - 1 - got);

          if (n <= 0)
            break;
          got += n;
          head[got] = '\0';
        }
      if (sscanf (head, "CONNECT %255s HTTP/1.", authority) == 1 && strrchr (authority, ':') != NULL
          && sscanf (strrchr (authority, ':') + 1, "%u", &target) == 1)
        {
          g_mutex_lock (&proxy_lock);
          g_ptr_array_add (proxy_seen, g_strdup (authority));
          g_mutex_unlock (&proxy_lock);
          to.sin_port = htons (target);
          to.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
          sfd = socket (AF_INET, SOCK_STREAM, 0);
          if (connect (sfd, (struct sockaddr *)&to, sizeof to) == 0)
            {
              static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

              if (write (cfd, ok, sizeof ok - 1) == sizeof ok - 1)
                relay (cfd, sfd);
            }
          close (sfd);
        }
      close (cfd);
    }
}

/* A socket bound to 127.0.0.1 on a free port; *@bound_port gets the port. */
static int
loopback_socket (guint16 *bound_port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM, 0);

  ck_assert (fd >= 0 && bind (fd, (struct sockaddr *)&a, sizeof a) == 0
             && getsockname (fd, (struct sockaddr *)&a, &len) == 0);
  *bound_port = ntohs (a.sin_port);
  return fd;
}

/* Starts the proxy; returns its port. */
static guint16
start_proxy (void)
{
  guint16 p = 0;
  int lfd = loopback_socket (&p);

  ck_assert (listen (lfd, 8) == 0);
  proxy_seen = g_ptr_array_new_with_free_func (g_free);
  g_thread_unref (g_thread_new ("proxy", proxy_thread, GINT_TO_POINTER (lfd)));
  return p;
}

/* A free loopback port nothing listens on. */
static guint16
closed_port (void)
{
  guint16 p = 0;

  close (loopback_socket (&p));
  return p;
}

enum
{
  PROXY_USED,     /* a cluster name: through HTTPS_PROXY, as kubectl goes */
  PROXY_LOOPBACK, /* a loopback server: direct, whatever HTTPS_PROXY says */
  PROXY_BAD,      /* a proxy URL of another scheme: refused when the client is made */
  PROXY_CASES
};

START_TEST (test_https_proxy)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzKubeClient) c = NULL;
  g_autoptr (JsonObject) list = NULL;
  g_autofree char *proxy = NULL;
  g_autofree char *url = NULL;
  g_autofree char *want = NULL;

  g_unsetenv ("https_proxy");
  g_unsetenv ("NO_PROXY");
  g_unsetenv ("no_proxy");
  switch (_i)
    {
    case PROXY_USED:
      /* The server certificate carries kubernetes.default.svc, a name that resolves nowhere
       * here: only the proxy's CONNECT reaches it. */
      proxy = g_strdup_printf ("127.0.0.1:%u", start_proxy ());
      g_setenv ("HTTPS_PROXY", proxy, TRUE);
      url = g_strdup_printf ("https://kubernetes.default.svc:%u", port);
      c = client_with (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 0);
      list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
      ck_assert_msg (list != NULL, "through the proxy: %s", error ? error->message : "");
      want = g_strdup_printf ("kubernetes.default.svc:%u", port);
      g_mutex_lock (&proxy_lock);
      ck_assert_msg (proxy_seen->len >= 1 && g_str_equal (proxy_seen->pdata[0], want),
                     "the proxy was not asked for %s", want);
      g_mutex_unlock (&proxy_lock);
      break;
    case PROXY_LOOPBACK:
      proxy = g_strdup_printf ("http://127.0.0.1:%u", closed_port ());
      g_setenv ("HTTPS_PROXY", proxy, TRUE);
      url = server_url (port);
      c = client_with (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 0);
      list = nz_kube_get (c, "/api/v1/namespaces/team/pods", &error);
      ck_assert_msg (list != NULL, "a loopback server went to the proxy: %s",
                     error ? error->message : "");
      break;
    case PROXY_BAD:
      g_setenv ("HTTPS_PROXY", "ftp://u:pw@proxy.example:21", TRUE);
      url = g_strdup_printf ("https://kubernetes.default.svc:%u", port);
      ck_assert (
          nz_kube_client_new (nz_kube_access_new_explicit (url, ca_pem, token, NULL), 0, &error)
          == NULL);
      assert_error (error, NZ_KUBE_ERROR_CONFIG, "HTTPS_PROXY");
      break;
    default:
      g_assert_not_reached ();
    }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-client");
  TCase *tc = tcase_create ("client");
  g_autofree char *ca_path = NULL;
  int rc;

  nz_test_require_program ("python3", "python3 (scripts/install-deps)");
  nz_test_require_program ("certtool", "certtool (gnutls-bin, scripts/install-deps)");
  pki = g_dir_make_tmp ("nz-kube-pki-XXXXXX", NULL);
  NZ_TEST_REQUIRE (pki != NULL && make_pki (), "certtool could not make the test PKI");
  ca_path = pki_path ("ca.pem");
  NZ_TEST_REQUIRE (g_file_get_contents (ca_path, &ca_pem, NULL, NULL), "read the CA");
  port = start_fake ("server", &fake_pid);

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_pods_crud_and_status_mapping);
  tcase_add_test (tc, test_custom_resource_patches_and_preconditions);
  tcase_add_test (tc, test_credentials_refused);
  tcase_add_loop_test (tc, test_cluster_ca_verified, 0, TLS_CASES);
  tcase_add_loop_test (tc, test_client_certificate, 0, CERT_CASES);
  tcase_add_test (tc, test_exec_plugin_and_retry_on_401);
  tcase_add_test (tc, test_in_cluster_against_fake);
  tcase_add_test (tc, test_answer_too_large);
  tcase_add_test (tc, test_request_timeout);
  tcase_add_loop_test (tc, test_https_proxy, 0, PROXY_CASES);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);

  kill (fake_pid, SIGTERM);
  waitpid (fake_pid, NULL, 0);
  {
    g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", pki);

    if (system (cmd) != 0)
      rc = EXIT_FAILURE;
  }
  g_free (pki);
  g_free (ca_pem);
  return rc;
}
