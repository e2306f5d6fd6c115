/* Every tool honours the CLI contract's basics: --help on stdout and exit 0, --version, and a
 * bad option exits 2 with "Try '--help'" (STYLE.md: a --help/--version test for every program). */
#include <string.h>

#include "nz-config.h"
#include "../nz-test.h"

static char **tools;

static void
run (const char *tool, const char *arg, char **out, char **err, int *status)
{
  g_autofree char *path = nz_test_tool (tool);
  const char *argv[] = { path, arg, NULL };
  g_autoptr (GError) error = NULL;

  ck_assert_msg (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, out, err,
                               status, &error),
                 "spawn %s: %s", path, error ? error->message : "");
}

START_TEST (test_help)
{
  const char *tool = tools[_i];
  g_autofree char *out = NULL, *err = NULL;
  int status;

  run (tool, "--help", &out, &err, &status);
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "%s --help failed: %s", tool, err);
  ck_assert_msg (strstr (out, "Usage:") != NULL, "%s --help has no Usage: %s", tool, out);
  ck_assert_msg (strstr (out, tool) != NULL, "%s --help does not name the tool", tool);
}
END_TEST

START_TEST (test_version)
{
  const char *tool = tools[_i];
  g_autofree char *out = NULL, *err = NULL;
  /* The worker adds one line: the libsoup it carries (static or shared, docs/worker.md). */
  g_autofree char *want
      = g_strcmp0 (tool, "namzu-worker") == 0
            ? g_strdup_printf ("%s %s\n%s\n", tool, NZ_VERSION, NZ_LIBSOUP_LINKAGE)
            : g_strdup_printf ("%s %s\n", tool, NZ_VERSION);
  int status;

  run (tool, "--version", &out, &err, &status);
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "%s --version failed: %s", tool, err);
  ck_assert_str_eq (out, want);
}
END_TEST

START_TEST (test_bad_option)
{
  const char *tool = tools[_i];
  g_autofree char *out = NULL, *err = NULL;
  int status;

  run (tool, "--no-such-option", &out, &err, &status);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 2, "%s: bad option status %d",
                 tool, status);
  ck_assert_msg (strstr (err, "Try '") != NULL && strstr (err, "--help") != NULL,
                 "%s: no Try '--help' hint: %s", tool, err);
  ck_assert_str_eq (out, "");
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("cli");
  TCase *tc = tcase_create ("cli");
  const char *list = g_getenv ("NZ_TOOLS");
  int n;

  nz_test_require (list != NULL && *list != '\0', "NZ_TOOLS lists no tools");
  tools = g_strsplit (list, " ", -1);
  n = (int)g_strv_length (tools);
  tcase_add_loop_test (tc, test_help, 0, n);
  tcase_add_loop_test (tc, test_version, 0, n);
  tcase_add_loop_test (tc, test_bad_option, 0, n);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
