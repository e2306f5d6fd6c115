/* namzu-run: create a sandbox, run one command in it, destroy it whatever happens; exit with
 * the command's status, like `docker run --rm`.
 *
 * Three processes: this one creates, waits and destroys; the command runs under namzu-exec
 * (so its output, stdin, timeout and cancellation are exactly namzu-exec's); and a guard,
 * started first in a session of its own, destroys the sandbox if this process dies without
 * saying it is done (SIGKILL, a crash), so no way of ending leaves a sandbox behind. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-state.h"
#include "nz-tools.h"

#include "../namzu-create/options.h"
#include "guard.h"

#define EXIT_NAMZU 125

static char *opt_timeout, *opt_cwd;
static char **opt_command;
static gboolean opt_json, opt_stdin;

static const GOptionEntry run_entries[]
    = { { "stdin", 'i', 0, G_OPTION_ARG_NONE, &opt_stdin,
          "Send our stdin to the command (namzu-exec -i: at most 4 MiB of UTF-8 text)", NULL },
        { "timeout", 't', 0, G_OPTION_ARG_STRING, &opt_timeout,
          "Kill the command after MS milliseconds or a DURATION like 30s, 5m; exit 124",
          "MS|DURATION" },
        { "cwd", 'C', 0, G_OPTION_ARG_FILENAME, &opt_cwd,
          "Working directory inside the sandbox workspace (created if missing)", "DIR" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &opt_json,
          "Write namzu-exec's NDJSON events on stdout instead of passing output through", NULL },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_command, NULL, NULL },
        { NULL } };

static const char description[]
    = "Creates a sandbox with the namzu-create options given (default: container:bwrap, deny-all\n"
      "egress), runs COMMAND in it as namzu-exec would (stdout and stderr passed through, or\n"
      "--json events), and destroys the sandbox however the command ends: exit, signal, timeout,\n"
      "Ctrl-C, or this process being killed (a guard process outlives it for that). Nothing but\n"
      "the command's output is written on stdout.\n"
      "\n"
      "Exit status: the command's (as namzu-exec: 128+N for signal N, 124 on timeout, 126/127\n"
      "if it could not be run or found); 2 bad usage or config; 125 if namzu failed: the sandbox\n"
      "could not be created, or could not be confirmed destroyed (its id is then on stderr, for\n"
      "namzu-destroy). SIGINT, SIGTERM and SIGHUP cancel the command, then the sandbox goes.";

static volatile sig_atomic_t interrupted;
static volatile pid_t exec_pid;

/* The terminal sends SIGINT to namzu-exec too (one process group); a signal sent to us alone
 * (kill PID) is passed on, so namzu-exec cancels the command either way, once. */
static void
on_signal (int sig, siginfo_t *info, void *ctx)
{
  (void)ctx;
  interrupted = sig;
  if (exec_pid > 0 && info->si_code <= 0)
    kill (exec_pid, sig);
}

/* Next to us (the build tree, an install's bindir), else where meson installs it. */
static char *
sibling (const char *name)
{
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = self != NULL ? g_path_get_dirname (self) : NULL;
  g_autofree char *path = dir != NULL ? g_build_filename (dir, name, NULL) : NULL;

  if (path != NULL && g_file_test (path, G_FILE_TEST_IS_EXECUTABLE))
    return g_steal_pointer (&path);
  return g_build_filename (NZ_RUN_BINDIR, name, NULL);
}

/* namzu-exec --sandbox ID [options] -- COMMAND...; its status as a shell reports it. */
static int
run_exec (const char *id, GError **error)
{
  g_autofree char *exec = sibling ("namzu-exec");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autofree char *timeout_arg = NULL;
  g_autofree char *cwd_arg = NULL;
  GPid pid;
  int status;

  g_ptr_array_add (argv, exec);
  g_ptr_array_add (argv, (char *)"--sandbox");
  g_ptr_array_add (argv, (char *)id);
  if (opt_json)
    g_ptr_array_add (argv, (char *)"--json");
  if (opt_stdin)
    g_ptr_array_add (argv, (char *)"-i");
  if (opt_timeout != NULL)
    g_ptr_array_add (argv, timeout_arg = g_strconcat ("--timeout=", opt_timeout, NULL));
  if (opt_cwd != NULL)
    g_ptr_array_add (argv, cwd_arg = g_strconcat ("--cwd=", opt_cwd, NULL));
  g_ptr_array_add (argv, (char *)"--");
  for (int i = 0; opt_command[i] != NULL; i++)
    g_ptr_array_add (argv, opt_command[i]);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_async (NULL, (char **)argv->pdata, NULL,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_CHILD_INHERITS_STDIN, NULL, NULL, &pid,
                      error))
    return -1;
  exec_pid = pid;
  /* A signal that came while the sandbox started is the command's to answer now. */
  if (interrupted != 0)
    kill (pid, interrupted);
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return nz_throw_errno_prefix (error, "waiting for namzu-exec"), -1;
  exec_pid = 0;
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return WEXITSTATUS (status);
}

gboolean
nz_tool_run (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[--] COMMAND [ARGS...]");
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (GError) local = NULL;
  g_auto (NzRunGuard) guard = NZ_RUN_GUARD_INIT;
  int status;

  (void)cancellable;
  /* stdout is the command's; every failure of ours goes to stderr. */
  nz_cli_set_json_errors (FALSE);
  nz_cli_set_invalid_is_usage (TRUE);
  g_option_context_set_strict_posix (ctx, TRUE);
  g_option_context_add_main_entries (ctx, run_entries, NULL);
  g_option_context_add_main_entries (ctx, nz_create_entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  nz_cli_strip_dashdash (opt_command);
  if (opt_command == NULL || opt_command[0] == NULL || *opt_command[0] == '\0')
    return nz_cli_usage (error, "no COMMAND given");
  if (!nz_create_build_options (opts, error))
    return FALSE;

  opts->interrupted = &interrupted;
  nz_cli_trap_stop_signals (on_signal);
  /* Before the sandbox exists, so there is no moment it could be left without one. */
  if (!nz_run_guard_start (&guard, &local))
    return nz_cli_warn ("%s", local->message), nz_cli_exit_status (error, EXIT_NAMZU);
  h = nz_backend_create (opts, &local);
  if (h == NULL && interrupted != 0)
    return nz_cli_exit_status (error, 128 + interrupted);
  /* A config the backend refuses is a usage error, as namzu-create reports it. */
  if (h == NULL && g_error_matches (local, NZ_ERROR, NZ_ERROR_INVALID_ARGS))
    return g_propagate_error (error, g_steal_pointer (&local)), FALSE;
  if (h == NULL)
    return nz_cli_warn ("%s", local->message), nz_cli_exit_status (error, EXIT_NAMZU);
  nz_run_guard_arm (&guard, h->id);

  status = run_exec (h->id, &local);
  if (status < 0)
    {
      nz_cli_warn ("%s", local->message);
      g_clear_error (&local);
      status = EXIT_NAMZU;
    }
  if (!nz_backend_destroy (h, &local))
    {
      nz_cli_warn ("sandbox %s was not destroyed: %s (retry: namzu-destroy --sandbox %s)", h->id,
                   local->message, h->id);
      status = EXIT_NAMZU;
    }
  /* Done either way: a sandbox that could not be confirmed gone keeps its state for a retry,
   * which the guard would only repeat. */
  nz_run_guard_disarm (&guard);
  return status == 0 ? TRUE : nz_cli_exit_status (error, status);
}

int
main (int argc, char **argv)
{
  if (g_getenv (NZ_RUN_GUARD_ENV) != NULL)
    return nz_run_guard_main ();
  return nz_cli_main ("namzu-run", nz_tool_run, argc, argv);
}
