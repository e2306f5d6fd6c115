/* Every tool honours the CLI contract's basics: --help on stdout and exit 0, --version, and a
 * bad option exits 2 with "Try '--help'" (STYLE.md: a --help/--version test for every program). */
#include <gio/gio.h>
#include <glib/gstdio.h>
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
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 2, "%s: bad option status %d", tool,
                 status);
  ck_assert_msg (strstr (err, "Try '") != NULL && strstr (err, "--help") != NULL,
                 "%s: no Try '--help' hint: %s", tool, err);
  ck_assert_str_eq (out, "");
}
END_TEST

/* Every numeric flag refuses what is out of range or not a number as a usage error: exit 2,
 * the flag named, "Try '<tool> --help'". A value that slipped through would instead reach a
 * sandbox that does not exist (exit 1) or, for namzu-create, a bwrap that is /bin/false. */
static const struct
{
  const char *tool;
  const char *args[6];
} numeric_cases[] = {
  { "namzu-create", { "--cpus", "1e17" } },
  { "namzu-create", { "--cpus", "1e+17" } },
  { "namzu-create", { "--cpus", "nan" } },
  { "namzu-create", { "--cpus", "inf" } },
  { "namzu-create", { "--cpus", "-1" } },
  { "namzu-create", { "--cpus", "0" } },
  { "namzu-create", { "--cpus", "0.001" } },
  { "namzu-create", { "--cpus", "0x10" } },
  { "namzu-create", { "--cpus", " 1" } },
  { "namzu-create", { "--cpus", "1 " } },
  { "namzu-create", { "--cpus", "1.5x" } },
  { "namzu-create", { "--cpus", "" } },
  { "namzu-create", { "--cpus", "100000" } },
  { "namzu-create", { "--memory-mb", "0" } },
  { "namzu-create", { "--memory-mb", "-64" } },
  { "namzu-create", { "--memory-mb", "64x" } },
  { "namzu-create", { "--memory-mb", "1e3" } },
  { "namzu-create", { "--memory-mb", "18446744073709551617" } },
  { "namzu-create", { "--memory-mb", "1048577" } },
  { "namzu-create", { "--disk-mb", "0" } },
  { "namzu-create", { "--disk-mb", "-1" } },
  { "namzu-create", { "--disk-mb", "nan" } },
  { "namzu-create", { "--disk-mb", "1048577" } },
  { "namzu-create", { "--disk-mb", "9223372036854775808" } },
  { "namzu-create", { "--max-processes", "0" } },
  { "namzu-create", { "--max-processes", "2147483648" } },
  { "namzu-create", { "--max-processes", "1.5" } },
  { "namzu-create", { "--ready-timeout", "0" } },
  { "namzu-create", { "--ready-timeout", "-1" } },
  { "namzu-create", { "--ready-timeout", "inf" } },
  { "namzu-exec", { "--timeout", "0", "true" } },
  { "namzu-exec", { "--timeout", "-5", "true" } },
  { "namzu-exec", { "--timeout", "1e3", "true" } },
  { "namzu-exec", { "--timeout", "9223372036854775807h", "true" } },
  { "namzu-attach", { "--from", "-1", "--list" } },
  { "namzu-attach", { "--from", "99999999999999999999", "--list" } },
  { "namzu-cp", { "--part-kib", "0", "a", ":b" } },
  { "namzu-cp", { "--part-kib", "4097", "a", ":b" } },
  { "namzu-cp", { "--part-kib", "1x", "a", ":b" } },
  { "namzu-quiesce", { "--grace", "-1" } },
  { "namzu-quiesce", { "--grace", "nan" } },
  { "namzu-seed", { "--timeout", "-1", "--root", "/r", "x" } },
  { "namzu-egress", { "proxy", "--max-connections", "0" } },
};

START_TEST (test_numeric_flags_refused)
{
  const char *tool = numeric_cases[_i].tool;
  g_autofree char *path = nz_test_tool (tool);
  g_autofree char *state = g_dir_make_tmp ("nz-cli-XXXXXX", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *try_line = g_strdup_printf ("Try '%s --help'", tool);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  const char *flag = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  g_ptr_array_add (argv, path);
  for (gsize i = 0; i < G_N_ELEMENTS (numeric_cases[_i].args) && numeric_cases[_i].args[i]; i++)
    {
      const char *a = numeric_cases[_i].args[i];

      g_ptr_array_add (argv, (gpointer)a);
      if (flag == NULL && g_str_has_prefix (a, "--"))
        flag = a;
    }
  g_ptr_array_add (argv, NULL);
  envp = g_environ_setenv (envp, "NAMZU_STATE_DIR", state, TRUE);
  envp = g_environ_setenv (envp, "NAMZU_BWRAP", "/bin/false", TRUE);
  envp = g_environ_unsetenv (envp, "NAMZU_SANDBOX");
  ck_assert_msg (g_spawn_sync (NULL, (char **)argv->pdata, envp, G_SPAWN_STDIN_FROM_DEV_NULL, NULL,
                               NULL, &out, &err, &status, &error),
                 "spawn %s: %s", path, error ? error->message : "");
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 2, "%s %s %s: status %d, %s", tool,
                 flag, numeric_cases[_i].args[1], status, err);
  ck_assert_msg (strstr (err, flag) != NULL, "%s: the refusal does not name %s: %s", tool, flag,
                 err);
  ck_assert_msg (strstr (err, try_line) != NULL, "%s %s %s: no \"%s\": %s", tool, flag,
                 numeric_cases[_i].args[1], try_line, err);
  ck_assert_int_eq (g_rmdir (state), 0); /* nothing was created */
}
END_TEST

/* What the wire carries as JSON strings must be UTF-8: other bytes are refused by name with
 * exit 2 before anything is sent; UTF-8 beyond ASCII passes the option parser under the C
 * locale (GOption would convert it from the locale's charset and fail). */
static const struct
{
  const char *tool;
  const char *args[6];
  const char *needle;
} text_cases[] = {
  { "namzu-exec", { "--json", "--", "echo", "caf\xe9" }, "argument 1 is not UTF-8" },
  { "namzu-exec", { "--json", "-e", "X=caf\xe9", "--", "true" }, "--env 1 is not UTF-8" },
  { "namzu-attach", { "--terminal", "--", "echo", "caf\xe9" }, "argument 1 is not UTF-8" },
  { "namzu-cp", { "/etc/hostname", ":/tmp/caf\xe9" }, "sandbox path is not UTF-8" },
  { "namzu-exec", { "--json", "--", "echo", "caf\xc3\xa9" }, "cannot reach" },
  { "namzu-cp", { "/etc/hostname", ":/tmp/caf\xc3\xa9" }, "Could not connect" },
};

START_TEST (test_text_operands)
{
  g_autofree char *path = nz_test_tool (text_cases[_i].tool);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_environ_unsetenv (g_get_environ (), "NAMZU_SANDBOX");
  gboolean refused;
  int status;

  envp = g_environ_unsetenv (envp, "LANG");
  envp = g_environ_setenv (envp, "LC_ALL", "C", TRUE);
  g_ptr_array_add (argv, path);
  g_ptr_array_add (argv, (gpointer) "--endpoint");
  g_ptr_array_add (argv, (gpointer) "unix:/nonexistent/nz-cli.sock");
  for (gsize i = 0; i < G_N_ELEMENTS (text_cases[_i].args) && text_cases[_i].args[i]; i++)
    g_ptr_array_add (argv, (gpointer)text_cases[_i].args[i]);
  g_ptr_array_add (argv, NULL);
  ck_assert (g_spawn_sync (NULL, (char **)argv->pdata, envp, G_SPAWN_STDIN_FROM_DEV_NULL, NULL,
                           NULL, &out, &err, &status, NULL));
  ck_assert_msg (strstr (err, text_cases[_i].needle) != NULL, "%s %s: %s", text_cases[_i].tool,
                 text_cases[_i].args[2] ? text_cases[_i].args[2] : "", err);
  refused = strstr (text_cases[_i].needle, "UTF-8") != NULL;
  ck_assert_msg (WIFEXITED (status) && (WEXITSTATUS (status) == 2) == refused, "%s: status %d: %s",
                 text_cases[_i].tool, status, err);
}
END_TEST

/* A backend's own flags and config keys on another backend are refused, naming whose they
 * are, before anything is made: a docker network or label on a namespace sandbox would
 * otherwise be silently meaningless. */
static const struct
{
  const char *args[6];
  const char *needle;
} foreign_cases[] = {
  { { "--docker-network", "n1" },
    "--docker-network: not supported by container:bwrap (a container:docker setting)" },
  { { "--label", "a=b" }, "--label: not supported by container:bwrap" },
  { { "--egress-proxy-image", "p:1" }, "--egress-proxy-image: not supported by container:bwrap" },
  { { "--backend", "container:docker", "--host-reachability", "sideways" }, "--host-reachability" },
  { { "--config", "-", "--backend", "container:bwrap" },
    "the config's backend settings are for container:docker" },
};

START_TEST (test_foreign_backend_settings_refused)
{
  g_autofree char *path = nz_test_tool ("namzu-create");
  g_autofree char *state = g_dir_make_tmp ("nz-cli-XXXXXX", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "NAMZU_STATE_DIR", state, TRUE);
  const char *config = "{\"backend\":{\"tier\":\"container\",\"image\":\"i\",\"network\":\"n\"}}";
  gboolean reads_config = FALSE;
  int status;

  envp = g_environ_setenv (envp, "NAMZU_BWRAP", "/bin/false", TRUE);
  g_ptr_array_add (argv, path);
  for (gsize i = 0; i < G_N_ELEMENTS (foreign_cases[_i].args) && foreign_cases[_i].args[i]; i++)
    {
      g_ptr_array_add (argv, (gpointer)foreign_cases[_i].args[i]);
      reads_config |= g_str_equal (foreign_cases[_i].args[i], "-");
    }
  g_ptr_array_add (argv, NULL);
  {
    g_autoptr (GSubprocess) p = NULL;
    g_autoptr (GSubprocessLauncher) l
        = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                     | G_SUBPROCESS_FLAGS_STDERR_PIPE);

    g_subprocess_launcher_set_environ (l, envp);
    p = g_subprocess_launcher_spawnv (l, (const char *const *)argv->pdata, NULL);
    ck_assert (p != NULL);
    /* Only a case that reads the config gets it: the others are refused before reading
     * stdin, and writing to a pipe nobody reads would SIGPIPE this test, not the tool. */
    ck_assert (
        g_subprocess_communicate_utf8 (p, reads_config ? config : NULL, NULL, &out, &err, NULL));
    status = g_subprocess_get_exit_status (p);
  }
  ck_assert_msg (strstr (err, foreign_cases[_i].needle) != NULL, "%s", err);
  ck_assert_msg (status == 1 || status == 2, "status %d: %s", status, err);
  ck_assert_int_eq (g_rmdir (state), 0); /* nothing was created */
}
END_TEST

/* Every long option in a tool's GOptionEntry tables (its own sources, read from the tree) is
 * named by its --help, or, for a tool with commands (namzu-egress), by the --help of one of the
 * commands its --help lists. A hand-written help text (namzu-exec's front, namzu-egress) that
 * forgets an option fails here. */
static const struct
{
  const char *tool, *extra; /* extra: another directory whose option table the tool includes */
} shared_options[] = { { "namzu-run", "namzu-create" } };

static void
collect_options (const char *dir, GHashTable *names)
{
  g_autoptr (GRegex) re = g_regex_new (
      "\\{\\s*\"([a-z][a-z0-9-]+)\"\\s*,\\s*('.'|0)\\s*,\\s*[^,]+,\\s*G_OPTION_ARG_", 0, 0, NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  ck_assert_msg (d != NULL, "no source directory %s", dir);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *text = NULL;
      g_autoptr (GMatchInfo) m = NULL;

      if (!g_str_has_suffix (name, ".c") || !g_file_get_contents (path, &text, NULL, NULL))
        continue;
      for (g_regex_match (re, text, 0, &m); g_match_info_matches (m); g_match_info_next (m, NULL))
        g_hash_table_add (names, g_match_info_fetch (m, 1));
    }
}

/* The commands a "Commands:" section lists: the first word of each line indented by two. */
static char *
help_with_commands (const char *tool, const char *top)
{
  GString *all = g_string_new (top);
  const char *sec = strstr (top, "Commands:\n");
  g_auto (GStrv) lines = sec != NULL ? g_strsplit (sec, "\n", -1) : g_new0 (char *, 1);

  for (char **l = lines; *l != NULL; l++)
    if (g_str_has_prefix (*l, "  ") && g_ascii_isalpha ((*l)[2]))
      {
        g_autofree char *cmd = g_strndup (*l + 2, strcspn (*l + 2, " "));
        g_autofree char *path = nz_test_tool (tool);
        const char *argv[] = { path, cmd, "--help", NULL };
        g_autofree char *out = NULL;

        if (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                          NULL, NULL, NULL))
          g_string_append (all, out);
      }
  return g_string_free (all, FALSE);
}

START_TEST (test_help_names_every_option)
{
  const char *tool = tools[_i];
  const char *src = g_getenv ("NZ_SOURCE_DIR");
  g_autoptr (GHashTable) names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autofree char *dir = NULL, *out = NULL, *err = NULL, *help = NULL;
  GHashTableIter it;
  gpointer name;
  int status;

  ck_assert_msg (src != NULL, "NZ_SOURCE_DIR is not set");
  dir = g_build_filename (src, "tools", tool, NULL);
  if (!g_file_test (dir, G_FILE_TEST_IS_DIR)) /* namzu-exec-full: built from namzu-exec */
    return;
  collect_options (dir, names);
  for (gsize i = 0; i < G_N_ELEMENTS (shared_options); i++)
    if (g_str_equal (tool, shared_options[i].tool))
      {
        g_autofree char *extra = g_build_filename (src, "tools", shared_options[i].extra, NULL);
        collect_options (extra, names);
      }
  run (tool, "--help", &out, &err, &status);
  help = help_with_commands (tool, out);
  g_hash_table_iter_init (&it, names);
  while (g_hash_table_iter_next (&it, &name, NULL))
    {
      g_autofree char *flag = g_strconcat ("--", (char *)name, NULL);
      const char *at = help;
      gboolean found = FALSE;

      /* Whole option names only: --env must not be found inside --env-file. */
      while (!found && (at = strstr (at, flag)) != NULL)
        {
          char next = at[strlen (flag)];
          found = !(g_ascii_isalnum (next) || next == '-');
          at++;
        }
      ck_assert_msg (found, "%s --help does not name %s", tool, flag);
    }
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
  tcase_add_loop_test (tc, test_help_names_every_option, 0, n);
  tcase_add_loop_test (tc, test_numeric_flags_refused, 0, G_N_ELEMENTS (numeric_cases));
  tcase_add_loop_test (tc, test_text_operands, 0, G_N_ELEMENTS (text_cases));
  tcase_add_loop_test (tc, test_foreign_backend_settings_refused, 0, G_N_ELEMENTS (foreign_cases));
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
