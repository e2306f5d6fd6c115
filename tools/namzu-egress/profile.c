/* namzu-egress profile validate|translate: a profile normalised, or translated into what
 * each backend enforces (the docker/bwrap proxy configuration, Kubernetes NetworkPolicy,
 * CiliumNetworkPolicy). */
#include "nz-cli.h"
#include "nz-egress-k8s.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"

#include "commands.h"

gboolean
nz_egress_cmd_profile (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  static char *opt_to;
  static char *opt_namespace;
  static char *opt_template;
  GOptionEntry entries[]
      = { { "to", 0, 0, G_OPTION_ARG_STRING, &opt_to, "translate to docker|k8s|cilium", "T" },
          { "namespace", 0, 0, G_OPTION_ARG_STRING, &opt_namespace,
            "Kubernetes namespace (default namzu-sandboxes)", "NS" },
          { "template", 0, 0, G_OPTION_ARG_STRING, &opt_template,
            "sandbox template name (default namzu-sandbox)", "NAME" },
          { NULL } };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("profile validate|translate FILE|-");
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) out = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, nz_egress_summary);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc != 3 || (!g_str_equal (argv[1], "validate") && !g_str_equal (argv[1], "translate")))
    return nz_cli_usage (error, "usage: namzu-egress profile validate|translate FILE|-");
  profile = nz_egress_read_profile (argv[2], error);
  if (profile == NULL)
    return FALSE;
  if (g_str_equal (argv[1], "validate"))
    {
      out = nz_egress_profile_to_json (profile);
      return nz_cli_print_json (out) ? TRUE : nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  if (opt_to == NULL)
    return nz_cli_usage (error, "profile translate needs --to docker|k8s|cilium");
  if (g_str_equal (opt_to, "docker") || g_str_equal (opt_to, "bwrap"))
    {
      /* The docker/bwrap policy: deny-all with no hosts, else the proxy's configuration. */
      JsonObject *o = json_object_new ();
      JsonObject *policy = json_object_new ();

      out = json_node_new (JSON_NODE_OBJECT);
      json_node_take_object (out, o);
      if (profile->rules->len == 0)
        json_object_set_string_member (policy, "kind", "deny-all");
      else
        {
          g_auto (GStrv) hosts = nz_egress_profile_hosts (profile);
          const char *env = NULL;
          JsonNode *config = nz_proxy_config_build ((const char *const *)hosts, profile, NULL, NULL,
                                                    NZ_EGRESS_PROXY_PORT, &env);
          JsonArray *list = json_array_new ();

          json_object_set_string_member (policy, "kind", "static");
          for (char **h = hosts; *h != NULL; h++)
            json_array_add_string_element (list, *h);
          json_object_set_array_member (policy, "allowedHosts", list);
          json_object_set_string_member (o, "proxyConfigEnv", env);
          json_object_set_member (o, "proxyConfig", config);
          if (nz_egress_profile_has_ports (profile))
            json_object_set_string_member (o, "proxyImageLabel",
                                           NZ_EGRESS_PROXY_IMAGE_CONFIG_LABEL "=2");
        }
      json_object_set_object_member (o, "policy", policy);
    }
  else if (g_str_equal (opt_to, "k8s") || g_str_equal (opt_to, "cilium"))
    {
      const char *tpl = opt_template != NULL ? opt_template : "namzu-sandbox";
      g_autofree char *name = g_strdup_printf ("%s-%s-egress", tpl, profile->name);
      g_autoptr (JsonObject) sel = json_object_new ();

      json_object_set_string_member (sel, "sandbox.namzu.ai/template", tpl);
      json_object_set_string_member (sel, "sandbox.namzu.ai/egress-profile", profile->name);
      out = nz_egress_k8s_from_profile (
          profile, g_str_equal (opt_to, "cilium") ? NZ_EGRESS_K8S_CILIUM : NZ_EGRESS_K8S_CORE, name,
          opt_namespace ? opt_namespace : "namzu-sandboxes", sel, error);
      if (out == NULL)
        return FALSE;
    }
  else
    return nz_cli_usage (error, "--to must be docker, k8s or cilium, got '%s'", opt_to);
  return nz_cli_print_json (out) ? TRUE : nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}
