/* namzu-exec and lib/client against the real namzu-agent: built binaries, a real unix socket
 * (or TCP with a token), real processes. The agent is started per test with a private
 * workspace and its ready line is read from stdout instead of sleeping.
 *
 * The exec matrix runs twice: against namzu-exec (its libc-only front serves the common case)
 * and against namzu-exec-full (lib/client's path, which the front hands everything else to),
 * so the two cannot drift apart unseen. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "../nz-test.h"
#include "../nz-test-exec.h"

/* The binary under test: namzu-exec (the front) or namzu-exec-full (set per tcase). */
static const char *exec_tool = "namzu-exec";

static void
use_front (void)
{
  exec_tool = "namzu-exec";
}

static void
use_full (void)
{
  exec_tool = "namzu-exec-full";
}

typedef struct
{
  char *dir;
  char *workspace;
  char *endpoint;
  char *token; /* TCP mode only */
  GSubprocess *proc;
} Agent;

static void
die_with_parent (gpointer user_data)
{
  /* A failed assertion ends the forked test; the agent must not outlive it. */
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Starts namzu-agent on a unix socket (tcp=FALSE) or on TCP port 0 with a bind token; waits
 * for its ready line unless @no_wait (unix only). */
static Agent *
agent_start_full (gboolean tcp, gboolean no_wait)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autofree char *bin = nz_test_tool ("namzu-agent");
  g_autoptr (GDataInputStream) in = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *line = NULL;
  Agent *a = g_new0 (Agent, 1);

  a->dir = g_dir_make_tmp ("nz-exec-XXXXXX", NULL);
  ck_assert_ptr_nonnull (a->dir);
  a->workspace = g_build_filename (a->dir, "ws", NULL);
  ck_assert_int_eq (g_mkdir (a->workspace, 0700), 0);
  g_subprocess_launcher_unsetenv (l, "NAMZU_AGENT_TCP_PORT");
  g_subprocess_launcher_unsetenv (l, "NAMZU_AGENT_UNIX_PATH");
  g_subprocess_launcher_unsetenv (l, "NAMZU_AGENT_BIND_TOKEN");
  g_subprocess_launcher_unsetenv (l, "NAMZU_AGENT_REQUIRE_TOKEN");
  g_subprocess_launcher_setenv (l, "NAMZU_SANDBOX_WORKSPACE", a->workspace, TRUE);
  g_subprocess_launcher_setenv (l, "NAMZU_AGENT_SHUTDOWN_DEADLINE_MS", "3000", TRUE);
  if (tcp)
    {
      a->token = g_strdup ("test-token-0123456789");
      g_subprocess_launcher_setenv (l, "NAMZU_AGENT_TCP_PORT", "0", TRUE);
      g_subprocess_launcher_setenv (l, "NAMZU_AGENT_BIND_TOKEN", a->token, TRUE);
    }
  else
    {
      g_autofree char *sock = g_build_filename (a->dir, "agent.sock", NULL);

      g_subprocess_launcher_setenv (l, "NAMZU_AGENT_UNIX_PATH", sock, TRUE);
      a->endpoint = g_strdup_printf ("unix:%s", sock);
    }
  g_subprocess_launcher_set_child_setup (l, die_with_parent, NULL, NULL);
  a->proc = g_subprocess_launcher_spawn (l, &error, bin, NULL);
  ck_assert_msg (a->proc != NULL, "spawn %s: %s", bin, error ? error->message : "");
  if (no_wait)
    return a;
  in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (a->proc));
  line = g_data_input_stream_read_line_utf8 (in, NULL, NULL, &error);
  ck_assert_msg (line != NULL, "namzu-agent printed no ready line: %s",
                 error ? error->message : "EOF");
  if (tcp)
    {
      /* The ready line ends with the bound port, whatever words precede it. */
      const char *p = line + strlen (line);
      guint64 port = 0;

      while (p > line && g_ascii_isdigit (p[-1]))
        p--;
      ck_assert_msg (g_ascii_string_to_unsigned (p, 10, 1, 65535, &port, NULL),
                     "no port at the end of the ready line \"%s\"", line);
      a->endpoint = g_strdup_printf ("tcp:127.0.0.1:%u", (unsigned)port);
    }
  return a;
}

static Agent *
agent_start (gboolean tcp)
{
  return agent_start_full (tcp, FALSE);
}

static void
agent_stop (Agent *a)
{
  const char *rm[] = { "/bin/rm", "-rf", a->dir, NULL };

  g_subprocess_send_signal (a->proc, SIGTERM);
  ck_assert (g_subprocess_wait (a->proc, NULL, NULL));
  g_spawn_sync (NULL, (char **)rm, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
  g_object_unref (a->proc);
  g_free (a->dir);
  g_free (a->workspace);
  g_free (a->endpoint);
  g_free (a->token);
  g_free (a);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Agent, agent_stop)

static GSubprocess *
exec_spawn (Agent *a, const char *token, GSubprocessFlags flags, const char *const *args)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (flags);
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GError) error = NULL;
  GSubprocess *p;

  g_ptr_array_add (argv, nz_test_tool (exec_tool));
  if (a != NULL)
    {
      g_ptr_array_add (argv, g_strdup ("--endpoint"));
      g_ptr_array_add (argv, g_strdup (a->endpoint));
    }
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);
  /* Direct-agent runs must not pick up a sandbox from the environment. */
  if (a != NULL)
    g_subprocess_launcher_unsetenv (l, "NAMZU_SANDBOX");
  g_subprocess_launcher_unsetenv (l, "NAMZU_TOKEN");
  /* A proxy the environment names (nothing listens there) must not see the control channel,
   * which carries the token: namzu-exec connects to the sandbox directly. */
  for (const char *const *v
       = (const char *const[]){ "http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                                "HTTPS_PROXY", "ALL_PROXY", NULL };
       *v != NULL; v++)
    g_subprocess_launcher_setenv (l, *v, "http://127.0.0.1:9", TRUE);
  g_subprocess_launcher_unsetenv (l, "no_proxy");
  g_subprocess_launcher_unsetenv (l, "NO_PROXY");
  if (token != NULL)
    g_subprocess_launcher_setenv (l, "NAMZU_TOKEN", token, TRUE);
  p = g_subprocess_launcher_spawnv (l, (const char *const *)argv->pdata, &error);
  ck_assert_msg (p != NULL, "spawn namzu-exec: %s", error ? error->message : "");
  return p;
}

/* Runs namzu-exec to completion; returns its exit status (128+N if a signal killed it). */
static int
exec_run (Agent *a, const char *token, const char *stdin_text, char **out, char **err,
          const char *const *args)
{
  g_autoptr (GSubprocess) p
      = exec_spawn (a, token,
                    G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                        | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                    args);
  g_autoptr (GError) error = NULL;

  ck_assert_msg (g_subprocess_communicate_utf8 (p, stdin_text, NULL, out, err, &error),
                 "communicate: %s", error ? error->message : "");
  if (g_subprocess_get_if_signaled (p))
    return 128 + g_subprocess_get_term_sig (p);
  return g_subprocess_get_exit_status (p);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

START_TEST (test_echo_and_stderr_separation)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  ck_assert_int_eq (exec_run (a, NULL, "", &out, &err, ARGS ("--", "echo", "hello", "world")), 0);
  ck_assert_str_eq (out, "hello world\n");
  ck_assert_str_eq (err, "");
  /* Options end at COMMAND even without "--": -c belongs to sh. */
  ck_assert_int_eq (
      exec_run (a, NULL, "", &out2, &err2, ARGS ("sh", "-c", "echo out; echo err >&2; echo out2")),
      0);
  ck_assert_str_eq (out2, "out\nout2\n");
  ck_assert_str_eq (err2, "err\n");
}
END_TEST

START_TEST (test_exit_statuses)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  static const struct
  {
    const char *script;
    int status;
  } cases[] = {
    { "exit 0", 0 },
    { "exit 3", 3 },
    { "exit 255", 255 },
    { "kill -TERM $$", 128 + SIGTERM },
    { "kill -KILL $$", 128 + SIGKILL },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int status = exec_run (a, NULL, "", &out, &err, ARGS ("--", "sh", "-c", cases[i].script));

      ck_assert_msg (status == cases[i].status, "%s: status %d, want %d (stderr: %s)",
                     cases[i].script, status, cases[i].status, err);
    }
}
END_TEST

START_TEST (test_timeout)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  gint64 t0 = g_get_monotonic_time ();

  ck_assert_int_eq (
      exec_run (a, NULL, "", &out, &err, ARGS ("--timeout", "300", "--", "sleep", "30")), 124);
  ck_assert_int_lt (g_get_monotonic_time () - t0, 5 * G_USEC_PER_SEC);
  ck_assert_int_eq (exec_run (a, NULL, "", &out2, &err2, ARGS ("--timeout", "1s", "--", "true")),
                    0);
}
END_TEST

START_TEST (test_not_found_and_not_executable)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  g_autofree char *script = g_build_filename (a->workspace, "not-exec.sh", NULL);

  ck_assert_int_eq (exec_run (a, NULL, "", &out, &err, ARGS ("--", "/nonexistent/namzu-cmd")), 127);
  ck_assert_msg (g_str_has_prefix (err, "namzu-exec: ") && strstr (err, "not found"), "%s", err);
  ck_assert_str_eq (out, "");
  ck_assert (g_file_set_contents (script, "#!/bin/sh\necho no\n", -1, NULL));
  ck_assert_int_eq (chmod (script, 0644), 0);
  ck_assert_int_eq (exec_run (a, NULL, "", &out2, &err2, ARGS ("--", "./not-exec.sh")), 126);
  ck_assert_msg (g_str_has_prefix (err2, "namzu-exec: "), "%s", err2);
}
END_TEST

START_TEST (test_env_and_cwd)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *want = g_strdup_printf ("bar|x=y\n%s/sub/dir\n", a->workspace);

  ck_assert_int_eq (exec_run (a, NULL, "", &out, &err,
                              ARGS ("--env", "FOO=bar", "-e", "EQ=x=y", "--cwd", "sub/dir", "--",
                                    "sh", "-c", "echo \"$FOO|$EQ\"; pwd -P")),
                    0);
  ck_assert_str_eq (out, want);
}
END_TEST

START_TEST (test_json_events)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GString) so = g_string_new (NULL), se = g_string_new (NULL);
  guint results = 0, n;
  double code = -1;

  ck_assert_int_eq (
      exec_run (a, NULL, "", &out, &err,
                ARGS ("--json", "--", "sh", "-c", "echo a; echo b >&2; sleep 0.1; exit 5")),
      5);
  lines = g_strsplit (out, "\n", -1);
  n = g_strv_length (lines);
  ck_assert_msg (n >= 2 && *lines[n - 1] == '\0', "not newline-terminated NDJSON: %s", out);
  for (guint i = 0; i + 1 < n; i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (JsonObject) ev = nz_json_parse_object (lines[i], -1, &error);
      const char *type;

      ck_assert_msg (ev != NULL, "line %u is not a JSON object: %s", i, lines[i]);
      type = nz_json_get_string (ev, "type");
      ck_assert_ptr_nonnull (type);
      if (g_str_equal (type, "stdout"))
        g_string_append (so, nz_json_get_string (ev, "data"));
      else if (g_str_equal (type, "stderr"))
        g_string_append (se, nz_json_get_string (ev, "data"));
      else
        {
          ck_assert_str_eq (type, "result");
          ck_assert_msg (i + 2 == n, "result is not the last line: %s", out);
          results++;
          ck_assert (nz_json_get_number (ev, "exitCode", &code));
          ck_assert (!nz_json_get_bool (ev, "timedOut", TRUE));
          ck_assert (g_str_has_prefix (nz_json_get_string (ev, "executionId"), "exec_"));
          nz_test_check_exec_timing (ev, 100);
        }
    }
  ck_assert_uint_eq (results, 1);
  ck_assert (code == 5);
  ck_assert_str_eq (so->str, "a\n");
  ck_assert_str_eq (se->str, "b\n");
  ck_assert_str_eq (err, "");
}
END_TEST

START_TEST (test_stdin)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  ck_assert_int_eq (
      exec_run (a, NULL, "line one\nline two\n", &out, &err, ARGS ("-i", "--", "sort", "-r")), 0);
  ck_assert_str_eq (out, "line two\nline one\n");
  /* Without -i the command's stdin is empty, even when ours is not. */
  ck_assert_int_eq (exec_run (a, NULL, "ignored\n", &out2, &err2, ARGS ("--", "wc", "-c")), 0);
  ck_assert_str_eq (g_strstrip (out2), "0");
}
END_TEST

/* The agent confirms a cancellation only once the process group is gone; allow a moment for
 * its final reap of the leader, no more. */
static void
assert_gone (pid_t pid)
{
  gint64 deadline = g_get_monotonic_time () + G_USEC_PER_SEC / 2;

  while (kill (pid, 0) == 0 && g_get_monotonic_time () < deadline)
    g_usleep (10000);
  ck_assert_msg (kill (pid, 0) == -1 && errno == ESRCH,
                 "remote command %d still exists after cancellation", (int)pid);
}

/* SIGINT/SIGTERM to namzu-exec cancel the remote command, which must be gone afterwards. */
static void
assert_signal_cancels (int signo)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *pidfile = g_build_filename (a->workspace, "pid", NULL);
  g_autoptr (GSubprocess) p
      = exec_spawn (a, NULL, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
                    ARGS ("--", "sh", "-c", "echo $$ > pid; echo started; exec sleep 60"));
  g_autoptr (GDataInputStream) in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (p));
  g_autofree char *line = g_data_input_stream_read_line_utf8 (in, NULL, NULL, NULL);
  g_autofree char *pidtext = NULL;
  gint64 t0;
  guint64 pid = 0;

  ck_assert_str_eq (line, "started");
  ck_assert (g_file_get_contents (pidfile, &pidtext, NULL, NULL));
  ck_assert (g_ascii_string_to_unsigned (g_strstrip (pidtext), 10, 2, G_MAXINT, &pid, NULL));
  ck_assert_int_eq (kill ((pid_t)pid, 0), 0);
  t0 = g_get_monotonic_time ();
  g_subprocess_send_signal (p, signo);
  ck_assert (g_subprocess_wait (p, NULL, NULL));
  ck_assert_msg (g_subprocess_get_if_exited (p), "namzu-exec died of the signal itself");
  ck_assert_int_eq (g_subprocess_get_exit_status (p), 128 + signo);
  ck_assert_int_lt (g_get_monotonic_time () - t0, 5 * G_USEC_PER_SEC);
  assert_gone ((pid_t)pid);
}

START_TEST (test_sigint_cancels_remote)
{
  assert_signal_cancels (SIGINT);
}
END_TEST

START_TEST (test_sigterm_cancels_remote)
{
  assert_signal_cancels (SIGTERM);
}
END_TEST

START_TEST (test_sighup_cancels_remote)
{
  assert_signal_cancels (SIGHUP);
}
END_TEST

/* A reader that goes away (namzu-exec ... | head -1) cancels the remote command, like SIGPIPE
 * would end a local one, and namzu-exec reports 128+SIGPIPE. */
START_TEST (test_closed_stdout_cancels_remote)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *pidfile = g_build_filename (a->workspace, "pid", NULL);
  g_autoptr (GSubprocess) p
      = exec_spawn (a, NULL, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE,
                    ARGS ("--", "sh", "-c", "echo $$ > pid; while :; do echo y; done"));
  GInputStream *out = g_subprocess_get_stdout_pipe (p);
  g_autofree char *pidtext = NULL;
  char buf[2];
  guint64 pid = 0;

  ck_assert_int_eq (g_input_stream_read (out, buf, sizeof buf, NULL, NULL), 2);
  ck_assert (g_input_stream_close (out, NULL, NULL));
  ck_assert (g_subprocess_wait (p, NULL, NULL));
  ck_assert_msg (g_subprocess_get_if_exited (p), "namzu-exec died of SIGPIPE itself");
  ck_assert_int_eq (g_subprocess_get_exit_status (p), 128 + SIGPIPE);
  ck_assert (g_file_get_contents (pidfile, &pidtext, NULL, NULL));
  ck_assert (g_ascii_string_to_unsigned (g_strstrip (pidtext), 10, 2, G_MAXINT, &pid, NULL));
  assert_gone ((pid_t)pid);
}
END_TEST

START_TEST (test_unreachable_endpoint)
{
  g_autofree char *out = NULL, *err = NULL;
  const char *args[] = { "--endpoint", "unix:/nonexistent/namzu/agent.sock", "--", "true", NULL };
  int status = exec_run (NULL, NULL, "", &out, &err, args);

  ck_assert_int_eq (status, 125);
  ck_assert_str_eq (out, "");
  ck_assert_msg (g_str_has_prefix (err, "namzu-exec: ") && strstr (err, "cannot reach")
                     && strstr (err, "namzu-ls") && strchr (err, '\n') == err + strlen (err) - 1,
                 "not one clear line: %s", err);
}
END_TEST

START_TEST (test_usage_errors)
{
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  g_autofree char *out3 = NULL, *err3 = NULL;

  ck_assert_int_eq (exec_run (NULL, NULL, "", &out, &err, ARGS ("--endpoint", "unix:/x")), 2);
  ck_assert_msg (strstr (err, "no COMMAND") && strstr (err, "--help"), "%s", err);
  ck_assert_int_eq (exec_run (NULL, NULL, "", &out2, &err2,
                              ARGS ("--endpoint", "unix:/x", "--timeout", "soon", "--", "true")),
                    2);
  /* The wire carries the command as JSON strings: bytes that are not UTF-8 are refused by name,
   * never sent mangled. */
  ck_assert_int_eq (exec_run (NULL, NULL, "", &out3, &err3,
                              ARGS ("--endpoint", "unix:/x", "--", "echo", "caf\xe9")),
                    2);
  ck_assert_msg (strstr (err3, "argument 1 is not UTF-8") != NULL, "%s", err3);
}
END_TEST

START_TEST (test_tcp_token)
{
  g_autoptr (Agent) a = agent_start (TRUE);
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;

  ck_assert_int_eq (exec_run (a, a->token, "", &out, &err, ARGS ("--", "echo", "over tcp")), 0);
  ck_assert_str_eq (out, "over tcp\n");
  ck_assert_int_eq (exec_run (a, "wrong-token", "", &out2, &err2, ARGS ("--", "true")), 125);
  ck_assert_msg (strstr (err2, "unauthorized") != NULL, "%s", err2);
}
END_TEST

static char *
run_tool (const char *name, const char *arg1, const char *arg2)
{
  g_autofree char *bin = nz_test_tool (name);
  const char *argv[] = { bin, arg1, arg2, NULL };
  g_autofree char *err = NULL;
  char *out = NULL;
  int status = 0;

  ck_assert (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                           &status, NULL));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "%s failed: %s", name, err);
  return out;
}

/* The sandbox paths through lib/backend's handles: the handle piped from namzu-create, then
 * $NAMZU_SANDBOX, then --sandbox; then an agent that died under a running command, a sandbox
 * whose agent is gone, and one that was destroyed. */
START_TEST (test_sandbox_handles)
{
  g_autofree char *state = g_dir_make_tmp ("nz-exec-state-XXXXXX", NULL);
  g_autofree char *handle = NULL, *destroyed = NULL;
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_autofree char *o4 = NULL, *e4 = NULL, *o5 = NULL, *e5 = NULL, *o6 = NULL, *e6 = NULL;
  g_autoptr (JsonObject) h = NULL;
  const char *rm[] = { "/bin/rm", "-rf", state, NULL };
  const char *id;

  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  handle = run_tool ("namzu-create", NULL, NULL);
  h = nz_json_parse_object (handle, -1, NULL);
  ck_assert_msg (h != NULL && (id = nz_json_get_string (h, "id")) != NULL, "handle: %s", handle);

  ck_assert_int_eq (exec_run (NULL, NULL, handle, &o1, &e1, ARGS ("--", "echo", "piped")), 0);
  ck_assert_str_eq (o1, "piped\n");
  g_setenv ("NAMZU_SANDBOX", id, TRUE);
  ck_assert_int_eq (exec_run (NULL, NULL, "from stdin\n", &o2, &e2, ARGS ("-i", "--", "cat")), 0);
  ck_assert_str_eq (o2, "from stdin\n");
  g_unsetenv ("NAMZU_SANDBOX");

  /* The command cannot kill its own agent (privsep: another uid, docs/security.md) ... */
  ck_assert_int_eq (exec_run (NULL, NULL, "", &o3, &e3,
                              ARGS ("--sandbox", id, "--", "sh", "-c", "kill -9 $PPID")),
                    1);
  g_clear_pointer (&o3, g_free);
  g_clear_pointer (&e3, g_free);
  /* ... but when the agent dies under a command (the host kills it here), the stream is cut
   * and the outcome unknown -> 125. */
  {
    g_autofree char *hpath = g_build_filename (state, id, "handle.json", NULL);
    g_autofree char *htext = NULL;
    g_autoptr (JsonObject) hobj = NULL;
    double agent_pid = 0;

    ck_assert (g_file_get_contents (hpath, &htext, NULL, NULL));
    hobj = nz_json_parse_object (htext, -1, NULL);
    ck_assert (hobj != NULL
               && nz_json_get_number (nz_json_get_object (hobj, "private"), "childPid", &agent_pid)
               && agent_pid > 1);
    g_autofree char *cmd = g_strdup_printf ("sleep 1 && kill -9 %d", (int)agent_pid);
    const char *killer[] = { "/bin/sh", "-c", cmd, NULL };

    ck_assert (
        g_spawn_async (NULL, (char **)killer, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL));
  }
  ck_assert_int_eq (exec_run (NULL, NULL, "", &o3, &e3, ARGS ("--sandbox", id, "--", "sleep", "5")),
                    125);
  ck_assert_msg (strstr (e3, "socket closed before exec stream terminator"), "%s", e3);
  /* The dying agent's listener may still take one connection into its backlog and then
   * reset it (the kernel releases a killed process's sockets in no set order), so allow a few
   * tries; every one must still be a 125. */
  for (int i = 0; i < 40; i++)
    {
      g_clear_pointer (&o4, g_free);
      g_clear_pointer (&e4, g_free);
      ck_assert_int_eq (exec_run (NULL, NULL, "", &o4, &e4, ARGS ("--sandbox", id, "--", "true")),
                        125);
      if (g_str_has_prefix (e4, "namzu-exec: cannot reach sandbox "))
        break;
      g_usleep (50000);
    }
  ck_assert_msg (g_str_has_prefix (e4, "namzu-exec: cannot reach sandbox ")
                     && strstr (e4, "namzu-ls") && strstr (e4, "namzu-create"),
                 "%s", e4);

  destroyed = run_tool ("namzu-destroy", "--sandbox", id);
  ck_assert_int_eq (exec_run (NULL, NULL, "", &o5, &e5, ARGS ("--sandbox", id, "--", "true")), 125);
  ck_assert_msg (g_str_has_prefix (e5, "namzu-exec: ") && strstr (e5, "namzu-ls"), "%s", e5);
  /* Nothing to say where to run: a clear refusal, not a hang on a terminal. */
  ck_assert_int_eq (exec_run (NULL, NULL, "", &o6, &e6, ARGS ("--", "true")), 125);
  ck_assert_msg (g_str_has_prefix (e6, "namzu-exec: "), "%s", e6);
  g_spawn_sync (NULL, (char **)rm, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
}
END_TEST

/* namzu-exec's front hands what it does not serve itself to the full implementation, with the
 * unchanged argv: every option keeps working. */
START_TEST (test_front_hands_over)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_autoptr (JsonObject) started = NULL;

  ck_assert_int_eq (exec_run (a, NULL, "", &o1, &e1, ARGS ("--json", "--", "echo", "hi")), 0);
  ck_assert_msg (strstr (o1, "{\"type\":\"stdout\",\"data\":\"hi\\n\"}\n")
                     && strstr (o1, "\"type\":\"result\""),
                 "%s", o1);
  ck_assert_int_eq (exec_run (a, NULL, "", &o2, &e2, ARGS ("--detach", "--", "true")), 0);
  started = nz_json_parse_object (o2, -1, NULL);
  ck_assert_msg (started != NULL
                     && g_str_has_prefix (nz_json_get_string (started, "executionId"), "exec_"),
                 "%s", o2);
  /* A repeated --env keeps its first place and its last value, as json-glib built it. */
  ck_assert_int_eq (exec_run (a, NULL, "", &o3, &e3,
                              ARGS ("-e", "A=1", "-e", "B=2", "--env=A=3", "-t", "30s", "--", "sh",
                                    "-c", "echo $A$B")),
                    0);
  ck_assert_str_eq (o3, "32\n");
}
END_TEST

/* Output and arguments with every kind of escape come back byte for byte. */
START_TEST (test_output_round_trip)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autofree char *out = NULL, *err = NULL, *env = NULL, *want = NULL;
  const char *text = "q\"b\\s/\x01\x1f\t\r\n caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \x7f end";

  env = g_strdup_printf ("X=%s", text);
  want = g_strdup_printf ("%s|%s", text, text);
  ck_assert_int_eq (
      exec_run (a, NULL, "", &out, &err,
                ARGS ("-e", env, "--", "sh", "-c",
                      "printf '%s|%s' \"$X\" \"$1\"; printf '%s' \"$1\" >&2", "sh", text)),
      0);
  ck_assert_str_eq (out, want);
  ck_assert_str_eq (err, text);
}
END_TEST

/* What is on stdin when no sandbox is named must be a handle; anything else is refused in one
 * line that says so. */
START_TEST (test_malformed_handle)
{
  g_autofree char *state = g_dir_make_tmp ("nz-exec-state-XXXXXX", NULL);
  const char *cases[][2] = {
    { "{\"id\": nz-\n", "sandbox handle" },
    { "[1,2]\n", "sandbox handle" },
    { "{\"backend\":\"container:bwrap\"}\n", "no string \"id\"" },
    { "{\"error\":{\"code\":\"failed\",\"message\":\"create went wrong\"}}\n",
      "create went wrong" },
    { "{\"id\":\"nz-00000000abcd\"}\n", "unknown sandbox" },
  };

  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *out = NULL, *err = NULL;

      ck_assert_int_eq (exec_run (NULL, NULL, cases[i][0], &out, &err, ARGS ("--", "true")), 125);
      ck_assert_str_eq (out, "");
      ck_assert_msg (g_str_has_prefix (err, "namzu-exec: ") && strstr (err, cases[i][1])
                         && strchr (err, '\n') == err + strlen (err) - 1,
                     "%s: %s", cases[i][0], err);
    }
  g_rmdir (state);
}
END_TEST

/* The front cannot retire a sandbox after an unconfirmed cancel: it hands that to
 * namzu-exec-full with NZ_EXEC_RETIRE_UNCONFIRMED, which retires the sandbox the argv names. */
START_TEST (test_retire_hand_over)
{
  g_autofree char *state = g_dir_make_tmp ("nz-exec-state-XXXXXX", NULL);
  g_autofree char *handle = NULL, *full = nz_test_tool ("namzu-exec-full");
  g_autofree char *out = NULL, *err = NULL, *o2 = NULL, *e2 = NULL;
  g_autoptr (JsonObject) h = NULL;
  g_auto (GStrv) envp = NULL;
  const char *rm[] = { "/bin/rm", "-rf", state, NULL };
  const char *id;
  int status = 0;

  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  handle = run_tool ("namzu-create", NULL, NULL);
  h = nz_json_parse_object (handle, -1, NULL);
  ck_assert_msg (h != NULL && (id = nz_json_get_string (h, "id")) != NULL, "handle: %s", handle);
  envp = g_environ_setenv (g_get_environ (), "NZ_EXEC_RETIRE_UNCONFIRMED",
                           "could not confirm that execution exec_x stopped (test)", TRUE);
  ck_assert (g_spawn_sync (NULL,
                           (char **)(const char *[]){ full, "--sandbox", id, "--", "true", NULL },
                           envp, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, NULL));
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 125, "status %d: %s", status, err);
  ck_assert_msg (strstr (err, "could not confirm that execution exec_x stopped (test)")
                     && strstr (err, "was retired"),
                 "%s", err);
  /* Retired: nothing runs there any more. */
  ck_assert_int_eq (exec_run (NULL, NULL, "", &o2, &e2, ARGS ("--sandbox", id, "--", "true")), 125);
  g_spawn_sync (NULL, (char **)rm, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
}
END_TEST

/* ---- lib/client against the real agent ------------------------------------------------- */

START_TEST (test_client_wait_ready)
{
  /* No ready line read: the client's readiness polling is what waits here. */
  g_autoptr (Agent) a = agent_start_full (FALSE, TRUE);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (a->endpoint, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) h = NULL;

  ck_assert_msg (nz_agent_client_wait_ready (c, 10000, &error), "%s", error ? error->message : "");
  h = nz_agent_client_healthz (c, NULL, &error);
  ck_assert_msg (h != NULL, "%s", error ? error->message : "");
  ck_assert_ptr_nonnull (nz_agent_client_get_features (c));
  ck_assert (!json_object_has_member (h, "guestBootId"));
}
END_TEST

typedef struct
{
  GCancellable *cancellable;
  GString *out;
} CancelOnStart;

static void
cancel_on_start (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  CancelOnStart *cs = user_data;

  g_string_append_len (cs->out, data, len);
  if (strstr (cs->out->str, "started\n") != NULL)
    g_cancellable_cancel (cs->cancellable);
}

START_TEST (test_client_exec_cancel)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (a->endpoint, NULL);
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_autoptr (GString) out = g_string_new (NULL);
  CancelOnStart cs = { cancellable, out };
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) again = NULL;
  g_autoptr (JsonArray) args = json_array_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *id = NULL, *pidtext = NULL;
  g_autofree char *pidfile = g_build_filename (a->workspace, "pid", NULL);
  guint64 pid = 0;

  json_array_add_string_element (args, "-c");
  json_array_add_string_element (args, "echo $$ > pid; echo started; exec sleep 60");
  json_object_set_string_member (body, "command", "sh");
  json_object_set_array_member (body, "args", json_array_ref (args));
  ck_assert_ptr_null (
      nz_agent_client_exec (c, body, cancel_on_start, &cs, &id, cancellable, &error));
  ck_assert_msg (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED), "%s", error->message);
  ck_assert (g_str_has_prefix (id, "exec_"));
  ck_assert (g_file_get_contents (pidfile, &pidtext, NULL, NULL));
  ck_assert (g_ascii_string_to_unsigned (g_strstrip (pidtext), 10, 2, G_MAXINT, &pid, NULL));
  assert_gone ((pid_t)pid);
  /* cancel-execution is idempotent: asking again reports the same terminal outcome. */
  again = nz_agent_client_cancel (c, id, NULL, &error);
  ck_assert_msg (again != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (nz_json_get_string (again, "state"), "cancelled");
}
END_TEST

START_TEST (test_client_cancel_unknown)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (a->endpoint, NULL);
  g_autoptr (GError) error = NULL;

  ck_assert_ptr_null (
      nz_agent_client_cancel (c, "exec_6f1c1a4e-0f3b-4c2e-9a7d-2b1e8f0c9d11", NULL, &error));
  ck_assert_msg (strstr (error->message, "unknown_execution") != NULL, "%s", error->message);
}
END_TEST

static gboolean
collect_types (JsonObject *frame, gpointer user_data, GError **error)
{
  g_string_append_printf (user_data, "%s,", nz_json_get_string (frame, "type"));
  return TRUE;
}

START_TEST (test_client_stream)
{
  g_autoptr (Agent) a = agent_start (FALSE);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (a->endpoint, NULL);
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (GString) types = g_string_new (NULL);
  g_autoptr (GError) error = NULL;

  /* An untracked execute is a plain stream: deltas, result, terminator, close. */
  json_object_set_string_member (body, "command", "pwd");
  ck_assert_msg (
      nz_agent_client_stream (c, "execute", body, 10000, collect_types, types, NULL, &error), "%s",
      error ? error->message : "");
  ck_assert_str_eq (types->str, "stdout_delta,result,");
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("exec");
  TCase *tc = tcase_create ("exec");
  TCase *full = tcase_create ("exec-full");
  g_autofree char *agent = NULL;

  agent = g_build_filename (g_getenv ("NZ_TOOLS_DIR") ? g_getenv ("NZ_TOOLS_DIR") : ".",
                            "namzu-agent", NULL);
  nz_test_require (g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE), "namzu-agent is not built");
  /* A namzu-exec that does not read its stdin must fail an assertion, not kill the test. */
  signal (SIGPIPE, SIG_IGN);
  tcase_set_timeout (tc, 60);
  tcase_add_checked_fixture (tc, use_front, NULL);
  tcase_set_timeout (full, 60);
  tcase_add_checked_fixture (full, use_full, NULL);
  for (TCase **t = (TCase *[]){ tc, full, NULL }; *t != NULL; t++)
    {
      tcase_add_test (*t, test_echo_and_stderr_separation);
      tcase_add_test (*t, test_exit_statuses);
      tcase_add_test (*t, test_timeout);
      tcase_add_test (*t, test_not_found_and_not_executable);
      tcase_add_test (*t, test_env_and_cwd);
      tcase_add_test (*t, test_json_events);
      tcase_add_test (*t, test_stdin);
      tcase_add_test (*t, test_sigint_cancels_remote);
      tcase_add_test (*t, test_sigterm_cancels_remote);
      tcase_add_test (*t, test_sighup_cancels_remote);
      tcase_add_test (*t, test_closed_stdout_cancels_remote);
      tcase_add_test (*t, test_unreachable_endpoint);
      tcase_add_test (*t, test_usage_errors);
      tcase_add_test (*t, test_tcp_token);
      tcase_add_test (*t, test_sandbox_handles);
      tcase_add_test (*t, test_output_round_trip);
      tcase_add_test (*t, test_malformed_handle);
    }
  /* The front's own: what it hands over, and to whom. */
  tcase_add_test (tc, test_front_hands_over);
  tcase_add_test (tc, test_retire_hand_over);
  tcase_add_test (tc, test_client_wait_ready);
  tcase_add_test (tc, test_client_exec_cancel);
  tcase_add_test (tc, test_client_cancel_unknown);
  tcase_add_test (tc, test_client_stream);
  suite_add_tcase (s, tc);
  suite_add_tcase (s, full);
  return nz_test_run (s);
}
