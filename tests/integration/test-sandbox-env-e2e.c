/* End to end for the sandbox environment on container:bwrap (real bubblewrap, the real agent):
 * namzu-create --env/--env-file/--config env reach every command (exec, a detached session, a
 * terminal, namzu-run's), under namzu-exec --env; reserved names are refused with exit 2 and
 * nothing left; the handle shows names, never values; and the workload gets no more than the
 * variables themselves: not the agent's knobs, not its credential. */
#include <string.h>

#include "nz-json.h"
#include "sandbox-harness.h"

static void
setup (void)
{
  harness_begin ("/tmp/nz-env-e2e-XXXXXX");
  harness_start_reaper (0);
}

static char *
write_file (const char *name, const char *text)
{
  char *path = g_build_filename (harness.tmp, name, NULL);

  ck_assert (g_file_set_contents (path, text, -1, NULL));
  return path;
}

static char *exec_out (const char *id, const char *first, ...) G_GNUC_NULL_TERMINATED;

/* namzu-exec --sandbox ID ARGS...: its stdout, success asserted. */
static char *
exec_out (const char *id, const char *first, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  g_autofree char *err = NULL;
  char *out = NULL;
  va_list ap;
  int rc;

  g_ptr_array_add (args, (char *)"--sandbox");
  g_ptr_array_add (args, (char *)id);
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (args, (char *)a);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  rc = run_toolv (NULL, &out, &err, "namzu-exec", (const char *const *)args->pdata);
  ck_assert_msg (rc == 0, "namzu-exec rc %d: %s", rc, err);
  return out;
}

START_TEST (test_every_command_gets_it)
{
  g_autofree char *file = write_file ("env", "# the task's settings\n"
                                             "B=from the file\n"
                                             "A=overridden by --env\n"
                                             "\n"
                                             "NZ_E2E_FROM_HOST\n");
  g_autofree char *out = NULL, *err = NULL, *ls = NULL, *priv = NULL, *hpath = NULL;
  g_autoptr (JsonObject) pub = NULL;
  JsonArray *names;
  const char *id;

  g_setenv ("NZ_E2E_FROM_HOST", "host's value", TRUE);
  pub = create_handle ("--env", "A=1", "--env-file", file, "--env", "SECRETISH=s3cr3t-value", NULL);
  id = nz_json_get_string (pub, "id");
  /* Names only, in the handle and namzu-ls; no value anywhere in them or the private record. */
  names = nz_json_get_array (pub, "envNames");
  ck_assert_ptr_nonnull (names);
  ck_assert_uint_eq (json_array_get_length (names), 4);
  ck_assert_str_eq (json_array_get_string_element (names, 0), "B");
  ck_assert_str_eq (json_array_get_string_element (names, 1), "A");
  ck_assert_int_eq (run_tool (NULL, &ls, NULL, "namzu-ls", NULL), 0);
  ck_assert_msg (strstr (ls, "\"envNames\":[\"B\",\"A\",\"NZ_E2E_FROM_HOST\",\"SECRETISH\"]"), "%s",
                 ls);
  ck_assert (strstr (ls, "s3cr3t") == NULL);
  hpath = g_build_filename (harness.state, id, "handle.json", NULL);
  ck_assert (g_file_get_contents (hpath, &priv, NULL, NULL));
  ck_assert (strstr (priv, "s3cr3t") == NULL);

  /* Every command, each on its own: exec, twice, and a shell's children. */
  out = exec_out (id, "--", "printenv", "A", NULL);
  ck_assert_str_eq (out, "1\n");
  g_clear_pointer (&out, g_free);
  out = exec_out (id, "--", "sh", "-c", "echo \"$A|$B|$NZ_E2E_FROM_HOST|$SECRETISH\"", NULL);
  ck_assert_str_eq (out, "1|from the file|host's value|s3cr3t-value\n");
  g_clear_pointer (&out, g_free);
  /* The per-command env wins, for that command only. */
  out = exec_out (id, "--env", "A=2", "--", "printenv", "A", NULL);
  ck_assert_str_eq (out, "2\n");
  g_clear_pointer (&out, g_free);
  out = exec_out (id, "--", "printenv", "A", NULL);
  ck_assert_str_eq (out, "1\n");
  g_clear_pointer (&out, g_free);

  /* A detached session and a terminal get it too. */
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-attach", "--sandbox", id, "--start-detached",
                              "envs", "--", "sh", "-c", "echo \"s:$B\"", NULL),
                    0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (
      run_tool (NULL, &out, &err, "namzu-attach", "--sandbox", id, "--session", "envs", NULL), 0);
  ck_assert_msg (strstr (out, "s:from the file") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  run_tool ("echo \"t:$A\"; exit\n", &out, &err, "namzu-attach", "--sandbox", id, "--terminal",
            NULL);
  ck_assert_msg (out != NULL && strstr (out, "t:1") != NULL, "%s / %s", out, err);
  destroy_ok (id);
}
END_TEST

/* The workload holds the variables and nothing more: the knob that carried them, the agent's
 * other knobs and its credential stay out of every command's environment. */
START_TEST (test_workload_gets_no_knobs)
{
  g_autofree char *id = create_sandbox ("--env", "A=1", NULL);
  g_autofree char *out = NULL;

  ck_assert_int_eq (sh_in_sandbox (id, "env | grep NAMZU_ || true", &out), 0);
  ck_assert_msg (strcmp (out, "") == 0, "%s", out);
  destroy_ok (id);
}
END_TEST

START_TEST (test_config_env)
{
  g_autofree char *config = write_file ("config.json", "{\"env\":{\"C\":\"from config\","
                                                       "\"A\":\"config\"}}");
  g_autofree char *id = create_sandbox ("--config", config, "--env", "A=flag", NULL);
  g_autofree char *out = exec_out (id, "--", "sh", "-c", "echo \"$C|$A\"", NULL);

  ck_assert_str_eq (out, "from config|flag\n");
  destroy_ok (id);
}
END_TEST

/* Refused before anything starts: exit 2, nothing in the state directory. */
START_TEST (test_refusals_leave_nothing)
{
  g_autofree char *nul_config = write_file ("nul.json", "{\"env\":{\"A\":\"x\\u0000y\"}}");
  g_autofree char *bad_file = write_file ("bad.env", "OK=1\nNAMZU_AGENT_BIND_TOKEN=mine\n");
  static const char *const reserved[]
      = { "NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED=1", "NAMZU_SANDBOX_WORKSPACE=/",
          "NAMZU_AGENT_SANDBOX_ENV={}", "NAMZU_WORKER_UID=0" };
  struct
  {
    const char *args[4];
    const char *needle;
  } cases[] = {
    { { "--env-file", bad_file }, "line 2: NAMZU_AGENT_BIND_TOKEN is reserved" },
    { { "--config", nul_config }, "\\u0000" },
    { { "--env", "NZ_E2E_UNSET" }, "NZ_E2E_UNSET has no value" },
    { { "--env", "A-B=1" }, "is not a variable name" },
    { { "--env-file", "/nonexistent/env" }, "--env-file /nonexistent/env" },
    { { "--egress", "example.com", "--env", "HTTPS_PROXY=http://elsewhere:3128" },
      "HTTPS_PROXY is set by namzu" },
  };

  g_unsetenv ("NZ_E2E_UNSET");
  for (gsize i = 0; i < G_N_ELEMENTS (reserved); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int rc = run_tool (NULL, &out, &err, "namzu-create", "--env", reserved[i], NULL);

      ck_assert_msg (rc == 2, "%s: rc %d: %s", reserved[i], rc, err);
      ck_assert_msg (strstr (err, "is reserved") != NULL, "%s", err);
      ck_assert_msg (strstr (out, "\"error\"") != NULL, "%s", out);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      const char *argv[6] = { NULL };
      int rc;

      for (int k = 0; k < 4 && cases[i].args[k] != NULL; k++)
        argv[k] = cases[i].args[k];
      rc = run_toolv (NULL, &out, &err, "namzu-create", argv);
      ck_assert_msg (rc == 2 || (rc == 1 && strstr (cases[i].needle, "nonexistent")),
                     "case %zu: rc %d: %s", i, rc, err);
      ck_assert_msg (strstr (err, cases[i].needle) != NULL, "case %zu: %s", i, err);
    }
  /* Within the 64 KiB, but JSON writes each control byte as six: too big for the one
   * variable that carries it to the agent, refused rather than failing the exec. */
  {
    g_autofree char *ctl = g_strnfill (22000, '\x01');
    g_autofree char *arg = g_strconcat ("A=", ctl, NULL);
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_tool (NULL, &out, &err, "namzu-create", "--env", arg, NULL);

    ck_assert_msg (rc == 2 && strstr (err, "too large for container:bwrap once encoded"),
                   "rc %d: %s", rc, err);
  }
  ck_assert_uint_eq (sandboxes_left (), 0);
}
END_TEST

/* namzu-run takes namzu-create's options, so --env there is the sandbox's. */
START_TEST (test_run_takes_env)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-run", "--env", "A=run", "--", "printenv", "A", NULL);

  ck_assert_msg (rc == 0, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "run\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-run", "--env", "NAMZU_SANDBOX_TOKEN=x", "--", "true",
                 NULL);
  ck_assert_msg (rc == 2 && strstr (err, "is reserved") != NULL, "rc %d: %s", rc, err);
  ck_assert_uint_eq (sandboxes_left (), 0);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("sandbox-env-e2e");
  TCase *tc = tcase_create ("bwrap");

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) not installed");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_every_command_gets_it);
  tcase_add_test (tc, test_workload_gets_no_knobs);
  tcase_add_test (tc, test_config_env);
  tcase_add_test (tc, test_refusals_leave_nothing);
  tcase_add_test (tc, test_run_takes_env);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
