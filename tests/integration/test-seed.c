/* End to end for namzu-seed on container:bwrap: real bubblewrap sandboxes, the real agent, and
 * real git repositories the test makes on the host.
 *
 * How the sandbox reaches them: each case makes bare repositories in <tmp>/up and creates the
 * sandbox with `--uploads <tmp>/up`, so they are bound read-only at /mnt/user-data/uploads.
 * Seeds only accept https:// and http:// URLs (spec G.2 refuses file://), so the seed says
 * https://seed.test/<name>.git and the sandbox user's own git config maps that prefix to the
 * bind with url.<file>.insteadOf, as the reference's own seed tests do. The origin recorded in
 * each checkout is the https URL, exactly as with a real remote; only the bytes come from the
 * bind. Nothing in namzu-seed knows about this mapping. */
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "nz-json.h"
#include "../nz-test.h"

#define ROOT "/home/namzu/seeds"
#define URL_BASE "https://seed.test/"

static char *tmp;
static char *state;
static char *up;
static char *sandbox;
static GSubprocess *reaper;

static int run_tool (const char *stdin_text, char **out, char **err, const char *tool,
                     ...) G_GNUC_NULL_TERMINATED;

/* Runs a built tool with stdin, stdout and stderr on files, and returns its exit status (128+N
 * for a signal). @args is NULL-terminated. */
static int
run_toolv (const char *stdin_text, char **out, char **err, const char *tool,
           const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *in_path = g_build_filename (tmp, "stdin", NULL);
  g_autofree char *out_path = g_build_filename (tmp, "stdout", NULL);
  g_autofree char *err_path = g_build_filename (tmp, "stderr", NULL);

  g_ptr_array_add (argv, nz_test_tool (tool));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
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

static int
run_tool (const char *stdin_text, char **out, char **err, const char *tool, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  const char *a;
  va_list ap;

  va_start (ap, tool);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, (gpointer)a);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  return run_toolv (stdin_text, out, err, tool, (const char *const *)args->pdata);
}

/* `sh -c SCRIPT sh ARGS...` on the host, asserting success; returns stdout, trimmed. */
static char *host_sh (const char *script, ...) G_GNUC_NULL_TERMINATED;

static char *
host_sh (const char *script, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *err = NULL;
  char *out = NULL;
  const char *a;
  int status = 0;
  va_list ap;

  g_ptr_array_add (argv, (gpointer) "sh");
  g_ptr_array_add (argv, (gpointer) "-c");
  g_ptr_array_add (argv, (gpointer)script);
  g_ptr_array_add (argv, (gpointer) "sh");
  va_start (ap, script);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer)a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  ck_assert (g_spawn_sync (tmp, (char **)argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                           &err, &status, &error));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "host script failed: %s\n%s", script,
                 err);
  return g_strstrip (out);
}

/* Runs @script with sh -c in the sandbox via namzu-exec; returns its exit status. */
static int
sh_in (const char *script, char **out)
{
  g_autofree char *err = NULL;
  int rc = run_tool (NULL, out, &err, "namzu-exec", "--sandbox", sandbox, "--", "sh", "-c", script,
                     NULL);

  ck_assert_msg (rc != 125, "namzu-exec failed: %s", err);
  return rc;
}

static void
sh_in_ok (const char *script)
{
  g_autofree char *out = NULL;

  ck_assert_msg (sh_in (script, &out) == 0, "in the sandbox: %s\n%s", script, out);
}

/* Trimmed stdout of @script in the sandbox. */
static char *
sh_in_out (const char *script)
{
  char *out = NULL;

  ck_assert_msg (sh_in (script, &out) == 0, "in the sandbox: %s", script);
  return g_strstrip (out);
}

/* A bare repository <up>/<name>.git on branch main with @n commits; returns HEAD. */
static char *
make_repo (const char *name, int n)
{
  g_autofree char *count = g_strdup_printf ("%d", n);

  return host_sh ("set -e; w=work-$1; git init -q -b main \"$w\"; i=0\n"
                  "while [ $i -lt $2 ]; do i=$((i+1)); echo \"$1 $i\" > \"$w/file\";\n"
                  "  git -C \"$w\" add file; git -C \"$w\" commit -q -m \"c$i\"; done\n"
                  "git clone -q --bare \"$w\" \"$3/$1.git\"\n"
                  "git -C \"$w\" rev-parse HEAD",
                  name, count, up, NULL);
}

/* Replaces <up>/<name>.git's main with an unrelated history (a force-push); returns its tip. */
static char *
force_push_new_history (const char *name)
{
  return host_sh ("set -e; w=work-$1; git -C \"$w\" checkout -q --orphan rewritten\n"
                  "echo rewritten > \"$w/file\"; git -C \"$w\" add file\n"
                  "git -C \"$w\" commit -q -m rewritten\n"
                  "git -C \"$w\" push -q -f \"$2/$1.git\" rewritten:main\n"
                  "git -C \"$w\" rev-parse HEAD",
                  name, up, NULL);
}

static void
new_session (gpointer user_data)
{
  setsid ();
}

/* Check runs a checked teardown only when the case passed: a failed assertion _exits the
 * forked case. So every case gets a reaper, in its own session (out of reach of Check's kill of
 * the case's process group), that waits for the case's process to go away, for whatever reason,
 * and then destroys every sandbox in the case's state directory and removes its files. Only
 * the case holds the write end of the reaper's stdin (GLib opens it close-on-exec). */
static void
start_reaper (void)
{
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE
                                   | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autofree char *destroy = nz_test_tool ("namzu-destroy");
  g_autoptr (GError) error = NULL;

  g_subprocess_launcher_set_child_setup (launcher, new_session, NULL, NULL);
  reaper = g_subprocess_launcher_spawn (
      launcher, &error, "sh", "-c",
      "read x; for d in \"$2\"/nz-*; do [ -d \"$d\" ] || continue; NAMZU_STATE_DIR=\"$2\" \"$1\" "
      "--sandbox \"${d##*/}\"; done; rm -rf -- \"$3\"",
      "sh", destroy, state, tmp, NULL);
  ck_assert_msg (reaper != NULL, "%s", error ? error->message : "");
}

static void
setup (void)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) h = NULL;
  int rc;

  tmp = g_dir_make_tmp ("nz-seed-e2e-XXXXXX", NULL);
  ck_assert (tmp != NULL);
  state = g_build_filename (tmp, "state", NULL);
  up = g_build_filename (tmp, "up", NULL);
  ck_assert_int_eq (g_mkdir (up, 0755), 0);
  start_reaper ();
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  /* The host's git config must not change what the test builds. */
  g_setenv ("GIT_CONFIG_NOSYSTEM", "1", TRUE);
  g_setenv ("GIT_CONFIG_GLOBAL", "/dev/null", TRUE);
  g_setenv ("GIT_AUTHOR_NAME", "t", TRUE);
  g_setenv ("GIT_AUTHOR_EMAIL", "t@example.invalid", TRUE);
  g_setenv ("GIT_COMMITTER_NAME", "t", TRUE);
  g_setenv ("GIT_COMMITTER_EMAIL", "t@example.invalid", TRUE);

  rc = run_tool (NULL, &out, &err, "namzu-create", "--uploads", up, NULL);
  ck_assert_msg (rc == 0, "namzu-create: %s", err);
  h = nz_json_parse_object (out, -1, NULL);
  ck_assert (h != NULL);
  sandbox = g_strdup (nz_json_get_string (h, "id"));
  sh_in_ok ("git config --global url.file:///mnt/user-data/uploads/.insteadOf " URL_BASE);
}

/* Runs only after a passing case: hand the cleanup to the reaper and wait for it. */
static void
teardown (void)
{
  ck_assert (g_output_stream_close (g_subprocess_get_stdin_pipe (reaper), NULL, NULL));
  ck_assert (g_subprocess_wait (reaper, NULL, NULL));
  ck_assert (!g_file_test (tmp, G_FILE_TEST_EXISTS));
  g_clear_object (&reaper);
  g_clear_pointer (&sandbox, g_free);
  g_clear_pointer (&up, g_free);
  g_clear_pointer (&state, g_free);
  g_clear_pointer (&tmp, g_free);
}

/* Writes @json to a file in tmp and returns its path. */
static char *
seed_file (const char *json)
{
  static guint n;
  g_autofree char *name = g_strdup_printf ("seed-%u.json", n++);
  char *path = g_build_filename (tmp, name, NULL);

  ck_assert (g_file_set_contents (path, json, -1, NULL));
  return path;
}

/* Runs namzu-seed --root ROOT on @json; returns the exit status and the one JSON document. */
static int
seed (const char *json, JsonObject **doc, char **err, const char *extra)
{
  g_autofree char *path = seed_file (json);
  g_autofree char *out = NULL;
  int rc;

  if (extra != NULL)
    rc = run_tool (NULL, &out, err, "namzu-seed", "--sandbox", sandbox, "--root", ROOT, extra, path,
                   NULL);
  else
    rc = run_tool (NULL, &out, err, "namzu-seed", "--sandbox", sandbox, "--root", ROOT, path, NULL);
  *doc = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (*doc != NULL, "stdout is not one JSON object: '%s'", out);
  ck_assert_msg (strchr (out, '\n') == out + strlen (out) - 1, "not one line: '%s'", out);
  return rc;
}

static JsonObject *
repo_report (JsonObject *doc, guint i)
{
  JsonArray *a = nz_json_get_array (doc, "repositories");

  ck_assert (a != NULL);
  ck_assert_uint_gt (json_array_get_length (a), i);
  return json_array_get_object_element (a, i);
}

static void
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

static const char *
error_code (JsonObject *doc)
{
  JsonObject *e = nz_json_get_object (doc, "error");

  return e != NULL ? nz_json_get_string (e, "code") : NULL;
}

static const char *
error_message (JsonObject *doc)
{
  JsonObject *e = nz_json_get_object (doc, "error");

  ck_assert (e != NULL);
  return nz_json_get_string (e, "message");
}

/* Nothing named *.namzu-partial-* anywhere under the root. */
static void
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
  rc = run_tool (two, &out, &err2, "namzu-seed", "--sandbox", sandbox, "--root", ROOT, "-", NULL);
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
  const char *one = "{\"name\":\"s\",\"repositories\":["
                    "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}";
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
  const char *r_only = "{\"name\":\"s\",\"repositories\":["
                       "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}";
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

static gboolean
sandbox_has (const char *test_expr)
{
  g_autofree char *out = NULL;
  g_autofree char *script = g_strdup_printf ("test %s", test_expr);

  return sh_in (script, &out) == 0;
}

/* namzu-seed is killed (SIGTERM) while git is inside the clone: the remote command is cancelled,
 * the repository is not in place, nothing of the clone is still running, and the next call
 * clones it whole. The clone is held mid-way, deterministically, by an upload-pack hook in the
 * sandbox user's git config that waits before packing. */
START_TEST (test_killed_clone)
{
  g_autofree char *head = make_repo ("r", 2);
  g_autofree char *path = seed_file ("{\"name\":\"s\",\"repositories\":["
                                     "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}");
  g_autofree char *tool = nz_test_tool ("namzu-seed");
  g_autofree char *out_path = g_build_filename (tmp, "killed.out", NULL);
  g_autofree char *out = NULL, *err = NULL, *lingering = NULL, *in = NULL;
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) doc = NULL;
  g_autoptr (JsonObject) again = NULL;
  int rc;

  sh_in_ok ("printf '#!/bin/sh\\ntouch /tmp/pack-started\\nsleep 600\\nexec \"$@\"\\n' > "
            "/home/namzu/slow-pack && chmod +x /home/namzu/slow-pack && git config --global "
            "uploadpack.packObjectsHook /home/namzu/slow-pack");
  g_subprocess_launcher_set_stdout_file_path (launcher, out_path);
  g_subprocess_launcher_set_stderr_file_path (launcher, "/dev/null");
  p = g_subprocess_launcher_spawn (launcher, &error, tool, "--sandbox", sandbox, "--root", ROOT,
                                   path, NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  for (int i = 0; i < 200 && !sandbox_has ("-e /tmp/pack-started"); i++)
    g_usleep (100 * 1000);
  ck_assert_msg (sandbox_has ("-e /tmp/pack-started"), "the clone never reached the pack");
  /* Mid-clone: the clone is in its partial, nothing at the repository's place. */
  ck_assert (!sandbox_has ("-e " ROOT "/r"));
  {
    g_autofree char *partial = sh_in_out ("ls -d " ROOT "/r.namzu-partial-*");

    ck_assert (g_regex_match_simple ("^" ROOT "/r\\.namzu-partial-[0-9a-f]{12}$", partial, 0, 0));
  }

  g_subprocess_send_signal (p, SIGTERM);
  ck_assert (g_subprocess_wait (p, NULL, &error));
  ck_assert (g_subprocess_get_if_exited (p));
  ck_assert_int_eq (g_subprocess_get_exit_status (p), 128 + SIGTERM);
  ck_assert (g_file_get_contents (out_path, &out, NULL, NULL));
  doc = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (doc != NULL, "stdout: %s", out);
  ck_assert_str_eq (error_code (doc), "cancelled");

  ck_assert (!sandbox_has ("-e " ROOT "/r"));
  lingering = sh_in_out ("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done "
                         "2>/dev/null | grep -c 'sleep 60[0]' || :");
  ck_assert_str_eq (lingering, "0");

  sh_in_ok ("git config --global --unset uploadpack.packObjectsHook");
  rc = seed ("{\"name\":\"s\",\"repositories\":["
             "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}",
             &again, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (again, 0, "r", "cloned", head);
  in = sh_in_out ("git -C " ROOT "/r rev-parse HEAD && git -C " ROOT "/r status --porcelain");
  ck_assert_str_eq (in, head);
}
END_TEST

/* Two calls on one root: the one that finishes second finds the repository in place, removes
 * its own partial, checks what it found and reports it present. The first call's clone is held
 * in its pack step until the second call is done. */
START_TEST (test_concurrent_calls_one_clone)
{
  g_autofree char *head = make_repo ("r", 2);
  const char *json = "{\"name\":\"s\",\"repositories\":["
                     "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}";
  g_autofree char *path = seed_file (json);
  g_autofree char *tool = nz_test_tool ("namzu-seed");
  g_autofree char *out_path = g_build_filename (tmp, "first.out", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) first = NULL;
  g_autoptr (JsonObject) second = NULL;
  int rc;

  sh_in_ok ("printf '#!/bin/sh\\nif mkdir /tmp/first 2>/dev/null; then touch /tmp/pack-started;"
            " while [ ! -e /tmp/release ]; do sleep 0.1; done; fi\\nexec \"$@\"\\n' > "
            "/home/namzu/hold-first && chmod +x /home/namzu/hold-first && git config --global "
            "uploadpack.packObjectsHook /home/namzu/hold-first");
  g_subprocess_launcher_set_stdout_file_path (launcher, out_path);
  g_subprocess_launcher_set_stderr_file_path (launcher, "/dev/null");
  p = g_subprocess_launcher_spawn (launcher, &error, tool, "--sandbox", sandbox, "--root", ROOT,
                                   path, NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  for (int i = 0; i < 200 && !sandbox_has ("-e /tmp/pack-started"); i++)
    g_usleep (100 * 1000);
  ck_assert_msg (sandbox_has ("-e /tmp/pack-started"), "the first clone never reached the pack");

  rc = seed (json, &second, &err, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, err);
  assert_repo (second, 0, "r", "cloned", head);

  sh_in_ok ("touch /tmp/release");
  ck_assert (g_subprocess_wait (p, NULL, &error));
  ck_assert (g_subprocess_get_if_exited (p));
  ck_assert (g_file_get_contents (out_path, &out, NULL, NULL));
  ck_assert_msg (g_subprocess_get_exit_status (p) == 0, "first call: %s", out);
  first = nz_json_parse_object (out, -1, NULL);
  ck_assert (first != NULL);
  assert_repo (first, 0, "r", "present", head);
  assert_no_partials ();
}
END_TEST

/* Progress lines appear when stderr is a terminal (script(1) gives the tool a pty), and the
 * JSON document is still the whole of stdout's content. */
START_TEST (test_progress_on_a_terminal)
{
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *path = seed_file ("{\"name\":\"s\",\"repositories\":["
                                     "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}");
  g_autofree char *tool = nz_test_tool ("namzu-seed");
  g_autofree char *seen = host_sh ("script -qec \"$1 --sandbox $2 --root $3 $4\" /dev/null", tool,
                                   sandbox, ROOT, path, NULL);

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
  const char *json = "{\"name\":\"s\",\"repositories\":["
                     "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}";
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

/* A repository that asks for credentials fails at once: no prompt, no askpass program and no
 * credential helper is consulted, though the sandbox user's git config names both. The server
 * is a 401-only HTTP server on the sandbox's own loopback, run through namzu-exec. */
START_TEST (test_credentials_never_asked)
{
  g_autofree char *server = g_build_filename (up, "auth.py", NULL);
  g_autofree char *tool = nz_test_tool ("namzu-exec");
  g_autofree char *port = NULL, *json = NULL, *err = NULL, *asked = NULL;
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) doc = NULL;
  int rc;

  ck_assert (
      g_file_set_contents (server,
                           "import http.server, os\n"
                           "class H(http.server.BaseHTTPRequestHandler):\n"
                           "    def do_GET(self):\n"
                           "        self.send_response(401)\n"
                           "        self.send_header('WWW-Authenticate', 'Basic realm=\"seed\"')\n"
                           "        self.send_header('Content-Length', '0')\n"
                           "        self.end_headers()\n"
                           "    def log_message(self, *a):\n"
                           "        pass\n"
                           "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
                           "open('/tmp/port.tmp', 'w').write(str(s.server_port))\n"
                           "os.rename('/tmp/port.tmp', '/tmp/port')\n"
                           "s.serve_forever()\n",
                           -1, NULL));
  sh_in_ok ("printf '#!/bin/sh\\ntouch /tmp/askpass-asked\\necho x\\n' > /home/namzu/askpass && "
            "chmod +x /home/namzu/askpass && git config --global core.askPass /home/namzu/askpass "
            "&& git config --global credential.helper "
            "'!f() { touch /tmp/helper-asked; echo username=x; echo password=y; }; f'");
  g_subprocess_launcher_set_stdout_file_path (launcher, "/dev/null");
  g_subprocess_launcher_set_stderr_file_path (launcher, "/dev/null");
  p = g_subprocess_launcher_spawn (launcher, &error, tool, "--sandbox", sandbox, "--", "python3",
                                   "/mnt/user-data/uploads/auth.py", NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  for (int i = 0; i < 200 && !sandbox_has ("-e /tmp/port"); i++)
    g_usleep (100 * 1000);
  port = sh_in_out ("cat /tmp/port");

  json = g_strdup_printf ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":"
                          "\"http://127.0.0.1:%s/r.git\"}]}",
                          port);
  rc = seed (json, &doc, &err, "--timeout=20000");
  ck_assert_msg (rc == 1, "exit %d: %s", rc, err);
  ck_assert_str_eq (error_code (doc), "clone-failed");
  ck_assert_msg (strstr (error_message (doc), "terminal prompts disabled") != NULL, "%s",
                 error_message (doc));
  asked = sh_in_out ("ls /tmp/askpass-asked /tmp/helper-asked 2>/dev/null; :");
  ck_assert_msg (*asked == '\0', "asked: %s", asked);

  g_subprocess_send_signal (p, SIGTERM);
  ck_assert (g_subprocess_wait (p, NULL, NULL));
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
      int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", sandbox, "--root",
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
        run_tool (NULL, NULL, &err, "namzu-seed", "--sandbox", sandbox, good_path, NULL), 2);
    ck_assert (strstr (err, "--root") != NULL);
    ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-seed", "--root", ROOT, NULL), 2);
  }
  /* A root the sandbox cannot write is refused by the preflight, naming the root. */
  {
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr (JsonObject) doc = NULL;
    int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", sandbox, "--root", "/usr/seeds",
                       good_path, NULL);

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

static Suite *
seed_suite (void)
{
  Suite *s = suite_create ("seed-e2e");
  TCase *tc = tcase_create ("bwrap");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_clone_then_present);
  tcase_add_test (tc, test_pinned_commit);
  tcase_add_test (tc, test_moved_ref_is_drift);
  tcase_add_test (tc, test_origin_and_occupied_drift);
  tcase_add_test (tc, test_killed_clone);
  tcase_add_test (tc, test_concurrent_calls_one_clone);
  tcase_add_test (tc, test_progress_on_a_terminal);
  tcase_add_test (tc, test_forged_marker);
  tcase_add_test (tc, test_credentials_never_asked);
  tcase_add_test (tc, test_stale_partial_swept);
  tcase_add_test (tc, test_refusals);
  tcase_add_test (tc, test_url_is_data);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  g_autofree char *git = g_find_program_in_path ("git");
  const char *dir = g_getenv ("NZ_TOOLS_DIR");
  g_autofree char *agent = g_build_filename (dir ? dir : ".", "namzu-agent", NULL);

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (git != NULL, "git is not installed");
  nz_test_require (g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE), "namzu-agent is not built");
  return nz_test_run (seed_suite ());
}
