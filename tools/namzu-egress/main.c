/* namzu-egress: egress profiles (validate, translate, check), the egress proxy, the in-sandbox
 * relay, and live policy change. Thin: options -> one library or server call -> print.
 *
 *   namzu-egress profile validate FILE|-
 *   namzu-egress profile translate --to docker|k8s|cilium FILE|-
 *   namzu-egress check PROFILE [HOST[:PORT]|URL]...   (targets from stdin when none given)
 *   namzu-egress proxy [--listen ADDR] [--port N] [--unix PATH] [--log FILE] ...
 *   namzu-egress relay --listen 127.0.0.1:PORT --to UNIX_PATH [-- COMMAND...]
 *   namzu-egress set --sandbox ID (HOST... | --profile FILE | --none)
 *
 * Exit: 0 ok (check: every target allowed), 1 failure (check: some target denied), 2 usage. */
#include <locale.h>
#include <signal.h>
#include <stdio.h>

#include <gio/gunixinputstream.h>

#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-profile.h"
#include "nz-tools.h"

#include "commands.h"

const char nz_egress_summary[]
    = "Commands:\n"
      "  profile validate FILE|-             print the normalised profile\n"
      "  profile translate --to T FILE|-     T = docker (proxy config), k8s (core NetworkPolicy),\n"
      "                                      cilium (CiliumNetworkPolicy)\n"
      "  check PROFILE [TARGET...]           offline dry run, one JSON line per target\n"
      "  proxy                               run the egress proxy "
      "(NAMZU_EGRESS_PROXY_CONFIG[_V2])\n"
      "  relay --listen IP:PORT --to PATH    in-sandbox relay to the proxy's unix socket\n"
      "  set --sandbox ID HOST...|--profile F  change a live sandbox's allowlist (--none: an\n"
      "                                      empty list; kubernetes: with perSandbox)\n"
      "  isolate                             drop every default route of this network\n"
      "                                      namespace (CAP_NET_ADMIN; docker backend)\n"
      "\nExit status: 0 ok (check: all allowed), 1 failure (check: any denied), 2 usage.";

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

typedef gboolean (*Command) (int argc, char **argv, GCancellable *cancellable, GError **error);

static const struct
{
  const char *name;
  Command run;
} commands[] = {
  { "profile", nz_egress_cmd_profile }, { "check", nz_egress_cmd_check },
  { "proxy", nz_egress_cmd_proxy },     { "relay", nz_egress_cmd_relay },
  { "set", nz_egress_cmd_set },         { "isolate", nz_egress_cmd_isolate },
};

gboolean
nz_tool_egress (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  const char *cmd;

  setlocale (LC_ALL, "");
  /* Profile refusals carry the spec's code strings ("invalid-host", ...). */
  nz_cli_set_code_names (NZ_EGRESS_ERROR, nz_egress_error_code_name);
  /* A client hanging up mid-write must not kill the proxy. */
  signal (SIGPIPE, SIG_IGN);
  if (argc < 2)
    return nz_cli_usage (error, "a command is required");
  if (g_str_equal (argv[1], "--help") || g_str_equal (argv[1], "-h"))
    {
      printf ("Usage: namzu-egress COMMAND [OPTION...]\n\n%s\n", nz_egress_summary);
      return TRUE;
    }
  if (g_str_equal (argv[1], "--version"))
    {
      g_autoptr (GOptionContext) ctx = g_option_context_new (NULL);

      if (!nz_cli_parse_args (ctx, &argc, &argv, error))
        return FALSE;
    }
  cmd = argv[1];
  argv[1] = argv[0];
  argc--;
  argv++;
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    if (g_str_equal (cmd, commands[i].name))
      return commands[i].run (argc, argv, cancellable, error);
  return nz_cli_usage (error, "unknown command '%s'", cmd);
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-egress", nz_tool_egress, argc, argv);
}
