/* seed-cases.c: the namzu-seed end-to-end cases every backend runs (see seed-cases.h). The
 * repositories are bare repositories the test makes on the host, in seed_up; the seed names them
 * https://seed.test/<name>.git and the sandbox user's git config maps that prefix to wherever
 * the backend serves them from (url.<base>.insteadOf, as the reference's own seed tests do), so
 * the origin recorded in each checkout is the seed's URL exactly as with a real remote. Nothing
 * in namzu-seed knows about the mapping. */
#include "seed-cases.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

char *seed_up;
const SeedServer *seed_server;

void
seed_begin (const char *templ)
{
  harness_begin (templ);
  seed_up = g_build_filename (harness.tmp, "up", NULL);
  ck_assert_int_eq (g_mkdir (seed_up, 0755), 0);
  /* The host's git config must not change what the test builds. */
  g_setenv ("GIT_CONFIG_NOSYSTEM", "1", TRUE);
  g_setenv ("GIT_CONFIG_GLOBAL", "/dev/null", TRUE);
  g_setenv ("GIT_AUTHOR_NAME", "t", TRUE);
  g_setenv ("GIT_AUTHOR_EMAIL", "t@example.invalid", TRUE);
  g_setenv ("GIT_COMMITTER_NAME", "t", TRUE);
  g_setenv ("GIT_COMMITTER_EMAIL", "t@example.invalid", TRUE);
}

void
seed_end (void)
{
  harness_end ();
  g_clear_pointer (&seed_up, g_free);
}

char *
make_repo (const char *name, int n)
{
  g_autofree char *count = g_strdup_printf ("%d", n);

  return host_sh ("set -e; w=work-$1; git init -q -b main \"$w\"; i=0\n"
                  "while [ $i -lt $2 ]; do i=$((i+1)); echo \"$1 $i\" > \"$w/file\";\n"
                  "  git -C \"$w\" add file; git -C \"$w\" commit -q -m \"c$i\"; done\n"
                  "git clone -q --bare \"$w\" \"$3/$1.git\"\n"
                  "git -C \"$w\" rev-parse HEAD",
                  name, count, seed_up, NULL);
}

char *
force_push_new_history (const char *name)
{
  return host_sh ("set -e; w=work-$1; git -C \"$w\" checkout -q --orphan rewritten\n"
                  "echo rewritten > \"$w/file\"; git -C \"$w\" add file\n"
                  "git -C \"$w\" commit -q -m rewritten\n"
                  "git -C \"$w\" push -q -f \"$2/$1.git\" rewritten:main\n"
                  "git -C \"$w\" rev-parse HEAD",
                  name, seed_up, NULL);
}

char *
seed_file (const char *json)
{
  static guint n;
  g_autofree char *name = g_strdup_printf ("seed-%u.json", n++);
  char *path = g_build_filename (harness.tmp, name, NULL);

  ck_assert (g_file_set_contents (path, json, -1, NULL));
  return path;
}

int
seed (const char *json, JsonObject **doc, char **err, const char *extra)
{
  g_autofree char *path = seed_file (json);
  g_autofree char *out = NULL;
  int rc;

  if (extra != NULL)
    rc = run_tool (NULL, &out, err, "namzu-seed", "--sandbox", harness.sandbox, "--root", ROOT,
                   extra, path, NULL);
  else
    rc = run_tool (NULL, &out, err, "namzu-seed", "--sandbox", harness.sandbox, "--root", ROOT,
                   path, NULL);
  *doc = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (*doc != NULL, "stdout is not one JSON object: '%s'", out);
  ck_assert_msg (strchr (out, '\n') == out + strlen (out) - 1, "not one line: '%s'", out);
  return rc;
}

JsonObject *
repo_report (JsonObject *doc, guint i)
{
  JsonArray *a = nz_json_get_array (doc, "repositories");

  ck_assert (a != NULL);
  ck_assert_uint_gt (json_array_get_length (a), i);
  return json_array_get_object_element (a, i);
}

void
assert_repo (JsonObject *doc, guint i, const char *name, const char *status, const char *commit)
{
  JsonObject *r = repo_report (doc, i);

  ck_assert_str_eq (nz_json_get_string (r, "name"), name);
  ck_assert_msg (g_strcmp0 (nz_json_get_string (r, "status"), status) == 0,
                 "%s: status %s, "
                 "wanted %s",
                 name, nz_json_get_string (r, "status"), status);
  if (commit != NULL)
    ck_assert_str_eq (nz_json_get_string (r, "commit"), commit);
}

const char *
error_code (JsonObject *doc)
{
  JsonObject *e = nz_json_get_object (doc, "error");

  return e != NULL ? nz_json_get_string (e, "code") : NULL;
}

const char *
error_message (JsonObject *doc)
{
  JsonObject *e = nz_json_get_object (doc, "error");

  ck_assert (e != NULL);
  return nz_json_get_string (e, "message");
}

void
assert_no_partials (void)
{
  g_autofree char *found = sh_in_out ("find " ROOT " -name '*.namzu-partial-*' 2>/dev/null; :");

  ck_assert_msg (*found == '\0', "partials left: %s", found);
}

START_TEST (test_clone_then_present)
{
  g_autofree char *head_r = make_repo ("r", 2);
  g_autofree char *head_x = make_repo ("x", 1);
  g_autofree char *head_y = make_repo ("y", 1);
  g_autofree char *err = NULL, *err2 = NULL, *err3 = NULL;
  g_autofree char *in_r = NULL, *in_x = NULL, *changed = NULL, *marker = NULL;
  g_autoptr (JsonObject) doc = NULL;
  g_autoptr (JsonObject) doc2 = NULL;
  g_autoptr (JsonObject) doc3 = NULL;
  const char *two = "{\"name\":\"s\",\"repositories\":["
                    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"},"
                    "{\"url\":\"" URL_BASE "x.git\",\"path\":\"sub/x\",\"ref\":\"main\"}]}";
  g_autofree char *out = NULL;
  int rc;

  rc = seed (two, &doc, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  /* Progress is for a terminal: stderr is not one here. */
  ck_assert_str_eq (err, "");
  ck_assert_str_eq (nz_json_get_string (doc, "seed"), "s");
  ck_assert_str_eq (nz_json_get_string (doc, "root"), ROOT);
  ck_assert_uint_eq (strlen (nz_json_get_string (doc, "digest")), 64);
  assert_repo (doc, 0, "r", "cloned", head_r);
  assert_repo (doc, 1, "x", "cloned", head_x);
  ck_assert_str_eq (nz_json_get_string (repo_report (doc, 1), "dir"), "sub/x");
  in_r = sh_in_out ("git -C " ROOT "/r rev-parse HEAD");
  in_x = sh_in_out ("git -C " ROOT "/sub/x rev-parse HEAD");
  ck_assert_str_eq (in_r, head_r);
  ck_assert_str_eq (in_x, head_x);
  assert_no_partials ();
  marker = sh_in_out ("cat " ROOT "/.namzu/seed/s.json");
  ck_assert (strstr (marker, head_r) != NULL);

  /* Second call, seed on stdin: checks only. Nothing in the checkouts is written. */
  sh_in_ok ("touch /tmp/stamp");
  rc = run_tool (two, &out, &err2, "namzu-seed", "--sandbox", harness.sandbox, "--root", ROOT, "-",
                 NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err2);
  doc2 = nz_json_parse_object (out, -1, NULL);
  ck_assert (doc2 != NULL);
  assert_repo (doc2, 0, "r", "present", head_r);
  assert_repo (doc2, 1, "x", "present", head_x);
  changed = sh_in_out ("find " ROOT "/r " ROOT "/sub -newer /tmp/stamp");
  ck_assert_msg (*changed == '\0', "the second call wrote: %s", changed);

  /* A repository added to the seed is the only one cloned. */
  {
    const char *three = "{\"name\":\"s\",\"repositories\":["
                        "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"},"
                        "{\"url\":\"" URL_BASE "x.git\",\"path\":\"sub/x\",\"ref\":\"main\"},"
                        "{\"name\":\"y\",\"url\":\"" URL_BASE "y.git\"}]}";

    rc = seed (three, &doc3, &err3, NULL);
    ck_assert_msg (rc == 0, "exit %d: %s", rc, err3);
    assert_repo (doc3, 0, "r", "present", head_r);
    assert_repo (doc3, 1, "x", "present", head_x);
    assert_repo (doc3, 2, "y", "cloned", head_y);
  }
}
END_TEST

START_TEST (test_pinned_commit)
{
  g_autofree char *head = make_repo ("r", 3);
  g_autofree char *first = host_sh ("git -C work-r rev-list --max-parents=0 HEAD", NULL);
  g_autofree char *doc_json = g_strdup_printf (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\","
      "\"commit\":\"%s\"}]}",
      first);
  g_autofree char *moved_json = g_strdup_printf (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\","
      "\"commit\":\"%s\"}]}",
      head);
  g_autofree char *err = NULL, *err2 = NULL, *err3 = NULL, *in = NULL;
  g_autoptr (JsonObject) doc = NULL;
  g_autoptr (JsonObject) doc2 = NULL;
  g_autoptr (JsonObject) doc3 = NULL;
  int rc;

  rc = seed (doc_json, &doc, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (doc, 0, "r", "cloned", first);
  in = sh_in_out ("git -C " ROOT "/r rev-parse HEAD");
  ck_assert_str_eq (in, first);
  rc = seed (doc_json, &doc2, &err2, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err2);
  assert_repo (doc2, 0, "r", "present", first);
  /* A new pin over the old checkout is drift: HEAD is not the pinned commit. */
  rc = seed (moved_json, &doc3, &err3, NULL);
  ck_assert_int_eq (rc, 3);
  ck_assert_str_eq (error_code (doc3), "drift");
  ck_assert_msg (strstr (error_message (doc3), "r is not checked out at its pinned commit") != NULL,
                 "%s", error_message (doc3));
  assert_repo (doc3, 0, "r", "drifted", first);
}
END_TEST

/* A force-push moves the ref under a checkout. Seeds never fetch, so the checkout still holds
 * what was recorded until the workload follows the move; then the recorded commit is gone from
 * HEAD's history, and the call refuses without touching anything, before any clone. */
START_TEST (test_moved_ref_is_drift)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *head_b = make_repo ("b", 1);
  g_autofree char *moved = NULL, *marker_before = NULL, *marker_after = NULL, *in = NULL;
  g_autofree char *b_state = NULL;
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL;
  g_autoptr (JsonObject) d1 = NULL;
  g_autoptr (JsonObject) d2 = NULL;
  g_autoptr (JsonObject) d3 = NULL;
  g_autoptr (JsonObject) d4 = NULL;
  g_autoptr (JsonObject) d5 = NULL;
  const char *one = ONE_REPO;
  const char *two = "{\"name\":\"s\",\"repositories\":["
                    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"},"
                    "{\"name\":\"b\",\"url\":\"" URL_BASE "b.git\"}]}";
  const char *other_ref = "{\"name\":\"s\",\"repositories\":["
                          "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\",\"ref\":\"other\"}]}";
  int rc;

  rc = seed (one, &d1, &e1, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e1);
  assert_repo (d1, 0, "r", "cloned", head);

  moved = force_push_new_history ("r");
  ck_assert_str_ne (moved, head);
  rc = seed (one, &d2, &e2, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e2);
  assert_repo (d2, 0, "r", "present", head);

  /* The workload follows the force-push. */
  sh_in_ok ("cd " ROOT "/r && git fetch -q origin +main:refs/remotes/origin/main "
            "&& git reset -q --hard origin/main");
  marker_before = sh_in_out ("cat " ROOT "/.namzu/seed/s.json");
  sh_in_ok ("touch /tmp/stamp");
  rc = seed (two, &d3, &e3, NULL);
  ck_assert_msg (rc == 3, "exit %d: %s", rc, e3);
  ck_assert_str_eq (error_code (d3), "drift");
  ck_assert_msg (g_str_has_prefix (error_message (d3), "sandbox seed: r no longer contains its "
                                                       "pinned or recorded commit"),
                 "%s", error_message (d3));
  ck_assert (strstr (error_message (d3), "Nothing was changed") != NULL);
  ck_assert (strstr (e3, "Nothing was changed") != NULL);
  assert_repo (d3, 0, "r", "drifted", moved);
  assert_repo (d3, 1, "b", "missing", NULL);
  /* Nothing touched: b not cloned (not even a partial), the marker and r as they were. */
  b_state = sh_in_out ("ls -d " ROOT "/b* 2>/dev/null; :");
  ck_assert_msg (*b_state == '\0', "b was touched: %s", b_state);
  marker_after = sh_in_out ("cat " ROOT "/.namzu/seed/s.json");
  ck_assert_str_eq (marker_after, marker_before);
  in = sh_in_out ("git -C " ROOT "/r rev-parse HEAD");
  ck_assert_str_eq (in, moved);
  {
    /* (The preflight's write probe lives in .namzu/seed and is removed again.) */
    g_autofree char *changed = sh_in_out ("find " ROOT " -path " ROOT "/.namzu -prune -o "
                                          "-newer /tmp/stamp -print");

    ck_assert_msg (*changed == '\0', "a refused call wrote: %s", changed);
  }

  /* A ref the checkout does not hold is drift too. */
  rc = seed (other_ref, &d4, &e4, NULL);
  ck_assert_int_eq (rc, 3);
  ck_assert_msg (strstr (error_message (d4), "r does not hold the seed's ref 'other'") != NULL,
                 "%s", error_message (d4));

  /* --on-drift=report clones what is missing, reports the drift, still exits 3. */
  rc = seed (two, &d5, &e5, "--on-drift=report");
  ck_assert_msg (rc == 3, "exit %d: %s", rc, e5);
  ck_assert (nz_json_get_object (d5, "error") == NULL);
  assert_repo (d5, 0, "r", "drifted", moved);
  ck_assert_str_eq (nz_json_get_string (repo_report (d5, 0), "drift"), "history");
  assert_repo (d5, 1, "b", "cloned", head_b);
}
END_TEST

START_TEST (test_origin_and_occupied_drift)
{
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *e1 = NULL, *e2 = NULL, *kept = NULL;
  g_autoptr (JsonObject) d1 = NULL;
  g_autoptr (JsonObject) d2 = NULL;
  const char *doc = "{\"name\":\"s\",\"repositories\":["
                    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"},"
                    "{\"name\":\"plain\",\"url\":\"" URL_BASE "r.git\"}]}";
  const char *r_only = ONE_REPO;
  int rc;

  rc = seed (r_only, &d1, &e1, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e1);
  sh_in_ok ("git -C " ROOT "/r remote set-url origin " URL_BASE "elsewhere.git && mkdir " ROOT
            "/plain && echo mine > " ROOT "/plain/file");
  rc = seed (doc, &d2, &e2, NULL);
  ck_assert_msg (rc == 3, "exit %d: %s", rc, e2);
  ck_assert_msg (strstr (error_message (d2), "r has a different origin URL; plain is a "
                                             "directory that is not a git repository")
                     != NULL,
                 "%s", error_message (d2));
  assert_repo (d2, 0, "r", "drifted", head);
  assert_repo (d2, 1, "plain", "drifted", NULL);
  kept = sh_in_out ("cat " ROOT "/plain/file");
  ck_assert_str_eq (kept, "mine");
}
END_TEST

/* Starts namzu-seed on @json in the background, stdout to @out_path, and waits until the pack
 * hook raised flag @flag: git is inside the clone, in its partial. */
static GSubprocess *
start_held_seed (const char *json, const char *out_path, const char *flag)
{
  g_autofree char *path = seed_file (json);
  g_autofree char *tool = nz_test_tool ("namzu-seed");
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GError) error = NULL;
  GSubprocess *p;

  g_subprocess_launcher_set_stdout_file_path (launcher, out_path);
  g_subprocess_launcher_set_stderr_file_path (launcher, "/dev/null");
  p = g_subprocess_launcher_spawn (launcher, &error, tool, "--sandbox", harness.sandbox, "--root",
                                   ROOT, path, NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  for (int i = 0; i < 300 && !seed_server->flag (flag); i++)
    g_usleep (100 * 1000);
  ck_assert_msg (seed_server->flag (flag), "the clone never reached the pack");
  return p;
}

/* Waits for a held namzu-seed: its exit status and its one JSON document. */
static int
finish_held_seed (GSubprocess *p, const char *out_path, JsonObject **doc)
{
  g_autofree char *out = NULL;

  ck_assert (g_subprocess_wait (p, NULL, NULL));
  ck_assert (g_file_get_contents (out_path, &out, NULL, NULL));
  *doc = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (*doc != NULL, "stdout: %s", out);
  if (g_subprocess_get_if_signaled (p))
    return 128 + g_subprocess_get_term_sig (p);
  return g_subprocess_get_exit_status (p);
}

/* The partial of repository r, asserted to be the only one and well named. */
static void
assert_one_partial (void)
{
  g_autofree char *partial = sh_in_out ("ls -d " ROOT "/r.namzu-partial-*");

  ck_assert_msg (g_regex_match_simple ("^" ROOT "/r\\.namzu-partial-[0-9a-f]{12}$", partial, 0, 0),
                 "%s", partial);
}

/* The clone's processes in the sandbox: its shell carries the script, git the partial's path. */
#define CLONE_PIDS                                                                                 \
  "for f in /proc/[0-9]*/cmdline; do if tr '\\0' ' ' < \"$f\" 2>/dev/null | "                      \
  "grep -q -e 'namzu-partia[l]' -e 'sleep 60[0]'; then p=${f#/proc/}; echo ${p%/cmdline}; fi; "    \
  "done"

/* namzu-seed is killed (SIGTERM) while git is inside the clone: the remote command is cancelled,
 * the repository is not in place, nothing of the clone is still running, and the next call
 * clones it whole. The clone is held mid-way, deterministically, by an upload-pack hook where
 * the repositories are served from. */
START_TEST (test_killed_clone)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *out_path = g_build_filename (harness.tmp, "killed.out", NULL);
  g_autofree char *err = NULL, *lingering = NULL, *in = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (JsonObject) doc = NULL;
  g_autoptr (JsonObject) again = NULL;
  int rc;

  seed_server->pack_hook ("touch \"$F/held\"; sleep 600");
  p = start_held_seed (ONE_REPO, out_path, "held");
  /* Mid-clone: the clone is in its partial, nothing at the repository's place. */
  ck_assert (!sandbox_has ("-e " ROOT "/r"));
  assert_one_partial ();

  g_subprocess_send_signal (p, SIGTERM);
  rc = finish_held_seed (p, out_path, &doc);
  ck_assert_int_eq (rc, 128 + SIGTERM);
  ck_assert_str_eq (error_code (doc), "cancelled");
  ck_assert (!sandbox_has ("-e " ROOT "/r"));
  lingering = sh_in_out (CLONE_PIDS);
  ck_assert_msg (*lingering == '\0', "still running: %s", lingering);

  seed_server->pack_hook (NULL);
  rc = seed (ONE_REPO, &again, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (again, 0, "r", "cloned", head);
  in = sh_in_out ("git -C " ROOT "/r rev-parse HEAD && git -C " ROOT "/r status --porcelain");
  ck_assert_str_eq (in, head);
  assert_no_partials ();
}
END_TEST

/* A clone that dies at once with everything around it (SIGKILL to the clone's process group in
 * the sandbox, as a crash would) cannot clean up: the call fails as clone-failed, the partial is
 * left beside the repository's place, never in it. A later call clones the repository whole and,
 * once that partial is an hour old (a younger one could be a clone in flight), sweeps it. */
START_TEST (test_crashed_clone_swept_later)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *out_path = g_build_filename (harness.tmp, "crashed.out", NULL);
  g_autofree char *err = NULL, *err2 = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (JsonObject) doc = NULL;
  g_autoptr (JsonObject) again = NULL;
  g_autoptr (JsonObject) swept = NULL;
  int rc;

  seed_server->pack_hook ("touch \"$F/held\"; sleep 600");
  p = start_held_seed (ONE_REPO, out_path, "held");
  /* The clone's shell leads its own process group (every exec is a session): kill the group,
   * so nothing of the clone (git's transport helper included) outlives it. */
  sh_in_ok ("for p in $(" CLONE_PIDS "); do set -- $(cat /proc/$p/stat); "
            "if [ \"$5\" = \"$p\" ]; then kill -s KILL -- \"-$p\"; fi; done");
  rc = finish_held_seed (p, out_path, &doc);
  ck_assert_int_eq (rc, 1);
  ck_assert_str_eq (error_code (doc), "clone-failed");
  ck_assert_msg (strstr (error_message (doc), "failed (exit 137)") != NULL, "%s",
                 error_message (doc));
  ck_assert (!sandbox_has ("-e " ROOT "/r"));
  assert_one_partial ();

  /* Fresh, it may be a peer's clone in flight: cloned around, not swept. */
  seed_server->pack_hook (NULL);
  rc = seed (ONE_REPO, &again, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (again, 0, "r", "cloned", head);
  assert_one_partial ();
  /* An hour old: swept by the next call, which only checks r. */
  sh_in_ok ("touch -d '61 minutes ago' " ROOT "/r.namzu-partial-*");
  rc = seed (ONE_REPO, &swept, &err2, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err2);
  assert_repo (swept, 0, "r", "present", head);
  assert_no_partials ();
}
END_TEST

/* Two calls on one root: the one that finishes second finds the repository in place, removes
 * its own partial, checks what it found and reports it present. The first call's clone is held
 * in its pack step until the second call is done. */
START_TEST (test_concurrent_calls_one_clone)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *out_path = g_build_filename (harness.tmp, "first.out", NULL);
  g_autofree char *err = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (JsonObject) first = NULL;
  g_autoptr (JsonObject) second = NULL;
  int rc;

  seed_server->pack_hook ("if mkdir \"$F/first\" 2>/dev/null; then touch \"$F/held\";"
                          " while [ ! -e \"$F/release\" ]; do sleep 0.1; done; fi");
  p = start_held_seed (ONE_REPO, out_path, "held");

  rc = seed (ONE_REPO, &second, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (second, 0, "r", "cloned", head);

  seed_server->raise_flag ("release");
  rc = finish_held_seed (p, out_path, &first);
  ck_assert_msg (rc == 0, "first call: exit %d", rc);
  assert_repo (first, 0, "r", "present", head);
  assert_no_partials ();
}
END_TEST

/* Progress lines appear when stderr is a terminal (script(1) gives the tool a pty), and the
 * JSON document is still the whole of stdout's content. */
START_TEST (test_progress_on_a_terminal)
{
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *path = seed_file (ONE_REPO);
  g_autofree char *tool = nz_test_tool ("namzu-seed");
  g_autofree char *seen = host_sh ("script -qec \"$1 --sandbox $2 --root $3 $4\" /dev/null", tool,
                                   harness.sandbox, ROOT, path, NULL);

  ck_assert_msg (strstr (seen, "namzu-seed: checking 1 repositories under " ROOT) != NULL, "%s",
                 seen);
  ck_assert_msg (strstr (seen, "namzu-seed: cloning r from " URL_BASE "r.git") != NULL, "%s", seen);
  ck_assert (strstr (seen, "\"status\":\"cloned\"") != NULL);
  ck_assert (strstr (seen, head) != NULL);
}
END_TEST

/* The marker is guest-writable: never a reason to skip a check. A repository it lists but that
 * is gone is cloned; a forged commit is checked like any other (and is drift here); a value
 * that is not a commit id is ignored. */
START_TEST (test_forged_marker)
{
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *unrelated = make_repo ("u", 1);
  const char *json = ONE_REPO;
  g_autofree char *forge = NULL, *garbage = NULL;
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
  g_autoptr (JsonObject) d1 = NULL;
  g_autoptr (JsonObject) d2 = NULL;
  g_autoptr (JsonObject) d3 = NULL;
  g_autoptr (JsonObject) d4 = NULL;
  int rc;

  rc = seed (json, &d1, &e1, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e1);
  sh_in_ok ("rm -rf " ROOT "/r");
  rc = seed (json, &d2, &e2, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e2);
  assert_repo (d2, 0, "r", "cloned", head);

  forge = g_strdup_printf ("printf '{\"seed\":\"s\",\"commits\":{\"r\":\"%s\"},\"refs\":{\"r\":"
                           "\"\"}}' > " ROOT "/.namzu/seed/s.json",
                           unrelated);
  sh_in_ok (forge);
  rc = seed (json, &d3, &e3, NULL);
  ck_assert_msg (rc == 3, "exit %d: %s", rc, e3);
  ck_assert (strstr (error_message (d3), "r no longer contains its pinned or recorded commit"));

  garbage = g_strdup ("printf '{\"seed\":\"s\",\"commits\":{\"r\":\"--output=/tmp/x\"},"
                      "\"refs\":{\"r\":\"\"}}' > " ROOT "/.namzu/seed/s.json");
  sh_in_ok (garbage);
  rc = seed (json, &d4, &e4, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e4);
  assert_repo (d4, 0, "r", "present", head);
}
END_TEST

/* What a crashed call leaves behind (a partial that was never renamed) is swept once it is
 * older than 60 minutes; a fresh one (a peer's clone in flight) and anything else stay. */
START_TEST (test_stale_partial_swept)
{
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *err = NULL, *left = NULL;
  g_autoptr (JsonObject) doc = NULL;
  int rc;

  sh_in_ok ("set -e; mkdir -p " ROOT "/sub; for d in r.namzu-partial-0123456789ab "
            "sub/x.namzu-partial-aaaaaaaaaaaa old-but-mine; do mkdir " ROOT "/$d; "
            "echo half > " ROOT "/$d/junk; touch -d '61 minutes ago' " ROOT "/$d; done; "
            "mkdir " ROOT "/r.namzu-partial-ba5eba11f00d; "
            "touch -d '59 minutes ago' " ROOT "/r.namzu-partial-ba5eba11f00d");
  rc = seed ("{\"name\":\"s\",\"repositories\":["
             "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"},"
             "{\"name\":\"x\",\"url\":\"" URL_BASE "r.git\",\"dir\":\"sub/x\"}]}",
             &doc, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (doc, 0, "r", "cloned", head);
  assert_repo (doc, 1, "x", "cloned", head);
  left = sh_in_out ("cd " ROOT " && ls -d r* old* sub/*");
  ck_assert_str_eq (left, "old-but-mine\nr\nr.namzu-partial-ba5eba11f00d\nsub/x");
}
END_TEST

/* Every refusal of the seed or the root: exit 2, one stderr line, code "invalid", and nothing
 * at all created in the sandbox. */
START_TEST (test_refusals)
{
  static const char *const bad_repos[] = {
    "{\"name\":\"r\",\"url\":\"ssh://git@seed.test/r.git\"}",
    "{\"name\":\"r\",\"url\":\"git@seed.test:r.git\"}",
    "{\"name\":\"r\",\"url\":\"https://tok3n@seed.test/r.git\"}",
    "{\"name\":\"r\",\"url\":\"https://u:pw@seed.test/r.git\"}",
    "{\"name\":\"r\",\"url\":\"file:///mnt/user-data/uploads/r.git\"}",
    "{\"name\":\"r\",\"url\":\"git://seed.test/r.git\"}",
    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\",\"dir\":\"../escape\"}",
    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\",\"ref\":\"--upload-pack=x\"}",
  };
  static const char *const bad_roots[]
      = { "relative/dir", "/home/namzu/../etc", "/home/namzu/a b" };
  const char *good
      = "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}";
  g_autofree char *good_path = seed_file (good);

  for (gsize i = 0; i < G_N_ELEMENTS (bad_repos); i++)
    {
      g_autofree char *json
          = g_strdup_printf ("{\"name\":\"s\",\"repositories\":[%s]}", bad_repos[i]);
      g_autofree char *err = NULL;
      g_autoptr (JsonObject) doc = NULL;
      int rc = seed (json, &doc, &err, NULL);

      ck_assert_msg (rc == 2, "%s: exit %d", bad_repos[i], rc);
      ck_assert_str_eq (error_code (doc), "invalid");
      ck_assert (g_str_has_prefix (error_message (doc), "sandbox seed: repositories[0]."));
      ck_assert (strchr (err, '\n') == err + strlen (err) - 1);
      ck_assert (strstr (err, "tok3n") == NULL && strstr (err, "pw@") == NULL);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad_roots); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_autoptr (JsonObject) doc = NULL;
      int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", harness.sandbox, "--root",
                         bad_roots[i], good_path, NULL);

      ck_assert_msg (rc == 2, "%s: exit %d", bad_roots[i], rc);
      doc = nz_json_parse_object (out, -1, NULL);
      ck_assert (doc != NULL);
      ck_assert_str_eq (error_code (doc), "invalid");
      ck_assert (g_str_has_prefix (error_message (doc), "sandbox seed: root "));
    }
  ck_assert (!sandbox_has ("-e " ROOT));
  ck_assert (!sandbox_has ("-e /home/namzu/escape"));

  /* The seed on stdin: the sandbox must be named, stdin cannot also carry the handle. */
  {
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_tool (good, &out, &err, "namzu-seed", "--root", ROOT, "-", NULL);

    ck_assert_int_eq (rc, 2);
    ck_assert_msg (strstr (err, "NAMZU_SANDBOX") != NULL || strstr (err, "--sandbox") != NULL, "%s",
                   err);
  }
  /* Usage: no root, no seed. */
  {
    g_autofree char *err = NULL;

    ck_assert_int_eq (
        run_tool (NULL, NULL, &err, "namzu-seed", "--sandbox", harness.sandbox, good_path, NULL),
        2);
    ck_assert (strstr (err, "--root") != NULL);
    ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-seed", "--root", ROOT, NULL), 2);
  }
  /* A root the sandbox cannot write is refused by the preflight, naming the root. */
  {
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr (JsonObject) doc = NULL;
    int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", harness.sandbox, "--root",
                       "/usr/seeds", good_path, NULL);

    ck_assert_int_eq (rc, 1);
    doc = nz_json_parse_object (out, -1, NULL);
    ck_assert (doc != NULL);
    ck_assert_str_eq (error_code (doc), "invalid");
    ck_assert_msg (strstr (error_message (doc), "root /usr/seeds is not writable in the "
                                                "sandbox")
                       != NULL,
                   "%s", error_message (doc));
  }
}
END_TEST

/* A URL is data: it reaches git as an argument and is never parsed as shell. A failed clone is
 * reported by repository and leaves nothing behind. */
START_TEST (test_url_is_data)
{
  g_autofree char *err = NULL, *left = NULL;
  g_autoptr (JsonObject) doc = NULL;
  int rc;

  rc = seed ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"" URL_BASE
             "$(touch${IFS}/tmp/pwned)`touch${IFS}/tmp/pwned2`;touch${IFS}/tmp/pwned3\"}]}",
             &doc, &err, NULL);
  ck_assert_int_eq (rc, 1);
  ck_assert_str_eq (error_code (doc), "clone-failed");
  ck_assert_msg (g_str_has_prefix (error_message (doc), "sandbox seed: cloning r from " URL_BASE),
                 "%s", error_message (doc));
  ck_assert (strstr (error_message (doc), "failed (exit 1)") != NULL);
  ck_assert (!sandbox_has ("-e /tmp/pwned -o -e /tmp/pwned2 -o -e /tmp/pwned3"));
  left = sh_in_out ("ls -A " ROOT " | grep -v '^.namzu$' || :");
  ck_assert_msg (*left == '\0', "left behind: %s", left);
  assert_repo (doc, 0, "r", "missing", NULL);
}
END_TEST

TCase *
seed_tcase (const char *backend, const SeedServer *server, SFun setup, SFun teardown)
{
  TCase *tc = tcase_create (backend);

  seed_server = server;
  tcase_add_checked_fixture (tc, setup, teardown);
  /* A docker case creates and destroys a container; two cores shared with other work. */
  tcase_set_timeout (tc, 180);
  tcase_add_test (tc, test_clone_then_present);
  tcase_add_test (tc, test_pinned_commit);
  tcase_add_test (tc, test_moved_ref_is_drift);
  tcase_add_test (tc, test_origin_and_occupied_drift);
  tcase_add_test (tc, test_killed_clone);
  tcase_add_test (tc, test_crashed_clone_swept_later);
  tcase_add_test (tc, test_concurrent_calls_one_clone);
  tcase_add_test (tc, test_progress_on_a_terminal);
  tcase_add_test (tc, test_forged_marker);
  tcase_add_test (tc, test_stale_partial_swept);
  tcase_add_test (tc, test_refusals);
  tcase_add_test (tc, test_url_is_data);
  return tc;
}
