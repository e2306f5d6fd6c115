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
#include "sandbox-harness.h"

/* Every case gets its own directory and NAMZU_STATE_DIR, and a reaper that destroys what it
 * left running however it ends (sandbox-harness.h). */
static void
setup (void)
{
  harness_begin ("/tmp/nz-attach-e2e-XXXXXX");
  harness_start_reaper (0);
}

START_TEST (test_detach_then_attach)
{
  g_autofree char *id = create_sandbox (NULL, NULL);
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
  g_autofree char *id = create_sandbox (NULL, NULL);
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

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  Suite *s = suite_create ("attach-e2e");
  TCase *tc = tcase_create ("attach-e2e");

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_detach_then_attach);
  tcase_add_test (tc, test_terminal_and_sessions);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
