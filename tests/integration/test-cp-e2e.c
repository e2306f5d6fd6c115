/* End to end for namzu-cp and namzu-quiesce on container:bwrap (real bubblewrap, the real
 * agent): files up and down, through - pipes, refusals leaving nothing behind, and a quiesce
 * that stops a background process the workload detached. Every case gets its own
 * NAMZU_STATE_DIR. */
#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-json.h"
#include "sandbox-harness.h"

/* Every case gets its own directory and NAMZU_STATE_DIR, and a reaper that destroys what it
 * left running however it ends (sandbox-harness.h). */
static void
setup (void)
{
  harness_begin ("/tmp/nz-cp-e2e-XXXXXX");
  harness_start_reaper (0);
}

static JsonObject *
parse_out (const char *out)
{
  JsonObject *obj = nz_json_parse_object (out, -1, NULL);

  ck_assert_msg (obj != NULL, "stdout is not one JSON object: %s", out);
  return obj;
}

START_TEST (test_cp_up_and_down)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *src = g_build_filename (harness.tmp, "src.bin", NULL);
  g_autofree char *back = g_build_filename (harness.tmp, "back.bin", NULL);
  g_autofree char *remote = g_strdup_printf ("%s:in/deep/src.bin", id);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *have = NULL;
  g_autofree guint8 *data = g_malloc (3 * 1024 * 1024 + 17);
  g_autoptr (JsonObject) summary = NULL;
  gsize have_len = 0;
  int rc;

  for (gsize k = 0; k < 3 * 1024 * 1024 + 17; k++)
    data[k] = (guint8)(k * 131 + (k >> 9));
  ck_assert (g_file_set_contents (src, (const char *)data, 3 * 1024 * 1024 + 17, NULL));
  /* Up, ID:PATH form, in several parts. */
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", "--part-kib", "512", src, remote, NULL);
  ck_assert_msg (rc == 0, "namzu-cp up: %s", err);
  summary = parse_out (out);
  ck_assert_str_eq (nz_json_get_string (summary, "direction"), "upload");
  ck_assert_str_eq (nz_json_get_string (summary, "sandbox"), id);
  ck_assert_str_eq (nz_json_get_string (summary, "destination"), "in/deep/src.bin");
  ck_assert_int_eq (json_object_get_int_member (summary, "bytes"), 3 * 1024 * 1024 + 17);
  /* Down, :PATH form with --sandbox, into a directory. */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", "--sandbox", id, ":in/deep/src.bin", back, NULL);
  ck_assert_msg (rc == 0, "namzu-cp down: %s", err);
  ck_assert (g_file_get_contents (back, &have, &have_len, NULL));
  ck_assert_uint_eq (have_len, 3 * 1024 * 1024 + 17);
  ck_assert (memcmp (have, data, have_len) == 0);
  /* Pipes: stdin up, stdout down (data only on stdout then). */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool ("piped text\nsecond line\n", &out, &err, "namzu-cp", "--sandbox", id, "-",
                 ":p.txt", NULL);
  ck_assert_msg (rc == 0, "namzu-cp -: %s", err);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", "--sandbox", id, ":p.txt", "-", NULL);
  ck_assert_int_eq (rc, 0);
  ck_assert_str_eq (out, "piped text\nsecond line\n");
  /* Nothing half-written is left in the sandbox. */
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (sh_in_sandbox (id, "ls -a in/deep; ls -a", &out), 0);
  ck_assert_msg (strstr (out, ".namzu-write-") == NULL, "%s", out);
  /* Refusals: one error object, exit 1, nothing created. */
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", "--sandbox", id, src, ":../escape.bin", NULL);
  ck_assert_int_eq (rc, 1);
  ck_assert (strstr (out, "\"error\"") != NULL);
  ck_assert (strstr (err, "path escapes the workspace") != NULL);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", "--sandbox", id, ":missing.bin", back, NULL);
  ck_assert_int_eq (rc, 1);
  ck_assert (strstr (err, "ENOENT") != NULL);
  /* Usage. */
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, NULL, &err, "namzu-cp", src, back, NULL);
  ck_assert_int_eq (rc, 2);
  destroy_ok (id);
}
END_TEST

START_TEST (test_quiesce_background)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) r = NULL;
  JsonArray *stopped;
  gboolean saw_sleep = FALSE;
  int rc;

  /* A process the workload detached into its own session: nothing tracks it but the scan. */
  ck_assert_int_eq (sh_in_sandbox (id, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started", &out), 0);
  g_clear_pointer (&out, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-quiesce", "--sandbox", id, "--grace", "500", "--flush",
                 NULL);
  ck_assert_msg (rc == 0, "namzu-quiesce: %s %s", out, err);
  r = parse_out (out);
  ck_assert (nz_json_get_bool (nz_json_get_object (r, "quiesce"), "ok", FALSE));
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (r, "quiesce"), "scope"), "pid-namespace");
  stopped = nz_json_get_array (nz_json_get_object (r, "quiesce"), "stopped");
  for (guint k = 0; k < json_array_get_length (stopped); k++)
    if (g_str_equal (nz_json_get_string (json_array_get_object_element (stopped, k), "command"),
                     "sleep"))
      saw_sleep = TRUE;
  ck_assert_msg (saw_sleep, "%s", out);
  ck_assert (nz_json_get_bool (nz_json_get_object (r, "flush"), "ok", FALSE));
  /* It is gone, and the sandbox still runs commands. */
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (sh_in_sandbox (id, "cat /proc/[0-9]*/comm 2>/dev/null", &out), 0);
  ck_assert_msg (strstr (out, "sleep") == NULL, "%s", out);
  destroy_ok (id);
}
END_TEST

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  Suite *s = suite_create ("cp-e2e");
  TCase *tc = tcase_create ("cp-e2e");

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_cp_up_and_down);
  tcase_add_test (tc, test_quiesce_background);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
