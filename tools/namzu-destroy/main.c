/* namzu-destroy: tear a sandbox down, checked, and print
 * {"id":...,"destroyed":true,"alreadyGone":BOOL}. */
#include <stdio.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-tools.h"

static char *opt_sandbox;

static const GOptionEntry entries[] = {
  { "sandbox", 0, 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox id (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { NULL }
};

static const char summary[] =
  "Kills every process of the sandbox, confirms they are gone, removes its cgroups and its\n"
  "state. When that cannot be confirmed the state is kept so the command can be retried.\n"
  "Idempotent: a sandbox whose processes or container were already gone (its --ttl or\n"
  "--idle-timeout ended it), or that was destroyed before (within 7 days), is a success with\n"
  "\"alreadyGone\":true. Prints {\"id\",\"destroyed\":true,\"alreadyGone\"}.\n"
  "Exit status: 0 destroyed or already gone, 1 failure (an id namzu never knew, not\n"
  "confirmed gone), 2 bad usage.";

gboolean
nz_tool_destroy (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- destroy a sandbox");
  g_autofree char *id = NULL;
  gboolean gone = FALSE;
  g_autoptr (JsonObject) out = json_object_new ();

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);

  id = nz_handle_resolve_id (opt_sandbox, TRUE, error);
  if (id == NULL || !nz_backend_destroy_id (id, &gone, error))
    return FALSE;
  json_object_set_string_member (out, "id", id);
  json_object_set_boolean_member (out, "destroyed", TRUE);
  json_object_set_boolean_member (out, "alreadyGone", gone);
  return nz_cli_print_object (out) ? TRUE : nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-destroy", nz_tool_destroy, argc, argv);
}
