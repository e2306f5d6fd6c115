/* namzu-agent: the guest agent server. Configured by environment variables exactly like the
 * reference agent (NAMZU_AGENT_*, NAMZU_SANDBOX_*); prints one ready line on stdout once bound. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-agent-config.h"
#include "nz-agent-drain.h"
#include "nz-agent-server.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec.h"
#include "nz-guest.h"
#include "nz-heap.h"
#include "nz-lifetime.h"
#include "nz-privsep.h"
#include "nz-tools.h"

static const char description[]
    = "Listen modes (first set wins):\n"
      "  NAMZU_AGENT_UNIX_PATH=PATH     unix socket (an existing PATH is removed first)\n"
      "  NAMZU_AGENT_VSOCK_PORT=PORT    listen on the inherited fd 3 (vsock bridge)\n"
      "  NAMZU_AGENT_TCP_PORT=PORT      TCP on 0.0.0.0 (0 = ephemeral); needs a credential\n"
      "  NAMZU_AGENT_LISTEN_FD=N        accept on the inherited listening socket N (additive)\n"
      "Credentials:\n"
      "  NAMZU_AGENT_BIND_TOKEN=SECRET  every op but healthz must present this token\n"
      "  NAMZU_AGENT_BIND_TOKEN_FD=N    the same token, read from fd N to EOF (additive)\n"
      "  NAMZU_AGENT_REQUIRE_TOKEN=1    bind the first non-empty token presented\n"
      "Workspace: NAMZU_SANDBOX_WORKSPACE (default /workspace), NAMZU_SANDBOX_READ_ROOTS,\n"
      "NAMZU_SANDBOX_WRITE_ROOTS. Limits: NAMZU_AGENT_MAX_FRAME_BYTES, "
      "NAMZU_AGENT_CANCEL_GRACE_MS,\n"
      "NAMZU_SANDBOX_MAX_TIMEOUT_MS and the other NAMZU_AGENT_* knobs of the reference agent.\n"
      "Privilege separation (additive): NAMZU_AGENT_UID/NAMZU_AGENT_GID (the agent's own ids)\n"
      "with NAMZU_AGENT_WORKLOAD_UID/NAMZU_AGENT_WORKLOAD_GID (every command's); the agent is\n"
      "always non-dumpable.\n"
      "Lifetime (additive): NAMZU_AGENT_EXPIRES_AT_MS (wall-clock ms since the epoch) and\n"
      "NAMZU_AGENT_IDLE_TIMEOUT_MS (no request open and no command running for that long);\n"
      "either ends the agent like SIGTERM, with exit status 3. Unset or 0: never.\n"
      "\n"
      "Once bound, prints \"namzu-agent listening on <unix:PATH|tcp:0.0.0.0:PORT|vsock-fd:3>\".\n"
      "SIGTERM: stop accepting, quiesce every workload process, flush the workspace, exit 0\n"
      "within NAMZU_AGENT_SHUTDOWN_DEADLINE_MS. SIGUSR1: run NAMZU_AGENT_RESEED_HOOK and\n"
      "listen again (snapshot resume). Exits 1 on a fatal startup error.";

/* The reference's fatal line, so existing log scrapers keep working. */
static void
fatal_line (const char *message)
{
  fprintf (stderr, "[namzu-fc-agent] fatal: %s\n", message);
}

/* A fatal error once serving (a signal handler on the main loop): there is no caller left. */
G_NORETURN static void
fatal (const char *message)
{
  fatal_line (message);
  exit (1);
}

/* A fatal startup error: the line, then exit 1 through nz_cli_main. */
static gboolean
startup_failed (GError **error, const GError *cause)
{
  fatal_line (cause->message);
  return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}

static void
on_retire (NzGuest *guest, const char *message, gpointer user_data)
{
  fprintf (stderr, "[namzu-fc-agent] termination could not be confirmed; refusing reuse: %s\n",
           message);
}

typedef struct
{
  GMainLoop *loop;
  NzAgentConfig *config;
  NzAgentServer *server;
  NzGuest *guest;
  gboolean stopping;
  int exit_status; /* 0, or NZ_LIFETIME_EXIT_STATUS once the lifetime ended */
} Agent;

static void
log_line (const char *line, gpointer user_data)
{
  fprintf (stderr, "[namzu-fc-agent] %s\n", line);
}

static gboolean
drained (gpointer user_data)
{
  Agent *agent = user_data;

  /* A lifetime's end is the sandbox's end: exit at once with its status, like the worker. No
   * atexit work is owed (the kernel takes the whole pid namespace next), and a sanitizer's
   * exit-time leak scan cannot run under the sandbox's seccomp filter and would turn the
   * status into its own failure. */
  if (agent->exit_status != 0)
    {
      fflush (stdout);
      fflush (stderr);
      _exit (agent->exit_status);
    }
  g_main_loop_quit (agent->loop);
  return G_SOURCE_REMOVE;
}

static gboolean
shutdown_watchdog (gpointer user_data)
{
  Agent *agent = user_data;

  /* The deadline always wins: exit 0 even if the quiesce or the flush still hangs. */
  fprintf (stderr,
           "[namzu-fc-agent] SIGTERM: NAMZU_AGENT_SHUTDOWN_DEADLINE_MS (%" G_GINT64_FORMAT
           "ms) expired; exiting\n",
           agent->config->limits.shutdown_deadline_ms);
  if (agent->exit_status != 0)
    {
      fflush (stderr);
      _exit (agent->exit_status);
    }
  exit (0);
  return G_SOURCE_REMOVE;
}

static void
start_shutdown (Agent *agent)
{
  agent->stopping = TRUE;
  g_timeout_add ((guint)MIN (agent->config->limits.shutdown_deadline_ms, G_MAXUINT),
                 shutdown_watchdog, agent);
  nz_agent_drain_shutdown (agent->server, log_line, drained, agent);
}

/* terminate('SIGTERM') (spec C.15). */
static gboolean
on_sigterm (gpointer user_data)
{
  Agent *agent = user_data;

  /* A second SIGTERM never shortens the drain. */
  if (agent->stopping)
    {
      fprintf (stderr,
               "[namzu-fc-agent] SIGTERM: already stopping; the drain and flush go on until "
               "NAMZU_AGENT_SHUTDOWN_DEADLINE_MS (%" G_GINT64_FORMAT "ms) expires\n",
               agent->config->limits.shutdown_deadline_ms);
      return G_SOURCE_CONTINUE;
    }
  start_shutdown (agent);
  return G_SOURCE_CONTINUE;
}

/* The sandbox's lifetime ended (nz-lifetime.h): the SIGTERM sequence, then exit 3. This
 * process is the sandbox's payload, so its exit is the sandbox's end. */
static void
on_lifetime_end (NzLifetime *lt, NzLifetimeEnd why, const char *message, gpointer user_data)
{
  Agent *agent = user_data;

  fprintf (stderr, "[namzu-fc-agent] %s\n", message);
  if (agent->stopping)
    return;
  agent->exit_status = NZ_LIFETIME_EXIT_STATUS;
  start_shutdown (agent);
}

/* Something the agent started still runs: not idle. */
static gboolean
lifetime_busy (gpointer user_data)
{
  Agent *agent = user_data;
  g_autoptr (GArray) owned = nz_guest_collect_owned_sessions (agent->guest);

  return owned->len > 0;
}

static gboolean
on_sigint (gpointer user_data)
{
  g_main_loop_quit (((Agent *)user_data)->loop);
  return G_SOURCE_REMOVE;
}

/* NAMZU_AGENT_RESEED_HOOK: /bin/sh -c, stdio ignored, the full environment; we wait for it
 * to end either way (it reseeds entropy after a snapshot resume, before we listen). */
static void
run_reseed_hook (const char *hook)
{
  const char *argv[] = { "/bin/sh", "-c", hook, NULL };
  g_autoptr (GError) error = NULL;

  if (hook == NULL)
    return;
  if (!g_spawn_sync (NULL, (char **)argv, NULL,
                     G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL
                         | G_SPAWN_CHILD_INHERITS_STDIN,
                     nz_privsep_child_setup, NULL, NULL, NULL, NULL, &error))
    fprintf (stderr, "[namzu-fc-agent] reseed hook failed: %s\n", error->message);
}

/* SIGUSR1: re-listen on resume: reseed, close the listener, listen again. */
static gboolean
on_sigusr1 (gpointer user_data)
{
  Agent *agent = user_data;
  g_autoptr (GError) error = NULL;

  if (agent->stopping)
    return G_SOURCE_CONTINUE;
  run_reseed_hook (agent->config->reseed_hook);
  if (!nz_agent_server_relisten (agent->server, &error))
    fatal (error->message);
  /* Again, since an ephemeral TCP port changes. */
  printf ("namzu-agent listening on %s\n", nz_agent_server_get_address (agent->server));
  fflush (stdout);
  return G_SOURCE_CONTINUE;
}

gboolean
nz_tool_agent (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) local = NULL;
  g_autoptr (NzAgentConfig) config = NULL;
  g_autoptr (NzGuest) guest = NULL;
  g_autoptr (NzAgentServer) server = NULL;
  g_autoptr (GMainLoop) loop = NULL;
  g_autoptr (NzLifetime) lifetime = NULL;
  Agent agent = { 0 };

  nz_heap_keep_transfer_buffers ();
  g_option_context_set_summary (ctx, "Serve the namzu guest-agent protocol.");
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);

  /* Before anything else, and before any thread: out of the workload's reach. */
  if (!nz_privsep_enter_from_env ("NAMZU_AGENT", &local))
    return startup_failed (error, local);

  /* A peer that hangs up mid-reply must never kill the agent. */
  signal (SIGPIPE, SIG_IGN);

  config = nz_agent_config_new_from_env (&local);
  if (config == NULL)
    return startup_failed (error, local);
  /* The config holds its own copies: /proc/<pid>/environ reads as NULs from here on. */
  nz_privsep_hide_environ ((const char *const[]){ "NAMZU_AGENT_BIND_TOKEN",
                                                   "NAMZU_AGENT_REQUIRE_TOKEN", NULL });
  guest
      = nz_guest_new (&config->limits, config->workspace, config->read_roots, config->write_roots);
  nz_guest_set_retire_func (guest, on_retire, NULL);
  if (!nz_exec_reaper_install (&local))
    return startup_failed (error, local);

  guest->quiesce_owned_only = config->quiesce_owned_only;
  guest->flush_command = g_strdup (config->flush_command);
  nz_guest_set_sandbox_environ ((const char *const *)config->sandbox_env);

  run_reseed_hook (config->reseed_hook);
  loop = g_main_loop_new (NULL, FALSE);
  server = nz_agent_server_new (config, guest);
  if (!nz_agent_server_listen (server, &local))
    return startup_failed (error, local);
  agent = (Agent){ .loop = loop, .config = config, .server = server, .guest = guest };
  lifetime = nz_lifetime_new (config->expires_at_ms, config->idle_timeout_ms, lifetime_busy,
                              on_lifetime_end, &agent);
  nz_agent_server_set_lifetime (server, lifetime);
  nz_lifetime_start (lifetime);
  g_unix_signal_add (SIGTERM, on_sigterm, &agent);
  g_unix_signal_add (SIGINT, on_sigint, &agent);
  g_unix_signal_add (SIGUSR1, on_sigusr1, &agent);

  printf ("namzu-agent listening on %s\n", nz_agent_server_get_address (server));
  fflush (stdout);

  g_main_loop_run (loop);
  nz_agent_server_stop (server);
  /* Freed before the server: connections that close later must not reach it. */
  nz_agent_server_set_lifetime (server, NULL);
  return agent.exit_status != 0 ? nz_cli_exit_status (error, agent.exit_status) : TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-agent", nz_tool_agent, argc, argv);
}
