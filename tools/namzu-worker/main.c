/* namzu-worker: the container worker server. Configured by environment variables exactly like
 * the reference worker (NAMZU_SANDBOX_*); prints the reference's listening line on stdout once
 * bound. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-config.h"
#include "nz-exec.h"
#include "nz-guest.h"
#include "nz-heap.h"
#include "nz-privsep.h"
#include "nz-worker-config.h"
#include "nz-worker-server.h"
#include "nz-tools.h"

static const char description[]
    = "Environment (read once at startup; see docs/worker.md):\n"
      "  NAMZU_SANDBOX_PORT (2024; 0 = ephemeral)   NAMZU_SANDBOX_BIND (0.0.0.0)\n"
      "  NAMZU_SANDBOX_TOKEN                        bearer credential for every route but\n"
      "                                             GET /healthz\n"
      "  NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED=1      serve a routable bind with no token\n"
      "  NAMZU_SANDBOX_WORKSPACE (/workspace), NAMZU_SANDBOX_READ_ROOTS, _WRITE_ROOTS\n"
      "  NAMZU_SANDBOX_MAX_BODY_BYTES, _MAX_TIMEOUT_MS, _EXECUTION_LEASE_TTL_MS,\n"
      "  _EXECUTION_TERMINAL_TTL_MS, _MAX_TRACKED_EXECUTIONS, _CANCEL_GRACE_MS,\n"
      "  _CANCEL_CONFIRM_TIMEOUT_MS, _IDLE_TIMEOUT_MS, _NORMAL_EXIT_POLICY\n"
      "  NAMZU_SANDBOX_EXPIRES_AT_MS (additive)     wall-clock ms since the epoch: then exit 3\n"
      "\n"
      "Once bound, prints \"[namzu-sandbox-worker] listening on <bind>:<port> workspace=<ws>\n"
      "idleTimeoutMs=<n> auth=bearer|none\". Refuses to start (exit 1) on a routable bind\n"
      "without a token, and on a token no HTTP header can carry. SIGTERM exits 0; idle for\n"
      "NAMZU_SANDBOX_IDLE_TIMEOUT_MS exits 0, past NAMZU_SANDBOX_EXPIRES_AT_MS exits 3.\n"
      "Privilege separation (additive): NAMZU_WORKER_UID/NAMZU_WORKER_GID (the worker's own\n"
      "ids, started as root with CAP_SETUID/SETGID/KILL) with NAMZU_WORKER_WORKLOAD_UID/\n"
      "NAMZU_WORKER_WORKLOAD_GID (every command's); the worker is always non-dumpable.";

/* A refusal to start: the reference's line, then exit 1 through nz_cli_main. */
static gboolean
refuse (GError **error, const char *reason)
{
  /* Never the token itself: every refusal names the variable, not its value. */
  fprintf (stderr, NZ_WORKER_REFUSAL_PREFIX "%s\n", reason);
  return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}

static void
on_exit_request (NzWorkerServer *server, int exit_code, const char *message, gpointer user_data)
{
  if (message != NULL)
    fprintf (stderr, NZ_WORKER_LOG_PREFIX "%s\n", message);
  if (exit_code < 0)
    return;
  fflush (stdout);
  fflush (stderr);
  /* Idle or poisoned: the process ends here (the container's --rm cleans up). */
  _exit (exit_code);
}

static gboolean
on_sigterm (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

gboolean
nz_tool_worker (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) local = NULL;
  g_autoptr (NzWorkerConfig) config = NULL;
  g_autoptr (NzGuest) guest = NULL;
  g_autoptr (NzWorkerServer) server = NULL;
  g_autoptr (GMainLoop) loop = NULL;

  nz_heap_keep_transfer_buffers ();
  /* Which libsoup serves the API (the shared one Debian ships), for an audit of an update. */
  nz_cli_set_version_detail (NZ_LIBSOUP_LINKAGE);
  g_option_context_set_summary (ctx, "Serve the namzu container-worker HTTP API.");
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);

  /* Before anything else, and before any thread: out of the workload's reach. */
  if (!nz_privsep_enter_from_env ("NAMZU_WORKER", &local))
    return refuse (error, local->message);

  /* The worker reads nothing from stdin. Whatever the runtime left there (gVisor: a host
   * descriptor its /proc lets the workload open) goes; /dev/null, opened here, is nobody's. */
  {
    int null = open ("/dev/null", O_RDONLY);

    if (null < 0 || (null != STDIN_FILENO && dup2 (null, STDIN_FILENO) < 0))
      return refuse (error, "cannot put /dev/null on stdin");
    if (null != STDIN_FILENO)
      close (null);
  }

  /* A peer that hangs up mid-stream must never kill the worker. */
  signal (SIGPIPE, SIG_IGN);

  /* The startup decision, before any socket exists. */
  config = nz_worker_config_new_from_env (&local);
  if (config == NULL)
    return refuse (error, local->message);
  /* The config holds its own copy; not one byte of the environment stays in /proc/1/environ
   * (gVisor lets the workload read it), and commands do not inherit the token. */
  nz_privsep_hide_environ ((const char *const[]){ "NAMZU_SANDBOX_TOKEN", NULL });
  guest = nz_guest_new (&config->limits, config->workspace, config->read_roots,
                        config->write_roots);
  /* Subreaper: orphans of a command are reaped here, or their zombies keep its group alive. */
  if (!nz_exec_reaper_install (&local))
    return refuse (error, local->message);

  loop = g_main_loop_new (NULL, FALSE);
  server = nz_worker_server_new (config, guest, on_exit_request, NULL);
  if (!nz_worker_server_listen (server, &local))
    {
      fprintf (stderr, NZ_WORKER_LOG_PREFIX "%s\n", local->message);
      return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  g_unix_signal_add (SIGTERM, on_sigterm, loop);
  g_unix_signal_add (SIGINT, on_sigterm, loop);

  printf (NZ_WORKER_LOG_PREFIX "listening on %s:%u workspace=%s idleTimeoutMs=%" G_GINT64_FORMAT
          " auth=%s\n",
          config->bind, nz_worker_server_get_port (server), config->workspace,
          config->idle_timeout_ms, config->auth ? "bearer" : "none");
  fflush (stdout);

  g_main_loop_run (loop);
  nz_worker_server_stop (server);
  return TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-worker", nz_tool_worker, argc, argv);
}
