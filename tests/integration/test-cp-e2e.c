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
#include "../nz-test.h"

static char *tmp;
static char *state;
/* Every case's directory lives under this one, made in main(), so the parent can destroy
 * whatever a failed case left running: Check skips a checked teardown after a failure. */
static char base[] = "/tmp/nz-cp-e2e-XXXXXX";

static void
setup (void)
{
  tmp = g_build_filename (base, "case-XXXXXX", NULL);
  ck_assert (g_mkdtemp (tmp) != NULL);
  state = g_build_filename (tmp, "state", NULL);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  g_unsetenv ("NAMZU_BWRAP");
  g_unsetenv ("NAMZU_AGENT_BIN");
  g_unsetenv ("NAMZU_CGROUP_ROOT");
}

static int run_tool (const char *stdin_text, char **out, char **err, const char *tool, ...)
  G_GNUC_NULL_TERMINATED;

static void
teardown (void)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", tmp);
  const char *name;

  /* A failed assertion must not leave sandboxes running. */
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_BWRAP");
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    run_tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", name, NULL);
  ck_assert_int_eq (system (cmd), 0);
  g_clear_pointer (&state, g_free);
  g_clear_pointer (&tmp, g_free);
}

/* Runs a built tool with stdin, stdout and stderr on files (GLib 2.74's communicate() leaks),
 * and returns its exit status (128+N for a signal). */
static int
run_toolv (const char *stdin_text, char **out, char **err, const char *tool, va_list ap)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *in_path = g_build_filename (tmp, "stdin", NULL);
  g_autofree char *out_path = g_build_filename (tmp, "stdout", NULL);
  g_autofree char *err_path = g_build_filename (tmp, "stderr", NULL);
  const char *a;

  g_ptr_array_add (argv, nz_test_tool (tool));
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  g_ptr_array_add (argv, NULL);
  ck_assert (g_file_set_contents (in_path, stdin_text ? stdin_text : "", -1, NULL));
  /* GLib opens these without O_TRUNC: start from empty files. */
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
  va_list ap;
  int rc;

  va_start (ap, tool);
  rc = run_toolv (stdin_text, out, err, tool, ap);
  va_end (ap);
  return rc;
}

static guint
count_lines (const char *s)
{
  guint n = 0;

  for (; s != NULL && *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

/* namzu-create with @args (NULL-terminated), asserting success; returns the public handle. */
static JsonObject *
create (const char *first, ...)
{
  g_autofree char *out = NULL, *err = NULL;
  JsonObject *obj;
  va_list ap;
  int rc;

  va_start (ap, first);
  if (first == NULL)
    rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
  else
    {
      /* run_toolv takes the arguments after the tool name from @ap: put @first back. */
      g_autoptr (GPtrArray) args = g_ptr_array_new ();

      for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
        g_ptr_array_add (args, (gpointer)a);
      ck_assert_uint_le (args->len, 8);
      while (args->len < 8)
        g_ptr_array_add (args, NULL);
      rc = run_tool (NULL, &out, &err, "namzu-create", args->pdata[0], args->pdata[1],
                     args->pdata[2], args->pdata[3], args->pdata[4], args->pdata[5],
                     args->pdata[6], args->pdata[7], NULL);
    }
  va_end (ap);
  ck_assert_msg (rc == 0, "namzu-create failed (%d): %s", rc, err);
  ck_assert_msg (count_lines (out) == 1, "stdout: %s", out);
  /* Never the token on stdout. */
  ck_assert (strstr (out, "token") == NULL);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert (obj != NULL);
  ck_assert (g_str_has_prefix (nz_json_get_string (obj, "id"), "nz-"));
  ck_assert_str_eq (nz_json_get_string (obj, "backend"), "container:bwrap");
  ck_assert_str_eq (nz_json_get_string (obj, "tier"), "container");
  ck_assert (json_object_has_member (obj, "createdAt"));
  ck_assert (json_object_has_member (obj, "capabilities"));
  return obj;
}

/* Runs @script with sh -c in sandbox @id via namzu-exec; returns its exit status. */
static int
sh_in (const char *id, const char *script, char **out)
{
  g_autofree char *err = NULL;
  int rc = run_tool (NULL, out, &err, "namzu-exec", "--sandbox", id, "--", "sh", "-c", script,
                     NULL);

  /* 125 is namzu failing, never a command's answer in these tests */
  ck_assert_msg (rc != 125, "namzu-exec failed: %s", err);
  return rc;
}




static void
destroy_ok (const char *id)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) obj = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-destroy", "--sandbox", id, NULL);

  ck_assert_msg (rc == 0, "destroy: %s", err);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert (obj != NULL);
  ck_assert_str_eq (nz_json_get_string (obj, "id"), id);
  ck_assert (nz_json_get_bool (obj, "destroyed", FALSE));
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
  g_autoptr (JsonObject) pub = create (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *src = g_build_filename (tmp, "src.bin", NULL);
  g_autofree char *back = g_build_filename (tmp, "back.bin", NULL);
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
  ck_assert_int_eq (sh_in (id, "ls -a in/deep; ls -a", &out), 0);
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
  g_autoptr (JsonObject) pub = create (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) r = NULL;
  JsonArray *stopped;
  gboolean saw_sleep = FALSE;
  int rc;

  /* A process the workload detached into its own session: nothing tracks it but the scan. */
  ck_assert_int_eq (sh_in (id, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo started", &out), 0);
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
  ck_assert_int_eq (sh_in (id, "cat /proc/[0-9]*/comm 2>/dev/null", &out), 0);
  ck_assert_msg (strstr (out, "sleep") == NULL, "%s", out);
  destroy_ok (id);
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
            ">/dev/null 2>&1; done; rm -rf '%s'", base, dir ? dir : ".", base);
  if (system (cmd) != 0)
    fprintf (stderr, "cleanup of %s failed\n", base);
}

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  Suite *s = suite_create ("cp-e2e");
  TCase *tc = tcase_create ("cp-e2e");

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
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_cp_up_and_down);
  tcase_add_test (tc, test_quiesce_background);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
