/* test-sandbox-env: the sandbox's environment (namzu-create --env/--env-file, the config's env)
 * is parsed and refused here, and the agent lays it under every request's env. Pure code, no
 * sandbox. */
#include <glib/gstdio.h>
#include <string.h>

#include "nz-agent-config.h"
#include "nz-backend.h"
#include "nz-errors.h"
#include "nz-guest.h"
#include "nz-json.h"
#include "nz-sandbox-env.h"
#include "nz-test.h"

static GPtrArray *
new_env (void)
{
  return g_ptr_array_new_with_free_func (g_free);
}

static char *
joined (GPtrArray *env)
{
  g_autoptr (GPtrArray) copy = g_ptr_array_copy (env, NULL, NULL);

  g_ptr_array_set_free_func (copy, NULL);
  g_ptr_array_add (copy, NULL);
  return g_strjoinv ("|", (char **)copy->pdata);
}

/* A macro: the call must run before its error is read. */
#define assert_refused(call, error, needle) check_refused ((call), &(error), (needle))

static void
check_refused (gboolean ok, GError **errorp, const char *needle)
{
  GError *error = *errorp;

  ck_assert (!ok);
  ck_assert_ptr_nonnull (error);
  ck_assert_int_eq (error->code, NZ_ERROR_INVALID_ARGS);
  ck_assert_msg (strstr (error->message, needle) != NULL, "'%s' not in '%s'", needle,
                 error->message);
}

START_TEST (test_names)
{
  static const char *const good[] = { "A", "_", "a_b9", "PATH", "NAMZU_SANDBOX", "NAMZU_TOKEN" };
  static const char *const bad[] = { "", "9A", "A-B", "A B", "A.B", "Ä", "A=B" };

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    ck_assert_msg (nz_sandbox_env_name_is_valid (good[i]), "%s", good[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (!nz_sandbox_env_name_is_valid (bad[i]), "%s", bad[i]);
  ck_assert_str_eq (nz_sandbox_env_reserved_prefix ("NAMZU_SANDBOX_TOKEN"), "NAMZU_SANDBOX_");
  ck_assert_str_eq (nz_sandbox_env_reserved_prefix ("NAMZU_AGENT_BIND_TOKEN"), "NAMZU_AGENT_");
  ck_assert_str_eq (nz_sandbox_env_reserved_prefix ("NAMZU_WORKER_UID"), "NAMZU_WORKER_");
  ck_assert_ptr_null (nz_sandbox_env_reserved_prefix ("NAMZU_SANDBOX"));
  ck_assert_ptr_null (nz_sandbox_env_reserved_prefix ("namzu_sandbox_x"));
}
END_TEST

/* Every name the servers inside read their configuration or credential from is refused, in
 * every way it can be given. */
START_TEST (test_reserved_refused_everywhere)
{
  static const char *const reserved[]
      = { "NAMZU_SANDBOX_TOKEN",     "NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED",
          "NAMZU_SANDBOX_WORKSPACE", "NAMZU_AGENT_BIND_TOKEN",
          "NAMZU_AGENT_SANDBOX_ENV", "NAMZU_WORKER_UID" };

  for (gsize i = 0; i < G_N_ELEMENTS (reserved); i++)
    {
      g_autoptr (GPtrArray) env = new_env ();
      g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL;
      g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
      g_autofree char *arg = g_strdup_printf ("%s=1", reserved[i]);
      g_autofree char *file = g_strdup_printf ("OK=1\n%s=1\n", reserved[i]);
      g_autofree char *config = g_strdup_printf ("{\"env\":{\"%s\":\"1\"}}", reserved[i]);

      assert_refused (nz_sandbox_env_add_arg (env, arg, &e1), e1, "is reserved");
      assert_refused (nz_sandbox_env_add_file_data (env, file, strlen (file), "f", &e2), e2,
                      "env file f line 2: ");
      ck_assert_ptr_nonnull (strstr (e2->message, "is reserved"));
      assert_refused (nz_create_options_load_config (opts, config, -1, &e3), e3, "is reserved");
      /* The library refuses it too when a caller skips the parsers. */
      g_clear_error (&e3);
      g_ptr_array_add (opts->env, g_strdup (arg));
      assert_refused (nz_create_options_validate (opts, &e3), e3, "is reserved");
    }
}
END_TEST

START_TEST (test_args)
{
  g_autoptr (GPtrArray) env = new_env ();
  g_autoptr (GError) error = NULL;
  g_autofree char *all = NULL;

  g_setenv ("NZ_TEST_FROM_HOST", "host value", TRUE);
  g_unsetenv ("NZ_TEST_UNSET");
  ck_assert (nz_sandbox_env_add_arg (env, "A=1", NULL));
  ck_assert (nz_sandbox_env_add_arg (env, "B=x=y", NULL));
  ck_assert (nz_sandbox_env_add_arg (env, "C=", NULL));
  ck_assert (nz_sandbox_env_add_arg (env, "NZ_TEST_FROM_HOST", NULL));
  /* The last value wins, in the first one's place. */
  ck_assert (nz_sandbox_env_add_arg (env, "A=2", NULL));
  all = joined (env);
  ck_assert_str_eq (all, "A=2|B=x=y|C=|NZ_TEST_FROM_HOST=host value");
  assert_refused (nz_sandbox_env_add_arg (env, "NZ_TEST_UNSET", &error), error,
                  "--env: NZ_TEST_UNSET has no value and is not set");
  g_clear_error (&error);
  assert_refused (nz_sandbox_env_add_arg (env, "=1", &error), error, "is not a variable name");
  g_clear_error (&error);
  assert_refused (nz_sandbox_env_add_arg (env, "1A=1", &error), error, "is not a variable name");
  g_clear_error (&error);
  assert_refused (nz_sandbox_env_add_arg (env, "A=\xff", &error), error, "is not UTF-8");
  ck_assert_uint_eq (env->len, 4);
}
END_TEST

/* docker's env-file format, byte for byte where it matters. */
START_TEST (test_env_file_format)
{
  static const char data[] = "\xef\xbb\xbf# a comment\n"
                             "\n"
                             "   \t\n"
                             "PLAIN=1\n"
                             "  INDENTED=two\n"
                             "QUOTED=\"kept\" 'as is' \n"
                             "CRLF=dos\r\n"
                             "EQ=a=b\n"
                             "EMPTY=\n"
                             "#NOT=a comment\n"
                             "NZ_TEST_FROM_HOST\n"
                             "PLAIN=again\n"
                             "LAST=no newline";
  g_autoptr (GPtrArray) env = new_env ();
  g_autoptr (GError) error = NULL;
  g_autofree char *all = NULL;

  g_setenv ("NZ_TEST_FROM_HOST", "h", TRUE);
  ck_assert_msg (nz_sandbox_env_add_file_data (env, data, strlen (data), "f", &error), "%s",
                 error ? error->message : "");
  all = joined (env);
  ck_assert_str_eq (all, "PLAIN=again|INDENTED=two|QUOTED=\"kept\" 'as is' |CRLF=dos|EQ=a=b|"
                         "EMPTY=|NZ_TEST_FROM_HOST=h|LAST=no newline");
}
END_TEST

START_TEST (test_env_file_refusals)
{
  static const struct
  {
    const char *data;
    gsize len;
    const char *needle;
  } cases[] = {
    { "A=1\nB C=2\n", 10, "env file f line 2: 'B C' is not a variable name" },
    { "A=1\n=2\n", 6, "line 2: '' is not a variable name" },
    { "A=1\nNZ_TEST_UNSET\n", 18, "line 2: NZ_TEST_UNSET has no value and is not set" },
    { "A=x\0y\n", 6, "line 1: the value of A contains a NUL byte" },
    { "A\0B=1\n", 6, "line 1: contains a NUL byte" },
    { "A=\xc3\n", 5, "line 1: the value of A is not UTF-8" },
  };

  g_unsetenv ("NZ_TEST_UNSET");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GPtrArray) env = new_env ();
      g_autoptr (GError) error = NULL;

      assert_refused (nz_sandbox_env_add_file_data (env, cases[i].data, cases[i].len, "f", &error),
                      error, cases[i].needle);
    }
}
END_TEST

START_TEST (test_env_file_io)
{
  g_autofree char *dir = g_dir_make_tmp ("nz-env-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "env", NULL);
  g_autofree char *big = g_build_filename (dir, "big", NULL);
  g_autofree char *huge = g_malloc (NZ_SANDBOX_ENV_FILE_MAX_BYTES + 1);
  g_autoptr (GPtrArray) env = new_env ();
  g_autoptr (GError) error = NULL;

  ck_assert (g_file_set_contents (path, "A=1\n", -1, NULL));
  ck_assert (nz_sandbox_env_add_file (env, path, NULL));
  ck_assert_str_eq (env->pdata[0], "A=1");
  memset (huge, '#', NZ_SANDBOX_ENV_FILE_MAX_BYTES + 1);
  ck_assert (g_file_set_contents (big, huge, NZ_SANDBOX_ENV_FILE_MAX_BYTES + 1, NULL));
  assert_refused (nz_sandbox_env_add_file (env, big, &error), error, "larger than");
  g_clear_error (&error);
  /* Endless input is cut at the bound, not read forever. */
  assert_refused (nz_sandbox_env_add_file (env, "/dev/zero", &error), error, "larger than");
  g_clear_error (&error);
  ck_assert (!nz_sandbox_env_add_file (env, "/nonexistent/env", &error));
  ck_assert_int_eq (error->code, NZ_ERROR_NOT_FOUND);
  ck_assert_ptr_nonnull (strstr (error->message, "--env-file /nonexistent/env"));
  g_unlink (path);
  g_unlink (big);
  g_rmdir (dir);
}
END_TEST

START_TEST (test_config_env)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (NzCreateOptions) opts2 = nz_create_options_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *all = NULL;

  ck_assert_msg (
      nz_create_options_load_config (
          opts, "{\"env\":{\"A\":\"1\",\"B\":\"line\\nbreak\",\"C\":\"\\\\u0000\"}}", -1, &error),
      "%s", error ? error->message : "");
  all = joined (opts->env);
  /* An escaped backslash is not a NUL: the value is the six characters \u0000. */
  ck_assert_str_eq (all, "A=1|B=line\nbreak|C=\\u0000");
  assert_refused (nz_create_options_load_config (opts2, "{\"env\":{\"A\":1}}", -1, &error), error,
                  "env.A: must be a string");
  g_clear_error (&error);
  assert_refused (nz_create_options_load_config (opts2, "{\"env\":[\"A=1\"]}", -1, &error), error,
                  "env: must be an object of strings");
  g_clear_error (&error);
  assert_refused (nz_create_options_load_config (opts2, "{\"env\":{\"A-B\":\"1\"}}", -1, &error),
                  error, "'A-B' is not a variable name");
  g_clear_error (&error);
  /* json-glib would read "x" and "B" and say nothing. */
  assert_refused (
      nz_create_options_load_config (opts2, "{\"env\":{\"A\":\"x\\u0000y\"}}", -1, &error), error,
      "\\u0000 (NUL)");
  g_clear_error (&error);
  assert_refused (
      nz_create_options_load_config (opts2, "{\"env\":{\"B\\u0000C\":\"1\"}}", -1, &error), error,
      "\\u0000 (NUL)");
  ck_assert_uint_eq (opts2->env->len, 0);
}
END_TEST

/* The proxy variables point at the egress proxy namzu starts for an allowlist: refused there,
 * the host's to set elsewhere. */
START_TEST (test_proxy_names_with_allowlist)
{
  static const char *const names[]
      = { "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy" };

  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
      g_autoptr (GError) error = NULL;
      g_autofree char *arg = g_strdup_printf ("%s=http://elsewhere:3128", names[i]);

      ck_assert (nz_sandbox_env_add_arg (opts->env, arg, NULL));
      ck_assert (nz_create_options_validate (opts, NULL));
      opts->network = NZ_NETWORK_ALLOW_ALL;
      ck_assert (nz_create_options_validate (opts, NULL));
      opts->network = NZ_NETWORK_ALLOWLIST;
      g_ptr_array_add (opts->egress_hosts, g_strdup ("example.com"));
      assert_refused (nz_create_options_validate (opts, &error), error,
                      "is set by namzu in a sandbox with an egress allowlist");
    }
}
END_TEST

START_TEST (test_size_bound)
{
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *value = g_strnfill (NZ_SANDBOX_ENV_MAX_BYTES - 3, 'v');

  /* "A=" + value + its terminator is exactly the bound. */
  ck_assert (nz_sandbox_env_put (opts->env, "A", value, strlen (value), "t", NULL));
  ck_assert (nz_create_options_validate (opts, NULL));
  ck_assert (nz_sandbox_env_add_arg (opts->env, "B=", NULL));
  assert_refused (nz_create_options_validate (opts, &error), error, "bytes of variables");
}
END_TEST

START_TEST (test_names_json_record)
{
  g_autoptr (GPtrArray) env = new_env ();
  g_autoptr (JsonObject) priv = json_object_new ();
  g_autoptr (JsonObject) empty = json_object_new ();
  g_autoptr (GPtrArray) none = new_env ();
  g_autofree char *json = NULL;
  g_autofree char *names = NULL;
  JsonArray *arr;

  ck_assert (nz_sandbox_env_add_arg (env, "B=secret value", NULL));
  ck_assert (nz_sandbox_env_add_arg (env, "A=\"q\"", NULL));
  json = nz_sandbox_env_to_json (env);
  ck_assert_str_eq (json, "{\"B\":\"secret value\",\"A\":\"\\\"q\\\"\"}");
  nz_sandbox_env_record (priv, env);
  arr = json_object_get_array_member (priv, "envNames");
  ck_assert_uint_eq (json_array_get_length (arr), 2);
  ck_assert_str_eq (json_array_get_string_element (arr, 0), "B");
  ck_assert_str_eq (json_array_get_string_element (arr, 1), "A");
  names = nz_json_object_to_string (priv, NULL);
  ck_assert_ptr_null (strstr (names, "secret"));
  nz_sandbox_env_record (empty, none);
  ck_assert (!json_object_has_member (empty, "envNames"));
}
END_TEST

/* The agent's half: the knob is read and checked, and the child environment is the scrubbed
 * agent environment, then the sandbox's, then the request's. */
START_TEST (test_agent_layers_child_environ)
{
  g_autoptr (NzAgentConfig) config = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) overlay = json_object_new ();
  g_auto (GStrv) envp = NULL;
  const char *const sneaky[]
      = { "NAMZU_AGENT_BIND_TOKEN=x", "NAMZU_SANDBOX_TOKEN=y", "OK=1", NULL };

  g_setenv ("NAMZU_AGENT_UNIX_PATH", "/tmp/nz-test-sandbox-env.sock", TRUE);
  g_setenv ("NAMZU_AGENT_SANDBOX_ENV", "{\"A\":\"sandbox\",\"B\":\"sandbox\",\"PATH\":\"/sb\"}",
            TRUE);
  g_setenv ("B", "agent", TRUE);
  config = nz_agent_config_new_from_env (&error);
  ck_assert_msg (config != NULL, "%s", error ? error->message : "");
  ck_assert_uint_eq (g_strv_length (config->sandbox_env), 3);
  nz_guest_set_sandbox_environ ((const char *const *)config->sandbox_env);
  json_object_set_string_member (overlay, "A", "request");
  envp = nz_guest_child_environ (overlay);
  ck_assert_str_eq (g_environ_getenv (envp, "A"), "request");
  ck_assert_str_eq (g_environ_getenv (envp, "B"), "sandbox");
  ck_assert_str_eq (g_environ_getenv (envp, "PATH"), "/sb");
  /* The knob itself is scrubbed like every agent knob. */
  ck_assert_ptr_null (g_environ_getenv (envp, "NAMZU_AGENT_SANDBOX_ENV"));
  ck_assert_ptr_null (g_environ_getenv (envp, "NAMZU_AGENT_UNIX_PATH"));
  g_clear_pointer (&envp, g_strfreev);

  /* What the scrub removes, the sandbox's environment cannot put back. */
  nz_guest_set_sandbox_environ (sneaky);
  envp = nz_guest_child_environ (NULL);
  ck_assert_ptr_null (g_environ_getenv (envp, "NAMZU_AGENT_BIND_TOKEN"));
  ck_assert_ptr_null (g_environ_getenv (envp, "NAMZU_SANDBOX_TOKEN"));
  ck_assert_str_eq (g_environ_getenv (envp, "OK"), "1");
  nz_guest_set_sandbox_environ (NULL);
}
END_TEST

START_TEST (test_agent_knob_refusals)
{
  static const char *const bad[] = { "[]",
                                     "{\"A\":1}",
                                     "{\"NAMZU_AGENT_BIND_TOKEN\":\"x\"}",
                                     "{\"NAMZU_SANDBOX_WORKSPACE\":\"/\"}",
                                     "{\"\":\"x\"}",
                                     "{\"A\":\"x\\u0000y\"}",
                                     "not json" };

  g_setenv ("NAMZU_AGENT_UNIX_PATH", "/tmp/nz-test-sandbox-env.sock", TRUE);
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (NzAgentConfig) config = NULL;
      g_autoptr (GError) error = NULL;

      g_setenv ("NAMZU_AGENT_SANDBOX_ENV", bad[i], TRUE);
      config = nz_agent_config_new_from_env (&error);
      ck_assert_msg (config == NULL, "accepted %s", bad[i]);
      ck_assert_ptr_nonnull (strstr (error->message, "agent: NAMZU_AGENT_SANDBOX_ENV"));
    }
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("sandbox-env");
  TCase *tc = tcase_create ("env");

  tcase_add_test (tc, test_names);
  tcase_add_test (tc, test_reserved_refused_everywhere);
  tcase_add_test (tc, test_args);
  tcase_add_test (tc, test_env_file_format);
  tcase_add_test (tc, test_env_file_refusals);
  tcase_add_test (tc, test_env_file_io);
  tcase_add_test (tc, test_config_env);
  tcase_add_test (tc, test_proxy_names_with_allowlist);
  tcase_add_test (tc, test_size_bound);
  tcase_add_test (tc, test_names_json_record);
  tcase_add_test (tc, test_agent_layers_child_environ);
  tcase_add_test (tc, test_agent_knob_refusals);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return nz_test_run (suite ());
}
