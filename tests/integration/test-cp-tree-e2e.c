/* End to end for namzu-cp -r: directory trees into and out of container:bwrap (real
 * bubblewrap, the real agent, its file-tree-ops), a bare namzu-agent with file-ops and
 * file-tree-ops hidden (every verb through execute: find, install, ln, chmod), and
 * container:docker; plus a fake agent that lies (tests/fakes/tree-agent.py): whatever a
 * workload makes its agent reply, nothing lands outside the destination. */
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
  harness_begin ("/tmp/nz-cp-tree-XXXXXX");
  harness_start_reaper (0);
}

static JsonObject *
cp (int want_rc, const char *const *args, char **err_out)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_toolv (NULL, &out, &err, "namzu-cp", args);
  JsonObject *obj;

  ck_assert_msg (rc == want_rc, "namzu-cp %s %s: rc %d: %s %s", args[2], args[3], rc, out, err);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (obj != NULL, "stdout is not one JSON object: %s", out);
  if (err_out != NULL)
    *err_out = g_steal_pointer (&err);
  return obj;
}

/* "<path> <type> <mode> <link target>" of every entry below @dir but FIFOs, sorted, then the
 * files' checksums: what a faithful copy keeps. */
#define LISTING                                                                                    \
  "cd \"$1\" && find . -mindepth 1 ! -type p -printf '%P %y %m %l\\n' | LC_ALL=C sort && "         \
  "find . -type f -exec md5sum {} + | LC_ALL=C sort"

static char *
host_listing (const char *dir)
{
  return host_sh (LISTING, dir, NULL);
}

/* The tree a copy starts from: modes from 0600 to 0755, an executable, an empty and a
 * read-only directory, hidden names, a relative and an absolute link, a link to a host
 * directory holding a secret (copied as a link, never followed), a set-user-ID file (its bit
 * does not travel) and a FIFO (skipped). */
static char *
make_tree (void)
{
  g_autofree char *src = g_build_filename (harness.tmp, "src", NULL);
  g_autofree char *secret = g_build_filename (harness.tmp, "secret", NULL);
  g_autofree char *out = host_sh (
      "mkdir -p \"$1/a/b\" \"$1/empty\" \"$1/.hid\" \"$1/ro\" \"$2\" && "
      "echo hello > \"$1/a/b/f.txt\" && chmod 600 \"$1/a/b/f.txt\" && "
      "printf '#!/bin/sh\\necho ran\\n' > \"$1/run.sh\" && chmod 755 \"$1/run.sh\" && "
      "echo s > \"$1/suid\" && chmod 4755 \"$1/suid\" && "
      "echo h > \"$1/.hid/h\" && echo r > \"$1/ro/r\" && chmod 555 \"$1/ro\" && "
      "head -c 700000 /dev/urandom > \"$1/a/big.bin\" && "
      "ln -s a/b/f.txt \"$1/link\" && ln -s /etc/passwd \"$1/abs\" && "
      "echo TOPSECRET > \"$2/secret.txt\" && ln -s \"$2\" \"$1/hostlink\" && mkfifo \"$1/fifo\"",
      src, secret, NULL);

  return g_steal_pointer (&src);
}

/* The listing a copy of make_tree() must have: the source's, without the set-user-ID bit. */
static char *
expected_listing (const char *src)
{
  g_autofree char *l = host_listing (src);
  g_autoptr (GString) s = g_string_new (l);

  ck_assert (g_string_replace (s, "suid f 4755", "suid f 755", 1) == 1);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

static void
check_result (JsonObject *r, const char *direction, gint64 skipped)
{
  ck_assert_str_eq (nz_json_get_string (r, "direction"), direction);
  ck_assert_int_eq (json_object_get_int_member (r, "files"), 6);
  ck_assert_int_eq (json_object_get_int_member (r, "directories"), 6);
  ck_assert_int_eq (json_object_get_int_member (r, "symlinks"), 3);
  ck_assert_int_eq (json_object_get_int_member (r, "skipped"), skipped);
  ck_assert_int_eq (json_object_get_int_member (r, "bytes"), 6 + 19 + 2 + 2 + 2 + 700000);
}

/* The shared round trip; @opt @val pick the sandbox or the endpoint, @where is a sandbox
 * directory the workload may write (relative to its cwd). */
static void
exercise (const char *opt, const char *val, const char *where, const char *sandbox)
{
  g_autofree char *src = make_tree ();
  g_autofree char *want = expected_listing (src);
  g_autofree char *remote = g_strdup_printf (":%s/dst", where);
  g_autofree char *remote_dir = g_strdup_printf (":%s/", where);
  g_autofree char *back = g_build_filename (harness.tmp, "back", NULL);
  g_autofree char *into = g_build_filename (harness.tmp, "into", NULL);
  g_autofree char *err = NULL;
  g_autofree char *got = NULL;
  g_autoptr (JsonObject) up
      = cp (0, (const char *const[]){ opt, val, "-r", src, remote, NULL }, &err);
  g_autoptr (JsonObject) down = NULL;
  g_autoptr (JsonObject) up2 = NULL;
  g_autoptr (JsonObject) down2 = NULL;

  check_result (up, "upload", 1);
  ck_assert_msg (strstr (err, "skipping") != NULL && strstr (err, "fifo") != NULL, "%s", err);
  ck_assert (g_str_has_suffix (nz_json_get_string (up, "destination"), "/dst"));
  if (sandbox != NULL)
    {
      g_autofree char *script = g_strdup_printf ("cd %s/dst && ./run.sh && cat link && "
                                                 "! grep -r TOPSECRET . && test -L hostlink",
                                                 where);
      g_autofree char *out = NULL;

      ck_assert_msg (sh_in_sandbox (sandbox, script, &out) == 0, "%s", out);
      ck_assert_msg (strstr (out, "ran") != NULL && strstr (out, "hello") != NULL, "%s", out);
    }
  /* Out again: the same tree, modes and links as they were. */
  down = cp (0, (const char *const[]){ opt, val, "-r", remote, back, NULL }, NULL);
  check_result (down, "download", 0);
  ck_assert_str_eq (nz_json_get_string (down, "destination"), back);
  got = host_listing (back);
  ck_assert_str_eq (got, want);
  /* Into existing directories, cp -r's way: DST/<name>, both directions. */
  ck_assert_int_eq (g_mkdir (into, 0755), 0);
  down2 = cp (0, (const char *const[]){ opt, val, "-r", remote, into, NULL }, NULL);
  ck_assert (g_str_has_suffix (nz_json_get_string (down2, "destination"), "/into/dst"));
  up2 = cp (0, (const char *const[]){ opt, val, "-r", src, remote_dir, NULL }, NULL);
  ck_assert (g_str_has_suffix (nz_json_get_string (up2, "destination"), "/src"));
  {
    g_autofree char *sub = g_build_filename (into, "dst", NULL);
    g_autofree char *got2 = host_listing (sub);

    ck_assert_str_eq (got2, want);
  }
}

/* What the workload plants: a set-user-ID file (its bit stays in the sandbox), and a local
 * destination that already holds a symlink where the tree has a directory: refused, never
 * written through. */
static void
exercise_planted (const char *opt, const char *val, const char *where, const char *sandbox)
{
  g_autofree char *script
      = g_strdup_printf ("mkdir -p %s/p/a && echo x > %s/p/a/f && echo s > %s/p/s && "
                         "chmod 4755 %s/p/s && ln -s / %s/p/root",
                         where, where, where, where, where);
  g_autofree char *remote = g_strdup_printf (":%s/p", where);
  g_autofree char *dest = g_build_filename (harness.tmp, "planted", NULL);
  g_autofree char *victim = g_build_filename (harness.tmp, "victim", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) ok = NULL;
  g_autoptr (JsonObject) refused = NULL;
  struct stat st;

  ck_assert_msg (sh_in_sandbox (sandbox, script, &out) == 0, "%s", out);
  ok = cp (0, (const char *const[]){ opt, val, "-r", remote, dest, NULL }, NULL);
  {
    g_autofree char *s = g_build_filename (dest, "s", NULL);
    g_autofree char *root = g_build_filename (dest, "root", NULL);

    ck_assert_int_eq (stat (s, &st), 0);
    ck_assert_int_eq (st.st_mode & 07777, 0755);
    ck_assert_int_eq (lstat (root, &st), 0);
    ck_assert (S_ISLNK (st.st_mode));
  }
  /* Again (into DEST/p, DEST being a directory now) where "a" is a link to a victim
   * directory. */
  g_free (host_sh ("rm -rf \"$1\" && mkdir -p \"$1/p\" \"$2\" && ln -s \"$2\" \"$1/p/a\"", dest,
                   victim, NULL));
  refused = cp (1, (const char *const[]){ opt, val, "-r", remote, dest, NULL }, &err);
  ck_assert_msg (strstr (err, "not a directory (not followed)") != NULL, "%s", err);
  {
    g_autofree char *left = host_sh ("ls -A \"$1\"", victim, NULL);

    ck_assert_str_eq (left, "");
  }
}

START_TEST (test_tree_bwrap)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");

  exercise ("--sandbox", id, ".", id);
  exercise_planted ("--sandbox", id, ".", id);
  /* A sandbox path that escapes the jail is refused like any file op. */
  {
    g_autofree char *src = g_build_filename (harness.tmp, "src", NULL);
    g_autofree char *err = NULL;
    g_autoptr (JsonObject) esc
        = cp (1, (const char *const[]){ "--sandbox", id, "-r", src, ":../x", NULL }, &err);

    ck_assert_str_eq (nz_json_get_string (nz_json_get_object (esc, "error"), "code"),
                      "permission_denied");
  }
  destroy_ok (id);
}
END_TEST

/* A namzu-agent without file-ops and file-tree-ops: every verb through execute. */
START_TEST (test_tree_fallback)
{
  g_autofree char *ws = g_build_filename (harness.tmp, "ws", NULL);
  g_autofree char *sock = g_build_filename (harness.tmp, "a.sock", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  FILE *f;
  GPid pid;

  ck_assert_int_eq (g_mkdir (ws, 0755), 0);
  pid = harness_start_agent (ws, sock, "file-ops,file-tree-ops", &f);
  exercise ("--endpoint", endpoint, ".", NULL);
  /* The agent ran the fallback commands in its workspace: the copy is there. */
  {
    g_autofree char *dst = g_build_filename (ws, "dst", NULL);
    g_autofree char *src = g_build_filename (harness.tmp, "src", NULL);
    g_autofree char *want = expected_listing (src);
    g_autofree char *got = host_listing (dst);

    ck_assert_str_eq (got, want);
  }
  harness_stop (pid, f);
}
END_TEST

/* container:docker: the worker has no file-ops, so its Debian find/install/ln/chmod. */
START_TEST (test_tree_docker)
{
  const char *image = g_getenv ("NAMZU_WORKER_IMAGE");
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  g_autoptr (JsonObject) pub = NULL;
  const char *id;

  nz_test_require (g_file_test ("/var/run/docker.sock", G_FILE_TEST_EXISTS), "no docker daemon");
  ck_assert_int_eq (g_mkdir (outputs, 0777), 0);
  ck_assert_int_eq (chmod (outputs, 0777), 0);
  pub = create_handle ("--backend", "container:docker", "--image",
                       image != NULL ? image : "namzu-worker:latest", "--outputs", outputs, NULL);
  id = nz_json_get_string (pub, "id");
  exercise ("--sandbox", id, ".", id);
  exercise_planted ("--sandbox", id, ".", id);
  destroy_ok (id);
}
END_TEST

/* A fake agent with a scripted listing (tests/fakes/tree-agent.py): every lie is refused
 * before anything is written, and the honest listing is copied without following its link. */
static const char *const hostile_scenarios[] = { "dotdot",
                                                 "dotdot-inner",
                                                 "outside",
                                                 "prefix",
                                                 "the-root",
                                                 "dot",
                                                 "empty-component",
                                                 "below-symlink",
                                                 "below-symlink-dir",
                                                 "below-file",
                                                 "unlisted-parent",
                                                 "twice",
                                                 "other-root",
                                                 NULL };

static GPid
start_tree_agent (const char *sock, const char *scenario, FILE **out)
{
  g_autofree char *fake
      = g_build_filename (g_getenv ("NZ_SOURCE_DIR"), "tests", "fakes", "tree-agent.py", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  const char *argv[] = { "python3", fake, endpoint, scenario, NULL };

  return harness_spawn_listening (argv, NULL, out);
}

START_TEST (test_tree_hostile_listing)
{
  const char *scenario = hostile_scenarios[_i];
  g_autofree char *sock = g_build_filename (harness.tmp, "t.sock", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  g_autofree char *box = g_build_filename (harness.tmp, "box", NULL);
  g_autofree char *dest = g_build_filename (box, "out", NULL);
  g_autofree char *err = NULL;
  g_autofree char *left = NULL;
  g_autoptr (JsonObject) r = NULL;
  FILE *f;
  GPid pid = start_tree_agent (sock, scenario, &f);

  g_setenv ("NAMZU_TOKEN", "t", TRUE);
  ck_assert_int_eq (g_mkdir (box, 0755), 0);
  r = cp (1, (const char *const[]){ "--endpoint", endpoint, "-r", ":d", dest, NULL }, &err);
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (r, "error"), "code"), "protocol");
  ck_assert_msg (strstr (err, "the agent") != NULL, "%s: %s", scenario, err);
  /* Nothing at all: not the destination, not an escape beside it or above it. */
  left = host_sh ("find \"$1\" -mindepth 1; find \"$2\" /tmp/escape -name escape 2>/dev/null; true",
                  box, harness.tmp, NULL);
  ck_assert_msg (*left == '\0', "%s left: %s", scenario, left);
  harness_stop (pid, f);
}
END_TEST

START_TEST (test_tree_honest_fake)
{
  g_autofree char *sock = g_build_filename (harness.tmp, "t.sock", NULL);
  g_autofree char *endpoint = g_strconcat ("unix:", sock, NULL);
  g_autofree char *dest = g_build_filename (harness.tmp, "out", NULL);
  g_autofree char *got = NULL;
  g_autoptr (JsonObject) r = NULL;
  FILE *f;
  GPid pid = start_tree_agent (sock, "good", &f);

  g_setenv ("NAMZU_TOKEN", "t", TRUE);
  r = cp (0, (const char *const[]){ "--endpoint", endpoint, "-r", ":d", dest, NULL }, NULL);
  ck_assert_int_eq (json_object_get_int_member (r, "files"), 1);
  ck_assert_int_eq (json_object_get_int_member (r, "symlinks"), 1);
  got = host_listing (dest);
  ck_assert_str_eq (got, "a d 755 \na/up l 777 ../../..\na/x f 644 \n"
                         "e26d9050a8a01a25048a2d61cabedbcf  ./a/x");
  harness_stop (pid, f);
}
END_TEST

START_TEST (test_tree_usage)
{
  g_autofree char *out = NULL, *err = NULL;

  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-cp", "--endpoint", "unix:/nonexistent", "-r",
                              "-", ":x", NULL),
                    2);
  ck_assert_msg (strstr (err, "-r copies a directory") != NULL, "%s", err);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("cp-tree-e2e");
  TCase *tc = tcase_create ("cp-tree-e2e");

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) is not installed");
  nz_test_require_program ("python3", "python3 is not installed");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 180);
  tcase_add_test (tc, test_tree_bwrap);
  tcase_add_test (tc, test_tree_fallback);
  tcase_add_test (tc, test_tree_docker);
  tcase_add_loop_test (tc, test_tree_hostile_listing, 0,
                       g_strv_length ((char **)hostile_scenarios));
  tcase_add_test (tc, test_tree_honest_fake);
  tcase_add_test (tc, test_tree_usage);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
