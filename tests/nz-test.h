/* nz-test.h: shared test scaffolding. Check runs under meson as TAP (CK_TAP_LOG_FILE_NAME=-). */
#pragma once

#include <check.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

/* For main(), outside any test, where Check's ck_assert cannot report (it marks progress even
 * when it passes): aborts through g_error instead. */
#define NZ_TEST_REQUIRE(cond, ...)                                                           \
  do                                                                                         \
    {                                                                                        \
      if (!(cond))                                                                           \
        g_error (__VA_ARGS__);                                                               \
    }                                                                                        \
  while (0)

/* Runs @s and returns the process exit status. Cases fork (CK_FORK), so GLib state stays in
 * the child. */
static inline int
nz_test_run (Suite *s)
{
  SRunner *sr = srunner_create (s);
  int failed;

  srunner_run_all (sr, CK_ENV);
  failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* A test may skip only when its prerequisite is missing and CI is unset (STYLE.md). Under
 * CI=true a missing prerequisite is a failure. Call at the top of main(). */
static inline void
nz_test_require (gboolean have, const char *what)
{
  const char *ci = g_getenv ("CI");

  if (have)
    return;
  if (ci != NULL && *ci != '\0' && g_strcmp0 (ci, "false") != 0 && g_strcmp0 (ci, "0") != 0)
    {
      printf ("1..1\nnot ok 1 - prerequisite missing under CI: %s\n", what);
      exit (EXIT_FAILURE);
    }
  printf ("1..0 # SKIP %s\n", what);
  exit (EXIT_SUCCESS);
}

/* Path of a built tool: $NZ_TOOLS_DIR/<name> (set by tests/meson.build, never $PATH). */
static inline char *
nz_test_tool (const char *name)
{
  const char *dir = g_getenv ("NZ_TOOLS_DIR");

  ck_assert_msg (dir != NULL, "NZ_TOOLS_DIR is not set");
  return g_build_filename (dir, name, NULL);
}
