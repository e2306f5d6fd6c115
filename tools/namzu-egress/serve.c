/* namzu-egress proxy, relay and isolate: the servers and the one network-namespace change the
 * egress boundary needs, each a thin layer of options over lib/egress and lib/net. */
#include <stdio.h>

#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-netlink.h"
#include "nz-proxy-config.h"
#include "nz-proxy.h"
#include "nz-relay.h"

#include "commands.h"

gboolean
nz_egress_cmd_proxy (int argc, char **argv, GCancellable *cancellable, GError **error)
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
  g_autoptr (GError) local = NULL;
  g_autoptr (NzProxyConfig) config = NULL;
  NzProxyOptions opts = { 0 };
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (
      ctx, "Configured by NAMZU_EGRESS_PROXY_CONFIG (or _V2, which wins); flags are additions.\n"
           "NAMZU_EGRESS_CA_FILE adds trust anchors for upstream TLS.");
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc != 1)
    return nz_cli_usage (error, "proxy takes no arguments");
  if (opt_port < -1 || opt_port > 65535 || opt_max < 1 || opt_idle < 0)
    return nz_cli_usage (error, "--port, --max-connections or --idle-timeout out of range");
  if (opt_no_tcp && opt_unix == NULL)
    return nz_cli_usage (error, "--no-tcp needs --unix");
  config = nz_proxy_config_read (g_getenv (NZ_EGRESS_PROXY_CONFIG_ENV),
                                 g_getenv (NZ_EGRESS_PROXY_CONFIG_V2_ENV), &local);
  if (config == NULL)
    {
      /* The proxy's own prefix: its log lines are the proxy's, whichever binary runs it. */
      fprintf (stderr, "namzu-egress-proxy: %s\n", local->message);
      return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
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
  rc = nz_proxy_run (&opts, &local);
  if (local != NULL)
    fprintf (stderr, "namzu-egress-proxy: %s\n", local->message);
  return rc == NZ_EXIT_OK ? TRUE : nz_cli_exit_status (error, rc);
}

gboolean
nz_egress_cmd_relay (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  static char *opt_listen;
  static char *opt_to;
  GOptionEntry entries[]
      = { { "listen", 0, 0, G_OPTION_ARG_STRING, &opt_listen, "IP:PORT inside the sandbox",
            "ADDR" },
          { "to", 0, 0, G_OPTION_ARG_FILENAME, &opt_to, "the proxy's unix socket", "PATH" },
          { NULL } };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("relay [-- COMMAND...]");
  g_autoptr (GError) local = NULL;
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_strict_posix (ctx, TRUE);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (opt_listen == NULL || opt_to == NULL)
    return nz_cli_usage (error, "relay needs --listen and --to");
  rc = nz_relay_run (opt_listen, opt_to,
                     argc > 1 ? argv + (g_str_equal (argv[1], "--") ? 2 : 1) : NULL, &local);
  if (local != NULL)
    nz_cli_warn ("%s", local->message);
  return rc == NZ_EXIT_OK ? TRUE : nz_cli_exit_status (error, rc);
}

/* Run by the docker backend in a short-lived container that joins a sandbox's network
 * namespace with CAP_NET_ADMIN, before the workload starts: an --internal network still gives
 * the sandbox a default route on docker 20.10, whose packets the daemon drops, so a tool that
 * ignores the proxy settings would hang until its connect timed out. Without the route it
 * fails at once with "Network is unreachable", and the sandbox, holding no capabilities,
 * cannot put one back. */
gboolean
nz_egress_cmd_isolate (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("isolate");
  g_autoptr (JsonObject) out = json_object_new ();
  guint dropped = 0;

  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "isolate takes no arguments");
  if (!nz_netlink_drop_default_routes (&dropped, error))
    return FALSE;
  json_object_set_int_member (out, "droppedRoutes", dropped);
  nz_cli_print_object (out);
  return TRUE;
}
