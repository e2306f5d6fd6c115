/* namzu-attach against a frozen agent (issue 15, spec D.2.11): with a heartbeat agreed, an
 * agent that stops answering mid-stream (SIGSTOP: its socket stays open, nothing arrives)
 * ends --session, --terminal and --execution (a healthz probe there) with the named error and exit
 * 125, instead of a hang. Bad
 * --heartbeat values are usage errors. */
#include "agent-harness.h"

/* Long enough to tell a hang from a slow machine; a hang is what the tests guard against. */
#define HANG_BOUND_US (30 * G_USEC_PER_SEC)

typedef struct
{
  GPid pid;
  int in_fd, out_fd, err_fd;
} Tool;

/* Starts namzu-attach --endpoint unix:<agent> ARGS... with a clean environment. */
static Tool
tool_start (Agent *a, const char *const *args)
{
  g_autofree char *tool = nz_test_tool ("namzu-attach");
  g_autofree char *endpoint = g_strdup_printf ("unix:%s", a->sock_path);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) env = agent_env (NULL);
  g_autoptr (GError) error = NULL;
  Tool t = { 0 };

  g_ptr_array_add (argv, tool);
  g_ptr_array_add (argv, "--endpoint");
  g_ptr_array_add (argv, endpoint);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  ck_assert_msg (g_spawn_async_with_pipes (NULL, (char **)argv->pdata, env,
                                           G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &t.pid, &t.in_fd,
                                           &t.out_fd, &t.err_fd, &error),
                 "%s", error != NULL ? error->message : "");
  return t;
}

/* Reads @fd to EOF (the tool has exited). */
static char *
read_all (int fd)
{
  g_autoptr (GString) acc = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (acc, buf, n);
  return g_string_free (g_steal_pointer (&acc), FALSE);
}

/* Reads the tool's stdout until @needle shows: the stream is open and past its ready frame. */
static void
wait_output (Tool *t, const char *needle)
{
  g_autoptr (GString) acc = g_string_new (NULL);
  gint64 deadline = g_get_monotonic_time () + HANG_BOUND_US;

  while (strstr (acc->str, needle) == NULL)
    {
      struct pollfd p = { .fd = t->out_fd, .events = POLLIN };
      gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
      char buf[4096];
      ssize_t n;

      ck_assert_msg (left > 0 && poll (&p, 1, (int)left) > 0, "no \"%s\" on stdout: %s", needle,
                     acc->str);
      n = read (t->out_fd, buf, sizeof buf);
      ck_assert_msg (n > 0, "stdout closed before \"%s\": %s", needle, acc->str);
      g_string_append_len (acc, buf, n);
    }
}

/* Waits for the tool; a tool still running after HANG_BOUND_US is killed and reported as -1.
 * The agent is continued either way, so a failure leaves no frozen process behind. */
static int
wait_tool (Tool *t, Agent *a)
{
  gint64 deadline = g_get_monotonic_time () + HANG_BOUND_US;
  int status = 0;
  pid_t r;

  while ((r = waitpid (t->pid, &status, WNOHANG)) == 0 && g_get_monotonic_time () < deadline)
    g_usleep (20000);
  kill (a->pid, SIGCONT);
  if (r == 0)
    {
      kill (t->pid, SIGKILL);
      waitpid (t->pid, &status, 0);
      return -1;
    }
  ck_assert_int_eq (r, t->pid);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 1000 + status;
}

/* Freezes the agent under a streaming tool: it must give up with the named error. */
static void
assert_gone (Tool *t, Agent *a, const char *what)
{
  g_autofree char *err = NULL;
  int code;

  ck_assert_int_eq (kill (a->pid, SIGSTOP), 0);
  code = wait_tool (t, a);
  err = read_all (t->err_fd);
  ck_assert_msg (code != -1, "%s: namzu-attach still hung on a frozen agent; stderr: %s", what,
                 err);
  ck_assert_msg (code == 125, "%s: exit %d, stderr: %s", what, code, err);
  ck_assert_msg (strstr (err, "is treated as gone") != NULL, "%s: stderr: %s", what, err);
  close (t->in_fd);
  close (t->out_fd);
  close (t->err_fd);
  g_spawn_close_pid (t->pid);
}

/* Runs namzu-attach ARGS... to its end; returns its exit status. */
static int
tool_run (Agent *a, const char *const *args)
{
  Tool t = tool_start (a, args);
  g_autofree char *out = NULL, *err = NULL;
  int status = 0;

  close (t.in_fd);
  out = read_all (t.out_fd);
  err = read_all (t.err_fd);
  close (t.out_fd);
  close (t.err_fd);
  ck_assert_int_eq (waitpid (t.pid, &status, 0), t.pid);
  g_spawn_close_pid (t.pid);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 1000 + status;
}

START_TEST (test_session_frozen_agent)
{
  Agent *a = agent_start (FALSE);
  const char *start[]
      = { "--start-detached", "s1", "--", "/bin/sh", "-c", "echo hel''lo; exec sleep 60", NULL };
  const char *follow[] = { "--heartbeat", "200ms", "--session", "s1", NULL };
  const char *kill_s1[] = { "--kill", "s1", NULL };
  Tool t;

  ck_assert_int_eq (tool_run (a, start), 0);
  t = tool_start (a, follow);
  wait_output (&t, "hello");
  assert_gone (&t, a, "--session");
  ck_assert_int_eq (tool_run (a, kill_s1), 0);
  agent_stop (a);
}
END_TEST

START_TEST (test_terminal_frozen_agent)
{
  Agent *a = agent_start (FALSE);
  const char *term[] = {
    "--heartbeat", "200ms", "--terminal", "--", "/bin/sh", "-c", "echo hel''lo; exec sleep 60", NULL
  };
  Tool t = tool_start (a, term);

  /* stdin stays open (a pipe we hold), so the terminal is not ended by its EOF. */
  wait_output (&t, "hello");
  assert_gone (&t, a, "--terminal");
  agent_stop (a);
}
END_TEST

/* attach-execution: the wire has no heartbeat, so the silence is answered by a healthz on a
 * new connection, which a frozen agent never answers. */
START_TEST (test_execution_frozen_agent)
{
  Agent *a = agent_start (FALSE);
  g_autofree char *exec = nz_test_tool ("namzu-exec");
  g_autofree char *endpoint = g_strdup_printf ("unix:%s", a->sock_path);
  g_auto (GStrv) env = agent_env (NULL);
  const char *argv[] = { exec, "--endpoint", endpoint, "--detach",
                         "--", "/bin/sh",    "-c",     "echo hel''lo; exec sleep 60",
                         NULL };
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) started = NULL;
  int status = 0;
  Tool t;

  ck_assert (g_spawn_sync (NULL, (char **)argv, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                           &status, NULL));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "namzu-exec --detach: %s", err);
  started = nz_json_parse_object (out, -1, NULL);
  ck_assert_ptr_nonnull (started);
  {
    const char *follow[] = { "--heartbeat", "200ms", "--execution",
                             nz_json_get_string (started, "executionId"), NULL };

    t = tool_start (a, follow);
  }
  wait_output (&t, "hello");
  /* Silent but alive: the probe is answered and the stream goes on. */
  g_usleep (600 * 1000);
  ck_assert_msg (waitpid (t.pid, &status, WNOHANG) == 0,
                 "namzu-attach --execution gave up on a live, quiet agent");
  assert_gone (&t, a, "--execution");
  agent_stop (a);
}
END_TEST

START_TEST (test_bad_heartbeat)
{
  Agent *a = agent_start (FALSE);
  const char *bad[] = { "x", "-1", "0.5s", "", NULL };

  for (guint i = 0; bad[i] != NULL; i++)
    {
      const char *args[] = { "--heartbeat", bad[i], "--session", "s1", NULL };

      ck_assert_msg (tool_run (a, args) == 2, "--heartbeat '%s' was accepted", bad[i]);
    }
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("attach-liveness");
  TCase *tc = tcase_create ("liveness");

  tcase_set_timeout (tc, 90);
  tcase_add_test (tc, test_session_frozen_agent);
  tcase_add_test (tc, test_terminal_frozen_agent);
  tcase_add_test (tc, test_execution_frozen_agent);
  tcase_add_test (tc, test_bad_heartbeat);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
