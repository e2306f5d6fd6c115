/* End to end on container:bwrap with real bubblewrap: namzu-exec --detach starts a retained
 * execution and returns, namzu-attach (another process) picks it up with the full output and
 * the exit status; terminals and sessions through namzu-attach. Every case gets its own
 * NAMZU_STATE_DIR. */
#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nz-json.h"
#include "../nz-test.h"

static char *tmp;
static char *state;
static char base[] = "/tmp/nz-attach-e2e-XXXXXX";

static int run_tool (const char *stdin_text, char **out, char **err, const char *tool,
                     ...) G_GNUC_NULL_TERMINATED;

static void
setup (void)
{
  tmp = g_build_filename (base, "case-XXXXXX", NULL);
  ck_assert (g_mkdtemp (tmp) != NULL);
  state = g_build_filename (tmp, "state", NULL);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
}

static void
teardown (void)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmp);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    run_tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", name, NULL);
  ck_assert_int_eq (system (cmd), 0);
  g_clear_pointer (&state, g_free);
  g_clear_pointer (&tmp, g_free);
}

/* Runs a built tool with stdin, stdout and stderr on files; returns its exit status. */
static int
run_tool (const char *stdin_text, char **out, char **err, const char *tool, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *in_path = g_build_filename (tmp, "stdin", NULL);
  g_autofree char *out_path = g_build_filename (tmp, "stdout", NULL);
  g_autofree char *err_path = g_build_filename (tmp, "stderr", NULL);
  const char *a;
  va_list ap;

  g_ptr_array_add (argv, nz_test_tool (tool));
  va_start (ap, tool);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  ck_assert (g_file_set_contents (in_path, stdin_text ? stdin_text : "", -1, NULL));
  g_unlink (out_path);
  g_unlink (err_path);
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_set_stdin_file_path (launcher, in_path);
  g_subprocess_launcher_set_stdout_file_path (launcher, out_path);
  g_subprocess_launcher_set_stderr_file_path (launcher, err_path);
  p = g_subprocess_launcher_spawnv (launcher, (const char *const *)argv->pdata, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  ck_assert (g_subprocess_wait (p, NULL, &error));
  if (out != NULL)
    ck_assert (g_file_get_contents (out_path, out, NULL, NULL));
  if (err != NULL)
    ck_assert (g_file_get_contents (err_path, err, NULL, NULL));
  if (g_subprocess_get_if_signaled (p))
    return 128 + g_subprocess_get_term_sig (p);
  return g_subprocess_get_exit_status (p);
}

static char *
create (void)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) obj = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-create", NULL);

  ck_assert_msg (rc == 0, "namzu-create failed (%d): %s", rc, err);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert (obj != NULL);
  return g_strdup (nz_json_get_string (obj, "id"));
}

START_TEST (test_detach_then_attach)
{
  g_autofree char *id = create ();
  const char *exec_id = "exec_0b8f43e2-5c1d-4a7e-9f6b-2d3c4e5f6a7b";
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *out2 = NULL, *err2 = NULL;
  g_autofree char *out3 = NULL, *err3 = NULL;
  g_autoptr (JsonObject) started = NULL;
  int rc;

  rc = run_tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--detach", "--id", exec_id, "--",
                 "sh", "-c", "echo one; sleep 1; echo two >&2; sleep 0.3; echo three; exit 6",
                 NULL);
  ck_assert_msg (rc == 0, "detach: %d %s", rc, err);
  started = nz_json_parse_object (out, -1, NULL);
  ck_assert_ptr_nonnull (started);
  ck_assert_str_eq (nz_json_get_string (started, "executionId"), exec_id);
  ck_assert_str_eq (nz_json_get_string (started, "sandbox"), id);
  /* It returned at once: still running. */
  ck_assert_str_eq (nz_json_get_string (started, "state"), "running");

  /* Another process follows it: the whole output and the command's status. */
  rc = run_tool (NULL, &out2, &err2, "namzu-attach", "--sandbox", id, "--execution", exec_id, NULL);
  ck_assert_int_eq (rc, 6);
  ck_assert_str_eq (out2, "one\nthree\n");
  ck_assert_str_eq (err2, "two\n");
  /* From an offset: "one\n" is 4 bytes of the one interleaved stream. */
  rc = run_tool (NULL, &out3, &err3, "namzu-attach", "--sandbox", id, "--execution", exec_id,
                 "--from", "8", NULL);
  ck_assert_int_eq (rc, 6);
  ck_assert_str_eq (out3, "three\n");
  ck_assert_str_eq (err3, "");
  /* The id is held: a second detach under it is refused, it never runs twice. */
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, NULL, &err, "namzu-exec", "--sandbox", id, "--detach", "--id", exec_id, "--",
                 "true", NULL);
  ck_assert_int_eq (rc, 125);
  ck_assert_ptr_nonnull (strstr (err, "already exists"));
}
END_TEST

START_TEST (test_terminal_and_sessions)
{
  g_autofree char *id = create ();
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *list = NULL;
  g_autofree char *killed = NULL;
  g_autoptr (JsonObject) lo = NULL;
  g_autoptr (JsonObject) ko = NULL;
  int rc;

  /* Not a TTY: our stdin is forwarded as input, the shell's status is ours. */
  rc = run_tool ("echo in-the-terminal; exit 5\n", &out, &err, "namzu-attach", "--sandbox", id,
                 "--terminal", NULL);
  ck_assert_msg (rc == 5, "terminal: %d %s", rc, err);
  ck_assert_ptr_nonnull (strstr (out, "in-the-terminal"));

  /* A persistent terminal outlives us; list, follow and kill it. */
  g_clear_pointer (&out, g_free);
  /* The program prints by itself: input sent right before a hang-up is the agent suite's
   * business (test-agent-sessions), not this end-to-end check's. */
  rc = run_tool ("", &out, NULL, "namzu-attach", "--sandbox", id, "--terminal", "--persistent",
                 "--session", "work", "--", "sh", "-c", "echo kept-running; exec sleep 60", NULL);
  ck_assert_int_eq (rc, 0);
  /* Wait (bounded) until the ring holds the program's line ("kept-running\r\n", 14 bytes)
   * before killing it, so a slow machine cannot kill it before it printed. */
  for (int tries = 0; tries < 100; tries++)
    {
      JsonObject *first;
      double next = 0;

      g_clear_pointer (&list, g_free);
      g_clear_pointer (&lo, json_object_unref);
      ck_assert_int_eq (
          run_tool (NULL, &list, NULL, "namzu-attach", "--sandbox", id, "--list", NULL), 0);
      lo = nz_json_parse_object (list, -1, NULL);
      ck_assert_ptr_nonnull (lo);
      first = json_array_get_object_element (nz_json_get_array (lo, "sessions"), 0);
      if (nz_json_get_number (first, "nextOffset", &next) && next >= 14)
        break;
      g_usleep (50 * 1000);
    }
  ck_assert_str_eq (
      nz_json_get_string (json_array_get_object_element (nz_json_get_array (lo, "sessions"), 0),
                          "sessionId"),
      "work");
  rc = run_tool (NULL, &killed, NULL, "namzu-attach", "--sandbox", id, "--kill", "work", NULL);
  ck_assert_int_eq (rc, 0);
  ko = nz_json_parse_object (killed, -1, NULL);
  ck_assert_str_eq (nz_json_get_string (ko, "state"), "exited");
  /* Follow the exited session: the replay, then its status (128+SIGKILL). */
  g_clear_pointer (&out, g_free);
  rc = run_tool (NULL, &out, NULL, "namzu-attach", "--sandbox", id, "--session", "work", NULL);
  ck_assert_int_eq (rc, 128 + 9);
  ck_assert_ptr_nonnull (strstr (out, "kept-running"));
}
END_TEST

static void
destroy_leftovers (void)
{
  const char *dir = getenv ("NZ_TOOLS_DIR");
  char cmd[1024];

  snprintf (cmd, sizeof cmd,
            "for d in %s/*/state/nz-*; do [ -d \"$d\" ] || continue; "
            "NAMZU_STATE_DIR=\"${d%%/*}\" '%s/namzu-destroy' --sandbox \"${d##*/}\" "
            ">/dev/null 2>&1; done; rm -rf '%s'",
            base, dir ? dir : ".", base);
  if (system (cmd) != 0)
    fprintf (stderr, "cleanup of %s failed\n", base);
}

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  Suite *s = suite_create ("attach-e2e");
  TCase *tc = tcase_create ("attach-e2e");

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  if (mkdtemp (base) == NULL)
    {
      perror ("mkdtemp");
      return EXIT_FAILURE;
    }
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_unchecked_fixture (tc, NULL, destroy_leftovers);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_detach_then_attach);
  tcase_add_test (tc, test_terminal_and_sessions);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
