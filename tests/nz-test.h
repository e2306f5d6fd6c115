/* nz-test.h: shared test scaffolding. Check runs under meson as TAP (CK_TAP_LOG_FILE_NAME=-). */
#pragma once

#include <check.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* A fresh private directory as $NAMZU_STATE_DIR, for a checked fixture's setup (the case runs
 * in a child of its own); nz_test_state_dir_remove() for its teardown. */
static inline char *
nz_test_state_dir_make (const char *tmpl)
{
  char *dir = g_dir_make_tmp (tmpl, NULL);

  ck_assert (dir != NULL);
  g_setenv ("NAMZU_STATE_DIR", dir, TRUE);
  return dir;
}

static inline void
nz_test_state_dir_remove (char **dir)
{
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", *dir);

  ck_assert (system (cmd) == 0);
  g_clear_pointer (dir, g_free);
}

/* CI is set (and not "false" or "0"): .ci/run, where every prerequisite is installed. */
static inline gboolean
nz_test_under_ci (void)
{
  const char *ci = g_getenv ("CI");

  return ci != NULL && *ci != '\0' && g_strcmp0 (ci, "false") != 0 && g_strcmp0 (ci, "0") != 0;
}

/* A test may skip only when its prerequisite is missing and CI is unset (STYLE.md). Under
 * CI=true a missing prerequisite is a failure. Call at the top of main(). */
static inline void
nz_test_require (gboolean have, const char *what)
{
  if (have)
    return;
  if (nz_test_under_ci ())
    {
      printf ("1..1\nnot ok 1 - prerequisite missing under CI: %s\n", what);
      exit (EXIT_FAILURE);
    }
  printf ("1..0 # SKIP %s\n", what);
  exit (EXIT_SUCCESS);
}

/* nz_test_require for a program on $PATH. */
static inline void
nz_test_require_program (const char *program, const char *what)
{
  char *path = g_find_program_in_path (program);
  gboolean have = path != NULL;

  g_free (path);
  nz_test_require (have, what);
}

/* Path of a built tool: $NZ_TOOLS_DIR/<name> (set by tests/meson.build, never $PATH). */
static inline char *
nz_test_tool (const char *name)
{
  const char *dir = g_getenv ("NZ_TOOLS_DIR");

  ck_assert_msg (dir != NULL, "NZ_TOOLS_DIR is not set");
  return g_build_filename (dir, name, NULL);
}

/* A path of executable @path that any uid can run: @path itself when every directory above it
 * lets others search it, else a copy in a 0755 temp directory (a clone under `mktemp -d` sits
 * below a 0700 directory that a test running the agent as nobody cannot traverse). The copy
 * is made once per process and left for the system's /tmp cleaning. */
static inline char *
nz_test_file_for_others (const char *path)
{
  static GHashTable *copies;
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *base = g_path_get_basename (path);
  g_autofree char *copy_dir = NULL, *copy = NULL, *bytes = NULL;
  g_autoptr (GError) error = NULL;
  gboolean reachable = TRUE;
  struct stat st;
  gsize len = 0;

  for (char *d = g_canonicalize_filename (dir, NULL), *up; d != NULL; g_free (d), d = up)
    {
      reachable = reachable && stat (d, &st) == 0 && (st.st_mode & S_IXOTH) != 0;
      up = strcmp (d, "/") != 0 ? g_path_get_dirname (d) : NULL;
    }
  if (reachable)
    return g_strdup (path);
  if (copies == NULL)
    copies = g_hash_table_new (g_str_hash, g_str_equal);
  if (g_hash_table_contains (copies, path))
    return g_strdup (g_hash_table_lookup (copies, path));
  copy_dir = g_dir_make_tmp ("nz-tool-XXXXXX", &error);
  ck_assert_msg (copy_dir != NULL, "temp dir: %s", error ? error->message : "");
  ck_assert_int_eq (chmod (copy_dir, 0755), 0);
  copy = g_build_filename (copy_dir, base, NULL);
  ck_assert_msg (g_file_get_contents (path, &bytes, &len, &error), "read %s", path);
  ck_assert_msg (g_file_set_contents_full (copy, bytes, (gssize)len, G_FILE_SET_CONTENTS_NONE,
                                           0755, &error),
                 "copy %s: %s", copy, error ? error->message : "");
  g_hash_table_insert (copies, g_strdup (path), g_strdup (copy));
  return g_steal_pointer (&copy);
}

/* nz_test_file_for_others of tool @name. */
static inline char *
nz_test_tool_for_others (const char *name)
{
  g_autofree char *tool = nz_test_tool (name);

  return nz_test_file_for_others (tool);
}

/* namzu-exec (@exec_tool) in sandbox @id (@envp NULL: ours) runs a command whose cancel
 * cannot be confirmed — the group leader dies on SIGTERM while a member that ignores it keeps
 * the group, so the engine will not SIGKILL a reusable pgid and fences itself — and gets
 * SIGINT once that member has set its trap. Asserts namzu-exec retired the sandbox and
 * exited 125. */
static inline void
nz_test_exec_unconfirmed_cancel (const char *exec_tool, const char *id, char **envp)
{
  char *argv[] = { (char *)exec_tool, "--sandbox", (char *)id, "--", "sh", "-c",
                   "(trap '' TERM; echo started; exec sleep 30) & exec sleep 60", NULL };
  GString *first = g_string_new (NULL);
  GString *err = g_string_new (NULL);
  GError *error = NULL;
  int out_fd = -1, err_fd = -1, status = 0;
  char c, buf[4096];
  ssize_t n;
  GPid pid;

  ck_assert_msg (g_spawn_async_with_pipes (NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                           NULL, &pid, NULL, &out_fd, &err_fd, &error),
                 "spawn %s: %s", exec_tool, error != NULL ? error->message : "");
  while (read (out_fd, &c, 1) == 1 && c != '\n')
    g_string_append_c (first, c);
  ck_assert_str_eq (first->str, "started");
  g_string_free (first, TRUE);
  kill (pid, SIGINT);
  while ((n = read (err_fd, buf, sizeof buf)) > 0)
    g_string_append_len (err, buf, n);
  ck_assert (waitpid (pid, &status, 0) == pid);
  close (out_fd);
  close (err_fd);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 125, "status %d: %s", status,
                 err->str);
  ck_assert_msg (strstr (err->str, "cancellation_unconfirmed") != NULL
                     && strstr (err->str, "was retired") != NULL,
                 "%s", err->str);
  g_string_free (err, TRUE);
}

/* The number after "@key:" in /proc/@pid/@file. */
static inline gint64
proc_number (GPid pid, const char *file, const char *key)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", (int)pid, file);
  g_autofree char *needle = g_strconcat (key, ":", NULL);
  g_autofree char *text = NULL;
  const char *p;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  p = strstr (text, needle);
  ck_assert_msg (p != NULL, "no %s in %s", needle, path);
  return g_ascii_strtoll (p + strlen (needle), NULL, 10);
}

/* VmRSS of @pid in KiB. */
static inline gint64
vm_rss_kib (GPid pid)
{
  return proc_number (pid, "status", "VmRSS");
}
