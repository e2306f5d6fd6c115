/* End to end for namzu-run on container:bwrap (real bubblewrap, the real agent): the command's
 * output and status passed through, stdin, a timeout, refusals, and the sandbox gone however
 * the run ends: exit, Ctrl-C to the process group, SIGTERM to namzu-run alone, and SIGKILL,
 * after which only its guard is left to destroy it. Every case gets its own NAMZU_STATE_DIR. */
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-harness.h"

static void
setup (void)
{
  harness_begin ("/tmp/nz-run-e2e-XXXXXX");
  harness_start_reaper (0);
}

static void
teardown (void)
{
  harness_end ();
}

/* Sandboxes still in the case's state directory. */
static void
wait_until_gone (void)
{
  for (int i = 0; i < 200 && sandboxes_left () > 0; i++)
    g_usleep (50 * 1000);
  ck_assert_uint_eq (sandboxes_left (), 0);
}

START_TEST (test_run_passes_output_and_status)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-run", "--", "sh", "-c",
                     "echo out; echo err >&2; exit 7", NULL);

  ck_assert_msg (rc == 7, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "out\n");
  ck_assert_msg (strstr (err, "err\n") != NULL, "%s", err);
  ck_assert_uint_eq (sandboxes_left (), 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  /* Options of namzu-create go to the sandbox; the command's own flags stay its own. */
  rc = run_tool (NULL, &out, &err, "namzu-run", "--memory-mb", "256", "sh", "-c", "echo $0 $1",
                 "--memory-mb", "x", NULL);
  ck_assert_msg (rc == 0, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "--memory-mb x\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = run_tool (NULL, &out, &err, "namzu-run", "--", "no-such-command-here", NULL);
  ck_assert_msg (rc == 127, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "");
  ck_assert_uint_eq (sandboxes_left (), 0);
}
END_TEST

START_TEST (test_run_stdin_json_and_timeout)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_tool ("hello from the host\n", &out, &err, "namzu-run", "-i", "--", "cat", NULL);

  ck_assert_msg (rc == 0, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "hello from the host\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = run_tool (NULL, &out, &err, "namzu-run", "--json", "--", "sh", "-c", "exit 3", NULL);
  ck_assert_msg (rc == 3, "rc %d: %s", rc, err);
  ck_assert_msg (strstr (out, "\"type\":\"result\"") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = run_tool (NULL, &out, &err, "namzu-run", "--timeout", "300ms", "--", "sleep", "30", NULL);
  ck_assert_msg (rc == 124, "rc %d: %s", rc, err);
  ck_assert_uint_eq (sandboxes_left (), 0);
}
END_TEST

START_TEST (test_run_refusals_leave_nothing)
{
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-run", "--memory-mb", "lots", "--", "true", NULL);

  ck_assert_msg (rc == 2, "rc %d: %s", rc, err);
  ck_assert_str_eq (out, "");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = run_tool (NULL, &out, &err, "namzu-run", NULL);
  ck_assert_msg (rc == 2 && strstr (err, "no COMMAND") != NULL, "rc %d: %s", rc, err);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = run_tool (NULL, &out, &err, "namzu-run", "--backend", "microvm:firecracker", "--", "true",
                 NULL);
  ck_assert_msg (rc == 125, "rc %d: %s", rc, err);
  ck_assert_msg (strstr (err, "available: container:bwrap") != NULL, "%s", err);
  ck_assert_str_eq (out, "");
  ck_assert_uint_eq (sandboxes_left (), 0);
}
END_TEST

static void
own_group (gpointer user_data)
{
  (void)user_data;
  setpgid (0, 0);
}

/* namzu-run -- sh -c 'echo ready; exec sleep N' in a process group of its own (as a shell
 * puts a foreground job), returned once the command has started. The shell computes N, so
 * "sleep N" (@marker) is on the workload's command line alone, not on namzu-run's. */
static GPid
start_run (const char *marker)
{
  g_autofree char *run = nz_test_tool ("namzu-run");
  g_autofree char *script
      = g_strdup_printf ("echo ready; exec sleep $((%s + 0))", marker + strlen ("sleep "));
  const char *argv[] = { run, "--", "sh", "-c", script, NULL };
  g_autoptr (GError) error = NULL;
  char buf[64] = { 0 };
  struct pollfd pfd;
  GPid pid;
  int out;

  g_autofree char *err_path = g_build_filename (harness.tmp, "run.stderr", NULL);
  int err = open (err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  ck_assert (err >= 0);
  ck_assert_msg (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   own_group, NULL, -1, -1, err, NULL, NULL, 0,
                                                   &pid, NULL, &out, NULL, &error),
                 "%s", error ? error->message : "");
  close (err);
  pfd = (struct pollfd){ .fd = out, .events = POLLIN };
  ck_assert_msg (poll (&pfd, 1, 30000) == 1, "namzu-run's command never started");
  ck_assert (read (out, buf, sizeof buf - 1) > 0);
  ck_assert_str_eq (buf, "ready\n");
  close (out);
  ck_assert_uint_eq (sandboxes_left (), 1);
  /* sh may be between its echo and the exec of sleep, where its command line reads empty. */
  for (int i = 0; i < 100 && !host_process_mentions (marker); i++)
    g_usleep (20 * 1000);
  ck_assert (host_process_mentions (marker));
  return pid;
}

static int
wait_status (GPid pid)
{
  int status;

  while (waitpid (pid, &status, 0) < 0)
    ck_assert_int_eq (errno, EINTR);
  return WIFSIGNALED (status) ? 128 + WTERMSIG (status) : WEXITSTATUS (status);
}

static guint
occurrences (const char *text, const char *what)
{
  guint n = 0;

  for (const char *p = text; (p = strstr (p, what)) != NULL; p += strlen (what))
    n++;
  return n;
}

/* What start_run's namzu-run (and its guard, which shares the file) said on stderr. */
static char *
run_stderr (void)
{
  g_autofree char *path = g_build_filename (harness.tmp, "run.stderr", NULL);
  char *text = NULL;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  return text;
}

/* Ctrl-C is SIGINT to every process of the foreground group (the terminal's doing); a
 * SIGTERM sent to namzu-run alone is passed on. Either way namzu-exec cancels the command
 * once, and namzu-run, not its guard, destroys the sandbox. */
static const struct
{
  int signo;
  gboolean to_group;
  const char *marker, *said;
} interrupts[] = {
  { SIGINT, TRUE, "sleep 3101", "SIGINT: execution" },
  { SIGTERM, FALSE, "sleep 3102", "SIGTERM: execution" },
};

START_TEST (test_run_interrupted_cancels_and_destroys)
{
  g_autofree char *err = NULL;
  GPid pid = start_run (interrupts[_i].marker);

  ck_assert (kill (interrupts[_i].to_group ? -pid : pid, interrupts[_i].signo) == 0);
  ck_assert_int_eq (wait_status (pid), 128 + interrupts[_i].signo);
  ck_assert_uint_eq (sandboxes_left (), 0);
  ck_assert (!host_process_mentions (interrupts[_i].marker));
  err = run_stderr ();
  ck_assert_msg (occurrences (err, interrupts[_i].said) == 1, "%s", err);
  ck_assert_msg (strstr (err, "guard") == NULL, "%s", err);
}
END_TEST

START_TEST (test_run_sigkill_leaves_it_to_the_guard)
{
  g_autofree char *err = NULL;
  GPid pid = start_run ("sleep 3103");

  ck_assert (kill (pid, SIGKILL) == 0);
  ck_assert_int_eq (wait_status (pid), 128 + SIGKILL);
  wait_until_gone ();
  for (int i = 0; i < 100 && strstr ((err = run_stderr ()), "its guard destroyed it") == NULL; i++)
    {
      g_clear_pointer (&err, g_free);
      g_usleep (50 * 1000);
    }
  ck_assert_msg (err != NULL && strstr (err, "its guard destroyed it") != NULL, "%s", err);
  for (int i = 0; i < 100 && host_process_mentions ("sleep 3103"); i++)
    g_usleep (50 * 1000);
  ck_assert (!host_process_mentions ("sleep 3103"));
  /* namzu-exec, left in the group, ends once its sandbox is gone. */
  kill (-pid, SIGKILL);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("namzu-run");
  TCase *tc = tcase_create ("run");

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) not installed");
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_run_passes_output_and_status);
  tcase_add_test (tc, test_run_stdin_json_and_timeout);
  tcase_add_test (tc, test_run_refusals_leave_nothing);
  tcase_add_loop_test (tc, test_run_interrupted_cancels_and_destroys, 0, G_N_ELEMENTS (interrupts));
  tcase_add_test (tc, test_run_sigkill_leaves_it_to_the_guard);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
