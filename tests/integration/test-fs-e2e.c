/* End to end for namzu-fs: on container:bwrap (real bubblewrap, the real agent, the file-ops
 * ops), and against a bare namzu-agent with file-ops hidden (NAMZU_AGENT_TEST_HIDE_FEATURES),
 * where the same commands go through execute (find/rm/mv) and must answer alike; and on
 * container:docker. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-json.h"
#include "sandbox-harness.h"

static void
setup (void)
{
  harness_begin ("/tmp/nz-fs-e2e-XXXXXX");
  harness_start_reaper (0);
}

static JsonObject *
fs (int want_rc, const char *const *args)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_toolv (NULL, &out, &err, "namzu-fs", args);
  JsonObject *obj;

  ck_assert_msg (rc == want_rc, "namzu-fs %s: rc %d: %s %s", args[0], rc, out, err);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (obj != NULL, "stdout is not one JSON object: %s", out);
  return obj;
}

static gboolean
has_path_suffix (JsonObject *r, const char *suffix)
{
  JsonArray *e = nz_json_get_array (r, "entries");

  for (guint i = 0; e != NULL && i < json_array_get_length (e); i++)
    if (g_str_has_suffix (nz_json_get_string (json_array_get_object_element (e, i), "path"),
                          suffix))
      return TRUE;
  return FALSE;
}

/* The shared assertions; @target is "--sandbox ID" or "--endpoint unix:…", @via what the
 * listing must say it used. */
static void
exercise (const char *opt, const char *val, const char *via)
{
#define ARGS(...) ((const char *const[]){ opt, val, __VA_ARGS__, NULL })
  g_autoptr (JsonObject) walk = fs (0, ARGS ("walk"));
  g_autoptr (JsonObject) hidden = fs (0, ARGS ("walk", "--all"));
  g_autoptr (JsonObject) shallow = fs (0, ARGS ("walk", "--depth", "1"));
  g_autoptr (JsonObject) bounded = fs (0, ARGS ("walk", "--max-entries", "1"));
  g_autoptr (JsonObject) limit = fs (1, ARGS ("walk", "--max-visited", "4"));
  g_autoptr (JsonObject) missing = fs (0, ARGS ("ls", "no/such"));
  g_autoptr (JsonObject) ls = fs (0, ARGS ("ls"));
  g_autoptr (JsonObject) st = fs (0, ARGS ("stat", "etc"));
  g_autoptr (JsonObject) st_missing = fs (1, ARGS ("stat", "nope"));
  g_autoptr (JsonObject) mv = fs (0, ARGS ("mv", "lf", "a/lf2"));
  g_autoptr (JsonObject) st_moved = fs (0, ARGS ("stat", "a/lf2"));
  g_autoptr (JsonObject) rm_link = fs (0, ARGS ("rm", "etc"));
  g_autoptr (JsonObject) rm_dir = fs (1, ARGS ("rm", "a"));
  g_autoptr (JsonObject) rm_root = fs (1, ARGS ("rm", "-r", "."));
  g_autoptr (JsonObject) rm_tree = fs (0, ARGS ("rm", "-r", "a"));
  g_autoptr (JsonObject) after = fs (0, ARGS ("walk", "--all"));
  g_autofree char *out = NULL, *err = NULL;

  if (via != NULL)
    ck_assert_str_eq (nz_json_get_string (walk, "via"), via);
  /* Regular files only; nothing through ld -> a or etc -> /etc. */
  ck_assert_uint_eq (json_array_get_length (nz_json_get_array (walk, "entries")), 2);
  ck_assert (has_path_suffix (walk, "/f1.txt") && has_path_suffix (walk, "/a/b/c.txt"));
  ck_assert (!has_path_suffix (walk, "/passwd"));
  ck_assert (has_path_suffix (hidden, "/a/.h/x") && has_path_suffix (hidden, "/.top"));
  ck_assert_uint_eq (json_array_get_length (nz_json_get_array (shallow, "entries")), 1);
  ck_assert_uint_eq (json_array_get_length (nz_json_get_array (bounded, "entries")), 1);
  ck_assert (nz_json_get_bool (bounded, "truncated", FALSE));
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (limit, "error"), "code"),
                    "ERR_FILE_WALK_LIMIT");
  ck_assert_uint_eq (json_array_get_length (nz_json_get_array (missing, "entries")), 0);
  ck_assert (has_path_suffix (ls, "/ld") && has_path_suffix (ls, "/a"));
  ck_assert (!has_path_suffix (ls, "/a/b"));
  ck_assert_str_eq (nz_json_get_string (st, "type"), "symlink");
  ck_assert_str_eq (nz_json_get_string (st, "target"), "/etc");
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (st_missing, "error"), "code"),
                    "not_found");
  ck_assert_str_eq (nz_json_get_string (st_moved, "type"), "symlink");
  ck_assert (nz_json_get_bool (rm_link, "removed", FALSE));
  ck_assert (nz_json_get_object (rm_dir, "error") != NULL);
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (rm_root, "error"), "code"),
                    "permission_denied");
  ck_assert (nz_json_get_bool (rm_tree, "removed", FALSE));
  ck_assert (!has_path_suffix (after, "/c.txt") && has_path_suffix (after, "/f1.txt"));
  /* Usage. */
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-fs", opt, val, "mv", "x", NULL), 2);
#undef ARGS
}

static const char tree[] = "mkdir -p a/b a/.h && echo one > f1.txt && echo three > a/b/c.txt "
                           "&& echo h > a/.h/x && echo t > .top && ln -s f1.txt lf && "
                           "ln -s a ld && ln -s /etc etc";

START_TEST (test_fs_bwrap)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *out = NULL;

  ck_assert_int_eq (sh_in_sandbox (id, tree, &out), 0);
  exercise ("--sandbox", id, "file-ops");
  {
    g_autoptr (JsonObject) esc
        = fs (1, (const char *const[]){ "--sandbox", id, "ls", "../", NULL });

    ck_assert_str_eq (nz_json_get_string (nz_json_get_object (esc, "error"), "code"),
                      "permission_denied");
  }
  destroy_ok (id);
}
END_TEST

/* A namzu-agent without file-ops: every verb through execute. */
START_TEST (test_fs_fallback)
{
  g_autofree char *ws = g_build_filename (harness.tmp, "ws", NULL);
  g_autofree char *sock = g_build_filename (harness.tmp, "a.sock", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  g_autofree char *script = g_strdup_printf ("cd '%s' && %s", ws, tree);
  FILE *f;
  GPid pid;

  ck_assert_int_eq (g_mkdir (ws, 0755), 0);
  ck_assert_int_eq (system (script), 0);
  pid = harness_start_agent (ws, sock, "file-ops", &f);
  exercise ("--endpoint", endpoint, "execute");
  harness_stop (pid, f);
}
END_TEST

/* container:docker: the worker image (its own find/rm/mv from Debian); an image without
 * file-ops takes the execute path, one with it the ops, and both must answer alike. */
START_TEST (test_fs_docker)
{
  const char *image = g_getenv ("NAMZU_WORKER_IMAGE");
  g_autoptr (JsonObject) pub = NULL;
  g_autofree char *out = NULL;
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  const char *id;

  /* The workload (uid namzu) writes there; umask must not narrow it. */
  ck_assert_int_eq (g_mkdir (outputs, 0777), 0);
  ck_assert_int_eq (chmod (outputs, 0777), 0);
  nz_test_require (g_file_test ("/var/run/docker.sock", G_FILE_TEST_EXISTS), "no docker daemon");
  pub = create_handle ("--backend", "container:docker", "--image",
                       image != NULL ? image : "namzu-worker:latest", "--network", "allow-all",
                       "--docker-network", "bridge", "--outputs", outputs, NULL);
  id = nz_json_get_string (pub, "id");
  {
    g_autofree char *script = g_strdup_printf ("(%s) 2>&1", tree);

    ck_assert_msg (sh_in_sandbox (id, script, &out) == 0, "%s", out);
  }
  exercise ("--sandbox", id, NULL);
  destroy_ok (id);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("fs-e2e");
  TCase *tc = tcase_create ("fs-e2e");

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_fs_bwrap);
  tcase_add_test (tc, test_fs_fallback);
  tcase_add_test (tc, test_fs_docker);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
