/* namzu-ls: list the sandboxes in the state directory as JSON Lines, one public handle plus
 * "status" per line, oldest first. No sandboxes, no lines. With --capacity, the capacity of a
 * microvm:kubernetes warm pool instead, one object. */
#include <stdio.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-kube-release.h"
#include "nz-tools.h"

/* Per-sandbox healthz budget: ls must stay quick with many sandboxes. */
#define NZ_LS_PROBE_MS 500

static gboolean opt_no_probe;
static gboolean opt_capacity;
static NzKubeBulkFlags kube_flags;

static const GOptionEntry entries[] = {
  { "no-probe", 0, 0, G_OPTION_ARG_NONE, &opt_no_probe,
    "Judge status from the processes only; do not ask each agent for healthz", NULL },
  { "capacity", 0, 0, G_OPTION_ARG_NONE, &opt_capacity,
    "microvm:kubernetes: print the warm pool's capacity (readyReplicas, replicas, its claims, "
    "the namespace's Pending pods) instead of the sandboxes",
    NULL },
  { NULL }
};

static const char summary[] =
  "Prints one JSON object per line: the public handle namzu-create printed, plus \"status\":\n"
  "running (processes alive, agent answers), unresponsive (alive, agent silent), expired\n"
  "(gone because its --ttl or --idle-timeout ended it; the handle shows expiresAt and\n"
  "idleTimeoutMs) or dead.\n"
  "A sandbox whose handle cannot be read or parsed is named on stderr; the others are still\n"
  "listed.\n"
  "--capacity --warm-pool P --backend microvm:kubernetes [--kubeconfig, --context,\n"
  "--namespace, --config]: prints {\"warmPool\",\"readyReplicas\",\"replicas\",\"claims\",\n"
  "\"pendingPods\"} from the cluster: the SandboxWarmPool's status.readyReplicas and\n"
  "spec.replicas, the SandboxClaims whose warmPoolRef is P, the namespace's Pending pods.\n"
  "Exit status: 0 listed, 1 the state directory or a sandbox's handle cannot be read (or\n"
  "the capacity cannot be read: no such pool), 2 bad usage.";

/* --capacity: spec D.6.3 readKubernetesTaskCapacity, one object on stdout. */
static gboolean
ls_capacity (GError **error)
{
  g_autoptr (JsonObject) out = NULL;

  if (opt_no_probe)
    return nz_cli_usage (error, "--no-probe lists sandboxes; --capacity reads a warm pool");
  nz_cli_set_invalid_is_usage (TRUE);
  out = nz_kube_read_task_capacity (&kube_flags, error);
  return out != NULL && (nz_cli_print_object (out) || nz_cli_exit_status (error, NZ_EXIT_FAILURE));
}

gboolean
nz_tool_ls (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- list sandboxes");
  g_autoptr (GPtrArray) handles = NULL;
  g_autoptr (GPtrArray) unreadable = g_ptr_array_new_with_free_func (g_free);

  g_option_context_add_main_entries (ctx, entries, NULL);
  nz_kube_bulk_add_entries (ctx, &kube_flags, TRUE);
  g_option_context_set_summary (ctx, summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);
  if (opt_capacity)
    return ls_capacity (error);
  if (nz_kube_bulk_flags_given (&kube_flags) != NULL)
    return nz_cli_usage (error, "%s goes with --capacity (the list is of this host's sandboxes)",
                         nz_kube_bulk_flags_given (&kube_flags));

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
