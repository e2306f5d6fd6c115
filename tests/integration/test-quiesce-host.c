/* An agent running in the host's own pid namespace never widens quiesce to "every process of
 * its uid", even when it was orphaned to init (ppid 1): that would stop its owner's shell.
 * The agent here runs as nobody, so a regression would only reach nobody's processes. */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-agent-client.h"
#include "nz-json.h"
#include "../nz-test.h"

#define NOBODY "65534"

static char *tmp;

static GPid
spawn_as_nobody (const char *const *argv, const char *const *envp)
{
  GPtrArray *full = g_ptr_array_new ();
  g_autoptr (GError) error = NULL;
  GPid pid = 0;

  g_ptr_array_add (full, (char *)"setpriv");
  g_ptr_array_add (full, (char *)"--reuid=" NOBODY);
  g_ptr_array_add (full, (char *)"--regid=" NOBODY);
  g_ptr_array_add (full, (char *)"--clear-groups");
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (full, (char *)argv[i]);
  g_ptr_array_add (full, NULL);
  ck_assert_msg (g_spawn_async (tmp, (char **)full->pdata, (char **)envp,
                                G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
                                &error),
                 "spawn: %s", error ? error->message : "");
  g_ptr_array_unref (full);
  return pid;
}

static gboolean
alive (pid_t pid)
{
  return kill (pid, 0) == 0;
}

/* Waits for a line to appear in @path (the agent's ready line, redirected by sh). */
static char *
wait_for_file_line (const char *path)
{
  for (int i = 0; i < 1000; i++)
    {
      char *text = NULL;

      if (g_file_get_contents (path, &text, NULL, NULL) && strchr (text, '\n') != NULL)
        return text;
      g_free (text);
      g_usleep (10 * 1000);
    }
  ck_abort_msg ("no line in %s", path);
  return NULL;
}

START_TEST (test_orphaned_agent_stays_narrow)
{
  g_autofree char *agent = nz_test_tool_for_others ("namzu-agent");
  g_autofree char *sock = g_build_filename (tmp, "agent.sock", NULL);
  g_autofree char *ready = g_build_filename (tmp, "ready", NULL);
  g_autofree char *pidfile = g_build_filename (tmp, "agent.pid", NULL);
  g_autofree char *endpoint = g_strdup_printf ("unix:%s", sock);
  g_autofree char *ws_env = g_strdup_printf ("NAMZU_SANDBOX_WORKSPACE=%s", tmp);
  g_autofree char *sock_env = g_strdup_printf ("NAMZU_AGENT_UNIX_PATH=%s", sock);
  g_autofree char *line = NULL, *pidtext = NULL;
  g_autofree char *status = NULL, *stat_path = NULL;
  /* sh starts the agent in the background and exits at once, so the agent is orphaned. */
  const char *launcher[] = { "sh", "-c", "\"$0\" > ready 2> agent.log & echo $! > agent.pid",
                             agent, NULL };
  const char *victim_argv[] = { "sleep", "30", NULL };
  const char *envp[] = { ws_env, sock_env, "PATH=/usr/bin:/bin", NULL };
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) reply = NULL;
  g_autoptr (GError) error = NULL;
  GPid launcher_pid, victim;
  pid_t agent_pid;
  int wstatus;

  victim = spawn_as_nobody (victim_argv, envp);
  launcher_pid = spawn_as_nobody (launcher, envp);
  ck_assert_int_eq (waitpid (launcher_pid, &wstatus, 0), launcher_pid);
  line = wait_for_file_line (ready);
  ck_assert_msg (strstr (line, "listening on unix:") != NULL, "ready line: %s", line);
  ck_assert (g_file_get_contents (pidfile, &pidtext, NULL, NULL));
  agent_pid = (pid_t)g_ascii_strtoll (pidtext, NULL, 10);
  ck_assert_int_gt (agent_pid, 1);

  /* The premise: orphaned to init (no subreaper above us), in the host's pid namespace. */
  stat_path = g_strdup_printf ("/proc/%d/status", agent_pid);
  ck_assert (g_file_get_contents (stat_path, &status, NULL, NULL));
  nz_test_require (strstr (status, "\nPPid:\t1\n") != NULL,
                   "the orphaned agent was adopted by a subreaper, not init");

  client = nz_agent_client_new (endpoint, NULL);
  reply = nz_agent_client_call (client, "quiesce", NULL, NULL, &error);
  ck_assert_msg (reply != NULL, "quiesce: %s", error ? error->message : "");
  ck_assert (nz_json_get_bool (reply, "ok", FALSE));
  ck_assert_str_eq (nz_json_get_string (reply, "scope"), "owned-sessions");
  ck_assert_msg (alive (victim), "quiesce stopped a process it does not own");

  kill (victim, SIGKILL);
  waitpid (victim, &wstatus, 0);
  kill (agent_pid, SIGKILL);
}
END_TEST

int
main (void)
{
  g_autofree char *setpriv = g_find_program_in_path ("setpriv");
  Suite *s = suite_create ("quiesce-host");
  TCase *tc = tcase_create ("quiesce-host");

  nz_test_require (setpriv != NULL, "setpriv (util-linux) missing");
  tmp = g_dir_make_tmp ("nz-quiesce-host-XXXXXX", NULL);
  /* nobody writes its socket, ready line and pid file here. */
  if (tmp == NULL || chmod (tmp, 0777) != 0)
    {
      printf ("1..1\nnot ok 1 - cannot make a temp dir for nobody\n");
      return EXIT_FAILURE;
    }
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_orphaned_agent_stays_narrow);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
