/* namzu-agent: the guest agent server. Configured by environment variables exactly like the
 * reference agent (NAMZU_AGENT_*, NAMZU_SANDBOX_*); prints one ready line on stdout once bound. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib-unix.h>

#include "nz-agent-config.h"
#include "nz-agent-server.h"
#include "nz-cli.h"
#include "nz-exec.h"
#include "nz-guest.h"

static const char description[]
    = "Listen modes (first set wins):\n"
      "  NAMZU_AGENT_UNIX_PATH=PATH     unix socket (an existing PATH is removed first)\n"
      "  NAMZU_AGENT_VSOCK_PORT=PORT    listen on the inherited fd 3 (vsock bridge)\n"
      "  NAMZU_AGENT_TCP_PORT=PORT      TCP on 0.0.0.0 (0 = ephemeral); needs a credential\n"
      "Credentials:\n"
      "  NAMZU_AGENT_BIND_TOKEN=SECRET  every op but healthz must present this token\n"
      "  NAMZU_AGENT_REQUIRE_TOKEN=1    bind the first non-empty token presented\n"
      "Workspace: NAMZU_SANDBOX_WORKSPACE (default /workspace), NAMZU_SANDBOX_READ_ROOTS,\n"
      "NAMZU_SANDBOX_WRITE_ROOTS. Limits: NAMZU_AGENT_MAX_FRAME_BYTES, "
      "NAMZU_AGENT_CANCEL_GRACE_MS,\n"
      "NAMZU_SANDBOX_MAX_TIMEOUT_MS and the other NAMZU_AGENT_* knobs of the reference agent.\n"
      "\n"
      "Once bound, prints \"namzu-agent listening on <unix:PATH|tcp:0.0.0.0:PORT|vsock-fd:3>\".\n"
      "Exits 0 on SIGTERM, 1 on a fatal startup error.";

G_NORETURN static void
fatal (const char *message)
{
  /* The reference's fatal line, so existing log scrapers keep working. */
  fprintf (stderr, "[namzu-fc-agent] fatal: %s\n", message);
  exit (1);
}

static void
on_retire (NzGuest *guest, const char *message, gpointer user_data)
{
  fprintf (stderr, "[namzu-fc-agent] termination could not be confirmed; refusing reuse: %s\n",
           message);
}

static gboolean
on_terminate (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (NzAgentConfig) config = NULL;
  g_autoptr (NzGuest) guest = NULL;
  g_autoptr (NzAgentServer) server = NULL;
  g_autoptr (GMainLoop) loop = NULL;

  nz_cli_init ("namzu-agent");
  g_option_context_set_summary (ctx, "Serve the namzu guest-agent protocol.");
  g_option_context_set_description (ctx, description);
  nz_cli_parse (ctx, &argc, &argv);
  if (argc > 1)
    nz_cli_usage_error ("unexpected argument '%s'", argv[1]);

  /* A peer that hangs up mid-reply must never kill the agent. */
  signal (SIGPIPE, SIG_IGN);

  config = nz_agent_config_new_from_env (&error);
  if (config == NULL)
    fatal (error->message);
  guest
      = nz_guest_new (&config->limits, config->workspace, config->read_roots, config->write_roots);
  nz_guest_set_retire_func (guest, on_retire, NULL);
  if (!nz_exec_reaper_install (&error))
    fatal (error->message);

  loop = g_main_loop_new (NULL, FALSE);
  server = nz_agent_server_new (config, guest);
  if (!nz_agent_server_listen (server, &error))
    fatal (error->message);
  g_unix_signal_add (SIGTERM, on_terminate, loop);
  g_unix_signal_add (SIGINT, on_terminate, loop);

  printf ("namzu-agent listening on %s\n", nz_agent_server_get_address (server));
  fflush (stdout);

  g_main_loop_run (loop);
  /* Stop accepting first; the quiesce/flush drain of the reference's SIGTERM handler is not
   * part of this agent yet. */
  nz_agent_server_stop (server);
  return 0;
}
