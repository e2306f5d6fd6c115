/* Progress on long work, end to end on container:bwrap (issue 16): the built namzu-cp,
 * namzu-create and namzu-seed draw their progress line when stderr is a real pseudo-terminal
 * (forkpty, not a knob), and say nothing of it in a pipe or with NAMZU_PROGRESS=0.
 *
 * A line is drawn in place: "\r" + the line + clear-to-end-of-line. The terminal turns the
 * tools' own "\n" into "\r\n", so "\rnamzu-cp: " can only be a redrawn line, never the start
 * of an ordinary message. */
#include <gio/gio.h>
#include <string.h>
#include <unistd.h>

#include "seed-cases.h"

static char *real_bwrap;

static JsonObject *
parse_out (const char *out)
{
  JsonObject *obj = nz_json_parse_object (out, -1, NULL);

  ck_assert_msg (obj != NULL, "stdout is not one JSON object: %s", out);
  return obj;
}

static void
assert_no_progress (const char *err, const char *what)
{
  ck_assert_msg (strchr (err, '\r') == NULL && strstr (err, "\033[") == NULL
                     && strstr (err, "/s") == NULL && strstr (err, "waiting") == NULL,
                 "%s printed progress: '%s'", what, err);
}

static void
setup (void)
{
  harness_begin ("/tmp/nz-progress-e2e-XXXXXX");
  harness_start_reaper (0);
}

START_TEST (test_cp_progress)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *src = g_build_filename (harness.tmp, "big.bin", NULL);
  g_autofree char *back = g_build_filename (harness.tmp, "back.bin", NULL);
  g_autofree char *remote = g_strdup_printf ("%s:big.bin", id);
  g_autofree char *want = g_strdup_printf ("\rnamzu-cp: %s  ", src);
  g_autofree char *data = g_malloc0 (4 * 1024 * 1024);
  g_autofree char *out = NULL, *tty = NULL, *err = NULL;
  g_autoptr (JsonObject) summary = NULL;
  int rc;

  ck_assert (g_file_set_contents (src, data, 4 * 1024 * 1024, NULL));
  /* Up, on a terminal: the line with the total (the file's size), a rate, and a last line that
   * ends in a newline before anything else is said. */
  rc = run_tool_on_tty (&out, &tty, "namzu-cp", "--part-kib", "256", src, remote, NULL);
  ck_assert_msg (rc == 0, "namzu-cp up: %s", tty);
  summary = parse_out (out);
  ck_assert_int_eq (json_object_get_int_member (summary, "bytes"), 4 * 1024 * 1024);
  ck_assert_msg (strstr (tty, want) != NULL, "no progress line: '%s'", tty);
  ck_assert_msg (strstr (tty, " / 4.0 MiB  ") != NULL && strstr (tty, "B/s") != NULL
                     && strstr (tty, "\033[K") != NULL,
                 "no total, rate or clear-to-end: '%s'", tty);
  ck_assert_msg (strstr (tty, "4.0 MiB / 4.0 MiB  100%  ") != NULL
                     && g_str_has_suffix (tty, "\033[K\r\n"),
                 "no last line: '%s'", tty);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&tty, g_free);
  g_clear_pointer (&summary, json_object_unref);

  /* Down, on a terminal: the announced length is the total. */
  rc = run_tool_on_tty (&out, &tty, "namzu-cp", remote, back, NULL);
  ck_assert_msg (rc == 0, "namzu-cp down: %s", tty);
  ck_assert_msg (strstr (tty, "\rnamzu-cp: big.bin  ") != NULL
                     && strstr (tty, "4.0 MiB / 4.0 MiB  100%  ") != NULL
                     && strstr (tty, "B/s") != NULL,
                 "no progress line: '%s'", tty);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&tty, g_free);

  /* The same copies in a pipe: nothing on stderr at all. */
  rc = run_tool (NULL, &out, &err, "namzu-cp", src, remote, NULL);
  ck_assert_msg (rc == 0, "namzu-cp up: %s", err);
  ck_assert_str_eq (err, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, &out, &err, "namzu-cp", remote, back, NULL);
  ck_assert_msg (rc == 0, "namzu-cp down: %s", err);
  ck_assert_str_eq (err, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* A terminal that cannot clear a line (TERM=dumb) gets the line blanked with spaces. */
  g_setenv ("TERM", "dumb", TRUE);
  rc = run_tool_on_tty (&out, &tty, "namzu-cp", src, remote, NULL);
  g_unsetenv ("TERM");
  ck_assert_msg (rc == 0, "namzu-cp up: %s", tty);
  ck_assert_msg (strstr (tty, want) != NULL && strstr (tty, "\033[") == NULL,
                 "not a dumb terminal's line: '%s'", tty);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&tty, g_free);

  /* NAMZU_PROGRESS=0: a terminal, and still nothing. */
  g_setenv ("NAMZU_PROGRESS", "0", TRUE);
  rc = run_tool_on_tty (&out, &tty, "namzu-cp", src, remote, NULL);
  g_unsetenv ("NAMZU_PROGRESS");
  ck_assert_msg (rc == 0, "namzu-cp up: %s", tty);
  assert_no_progress (tty, "namzu-cp with NAMZU_PROGRESS=0");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&tty, g_free);

  /* The file itself on the terminal (stdout is the terminal too): no line tears it. */
  ck_assert (g_file_set_contents (src, "hello, terminal\n", -1, NULL));
  rc = run_tool (NULL, &out, &err, "namzu-cp", src, remote, NULL);
  ck_assert_msg (rc == 0, "namzu-cp up: %s", err);
  g_clear_pointer (&out, g_free);
  rc = run_tool_on_tty (NULL, &tty, "namzu-cp", remote, "-", NULL);
  ck_assert_msg (rc == 0, "namzu-cp down: %s", tty);
  ck_assert_str_eq (tty, "hello, terminal\r\n");
  g_clear_pointer (&tty, g_free);

  destroy_ok (id);
}
END_TEST

/* A directory copy: one line for the whole tree, its total the sum of the files, and a warning
 * in the middle (a FIFO is skipped) on a line of its own, not glued to the progress line. */
START_TEST (test_cp_tree_progress)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *remote = g_strdup_printf ("%s:t", id);
  g_autofree char *dest = g_build_filename (harness.tmp, "got", NULL);
  g_autofree char *out = NULL, *tty = NULL, *script = NULL;
  const char *skip;
  int rc;

  script = g_strdup_printf ("mkdir t && head -c 3145728 /dev/zero > t/a && mkfifo t/b && "
                            "head -c 1048576 /dev/zero > t/c");
  ck_assert_int_eq (sh_in_sandbox (id, script, NULL), 0);
  rc = run_tool_on_tty (&out, &tty, "namzu-cp", "-r", remote, dest, NULL);
  ck_assert_msg (rc == 0, "namzu-cp -r: %s", tty);
  ck_assert_msg (strstr (tty, "\rnamzu-cp: t  ") != NULL
                     && strstr (tty, "4.0 MiB / 4.0 MiB  100%  ") != NULL,
                 "no line for the tree: '%s'", tty);
  skip = strstr (tty, "namzu-cp: skipping '");
  ck_assert_msg (skip != NULL, "no warning: '%s'", tty);
  ck_assert_msg (skip - tty >= 4 && (strncmp (skip - 4, "\r\033[K", 4) == 0 || skip[-1] == '\n'),
                 "the warning is glued to the line: '%s'", tty);
  g_clear_pointer (&tty, g_free);

  /* With stdout on the terminal too, the result starts on a line of its own. */
  rc = run_tool_on_tty (NULL, &tty, "namzu-cp", "-r", remote, dest, NULL);
  ck_assert_msg (rc == 0, "namzu-cp -r: %s", tty);
  ck_assert_msg (strstr (tty, "\033[K\r\n{\"") != NULL, "the result is glued to the line: '%s'",
                 tty);
  destroy_ok (id);
}
END_TEST

/* A slow backend: a bwrap that takes 2 seconds before it starts the sandbox. The line appears
 * only after its one-second delay, so this bounds nothing from above. */
START_TEST (test_create_waiting_line)
{
  g_autofree char *slow = g_build_filename (harness.tmp, "slow-bwrap", NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\nsleep 2\nexec '%s' \"$@\"\n", real_bwrap);
  g_autofree char *out = NULL, *tty = NULL, *err = NULL;
  g_autoptr (JsonObject) h = NULL;
  int rc;

  ck_assert (g_file_set_contents (slow, script, -1, NULL));
  ck_assert_int_eq (chmod (slow, 0755), 0);
  g_setenv ("NAMZU_BWRAP", slow, TRUE);
  rc = run_tool_on_tty (&out, &tty, "namzu-create", NULL);
  ck_assert_msg (rc == 0, "namzu-create: %s", tty);
  h = parse_out (out);
  ck_assert_msg (strstr (tty, "\rnamzu-create: waiting for the sandbox to be ready (1s)\033[K")
                     != NULL,
                 "no waiting line: '%s'", tty);
  ck_assert_msg (g_str_has_suffix (tty, "s)\033[K\r\n"), "no last line: '%s'", tty);
  g_clear_pointer (&out, g_free);

  /* In a pipe, the same slow create says nothing. */
  rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
  g_unsetenv ("NAMZU_BWRAP");
  ck_assert_msg (rc == 0, "namzu-create: %s", err);
  ck_assert_str_eq (err, "");
  destroy_ok (nz_json_get_string (h, "id"));
}
END_TEST

static void
seed_setup (void)
{
  seed_begin ("/tmp/nz-progress-seed-XXXXXX");
  harness_start_reaper (0);
  harness.sandbox = create_sandbox ("--uploads", seed_up, NULL);
  sh_in_ok ("git config --global url.file:///mnt/user-data/uploads/.insteadOf " URL_BASE);
}

/* Every step on a line of its own, with its elapsed time; in a pipe, only the report. */
START_TEST (test_seed_steps)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *head2 = make_repo ("q", 1);
  g_autofree char *two
      = seed_file ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE
                   "r.git\"},{\"name\":\"q\",\"url\":\"" URL_BASE "q.git\"}]}");
  g_autoptr (JsonObject) doc = NULL;
  g_autofree char *out = NULL, *tty = NULL, *err = NULL;
  int rc;

  rc = seed (ONE_REPO, &doc, &err, NULL);
  ck_assert_msg (rc == 0, "namzu-seed: %s", err);
  assert_repo (doc, 0, "r", "cloned", head);
  ck_assert_str_eq (err, "");
  g_clear_pointer (&doc, json_object_unref);

  rc = run_tool_on_tty (&out, &tty, "namzu-seed", "--sandbox", harness.sandbox, "--root", ROOT, two,
                        NULL);
  ck_assert_msg (rc == 0, "namzu-seed: %s", tty);
  doc = parse_out (out);
  assert_repo (doc, 0, "r", "present", head);
  assert_repo (doc, 1, "q", "cloned", head2);
  ck_assert_msg (strstr (tty, "\rnamzu-seed: checking 2 repositories under " ROOT " (") != NULL,
                 "no check step: '%s'", tty);
  ck_assert_msg (strstr (tty, "\rnamzu-seed: cloning q from " URL_BASE "q.git (") != NULL
                     && strstr (tty, "cloning r") == NULL,
                 "no clone step: '%s'", tty);
  ck_assert_msg (g_str_has_suffix (tty, "s)\033[K\r\n"), "no last line: '%s'", tty);
}
END_TEST

int
main (void)
{
  g_autofree char *git = g_find_program_in_path ("git");
  Suite *s = suite_create ("progress-e2e");
  TCase *tc = tcase_create ("progress-e2e");
  TCase *tc_seed = tcase_create ("progress-seed");
  int rc;

  real_bwrap = g_find_program_in_path ("bwrap");
  nz_test_require (real_bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (git != NULL, "git is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_cp_progress);
  tcase_add_test (tc, test_cp_tree_progress);
  tcase_add_test (tc, test_create_waiting_line);
  suite_add_tcase (s, tc);
  tcase_add_checked_fixture (tc_seed, seed_setup, seed_end);
  tcase_set_timeout (tc_seed, 120);
  tcase_add_test (tc_seed, test_seed_steps);
  suite_add_tcase (s, tc_seed);
  rc = nz_test_run (s);
  g_free (real_bwrap);
  return rc;
}
