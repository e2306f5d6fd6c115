/* Unit tests for the workspace jail (spec C.1): lexical resolution, root lists and the
 * realpath symlink check, against a real temporary directory tree. */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "nz-errors.h"
#include "nz-jail.h"
#include "../nz-test.h"

static char *
resolve_ok (NzJail *jail, const char *path, gboolean write)
{
  g_autoptr (GError) error = NULL;
  char *r = write ? nz_jail_resolve_write (jail, path, NULL, &error)
                  : nz_jail_resolve_read (jail, path, NULL, &error);

  ck_assert_msg (r != NULL, "%s: %s", path, error != NULL ? error->message : "?");
  return r;
}

static void
assert_escape (NzJail *jail, const char *path, int kind)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *r = NULL;

  if (kind == 0)
    r = nz_jail_resolve_read (jail, path, NULL, &error);
  else if (kind == 1)
    r = nz_jail_resolve_write (jail, path, NULL, &error);
  else
    r = nz_jail_resolve_cwd (jail, path, &error);
  ck_assert_msg (r == NULL, "%s resolved to %s", path, r);
  ck_assert_str_eq (error->message, "path escapes the workspace");
}

START_TEST (test_resolve_path)
{
  const char *cases[][3] = {
    { "/ws", "a/b", "/ws/a/b" }, { "/ws", "a/../b", "/ws/b" }, { "/ws", "./a//b/", "/ws/a/b" },
    { "/ws", "..", "/" },        { "/ws", "/x/../y", "/y" },   { "/ws", "", "/ws" },
    { "/", "..", "/" },          { "/ws/", "a/./.", "/ws/a" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *r = nz_jail_resolve_path (cases[i][0], cases[i][1]);

      ck_assert_str_eq (r, cases[i][2]);
    }
}
END_TEST

START_TEST (test_lexical)
{
  g_autoptr (NzJail) jail = nz_jail_new ("/ws/", " /extra/r : :/ws:/extra/r/", "/extra/w");
  g_autofree char *a = resolve_ok (jail, "a/b", FALSE);
  g_autofree char *b = resolve_ok (jail, "a/..", FALSE);
  g_autofree char *c = resolve_ok (jail, "/extra/r/file", FALSE);
  g_autofree char *d = resolve_ok (jail, "/extra/w/file", TRUE);
  g_autofree char *e = resolve_ok (jail, "/ws/x/../y", TRUE);
  g_autofree char *root = NULL;
  g_autofree char *f = nz_jail_resolve_read (jail, "/extra/r/z", &root, NULL);
  const char *const *rr = nz_jail_get_read_roots (jail);

  ck_assert_str_eq (nz_jail_get_workspace (jail), "/ws");
  ck_assert_str_eq (a, "/ws/a/b");
  ck_assert_str_eq (b, "/ws");
  ck_assert_str_eq (c, "/extra/r/file");
  ck_assert_str_eq (d, "/extra/w/file");
  ck_assert_str_eq (e, "/ws/y");
  ck_assert_str_eq (root, "/extra/r");
  /* Trimmed, empties dropped, resolved and de-duplicated; the workspace first. */
  ck_assert_str_eq (rr[0], "/ws");
  ck_assert_str_eq (rr[1], "/extra/r");
  ck_assert_ptr_null (rr[2]);

  assert_escape (jail, "../x", 0);
  assert_escape (jail, "a/../../x", 1);
  assert_escape (jail, "/ws2/x", 0); /* sibling prefix */
  assert_escape (jail, "/etc/passwd", 0);
  assert_escape (jail, "/extra/w/f", 0); /* a write root is not a read root */
  assert_escape (jail, "/extra/r/f", 1); /* and vice versa */
  /* A relative path never means an extra root. */
  assert_escape (jail, "../extra/r/f", 0);
}
END_TEST

START_TEST (test_cwd)
{
  g_autoptr (NzJail) jail = nz_jail_new ("/ws", "/extra", "/extra");
  g_autofree char *a = nz_jail_resolve_cwd (jail, "sub/dir", NULL);
  g_autofree char *b = nz_jail_resolve_cwd (jail, "/ws/abs", NULL);

  ck_assert_str_eq (a, "/ws/sub/dir");
  ck_assert_str_eq (b, "/ws/abs");
  /* cwd only ever lands in the workspace itself. */
  assert_escape (jail, "/extra", 2);
  assert_escape (jail, "..", 2);
  assert_escape (jail, "/tmp", 2);
}
END_TEST

START_TEST (test_realpath)
{
  g_autofree char *base = g_dir_make_tmp ("nz-jail-XXXXXX", NULL);
  g_autofree char *ws = g_build_filename (base, "ws", NULL);
  g_autofree char *outside = g_build_filename (base, "outside", NULL);
  g_autofree char *inner = g_build_filename (ws, "inner", NULL);
  g_autofree char *link_out = g_build_filename (ws, "out", NULL);
  g_autofree char *link_in = g_build_filename (ws, "in", NULL);
  g_autofree char *via_out = g_build_filename (link_out, "secret", NULL);
  g_autofree char *via_in = g_build_filename (link_in, "f", NULL);
  g_autofree char *new_file = g_build_filename (ws, "new-file", NULL);
  g_autofree char *missing_parent = g_build_filename (ws, "nodir", "f", NULL);
  g_autofree char *expect_in = g_build_filename (inner, "f", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *r1 = NULL;
  g_autofree char *r2 = NULL;
  g_autofree char *r3 = NULL;
  g_autofree char *r4 = NULL;
  g_autofree char *r5 = NULL;

  ck_assert_int_eq (g_mkdir_with_parents (inner, 0700), 0);
  ck_assert_int_eq (g_mkdir_with_parents (outside, 0700), 0);
  ck_assert_int_eq (symlink (outside, link_out), 0);
  ck_assert_int_eq (symlink ("inner", link_in), 0);

  r1 = nz_jail_realpath_within (via_out, ws, &error);
  ck_assert_ptr_null (r1);
  ck_assert_str_eq (error->message, "symlink escapes the workspace");
  g_clear_error (&error);

  /* The link itself, resolved, is outside too. */
  r2 = nz_jail_realpath_within (link_out, ws, &error);
  ck_assert_ptr_null (r2);
  ck_assert_str_eq (error->message, "symlink escapes the workspace");
  g_clear_error (&error);

  r3 = nz_jail_realpath_within (via_in, ws, &error);
  ck_assert_msg (r3 != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (r3, expect_in);

  r4 = nz_jail_realpath_within (new_file, ws, &error);
  ck_assert_ptr_nonnull (r4);
  ck_assert_str_eq (r4, new_file);

  r5 = nz_jail_realpath_within (missing_parent, ws, &error);
  ck_assert_ptr_null (r5);
  ck_assert (g_str_has_prefix (error->message, "ENOENT: no such file or directory, realpath '"));
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_NOT_FOUND));
}
END_TEST

/* The race-free opens, by openat2 (_i == 0) and by the O_NOFOLLOW walk a kernel without it
 * gets (_i == 1): nothing followed, nothing outside, inside symlinks still honoured by the
 * realpath step before the open. */
START_TEST (test_open_beneath)
{
  g_autofree char *base = g_dir_make_tmp ("nz-jail-XXXXXX", NULL);
  g_autofree char *ws = g_build_filename (base, "ws", NULL);
  g_autofree char *outside = g_build_filename (base, "outside", NULL);
  g_autofree char *deep = g_build_filename (ws, "a", "b", NULL);
  g_autofree char *f = g_build_filename (deep, "f", NULL);
  g_autofree char *secret = g_build_filename (outside, "secret", NULL);
  g_autofree char *link_in = g_build_filename (ws, "l", NULL);
  g_autofree char *link_out = g_build_filename (ws, "out", NULL);
  g_autofree char *via_in = g_build_filename (ws, "l", "b", "f", NULL);
  g_autofree char *via_out = g_build_filename (ws, "out", "secret", NULL);
  g_autofree char *mk_in = g_build_filename (ws, "l", "x", "y", NULL);
  g_autofree char *mk_in_real = g_build_filename (ws, "a", "x", "y", NULL);
  g_autofree char *mk_out = g_build_filename (ws, "out", "zz", NULL);
  g_autofree char *mk_out_real = g_build_filename (outside, "zz", NULL);
  g_autofree char *real = NULL;
  g_autofree char *cwd = NULL;
  g_autofree char *link = NULL;
  g_autoptr (NzJail) jail = NULL;
  g_autoptr (GError) error = NULL;
  int root, fd;
  char buf[16] = { 0 };

  nz_jail_set_force_walk (_i == 1);
  ck_assert_int_eq (g_mkdir_with_parents (deep, 0700), 0);
  ck_assert_int_eq (g_mkdir_with_parents (outside, 0700), 0);
  ck_assert (g_file_set_contents (f, "in", -1, NULL));
  ck_assert (g_file_set_contents (secret, "out", -1, NULL));
  ck_assert_int_eq (symlink ("a", link_in), 0);
  ck_assert_int_eq (symlink (outside, link_out), 0);
  root = open (ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
  ck_assert_int_ge (root, 0);

  /* The low level: no symlink at all, never "..", the root itself as ".". */
  fd = nz_jail_openat_beneath (root, "a/b/f", O_RDONLY, 0);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (read (fd, buf, sizeof buf), 2);
  close (fd);
  errno = 0;
  ck_assert_int_lt (nz_jail_openat_beneath (root, "l/b/f", O_RDONLY, 0), 0);
  ck_assert_int_eq (errno, ELOOP);
  ck_assert_int_lt (nz_jail_openat_beneath (root, "out/secret", O_RDONLY, 0), 0);
  ck_assert_int_lt (nz_jail_openat_beneath (root, "out", O_PATH | O_DIRECTORY, 0), 0);
  ck_assert_int_lt (nz_jail_openat_beneath (root, "l", O_PATH, 0), 0);
  ck_assert_int_eq (errno, ELOOP);
  ck_assert_int_lt (nz_jail_openat_beneath (root, "../outside/secret", O_RDONLY, 0), 0);
  ck_assert_int_eq (errno, EXDEV);
  /* ".." that stays inside: openat2 allows it, the walk refuses every ".." (callers only ever
   * pass real paths, which have none) -- which also proves which path ran. */
  fd = nz_jail_openat_beneath (root, "a/../a/b/f", O_RDONLY, 0);
  if (_i == 0)
    ck_assert_int_ge (fd, 0);
  else
    ck_assert_int_lt (fd, 0);
  if (fd >= 0)
    close (fd);
  fd = nz_jail_openat_beneath (root, ".", O_RDONLY | O_DIRECTORY, 0);
  ck_assert_int_ge (fd, 0);
  close (fd);
  fd = nz_jail_openat_beneath (root, "a/new", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge (fd, 0);
  close (fd);
  close (root);

  /* The jailed open: inside symlinks by the realpath step, a swapped one refused. */
  fd = nz_jail_open_within (via_in, ws, O_RDONLY, 0, &real, &error);
  ck_assert_msg (fd >= 0, "%s", error ? error->message : "");
  ck_assert_str_eq (real, f);
  close (fd);
  ck_assert_int_lt (nz_jail_open_within (via_out, ws, O_RDONLY, 0, NULL, &error), 0);
  ck_assert_str_eq (error->message, "symlink escapes the workspace");
  g_clear_error (&error);
  /* A dangling link inside reads as no file, as before. */
  {
    g_autofree char *dangling = g_build_filename (ws, "dang", NULL);

    ck_assert_int_eq (symlink ("nothere", dangling), 0);
    ck_assert_int_lt (nz_jail_open_within (dangling, ws, O_RDONLY, 0, NULL, &error), 0);
    ck_assert_msg (g_str_has_prefix (error->message, "ENOENT: no such file or directory, open '"),
                   "%s", error->message);
    g_clear_error (&error);
  }

  /* mkdir -p: through an inside link, yes; through an outside one, refused, nothing made. */
  ck_assert_msg (nz_jail_mkdir_p_within (mk_in, ws, &error), "%s", error ? error->message : "");
  ck_assert (g_file_test (mk_in_real, G_FILE_TEST_IS_DIR));
  ck_assert (!nz_jail_mkdir_p_within (mk_out, ws, &error));
  ck_assert_str_eq (error->message, "symlink escapes the workspace");
  g_clear_error (&error);
  ck_assert (!g_file_test (mk_out_real, G_FILE_TEST_EXISTS));
  ck_assert (!nz_jail_mkdir_p_within (f, ws, &error));
  ck_assert (g_str_has_prefix (error->message, "ENOTDIR: "));
  g_clear_error (&error);

  /* A cwd is the opened directory itself. */
  jail = nz_jail_new (ws, NULL, NULL);
  cwd = nz_jail_enter_cwd (jail, "l/x", &fd, &error);
  ck_assert_msg (cwd != NULL, "%s", error ? error->message : "");
  link = g_file_read_link (cwd, NULL);
  {
    g_autofree char *want = g_build_filename (ws, "a", "x", NULL);

    ck_assert_str_eq (link, want);
  }
  close (fd);
  ck_assert_ptr_null (nz_jail_enter_cwd (jail, "out", &fd, &error));
  ck_assert_str_eq (error->message, "symlink escapes the workspace");
  ck_assert_int_eq (fd, -1);
  nz_jail_set_force_walk (FALSE);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("jail");
  TCase *tc = tcase_create ("jail");

  tcase_add_test (tc, test_resolve_path);
  tcase_add_test (tc, test_lexical);
  tcase_add_test (tc, test_cwd);
  tcase_add_test (tc, test_realpath);
  tcase_add_loop_test (tc, test_open_beneath, 0, 2);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
