/* namzu-create: create a sandbox and print its public handle (JSON) on stdout. */
#include <signal.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-progress.h"
#include "nz-tools.h"

#include "options.h"

static const char summary[] =
  "Creates a sandbox and prints its public handle (JSON: id, backend, tier, createdAt,\n"
  "expiresAt and idleTimeoutMs when it has a lifetime, rootDir, network, limits,\n"
  "capabilities) on stdout. The token stays in the private state\n"
  "directory ($NAMZU_STATE_DIR, else $XDG_RUNTIME_DIR/namzu, else /run/namzu).\n"
  "A create still waiting for its sandbox after a second says so on stderr when it is a\n"
  "terminal ($NAMZU_PROGRESS=0: never).\n"
  "Exit status: 0 created, 1 failure, 2 bad usage or config.";

static volatile sig_atomic_t interrupted;

/* SIGINT/SIGTERM/SIGHUP while the sandbox starts: roll it back instead of orphaning it. */
static void
on_signal (int sig, siginfo_t *info, void *ctx)
{
  interrupted = sig;
}

/* A create that answers within this long prints no waiting line at all. */
#define WAITING_LINE_DELAY_MS 1000

static void
on_waiting (gpointer line)
{
  nz_progress_tick (line);
}

gboolean
nz_tool_create (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- create a sandbox");
  g_autoptr (NzCreateOptions) opts = nz_create_options_new ();
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (JsonObject) pub = NULL;
  g_autoptr (NzProgress) line = NULL;

  /* Its flags and --config are what an INVALID_ARGS refusal is about. */
  nz_cli_set_invalid_is_usage (TRUE);
  g_option_context_add_main_entries (ctx, nz_create_entries, NULL);
  g_option_context_set_summary (ctx, summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);

  if (!nz_create_build_options (opts, error))
    return FALSE;
  opts->interrupted = &interrupted;
  nz_cli_trap_stop_signals (on_signal);
  /* Timed from here: what the backend did before it waits (an image check, a container
   * start) is part of the wait a person sees. */
  line = nz_progress_new_wait ("namzu-create: waiting for the sandbox to be ready",
                               WAITING_LINE_DELAY_MS);
  opts->waiting = on_waiting;
  opts->waiting_data = line;
  h = nz_backend_create (opts, error);
  g_clear_pointer (&line, nz_progress_free);
  if (h == NULL)
    return FALSE;
  pub = nz_backend_public_handle (h);
  if (!nz_cli_print_object (pub))
    {
      /* Nobody will learn this sandbox's id: do not leave it running. */
      g_autoptr (GError) derr = NULL;

      nz_cli_warn ("cannot write the handle to stdout; destroying sandbox %s", h->id);
      if (!nz_backend_destroy (h, &derr))
        nz_cli_warn ("%s", derr->message);
      return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  return TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-create", nz_tool_create, argc, argv);
}
