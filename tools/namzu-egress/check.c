/* namzu-egress check PROFILE [TARGET...]: decides each target the way the proxy would, without
 * sending anything. A target is HOST, HOST:PORT, [V6]:PORT or a URL; without a port it is
 * checked on the port the proxy dials (443: CONNECT's default, and plain http is upgraded). */

#include <stdio.h>
#include <string.h>

#include "nz-address.h"
#include "nz-allowlist.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"

#include "commands.h"

static gboolean
decide (const NzEgressProfile *profile, const char *target)
{
  g_autoptr (JsonObject) o = json_object_new ();
  g_autofree char *t = g_strstrip (g_strdup (target));
  g_autofree char *authority = NULL;
  g_autofree char *host = NULL;
  g_autofree char *reason = NULL;
  const NzEgressRule *rule = NULL;
  const char *why;
  const char *rest = t;
  gboolean any;
  gboolean allow = FALSE;
  const char *rule_name = "allowlist";
  int port;

  if (strstr (t, "://") != NULL)
    rest = strstr (t, "://") + 3;
  authority = g_strndup (rest, strcspn (rest, "/?#"));
  if (strchr (authority, '@') != NULL)
    {
      char *at = strrchr (authority, '@');

      memmove (authority, at + 1, strlen (at + 1) + 1);
    }
  nz_allowlist_split_authority (authority, &host, &port);
  if (port < 0)
    port = 443;
  json_object_set_string_member (o, "target", target);
  json_object_set_string_member (o, "host", host);
  json_object_set_int_member (o, "port", port);
  if (!nz_egress_rules_ports_for (profile->rules, host, &any, NULL, &rule))
    reason = g_strdup ("not on the egress allowlist");
  else if (!nz_egress_rules_allow_port (profile->rules, host, port))
    {
      rule_name = rule->host;
      reason = g_strdup_printf ("port %d is not allowed", port);
    }
  else if ((why = nz_address_literal_reason (host, NULL)) != NULL)
    {
      rule_name = "address-screen";
      reason = g_strdup_printf ("is a %s address", why);
    }
  else
    {
      allow = TRUE;
      rule_name = rule->host;
      reason = g_strdup ("allowed");
    }
  json_object_set_string_member (o, "decision", allow ? "allow" : "deny");
  json_object_set_string_member (o, "rule", rule_name);
  json_object_set_string_member (o, "reason", reason);
  /* An IP literal also says what the address screen makes of it, whichever check decided:
   * a profile cannot list a literal, so the screen would otherwise never show. */
  {
    g_autoptr (GInetAddress) literal = nz_address_parse_literal (host);

    if (literal != NULL)
      {
        const char *screen = nz_address_blocked_reason (literal, NULL);

        json_object_set_string_member (o, "addressScreen", screen != NULL ? screen : "reachable");
      }
  }
  nz_cli_print_object (o);
  return allow;
}

gboolean
nz_egress_cmd_check (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("check PROFILE [HOST[:PORT]|URL...]");
  g_autoptr (GError) local = NULL;
  g_autoptr (NzEgressProfile) profile = NULL;
  gboolean all = TRUE;

  g_option_context_set_summary (
      ctx, "Prints one JSON line per target: {target, host, port, decision, rule, reason}.\n"
           "Targets come from stdin, one per line, when none are given.\n"
           "Exit status: 0 every target allowed, 1 some target denied, 2 usage.");
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc < 2)
    return nz_cli_usage (error, "check needs a PROFILE");
  if (argc == 2 && g_str_equal (argv[1], "-"))
    return nz_cli_usage (error, "the profile cannot come from stdin when the targets do");
  profile = nz_egress_read_profile (argv[1], &local);
  if (profile == NULL)
    {
      nz_cli_warn ("%s", local->message);
      return nz_cli_exit_status (error, NZ_EXIT_USAGE);
    }
  if (argc > 2)
    for (int i = 2; i < argc; i++)
      all &= decide (profile, argv[i]);
  else
    {
      char line[4096];

      while (fgets (line, sizeof line, stdin) != NULL)
        {
          g_strstrip (line);
          if (line[0] != '\0' && line[0] != '#')
            all &= decide (profile, line);
        }
    }
  return all ? TRUE : nz_cli_exit_status (error, NZ_EXIT_FAILURE);
}
