/* namzu-egress: egress profiles (validate, translate, check), the egress proxy, the in-sandbox
 * relay, and live policy change. Thin: options -> one library or server call -> print.
 *
 *   namzu-egress profile validate FILE|-
 *   namzu-egress profile translate --to docker|k8s|cilium FILE|-
 *   namzu-egress check PROFILE [HOST[:PORT]|URL]...   (targets from stdin when none given)
 *   namzu-egress proxy [--listen ADDR] [--port N] [--unix PATH] [--log FILE] ...
 *   namzu-egress relay --listen 127.0.0.1:PORT --to UNIX_PATH [-- COMMAND...]
 *   namzu-egress set --sandbox ID (HOST... | --profile FILE)
 *
 * Exit: 0 ok (check: every target allowed), 1 failure (check: some target denied), 2 usage. */
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nz-cli.h"
#include "nz-egress-k8s.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-netlink.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"
#include "nz-proxy.h"
#include <gio/gunixinputstream.h>
#include "nz-relay.h"
#include "set.h"

static const char summary[]
    = "Commands:\n"
      "  profile validate FILE|-             print the normalised profile\n"
      "  profile translate --to T FILE|-     T = docker (proxy config), k8s (core NetworkPolicy),\n"
      "                                      cilium (CiliumNetworkPolicy)\n"
      "  check PROFILE [TARGET...]           offline dry run, one JSON line per target\n"
      "  proxy                               run the egress proxy "
      "(NAMZU_EGRESS_PROXY_CONFIG[_V2])\n"
      "  relay --listen IP:PORT --to PATH    in-sandbox relay to the proxy's unix socket\n"
      "  set --sandbox ID HOST...|--profile F  change a live sandbox's allowlist\n"
      "  isolate                             drop every default route of this network\n"
      "                                      namespace (CAP_NET_ADMIN; docker backend)\n"
      "\nExit status: 0 ok (check: all allowed), 1 failure (check: any denied), 2 usage.";

static int
fail_egress (const GError *error)
{
  /* Profile errors carry the spec's code strings ("invalid-host", ...). */
  if (error->domain == NZ_EGRESS_ERROR)
    {
      g_autoptr (JsonObject) outer = json_object_new ();
      JsonObject *inner = json_object_new ();

      nz_cli_warn ("%s", error->message);
      json_object_set_string_member (inner, "code", nz_egress_error_code_name (error));
      json_object_set_string_member (inner, "message", error->message);
      json_object_set_object_member (outer, "error", inner);
      nz_cli_print_object (outer);
      return NZ_EXIT_FAILURE;
    }
  return nz_cli_fail (error, TRUE);
}

NzEgressProfile *
nz_egress_read_profile (const char *path, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;

  if (g_str_equal (path, "-"))
    {
      g_autoptr (GInputStream) in = g_unix_input_stream_new (0, FALSE);
      g_autoptr (GOutputStream) mem = g_memory_output_stream_new_resizable ();

      /* A profile is small; refuse one that is not rather than buffering without bound. */
      if (g_output_stream_splice (mem, in, G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET, NULL, error) < 0)
        return NULL;
      len = g_memory_output_stream_get_data_size (G_MEMORY_OUTPUT_STREAM (mem));
      data = g_memory_output_stream_steal_data (G_MEMORY_OUTPUT_STREAM (mem));
    }
  else if (!g_file_get_contents (path, &data, &len, error))
    return NULL;
  if (len > 1024 * 1024)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "profile '%s' is larger than 1 MiB", path),
            NULL);
  return nz_egress_profile_parse (data != NULL ? data : "", len, NULL, error);
}

static int
cmd_profile (int argc, char **argv)
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
  g_autoptr (GError) error = NULL;
  g_autoptr (NzEgressProfile) profile = NULL;
  g_autoptr (JsonNode) out = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, summary);
  nz_cli_parse (ctx, &argc, &argv);
  if (argc != 3 || (!g_str_equal (argv[1], "validate") && !g_str_equal (argv[1], "translate")))
    nz_cli_usage_error ("usage: namzu-egress profile validate|translate FILE|-");
  profile = nz_egress_read_profile (argv[2], &error);
  if (profile == NULL)
    return fail_egress (error);
  if (g_str_equal (argv[1], "validate"))
    {
      out = nz_egress_profile_to_json (profile);
      return nz_cli_print_json (out) ? NZ_EXIT_OK : NZ_EXIT_FAILURE;
    }
  if (opt_to == NULL)
    nz_cli_usage_error ("profile translate needs --to docker|k8s|cilium");
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
          opt_namespace ? opt_namespace : "namzu-sandboxes", sel, &error);
      if (out == NULL)
        return fail_egress (error);
    }
  else
    nz_cli_usage_error ("--to must be docker, k8s or cilium, got '%s'", opt_to);
  return nz_cli_print_json (out) ? NZ_EXIT_OK : NZ_EXIT_FAILURE;
}

static int
cmd_proxy (int argc, char **argv)
{
  static char *opt_listen;
  static int opt_port = -1;
  static char *opt_unix;
  static char *opt_log;
  static int opt_max = 512;
  static int opt_idle = 300;
  static char *opt_test_resolve;
  static gboolean opt_no_tcp;
  GOptionEntry entries[] = {
    { "listen", 0, 0, G_OPTION_ARG_STRING, &opt_listen, "TCP address (default 0.0.0.0)", "ADDR" },
    { "port", 0, 0, G_OPTION_ARG_INT, &opt_port, "TCP port, 0 = any (default: config port)", "N" },
    { "unix", 0, 0, G_OPTION_ARG_FILENAME, &opt_unix, "also listen on this unix socket", "PATH" },
    { "no-tcp", 0, 0, G_OPTION_ARG_NONE, &opt_no_tcp, "listen on --unix only", NULL },
    { "log", 0, 0, G_OPTION_ARG_FILENAME, &opt_log, "decision log file (default stderr)", "FILE" },
    { "max-connections", 0, 0, G_OPTION_ARG_INT, &opt_max, "concurrent connections (512)", "N" },
    { "idle-timeout", 0, 0, G_OPTION_ARG_INT, &opt_idle, "idle seconds before close (300)", "S" },
    { "test-resolve", 0, 0, G_OPTION_ARG_STRING, &opt_test_resolve,
      "TEST ONLY: NAME=ADDR[;ADDR],... replaces DNS (also NAMZU_EGRESS_TEST_RESOLVE)", "MAP" },
    { NULL }
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("proxy - run the egress proxy");
  g_autoptr (GError) error = NULL;
  g_autoptr (NzProxyConfig) config = NULL;
  NzProxyOptions opts = { 0 };
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (
      ctx, "Configured by NAMZU_EGRESS_PROXY_CONFIG (or _V2, which wins); flags are additions.\n"
           "NAMZU_EGRESS_CA_FILE adds trust anchors for upstream TLS.");
  nz_cli_parse (ctx, &argc, &argv);
  if (argc != 1)
    nz_cli_usage_error ("proxy takes no arguments");
  if (opt_port < -1 || opt_port > 65535 || opt_max < 1 || opt_idle < 0)
    nz_cli_usage_error ("--port, --max-connections or --idle-timeout out of range");
  if (opt_no_tcp && opt_unix == NULL)
    nz_cli_usage_error ("--no-tcp needs --unix");
  config = nz_proxy_config_read (g_getenv (NZ_EGRESS_PROXY_CONFIG_ENV),
                                 g_getenv (NZ_EGRESS_PROXY_CONFIG_V2_ENV), &error);
  if (config == NULL)
    {
      fprintf (stderr, "namzu-egress-proxy: %s\n", error->message);
      return NZ_EXIT_FAILURE;
    }
  /* The configuration may hold credential values: keep it out of any child we might start. */
  g_unsetenv (NZ_EGRESS_PROXY_CONFIG_ENV);
  g_unsetenv (NZ_EGRESS_PROXY_CONFIG_V2_ENV);
  if (opt_port >= 0)
    config->port = opt_port;
  opts.config = config;
  opts.bind_host = opt_no_tcp ? NULL : (opt_listen != NULL ? opt_listen : "0.0.0.0");
  opts.unix_path = opt_unix;
  opts.log_path = opt_log;
  opts.max_connections = opt_max;
  opts.idle_timeout_s = opt_idle;
  opts.test_resolve
      = opt_test_resolve != NULL ? opt_test_resolve : g_getenv ("NAMZU_EGRESS_TEST_RESOLVE");
  opts.ca_file = g_getenv ("NAMZU_EGRESS_CA_FILE");
  rc = nz_proxy_run (&opts, &error);
  if (error != NULL)
    fprintf (stderr, "namzu-egress-proxy: %s\n", error->message);
  return rc;
}

static int
cmd_relay (int argc, char **argv)
{
  static char *opt_listen;
  static char *opt_to;
  GOptionEntry entries[]
      = { { "listen", 0, 0, G_OPTION_ARG_STRING, &opt_listen, "IP:PORT inside the sandbox",
            "ADDR" },
          { "to", 0, 0, G_OPTION_ARG_FILENAME, &opt_to, "the proxy's unix socket", "PATH" },
          { NULL } };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("relay [-- COMMAND...]");
  g_autoptr (GError) error = NULL;
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_strict_posix (ctx, TRUE);
  nz_cli_parse (ctx, &argc, &argv);
  if (opt_listen == NULL || opt_to == NULL)
    nz_cli_usage_error ("relay needs --listen and --to");
  rc = nz_relay_run (opt_listen, opt_to,
                     argc > 1 ? argv + (g_str_equal (argv[1], "--") ? 2 : 1) : NULL, &error);
  if (error != NULL)
    nz_cli_warn ("%s", error->message);
  return rc;
}

/* Run by the docker backend in a short-lived container that joins a sandbox's network
 * namespace with CAP_NET_ADMIN, before the workload starts: an --internal network still gives
 * the sandbox a default route on docker 20.10, whose packets the daemon drops, so a tool that
 * ignores the proxy settings would hang until its connect timed out. Without the route it
 * fails at once with "Network is unreachable", and the sandbox, holding no capabilities,
 * cannot put one back. */
static int
cmd_isolate (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("isolate");
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) out = json_object_new ();
  guint dropped = 0;

  nz_cli_parse (ctx, &argc, &argv);
  if (argc > 1)
    nz_cli_usage_error ("isolate takes no arguments");
  if (!nz_netlink_drop_default_routes (&dropped, &error))
    return nz_cli_fail (error, TRUE);
  json_object_set_int_member (out, "droppedRoutes", dropped);
  nz_cli_print_object (out);
  return NZ_EXIT_OK;
}

int
main (int argc, char **argv)
{
  const char *cmd;

  setlocale (LC_ALL, "");
  nz_cli_init ("namzu-egress");
  /* A client hanging up mid-write must not kill the proxy. */
  signal (SIGPIPE, SIG_IGN);
  if (argc < 2 || g_str_equal (argv[1], "--help") || g_str_equal (argv[1], "-h"))
    {
      if (argc < 2)
        nz_cli_usage_error ("a command is required");
      printf ("Usage: namzu-egress COMMAND [OPTION...]\n\n%s\n", summary);
      return NZ_EXIT_OK;
    }
  if (g_str_equal (argv[1], "--version"))
    {
      g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);

      nz_cli_parse (ctx, &argc, &argv);
    }
  cmd = argv[1];
  argv[1] = argv[0];
  argc--;
  argv++;
  if (g_str_equal (cmd, "profile"))
    return cmd_profile (argc, argv);
  if (g_str_equal (cmd, "check"))
    return nz_egress_cmd_check (argc, argv);
  if (g_str_equal (cmd, "proxy"))
    return cmd_proxy (argc, argv);
  if (g_str_equal (cmd, "relay"))
    return cmd_relay (argc, argv);
  if (g_str_equal (cmd, "set"))
    return nz_egress_cmd_set (argc, argv);
  if (g_str_equal (cmd, "isolate"))
    return cmd_isolate (argc, argv);
  nz_cli_usage_error ("unknown command '%s'", cmd);
}
