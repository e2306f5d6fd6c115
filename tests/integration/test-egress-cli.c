/* namzu-egress's offline commands as a user runs them: profile validate/translate and check
 * (exit 0 all allowed, 1 some denied, 2 usage), and the proxy's refusal of a configuration it
 * cannot enforce. No network. */
#include <gio/gio.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>

#include "../nz-test.h"

static char *dir;

/* Runs namzu-egress with @args (NULL-terminated), @stdin_text on stdin; returns the exit
 * status, stdout in *out and stderr in *err. */
static int
egress (const char *stdin_text, char **out, char **err, const char *const *env, const char *first,
        ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) l
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                   | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  va_list ap;
  const char *a;

  g_ptr_array_add (argv, nz_test_tool ("namzu-egress"));
  g_ptr_array_add (argv, g_strdup (first));
  va_start (ap, first);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_subprocess_launcher_unsetenv (l, "NAMZU_EGRESS_PROXY_CONFIG");
  g_subprocess_launcher_unsetenv (l, "NAMZU_EGRESS_PROXY_CONFIG_V2");
  for (; env != NULL && *env != NULL; env += 2)
    g_subprocess_launcher_setenv (l, env[0], env[1], TRUE);
  p = g_subprocess_launcher_spawnv (l, (const char *const *)argv->pdata, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  ck_assert (
      g_subprocess_communicate_utf8 (p, stdin_text ? stdin_text : "", NULL, out, err, &error));
  return g_subprocess_get_exit_status (p);
}

static char *
write_profile (const char *json)
{
  static int n;
  char *path = g_strdup_printf ("%s/p%d.json", dir, n++);

  g_file_set_contents (path, json, -1, NULL);
  return path;
}

static guint
count_lines (const char *s)
{
  guint n = 0;

  for (; *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

START_TEST (test_check)
{
  g_autofree char *p
      = write_profile ("{\"name\":\"ci\",\"hosts\":[{\"host\":\"api.example.com\",\"ports\":[443]},"
                       "{\"host\":\".pypi.org\"}]}");
  g_autofree char *out = NULL, *err = NULL;

  /* all allowed: 0 */
  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "check", p, "api.example.com",
                            "https://files.pypi.org/simple", "pypi.org:8080", NULL),
                    0);
  ck_assert_uint_eq (count_lines (out), 3);
  ck_assert (strstr (out,
                     "{\"target\":\"api.example.com\",\"host\":\"api.example.com\",\"port\":443,"
                     "\"decision\":\"allow\",\"rule\":\"api.example.com\",\"reason\":\"allowed\"}")
             != NULL);
  ck_assert (strstr (out, "\"host\":\"files.pypi.org\",\"port\":443,\"decision\":\"allow\","
                          "\"rule\":\".pypi.org\"")
             != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* any denied: 1, one line each, in order; targets from stdin */
  ck_assert_int_eq (egress ("api.example.com:22\nevil.example.com\n\n# comment\n10.0.0.1\n"
                            "http://user:pw@api.example.com/x\n",
                            &out, &err, NULL, "check", p, NULL),
                    1);
  ck_assert_uint_eq (count_lines (out), 4);
  ck_assert_msg (strstr (out, "\"port\":22,\"decision\":\"deny\",\"rule\":\"api.example.com\","
                              "\"reason\":\"port 22 is not allowed\"")
                     != NULL,
                 "%s", out);
  ck_assert (strstr (out, "\"host\":\"evil.example.com\",\"port\":443,\"decision\":\"deny\","
                          "\"rule\":\"allowlist\",\"reason\":\"not on the egress allowlist\"")
             != NULL);
  ck_assert_msg (strstr (out, "\"host\":\"10.0.0.1\",\"port\":443,\"decision\":\"deny\",\"rule\":"
                              "\"allowlist\",\"reason\":\"not on the egress allowlist\","
                              "\"addressScreen\":\"private\"}")
                     != NULL,
                 "%s", out);
  ck_assert (strstr (out, "\"target\":\"http://user:pw@api.example.com/x\",\"host\":"
                          "\"api.example.com\",\"port\":443,\"decision\":\"allow\"")
             != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* an allowed literal is screened */
  {
    g_autofree char *lit = write_profile ("{\"name\":\"l\",\"hosts\":[{\"host\":\".0.1\"}]}");

    ck_assert_int_eq (egress (NULL, &out, &err, NULL, "check", lit, "x", NULL), 2);
    ck_assert (strstr (err, "invalid") != NULL || strstr (err, "IP address") != NULL);
  }
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* usage: 2 */
  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "check", NULL), 2);
  ck_assert (strstr (err, "Try 'namzu-egress --help'") != NULL);
}
END_TEST

START_TEST (test_profile_commands)
{
  g_autofree char *good = write_profile (
      "{\"name\":\"ci\",\"hosts\":[{\"host\":\"API.example.com.\",\"ports\":[8443,443]},"
      "{\"host\":\".example.org\"}]}");
  g_autofree char *bad
      = write_profile ("{\"name\":\"ci\",\"hosts\":[{\"host\":\"*.example.org\"}]}");
  g_autofree char *out = NULL, *err = NULL;

  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "profile", "validate", good, NULL), 0);
  ck_assert_str_eq (out, "{\"name\":\"ci\",\"hosts\":[{\"host\":\"api.example.com\",\"ports\":"
                         "[443,8443]},{\"host\":\".example.org\"}]}\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      egress ("{\"name\":\"x\",\"hosts\":[]}", &out, &err, NULL, "profile", "validate", "-", NULL),
      0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "profile", "validate", bad, NULL), 1);
  ck_assert_msg (g_str_has_prefix (out, "{\"error\":{\"code\":\"invalid-host\",\"message\":"
                                        "\"egress profile: hosts[0].host "),
                 "%s", out);
  ck_assert (g_str_has_prefix (err, "namzu-egress: egress profile: hosts[0].host"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      egress (NULL, &out, &err, NULL, "profile", "translate", "--to", "cilium", good, NULL), 0);
  ck_assert (strstr (out, "\"kind\":\"CiliumNetworkPolicy\"") != NULL);
  ck_assert (strstr (out, "{\"matchName\":\"example.org\"},{\"matchPattern\":\"*.example.org\"}")
             != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      egress (NULL, &out, &err, NULL, "profile", "translate", "--to", "k8s", good, NULL), 1);
  ck_assert (strstr (out, "\"code\":\"unsupported\"") != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      egress (NULL, &out, &err, NULL, "profile", "translate", "--to", "docker", good, NULL), 0);
  ck_assert (strstr (out, "\"proxyConfigEnv\":\"NAMZU_EGRESS_PROXY_CONFIG_V2\"") != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      egress (NULL, &out, &err, NULL, "profile", "translate", "--to", "yaml", good, NULL), 2);
}
END_TEST

START_TEST (test_proxy_refuses_config)
{
  const char *secret_env[] = { "NAMZU_EGRESS_PROXY_CONFIG", "{\"allowedHosts\":[\"sEcReT\"", NULL };
  const char *v2_env[] = { "NAMZU_EGRESS_PROXY_CONFIG_V2", "{\"allowedHosts\":[]}", NULL };
  g_autofree char *out = NULL, *err = NULL;

  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "proxy", "--port=0", NULL), 1);
  ck_assert_str_eq (err, "namzu-egress-proxy: NAMZU_EGRESS_PROXY_CONFIG is not set; this "
                         "container has no policy to enforce\n");
  ck_assert_str_eq (out, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (egress (NULL, &out, &err, secret_env, "proxy", "--port=0", NULL), 1);
  ck_assert (g_str_has_prefix (err, "namzu-egress-proxy: NAMZU_EGRESS_PROXY_CONFIG is not valid "
                                    "JSON"));
  ck_assert (strstr (err, "sEcReT") == NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (egress (NULL, &out, &err, v2_env, "proxy", "--port=0", NULL), 1);
  ck_assert (strstr (err, "NAMZU_EGRESS_PROXY_CONFIG_V2 has no hostPorts") != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (egress (NULL, &out, &err, NULL, "bogus", NULL), 2);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("egress-cli");
  TCase *tc = tcase_create ("cli");
  int rc;

  dir = g_dir_make_tmp ("nz-egress-cli-XXXXXX", NULL);
  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_check);
  tcase_add_test (tc, test_profile_commands);
  tcase_add_test (tc, test_proxy_refuses_config);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);
  {
    g_autofree char *cmd = g_strdup_printf ("rm -rf %s", dir);

    if (system (cmd) != 0)
      rc = 1;
  }
  return rc;
}
