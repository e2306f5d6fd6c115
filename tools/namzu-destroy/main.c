/* namzu-destroy: tear a sandbox down, checked, and print
 * {"id":...,"destroyed":true,"alreadyGone":BOOL}; or, with --selector, release every
 * microvm:kubernetes claim the label selector matches and print {"deleted":N,"names":[...]}. */
#include <stdio.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-kube-release.h"
#include "nz-tools.h"

static char *opt_sandbox;
static char *opt_selector;
static NzKubeBulkFlags kube_flags;

static const GOptionEntry entries[] = {
  { "sandbox", 0, 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox id (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { "selector", 0, 0, G_OPTION_ARG_STRING, &opt_selector,
    "microvm:kubernetes: release every SandboxClaim of the namespace whose labels (claimLabels) "
    "match this label selector, and remove their handles (never empty)",
    "SELECTOR" },
  { NULL }
};

static const char summary[] =
  "Kills every process of the sandbox, confirms they are gone, removes its cgroups and its\n"
  "state. When that cannot be confirmed the state is kept so the command can be retried.\n"
  "Idempotent: a sandbox whose processes or container were already gone (its --ttl or\n"
  "--idle-timeout ended it), or that was destroyed before (within 7 days), is a success with\n"
  "\"alreadyGone\":true. Prints {\"id\",\"destroyed\":true,\"alreadyGone\"}.\n"
  "--selector team=a,run=42 --backend microvm:kubernetes [--kubeconfig, --context,\n"
  "--namespace, --config]: DELETEs every SandboxClaim of the namespace the label selector\n"
  "matches (gone already counts as done), removes the handles of those sandboxes, and prints\n"
  "{\"deleted\":N,\"names\":[...]}. An empty selector is refused (it would release them all).\n"
  "Exit status: 0 destroyed or already gone, 1 failure (an id namzu never knew, not\n"
  "confirmed gone, a claim not released), 2 bad usage (an empty selector, or one the API\n"
  "server refused).";

/* --selector: spec D.6.3 releaseKubernetesTaskSandboxes, its {deleted, names} on stdout. */
static gboolean
destroy_by_selector (GError **error)
{
  g_autoptr (JsonObject) out = NULL;

  if (opt_sandbox != NULL)
    return nz_cli_usage (error, "--sandbox and --selector name different sandboxes; give one");
  /* Before any request: an empty selector selects every claim of the namespace. */
  if (nz_kube_selector_is_blank (opt_selector))
    return nz_cli_usage (error, "--selector: an empty label selector would release every claim "
                                "of the namespace; name the labels (e.g. team=a,run=42)");
  nz_cli_set_invalid_is_usage (TRUE);
  out = nz_kube_release_task_sandboxes (&kube_flags, opt_selector, error);
  return out != NULL && (nz_cli_print_object (out) || nz_cli_exit_status (error, NZ_EXIT_FAILURE));
}

gboolean
nz_tool_destroy (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- destroy a sandbox");
  g_autofree char *id = NULL;
  gboolean gone = FALSE;
  g_autoptr (JsonObject) out = json_object_new ();

  g_option_context_add_main_entries (ctx, entries, NULL);
  nz_kube_bulk_add_entries (ctx, &kube_flags, FALSE);
  g_option_context_set_summary (ctx, summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);
  if (opt_selector != NULL)
    return destroy_by_selector (error);
  if (nz_kube_bulk_flags_given (&kube_flags) != NULL)
    return nz_cli_usage (error, "%s goes with --selector (a sandbox's handle names its cluster)",
                         nz_kube_bulk_flags_given (&kube_flags));

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
