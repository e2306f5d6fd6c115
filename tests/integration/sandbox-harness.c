/* sandbox-harness.c: see sandbox-harness.h. */
#include "sandbox-harness.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-json.h"

NzHarness harness;

void
harness_begin (const char *templ)
{
  harness.tmp = g_mkdtemp (g_strdup (templ));
  ck_assert (harness.tmp != NULL);
  harness.state = g_build_filename (harness.tmp, "state", NULL);
  g_setenv ("NAMZU_STATE_DIR", harness.state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  /* Knobs a case may set to fake a part of the bwrap backend: never inherited. */
  g_unsetenv ("NAMZU_BWRAP");
  g_unsetenv ("NAMZU_AGENT_BIN");
  g_unsetenv ("NAMZU_CGROUP_ROOT");
}

int
run_toolv (const char *stdin_text, char **out, char **err, const char *tool,
           const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *in_path = g_build_filename (harness.tmp, "stdin", NULL);
  g_autofree char *out_path = g_build_filename (harness.tmp, "stdout", NULL);
  g_autofree char *err_path = g_build_filename (harness.tmp, "stderr", NULL);

  g_ptr_array_add (argv, nz_test_tool (tool));
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
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

/* The NULL-terminated arguments after @first (included when not NULL), borrowed. */
static GPtrArray *
collect_args (const char *first, va_list ap)
{
  GPtrArray *args = g_ptr_array_new ();

  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (args, (gpointer)a);
  g_ptr_array_add (args, NULL);
  return args;
}

int
run_tool (const char *stdin_text, char **out, char **err, const char *tool, ...)
{
  g_autoptr (GPtrArray) args = NULL;
  va_list ap;

  va_start (ap, tool);
  args = collect_args (va_arg (ap, const char *), ap);
  va_end (ap);
  return run_toolv (stdin_text, out, err, tool, (const char *const *)args->pdata);
}

guint
count_lines (const char *s)
{
  guint n = 0;

  for (; s != NULL && *s != '\0'; s++)
    n += *s == '\n';
  return n;
}

/* namzu-create with @args; see create_handle(). */
static JsonObject *
create_handlev (const char *const *args)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *backend = "container:bwrap";
  JsonObject *h;
  int rc;

  for (guint i = 0; args[i] != NULL; i++)
    if (g_strcmp0 (args[i], "--backend") == 0 && args[i + 1] != NULL)
      backend = args[i + 1];
  rc = run_toolv (NULL, &out, &err, "namzu-create", args);
  ck_assert_msg (rc == 0, "namzu-create failed (%d): %s", rc, err);
  ck_assert_msg (count_lines (out) == 1, "stdout: %s", out);
  /* Never the token on stdout. */
  ck_assert (strstr (out, "token") == NULL);
  h = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (h != NULL, "namzu-create printed: %s", out);
  ck_assert (g_str_has_prefix (nz_json_get_string (h, "id"), "nz-"));
  ck_assert_str_eq (nz_json_get_string (h, "backend"), backend);
  ck_assert_str_eq (nz_json_get_string (h, "tier"), "container");
  ck_assert (json_object_has_member (h, "createdAt"));
  ck_assert (json_object_has_member (h, "capabilities"));
  return h;
}

JsonObject *
create_handle (const char *first, ...)
{
  g_autoptr (GPtrArray) args = NULL;
  va_list ap;

  va_start (ap, first);
  args = collect_args (first, ap);
  va_end (ap);
  return create_handlev ((const char *const *)args->pdata);
}

char *
create_sandbox (const char *first, ...)
{
  g_autoptr (GPtrArray) args = NULL;
  g_autoptr (JsonObject) h = NULL;
  va_list ap;

  va_start (ap, first);
  args = collect_args (first, ap);
  va_end (ap);
  h = create_handlev ((const char *const *)args->pdata);
  return g_strdup (nz_json_get_string (h, "id"));
}

void
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

char *
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
  ck_assert (g_spawn_sync (harness.tmp, (char **)argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                           &out, &err, &status, &error));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "host script failed: %s\n%s", script,
                 err);
  return g_strstrip (out);
}

int
sh_in_sandbox (const char *id, const char *script, char **out)
{
  g_autofree char *err = NULL;
  int rc
      = run_tool (NULL, out, &err, "namzu-exec", "--sandbox", id, "--", "sh", "-c", script, NULL);

  /* 125 is namzu failing, never a command's answer in these tests */
  ck_assert_msg (rc != 125, "namzu-exec failed: %s", err);
  return rc;
}

int
sh_in (const char *script, char **out)
{
  return sh_in_sandbox (harness.sandbox, script, out);
}

void
sh_in_ok (const char *script)
{
  g_autofree char *out = NULL;

  ck_assert_msg (sh_in (script, &out) == 0, "in the sandbox: %s\n%s", script, out);
}

char *
sh_in_out (const char *script)
{
  char *out = NULL;

  ck_assert_msg (sh_in (script, &out) == 0, "in the sandbox: %s", script);
  return g_strstrip (out);
}

gboolean
sandbox_has (const char *test_expr)
{
  g_autofree char *out = NULL;
  g_autofree char *script = g_strdup_printf ("test %s", test_expr);

  return sh_in (script, &out) == 0;
}

static void
new_session (gpointer user_data)
{
  setsid ();
}

void
harness_start_reaper (GPid kill_pgid)
{
  g_autoptr (GSubprocessLauncher) launcher
      = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_SILENCE
                                   | G_SUBPROCESS_FLAGS_STDERR_SILENCE);
  g_autofree char *destroy = nz_test_tool ("namzu-destroy");
  g_autofree char *pgid = g_strdup_printf ("%d", (int)kill_pgid);
  g_autoptr (GError) error = NULL;

  g_subprocess_launcher_set_child_setup (launcher, new_session, NULL, NULL);
  harness.reaper = g_subprocess_launcher_spawn (
      launcher, &error, "sh", "-c",
      "read x; for d in \"$2\"/nz-*; do [ -d \"$d\" ] || continue; NAMZU_STATE_DIR=\"$2\" \"$1\" "
      "--sandbox \"${d##*/}\"; done; [ \"$4\" = 0 ] || kill -s KILL -- \"-$4\"; rm -rf -- \"$3\"",
      "sh", destroy, harness.state, harness.tmp, pgid, NULL);
  ck_assert_msg (harness.reaper != NULL, "%s", error ? error->message : "");
}

void
harness_end (void)
{
  ck_assert (g_output_stream_close (g_subprocess_get_stdin_pipe (harness.reaper), NULL, NULL));
  ck_assert (g_subprocess_wait (harness.reaper, NULL, NULL));
  ck_assert (!g_file_test (harness.tmp, G_FILE_TEST_EXISTS));
  g_clear_object (&harness.reaper);
  g_clear_pointer (&harness.sandbox, g_free);
  g_clear_pointer (&harness.state, g_free);
  g_clear_pointer (&harness.tmp, g_free);
}

gboolean
pid_gone (pid_t pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/stat", (int)pid);
  g_autofree char *text = NULL;
  char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return TRUE;
  p = strrchr (text, ')');
  return p != NULL && (p[2] == 'Z' || p[2] == 'X');
}

gboolean
host_process_mentions (const char *needle)
{
  g_autoptr (GDir) d = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%s/cmdline", name);
      g_autofree char *text = NULL;
      gsize len = 0;

      if (!g_ascii_isdigit (*name) || !g_file_get_contents (path, &text, &len, NULL))
        continue;
      for (gsize i = 0; i + 1 < len; i++)
        if (text[i] == '\0')
          text[i] = ' ';
      if (strstr (text, needle) != NULL && !pid_gone ((pid_t)atoi (name)))
        return TRUE;
    }
  return FALSE;
}

guint
sandboxes_left (void)
{
  g_autoptr (GDir) dir = g_dir_open (harness.state, 0, NULL);
  const char *name;
  guint n = 0;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    n += g_str_has_prefix (name, "nz-") && !g_str_has_suffix (name, ".destroyed");
  return n;
}

GPid
harness_spawn_listening (const char *const *argv, char **env, FILE **out)
{
  g_autoptr (GError) error = NULL;
  char line[256] = { 0 };
  GPid pid;
  int out_fd;

  ck_assert_msg (g_spawn_async_with_pipes (NULL, (char **)argv, env,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH, NULL,
                                           NULL, &pid, NULL, &out_fd, NULL, &error),
                 "%s: %s", argv[0], error != NULL ? error->message : "");
  *out = fdopen (out_fd, "r");
  ck_assert (fgets (line, sizeof line, *out) != NULL);
  ck_assert_msg (strstr (line, "listening") != NULL, "%s", line);
  return pid;
}

GPid
harness_start_agent (const char *ws, const char *sock, const char *hide, FILE **out)
{
  g_autofree char *agent = nz_test_tool ("namzu-agent");
  g_auto (GStrv) env = g_get_environ ();
  const char *argv[] = { agent, NULL };

  env = g_environ_setenv (env, "NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
  env = g_environ_setenv (env, "NAMZU_AGENT_UNIX_PATH", sock, TRUE);
  env = g_environ_setenv (env, "NAMZU_AGENT_TEST_HIDE_FEATURES", hide, TRUE);
  return harness_spawn_listening (argv, env, out);
}

void
harness_stop (GPid pid, FILE *out)
{
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
  g_spawn_close_pid (pid);
  fclose (out);
}

int
run_tool_on_tty (char **out, char **tty, const char *tool, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out_path = g_build_filename (harness.tmp, "tty-stdout", NULL);
  g_autoptr (GString) buf = g_string_new (NULL);
  struct winsize ws = { .ws_row = 24, .ws_col = 200 };
  gboolean exited = FALSE;
  int master = -1, status = 0;
  const char *a;
  va_list ap;
  pid_t pid;

  g_ptr_array_add (argv, nz_test_tool (tool));
  va_start (ap, tool);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  pid = forkpty (&master, NULL, NULL, &ws);
  ck_assert_msg (pid >= 0, "forkpty: %s", g_strerror (errno));
  if (pid == 0)
    {
      int in = open ("/dev/null", O_RDONLY);
      int o = open (out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

      if (in < 0 || o < 0 || dup2 (in, STDIN_FILENO) < 0
          || (out != NULL && dup2 (o, STDOUT_FILENO) < 0))
        _exit (126);
      execv (argv->pdata[0], (char **)argv->pdata);
      _exit (127);
    }
  /* Until the tool exited and the terminal holds nothing more (a sandbox it started may keep
   * the terminal open, so no EOF is awaited). */
  for (;;)
    {
      struct pollfd pfd = { master, POLLIN, 0 };
      char chunk[4096];
      ssize_t n;

      if (!exited && waitpid (pid, &status, WNOHANG) == pid)
        exited = TRUE;
      if (poll (&pfd, 1, exited ? 0 : 100) <= 0)
        {
          if (exited)
            break;
          continue;
        }
      n = read (master, chunk, sizeof chunk);
      if (n > 0)
        g_string_append_len (buf, chunk, n);
      else if (n < 0 && errno == EINTR)
        continue;
      else if (exited)
        break; /* EIO: the last holder of the terminal closed it */
      else
        g_usleep (10 * 1000);
    }
  close (master);
  if (out != NULL)
    ck_assert (g_file_get_contents (out_path, out, NULL, NULL));
  *tty = g_string_free (g_steal_pointer (&buf), FALSE);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}
