/* Unit tests for lib/kube's cluster access: kubeconfig parsing (token, tokenFile, client
 * certificates as data and files, exec credential plugins v1 and v1beta1, the $KUBECONFIG
 * merge, context selection and its errors, refusals), in-cluster discovery and explicit
 * access. Nothing here talks to a server (test-kube-client does). */
#include <glib/gstdio.h>
#include <string.h>

#include "nz-kube-access.h"
#include "nz-kube-client.h"
#include "nz-errors.h"
#include "../nz-test.h"

static char *tmp;

/* Check's fixture: a fresh directory and no ambient Kubernetes configuration. */
static void
setup (void)
{
  tmp = g_dir_make_tmp ("nz-kubecfg-XXXXXX", NULL);
  ck_assert (tmp != NULL);
  g_unsetenv ("KUBECONFIG");
  g_unsetenv ("KUBERNETES_SERVICE_HOST");
  g_unsetenv ("KUBERNETES_SERVICE_PORT");
  g_unsetenv (NZ_KUBE_SERVICEACCOUNT_DIR_ENV);
  g_setenv ("HOME", tmp, TRUE);
}

static void
teardown (void)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmp);

  ck_assert_int_eq (system (cmd), 0);
  g_clear_pointer (&tmp, g_free);
}

/* Writes @text to tmp/@name (mode 0700 for scripts) and returns its path. */
static char *
put (const char *name, const char *text, int mode)
{
  char *path = g_build_filename (tmp, name, NULL);
  g_autofree char *dir = g_path_get_dirname (path);

  ck_assert_int_eq (g_mkdir_with_parents (dir, 0700), 0);
  ck_assert (g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, mode, NULL));
  return path;
}

static const char one_cluster[] = "apiVersion: v1\n"
                                  "kind: Config\n"
                                  "clusters:\n"
                                  "- name: c1\n"
                                  "  cluster:\n"
                                  "    server: https://127.0.0.1:6443/\n"
                                  "    certificate-authority-data: %s\n"
                                  "contexts:\n"
                                  "- name: ctx\n"
                                  "  context: {cluster: c1, user: u1, namespace: team-a}\n"
                                  "current-context: ctx\n"
                                  "users:\n"
                                  "- name: u1\n"
                                  "  user:\n"
                                  "%s";

static char *
kubeconfig (const char *name, const char *user_block)
{
  g_autofree char *ca = g_base64_encode ((const guchar *)"CA PEM\n", 7);
  g_autofree char *text = g_strdup_printf (one_cluster, ca, user_block);

  return put (name, text, 0600);
}

static NzKubeAccess *
load_ok (const char *path, const char *context)
{
  g_autoptr (GError) error = NULL;
  NzKubeAccess *a = nz_kube_access_from_kubeconfig (path, context, &error);

  ck_assert_msg (a != NULL, "%s", error ? error->message : "");
  return a;
}

static void
assert_refused (const char *path, const char *context, const char *fragment)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzKubeAccess) a = nz_kube_access_from_kubeconfig (path, context, &error);

  ck_assert (a == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG));
  ck_assert_msg (strstr (error->message, fragment) != NULL, "'%s' lacks '%s'", error->message,
                 fragment);
}

START_TEST (test_token_user)
{
  g_autofree char *path = kubeconfig ("config", "    token: tok-123\n");
  g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
  g_autoptr (NzKubeCredential) cred = NULL;

  ck_assert_str_eq (a->server, "https://127.0.0.1:6443");
  ck_assert_str_eq (a->ca_pem, "CA PEM\n");
  ck_assert_str_eq (a->namespace, "team-a");
  ck_assert_str_eq (a->context, "ctx");
  ck_assert (!a->insecure);
  ck_assert_uint_eq (a->warnings->len, 0);
  cred = nz_kube_access_credential (a, NULL);
  ck_assert_str_eq (cred->token, "tok-123");
  ck_assert (cred->client_cert_pem == NULL);
}
END_TEST

START_TEST (test_token_file)
{
  /* A relative tokenFile is relative to the kubeconfig's directory, and re-read per use. */
  g_autofree char *tok = put ("sub/tok", "  first-token\n", 0600);
  g_autofree char *path = kubeconfig ("sub/config", "    tokenFile: tok\n");
  g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
  g_autoptr (NzKubeCredential) c1 = nz_kube_access_credential (a, NULL);
  g_autoptr (NzKubeCredential) c2 = NULL;
  g_autoptr (GError) error = NULL;

  ck_assert_str_eq (c1->token, "first-token");
  g_free (put ("sub/tok", "rotated\n", 0600));
  c2 = nz_kube_access_credential (a, NULL);
  ck_assert_str_eq (c2->token, "rotated");
  /* A token file that became empty is an error, never a blank bearer. */
  g_free (put ("sub/tok", " \n", 0600));
  ck_assert (nz_kube_access_credential (a, &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG));
  /* And a missing one is refused at load. */
  g_unlink (tok);
  assert_refused (path, NULL, "token file");
}
END_TEST

START_TEST (test_client_cert_data_and_files)
{
  g_autofree char *cert = g_base64_encode ((const guchar *)"CERT PEM", 8);
  g_autofree char *key = g_base64_encode ((const guchar *)"KEY PEM", 7);
  g_autofree char *block = g_strdup_printf ("    client-certificate-data: %s\n"
                                            "    client-key-data: %s\n",
                                            cert, key);
  g_autofree char *p1 = kubeconfig ("data", block);
  g_autofree char *cf = put ("certs/c.pem", "CERT FILE", 0600);
  g_autofree char *kf = put ("certs/k.pem", "KEY FILE", 0600);
  g_autofree char *block2 = g_strdup_printf ("    client-certificate: certs/c.pem\n"
                                             "    client-key: %s\n",
                                             kf);
  g_autofree char *p2 = kubeconfig ("files", block2);
  g_autofree char *p3 = kubeconfig ("half", "    client-certificate: certs/c.pem\n");
  g_autofree char *p4 = kubeconfig ("badb64", "    client-certificate-data: '***'\n"
                                              "    client-key-data: '***'\n");

  {
    g_autoptr (NzKubeAccess) a = load_ok (p1, NULL);
    g_autoptr (NzKubeCredential) c = nz_kube_access_credential (a, NULL);

    ck_assert_str_eq (c->client_cert_pem, "CERT PEM");
    ck_assert_str_eq (c->client_key_pem, "KEY PEM");
    ck_assert (c->token == NULL);
  }
  {
    g_autoptr (NzKubeAccess) a = load_ok (p2, NULL);

    ck_assert_str_eq (a->client_cert_pem, "CERT FILE");
    ck_assert_str_eq (a->client_key_pem, "KEY FILE");
  }
  assert_refused (p3, NULL, "needs both client-certificate and client-key");
  assert_refused (p4, NULL, "not base64");
}
END_TEST

/* A credential plugin that records its calls, args, env and KUBERNETES_EXEC_INFO. */
static const char plugin_sh[]
    = "#!/bin/sh\n"
      "echo call >> \"$LOG\"\n"
      "printf '%%s\\n' \"$*\" > \"$LOG.args\"\n"
      "printf '%%s\\n' \"$KUBERNETES_EXEC_INFO\" > \"$LOG.info\"\n"
      "printf '%%s\\n' \"$PLUGIN_ENV\" > \"$LOG.env\"\n"
      "cat <<EOF\n"
      "{\"apiVersion\":\"$API\",\"kind\":\"ExecCredential\",\"status\":{%s}}\n"
      "EOF\n";

static char *
plugin_config (const char *name, const char *api, const char *status)
{
  g_autofree char *script_text = g_strdup_printf (plugin_sh, status);
  g_autofree char *script = put ("bin/plugin.sh", script_text, 0700);
  g_autofree char *log = g_build_filename (tmp, "plugin.log", NULL);
  g_autofree char *block = g_strdup_printf ("    exec:\n"
                                            "      apiVersion: %s\n"
                                            "      command: ./bin/plugin.sh\n"
                                            "      args: [--cluster, \"c 1\"]\n"
                                            "      env:\n"
                                            "      - {name: LOG, value: '%s'}\n"
                                            "      - {name: API, value: '%s'}\n"
                                            "      - {name: PLUGIN_ENV, value: from-config}\n"
                                            "      interactiveMode: Never\n",
                                            api, log, api);

  return kubeconfig (name, block);
}

static int
plugin_calls (void)
{
  g_autofree char *log = g_build_filename (tmp, "plugin.log", NULL);
  g_autofree char *text = NULL;
  int n = 0;

  if (!g_file_get_contents (log, &text, NULL, NULL))
    return 0;
  for (char *p = text; (p = strstr (p, "call")) != NULL; p += 4)
    n++;
  return n;
}

static char *
plugin_file (const char *suffix)
{
  g_autofree char *path = g_strdup_printf ("%s/plugin.log%s", tmp, suffix);
  char *text = NULL;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  return g_strstrip (text);
}

START_TEST (test_exec_plugin_v1)
{
  g_autofree char *path = plugin_config (
      "config", NZ_KUBE_EXEC_V1,
      "\"token\":\"plugin-token\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"");
  g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
  g_autoptr (NzKubeCredential) c1 = NULL, c2 = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *args = NULL, *info = NULL, *env = NULL;

  ck_assert_int_eq (plugin_calls (), 0); /* loading runs nothing */
  c1 = nz_kube_access_credential (a, &error);
  ck_assert_msg (c1 != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (c1->token, "plugin-token");
  args = plugin_file (".args");
  info = plugin_file (".info");
  env = plugin_file (".env");
  ck_assert_str_eq (args, "--cluster c 1");
  ck_assert_str_eq (env, "from-config");
  ck_assert (strstr (info, "\"apiVersion\":\"client.authentication.k8s.io/v1\"") != NULL);
  ck_assert (strstr (info, "\"kind\":\"ExecCredential\"") != NULL);
  /* Cached until its expirationTimestamp... */
  c2 = nz_kube_access_credential (a, NULL);
  ck_assert_str_eq (c2->token, "plugin-token");
  ck_assert_int_eq (plugin_calls (), 1);
  /* ...or until the server refused it. */
  nz_kube_access_forget_credential (a);
  g_clear_pointer (&c2, nz_kube_credential_free);
  c2 = nz_kube_access_credential (a, NULL);
  ck_assert_int_eq (plugin_calls (), 2);
}
END_TEST

START_TEST (test_exec_plugin_v1beta1_cert_expired)
{
  /* An answer already expired is fetched anew every time. */
  g_autofree char *path
      = plugin_config ("config", NZ_KUBE_EXEC_V1BETA1,
                       "\"clientCertificateData\":\"PLUGIN CERT\",\"clientKeyData\":\"PLUGIN KEY\","
                       "\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"");
  g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
  g_autoptr (NzKubeCredential) c1 = nz_kube_access_credential (a, NULL);
  g_autoptr (NzKubeCredential) c2 = nz_kube_access_credential (a, NULL);
  g_autofree char *info = plugin_file (".info");

  ck_assert (c1 != NULL && c2 != NULL);
  ck_assert_str_eq (c1->client_cert_pem, "PLUGIN CERT");
  ck_assert_str_eq (c1->client_key_pem, "PLUGIN KEY");
  ck_assert (c1->token == NULL);
  ck_assert_int_eq (plugin_calls (), 2);
  ck_assert (strstr (info, NZ_KUBE_EXEC_V1BETA1) != NULL);
}
END_TEST

START_TEST (test_exec_plugin_refusals)
{
  struct
  {
    const char *api, *status, *fragment;
  } rows[] = {
    { NZ_KUBE_EXEC_V1, "", "neither a token nor a client certificate" },
    { NZ_KUBE_EXEC_V1, "\"clientCertificateData\":\"C\"", "only one of" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *path = plugin_config ("config", rows[i].api, rows[i].status);
      g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
      g_autoptr (GError) error = NULL;

      ck_assert (nz_kube_access_credential (a, &error) == NULL);
      ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CREDENTIAL));
      ck_assert_msg (strstr (error->message, rows[i].fragment) != NULL, "%s", error->message);
    }
  /* A plugin answering another apiVersion than configured, and one that fails. */
  {
    g_autofree char *path = plugin_config ("config", NZ_KUBE_EXEC_V1, "\"token\":\"t\"");
    g_autofree char *text = NULL;
    g_autoptr (GError) error = NULL;
    g_autoptr (NzKubeAccess) a = NULL;

    char *p;

    /* The plugin answers the apiVersion in $API: make it differ from the configured one. */
    ck_assert (g_file_get_contents (path, &text, NULL, NULL));
    p = strstr (text, "value: 'client.authentication.k8s.io/v1'");
    ck_assert (p != NULL);
    memcpy (p, "value: 'client.authentication.k8s.io/v9'", 40);
    g_free (put ("config", text, 0600));
    a = load_ok (path, NULL);
    ck_assert (nz_kube_access_credential (a, &error) == NULL);
    ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CREDENTIAL));
    ck_assert_msg (strstr (error->message, "answered apiVersion") != NULL, "%s", error->message);
  }
  {
    g_autofree char *block = g_strdup ("    exec:\n"
                                       "      apiVersion: client.authentication.k8s.io/v1\n"
                                       "      command: false\n");
    g_autofree char *path = kubeconfig ("config3", block);
    g_autoptr (NzKubeAccess) a = load_ok (path, NULL);
    g_autoptr (GError) error = NULL;

    ck_assert (nz_kube_access_credential (a, &error) == NULL);
    ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CREDENTIAL));
    ck_assert_msg (strstr (error->message, "exited with status 1") != NULL, "%s", error->message);
  }
  /* Unknown exec apiVersion and an interactive-only plugin are refused at load. */
  {
    g_autofree char *p1
        = kubeconfig ("c4", "    exec:\n"
                            "      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                            "      command: x\n");
    g_autofree char *p2 = kubeconfig ("c5", "    exec:\n"
                                            "      apiVersion: client.authentication.k8s.io/v1\n"
                                            "      command: x\n"
                                            "      interactiveMode: Always\n");

    assert_refused (p1, NULL, "is not client.authentication.k8s.io/v1 or");
    assert_refused (p2, NULL, "interactiveMode 'Always'");
  }
}
END_TEST

START_TEST (test_kubeconfig_list_merge)
{
  /* $KUBECONFIG: the first file that sets current-context wins, a name's first definition
   * wins, missing entries are skipped. */
  g_autofree char *a_path = put ("a.yaml",
                                 "contexts:\n"
                                 "- name: shared\n"
                                 "  context: {cluster: from-a, user: ua}\n"
                                 "clusters:\n"
                                 "- name: from-a\n"
                                 "  cluster: {server: 'https://a.example:1'}\n"
                                 "users:\n"
                                 "- name: ua\n"
                                 "  user: {token: token-a}\n",
                                 0600);
  g_autofree char *b_path = put ("b.yaml",
                                 "current-context: only-b\n"
                                 "contexts:\n"
                                 "- name: shared\n"
                                 "  context: {cluster: from-b, user: ub}\n"
                                 "- name: only-b\n"
                                 "  context: {cluster: from-b, user: ua}\n"
                                 "clusters:\n"
                                 "- name: from-b\n"
                                 "  cluster: {server: 'https://b.example:2'}\n"
                                 "- name: from-a\n"
                                 "  cluster: {server: 'https://shadowed.example'}\n"
                                 "users:\n"
                                 "- name: ub\n"
                                 "  user: {token: token-b}\n"
                                 "- name: ua\n"
                                 "  user: {token: shadowed}\n",
                                 0600);
  g_autofree char *c_path = put ("c.yaml", "current-context: shared\n", 0600);
  g_autofree char *missing = g_build_filename (tmp, "missing.yaml", NULL);
  g_autofree char *list = g_strjoin (":", missing, a_path, "", b_path, c_path, NULL);

  g_setenv ("KUBECONFIG", list, TRUE);
  {
    g_autoptr (NzKubeAccess) a = load_ok (NULL, NULL);
    g_autoptr (NzKubeCredential) cred = nz_kube_access_credential (a, NULL);

    ck_assert_str_eq (a->context, "only-b"); /* b's current-context came before c's */
    ck_assert_str_eq (a->server, "https://b.example:2");
    ck_assert_str_eq (cred->token, "token-a"); /* ua from a.yaml, not b's shadow */
  }
  {
    g_autoptr (NzKubeAccess) a = load_ok (NULL, "shared");
    g_autoptr (NzKubeCredential) cred = nz_kube_access_credential (a, NULL);

    ck_assert_str_eq (a->server, "https://a.example:1"); /* a's "shared" wins */
    ck_assert_str_eq (cred->token, "token-a");
    ck_assert (a->namespace == NULL);
  }
  assert_refused (NULL, "nope", "context 'nope' does not exist");
  /* An explicit path overrides $KUBECONFIG. */
  {
    g_autoptr (NzKubeAccess) a = load_ok (a_path, "shared");

    ck_assert_str_eq (a->server, "https://a.example:1");
  }
  assert_refused (a_path, NULL, "no current-context is set and no context was named");
  g_setenv ("KUBECONFIG", missing, TRUE);
  assert_refused (NULL, NULL, "no file named in KUBECONFIG exists");
}
END_TEST

START_TEST (test_home_kubeconfig)
{
  g_autoptr (GError) error = NULL;

  ck_assert (nz_kube_access_from_kubeconfig (NULL, NULL, &error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG));
  ck_assert_msg (strstr (error->message, ".kube/config' does not exist") != NULL, "%s",
                 error->message);
  g_free (kubeconfig (".kube/config", "    token: home-token\n"));
  {
    g_autoptr (NzKubeAccess) a = load_ok (NULL, NULL);

    ck_assert_str_eq (a->token, "home-token");
  }
  assert_refused ("/nonexistent/kubeconfig", NULL, "does not exist");
}
END_TEST

START_TEST (test_kubeconfig_refusals)
{
  struct
  {
    const char *text, *fragment;
  } rows[] = {
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n"
      "- name: c\n  cluster: {server: 'http://plain:80'}\n",
      "is not an https:// URL" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n"
      "- name: c\n  cluster: {}\n",
      "has no server" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: gone}\n",
      "cluster 'gone' does not exist" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n"
      "- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
      "  user: {username: a, password: b}\n",
      "'username' is not supported" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n"
      "- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
      "  user: {auth-provider: {name: gcp}}\n",
      "'auth-provider' is not supported" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n"
      "- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
      "  user: {token: t, exec: {apiVersion: client.authentication.k8s.io/v1, command: x}}\n",
      "more than one of" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n"
      "- name: c\n  cluster: {server: 'https://h', insecure-skip-tls-verify: maybe}\n",
      "is not a boolean" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n"
      "- name: c\n  cluster: &anchor {server: 'https://h'}\n",
      "anchors are not supported" },
    { "current-context: x\ncurrent-context: y\n", "duplicate key 'current-context'" },
    { "a: b\n---\nc: d\n", "more than one YAML document" },
    { "contexts: [unclosed\n", "YAML error at line" },
    { "- just\n- a list\n", "is not a mapping" },
    { "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n"
      "- name: c\n  cluster: {server: 'https://h', proxy-url: 'http://p'}\n",
      "'proxy-url' is not supported" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *path = put ("bad", rows[i].text, 0600);

      assert_refused (path, NULL, rows[i].fragment);
    }
}
END_TEST

START_TEST (test_insecure_and_tls_server_name)
{
  g_autofree char *path = put ("config",
                               "current-context: x\n"
                               "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                               "clusters:\n- name: c\n  cluster:\n"
                               "    server: 'https://10.0.0.1:6443'\n"
                               "    insecure-skip-tls-verify: true\n"
                               "    tls-server-name: api.internal\n"
                               "users:\n- name: u\n  user: {token: t}\n",
                               0600);
  g_autoptr (NzKubeAccess) a = load_ok (path, NULL);

  ck_assert (a->insecure);
  ck_assert_str_eq (a->tls_server_name, "api.internal");
  ck_assert_uint_eq (a->warnings->len, 1);
  ck_assert (strstr (a->warnings->pdata[0], "insecure-skip-tls-verify") != NULL);
}
END_TEST

START_TEST (test_in_cluster)
{
  g_autofree char *sa = g_build_filename (tmp, "sa", NULL);
  g_autofree char *tok = put ("sa/token", "sa-token\n", 0600);
  g_autoptr (GError) error = NULL;

  g_setenv (NZ_KUBE_SERVICEACCOUNT_DIR_ENV, sa, TRUE);
  /* Not in a pod: the service env is missing. */
  ck_assert (nz_kube_access_in_cluster (&error) == NULL);
  ck_assert (g_error_matches (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG));
  ck_assert (strstr (error->message, "KUBERNETES_SERVICE_HOST") != NULL);
  g_clear_error (&error);
  g_setenv ("KUBERNETES_SERVICE_HOST", "10.96.0.1", TRUE);
  g_setenv ("KUBERNETES_SERVICE_PORT", "443", TRUE);
  /* No CA yet. */
  ck_assert (nz_kube_access_in_cluster (&error) == NULL);
  ck_assert (strstr (error->message, "in-cluster access: in-cluster CA") != NULL);
  g_clear_error (&error);
  g_free (put ("sa/ca.crt", "CLUSTER CA\n", 0600));
  g_free (put ("sa/namespace", "namzu-sandboxes\n", 0600));
  {
    g_autoptr (NzKubeAccess) a = nz_kube_access_in_cluster (&error);
    g_autoptr (NzKubeCredential) c1 = NULL, c2 = NULL;

    ck_assert_msg (a != NULL, "%s", error ? error->message : "");
    ck_assert_str_eq (a->server, "https://10.96.0.1:443");
    ck_assert_str_eq (a->ca_pem, "CLUSTER CA\n");
    ck_assert_str_eq (a->namespace, "namzu-sandboxes");
    c1 = nz_kube_access_credential (a, NULL);
    ck_assert_str_eq (c1->token, "sa-token");
    /* The kubelet rotates the projected token: it is re-read. */
    g_free (put ("sa/token", "rotated-sa-token", 0600));
    c2 = nz_kube_access_credential (a, NULL);
    ck_assert_str_eq (c2->token, "rotated-sa-token");
  }
  g_setenv ("KUBERNETES_SERVICE_HOST", "fd00::1", TRUE);
  {
    g_autoptr (NzKubeAccess) a = nz_kube_access_in_cluster (NULL);

    ck_assert_str_eq (a->server, "https://[fd00::1]:443");
  }
  g_setenv ("KUBERNETES_SERVICE_PORT", "0", TRUE);
  ck_assert (nz_kube_access_in_cluster (&error) == NULL);
  ck_assert (strstr (error->message, "is not a port") != NULL);
  g_clear_error (&error);
  g_setenv ("KUBERNETES_SERVICE_PORT", "443", TRUE);
  g_unlink (tok);
  ck_assert (nz_kube_access_in_cluster (&error) == NULL);
  ck_assert (strstr (error->message, "token file") != NULL);
}
END_TEST

START_TEST (test_explicit_and_paths)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzKubeAccess) a = nz_kube_access_new_explicit ("https://k:6443/", NULL, "t", &error);
  g_autofree char *p1 = nz_kube_path (NULL, NULL, "ns", "pods", "p/1");
  g_autofree char *p2
      = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION,
                      "namzu-sandboxes", "sandboxclaims", NULL);

  ck_assert_str_eq (a->server, "https://k:6443");
  ck_assert (nz_kube_access_new_explicit ("http://k", NULL, "t", &error) == NULL);
  g_clear_error (&error);
  ck_assert (nz_kube_access_new_explicit ("https://k", NULL, "", &error) == NULL);
  ck_assert_str_eq (p1, "/api/v1/namespaces/ns/pods/p%2F1");
  ck_assert_str_eq (p2, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/namzu-sandboxes/"
                        "sandboxclaims");
}
END_TEST

START_TEST (test_error_convert)
{
  g_autoptr (GError) e = g_error_new (NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE, "gone");

  nz_kube_error_convert (&e);
  ck_assert (g_error_matches (e, NZ_ERROR, NZ_ERROR_NOT_FOUND));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-config");
  TCase *tc = tcase_create ("access");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_token_user);
  tcase_add_test (tc, test_token_file);
  tcase_add_test (tc, test_client_cert_data_and_files);
  tcase_add_test (tc, test_exec_plugin_v1);
  tcase_add_test (tc, test_exec_plugin_v1beta1_cert_expired);
  tcase_add_test (tc, test_exec_plugin_refusals);
  tcase_add_test (tc, test_kubeconfig_list_merge);
  tcase_add_test (tc, test_home_kubeconfig);
  tcase_add_test (tc, test_kubeconfig_refusals);
  tcase_add_test (tc, test_insecure_and_tls_server_name);
  tcase_add_test (tc, test_in_cluster);
  tcase_add_test (tc, test_explicit_and_paths);
  tcase_add_test (tc, test_error_convert);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
