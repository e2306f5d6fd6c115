/* namzu-egress set --sandbox ID (HOST... | --profile FILE | --none): change a live sandbox's
 * allowlist (container:bwrap, container:docker, container:runsc; microvm:kubernetes with
 * backend.egress.perSandbox, where it writes the sandbox's own CiliumNetworkPolicy). Prints
 * {"id", "allowedHosts", "changed"}. */
#include <glib.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-state.h"

#include "commands.h"

gboolean
nz_egress_cmd_set (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  static char *opt_sandbox;
  static char *opt_profile;
  static gboolean opt_none;
  GOptionEntry entries[] = { { "sandbox", 0, 0, G_OPTION_ARG_STRING, &opt_sandbox,
                               "sandbox id (or $NAMZU_SANDBOX)", "ID" },
                             { "profile", 0, 0, G_OPTION_ARG_FILENAME, &opt_profile,
                               "take the hosts from a profile", "FILE" },
                             { "none", 0, 0, G_OPTION_ARG_NONE, &opt_none,
                               "an empty list (deny all; kubernetes: the baseline alone)", NULL },
                             { NULL } };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("set HOST... | --profile FILE | --none");
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (GPtrArray) hosts = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (JsonObject) out = json_object_new ();
  g_autoptr (JsonArray) list = json_array_new ();
  gboolean changed = FALSE;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  /* An empty list is asked for by name: a forgotten HOST argument is a usage error. */
  if ((opt_profile != NULL) + (argc > 1) + (opt_none != FALSE) != 1)
    return nz_cli_usage (error, "set takes HOST..., --profile FILE or --none (an empty list)");
  h = nz_handle_resolve (opt_sandbox, FALSE, error);
  if (h == NULL)
    return FALSE;
  if (opt_profile != NULL)
    {
      g_autoptr (NzEgressProfile) p = nz_egress_read_profile (opt_profile, error);

      if (p == NULL)
        return FALSE;
      for (guint i = 0; i < p->rules->len; i++)
        g_ptr_array_add (hosts, g_strdup (((NzEgressRule *)p->rules->pdata[i])->host));
    }
  else
    for (int i = 1; i < argc; i++)
      {
        g_auto (GStrv) parts = g_strsplit (argv[i], ",", -1);

        for (char **p = parts; *p != NULL; p++)
          if (*g_strstrip (*p) != '\0')
            g_ptr_array_add (hosts, g_strdup (*p));
      }
  g_ptr_array_add (hosts, NULL);
  if (!nz_backend_set_network_policy (h, (const char *const *)hosts->pdata, &changed, error))
    return FALSE;
  json_object_set_string_member (out, "id", h->id);
  for (guint i = 0; hosts->pdata[i] != NULL; i++)
    json_array_add_string_element (list, hosts->pdata[i]);
  json_object_set_array_member (out, "allowedHosts", g_steal_pointer (&list));
  json_object_set_boolean_member (out, "changed", changed);
  return nz_cli_print_object (out) ? TRUE : nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}
