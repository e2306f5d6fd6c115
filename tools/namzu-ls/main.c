/* namzu-ls: list the sandboxes in the state directory as JSON Lines, one public handle plus
 * "status" per line, oldest first. No sandboxes, no lines. */
#include <stdio.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-tools.h"

/* Per-sandbox healthz budget: ls must stay quick with many sandboxes. */
#define NZ_LS_PROBE_MS 500

static gboolean opt_no_probe;

static const GOptionEntry entries[] = {
  { "no-probe", 0, 0, G_OPTION_ARG_NONE, &opt_no_probe,
    "Judge status from the processes only; do not ask each agent for healthz", NULL },
  { NULL }
};

static const char summary[] =
  "Prints one JSON object per line: the public handle namzu-create printed, plus \"status\":\n"
  "running (processes alive, agent answers), unresponsive (alive, agent silent), expired\n"
  "(gone because its --ttl or --idle-timeout ended it; the handle shows expiresAt and\n"
  "idleTimeoutMs) or dead.\n"
  "A sandbox whose handle cannot be read or parsed is named on stderr; the others are still\n"
  "listed.\n"
  "Exit status: 0 listed, 1 the state directory or a sandbox's handle cannot be read, 2 bad\n"
  "usage.";

gboolean
nz_tool_ls (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- list sandboxes");
  g_autoptr (GPtrArray) handles = NULL;
  g_autoptr (GPtrArray) unreadable = g_ptr_array_new_with_free_func (g_free);

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);

  handles = nz_state_list (unreadable, error);
  if (handles == NULL)
    return FALSE;
  for (guint i = 0; i < handles->len; i++)
    {
      NzHandle *h = handles->pdata[i];
      g_autoptr (JsonObject) pub = nz_backend_public_handle (h);
      NzSandboxStatus st = nz_backend_status (h, opt_no_probe ? 0 : NZ_LS_PROBE_MS);

      json_object_set_string_member (pub, "status", nz_sandbox_status_name (st));
      if (!nz_cli_print_object (pub))
        return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  /* Not silently skipped: such a sandbox may still be running, and nothing else shows it. */
  for (guint i = 0; i < unreadable->len; i++)
    nz_cli_warn ("%s", (const char *)unreadable->pdata[i]);
  return unreadable->len > 0 ? nz_cli_exit_status (error, NZ_EXIT_FAILURE) : TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-ls", nz_tool_ls, argc, argv);
}
