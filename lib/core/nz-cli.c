#include "nz-cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "nz-config.h"
#include "nz-errors.h"
#include "nz-json.h"

static const char *cli_tool = "namzu";
static gboolean cli_version;

void
nz_cli_init (const char *tool)
{
  cli_tool = tool;
  g_set_prgname (tool);
}

const char *
nz_cli_tool (void)
{
  return cli_tool;
}

void
nz_cli_warn (const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  fprintf (stderr, "%s: %s\n", cli_tool, msg);
  fflush (stderr);
}

void
nz_cli_usage_error (const char *fmt, ...)
{
  char *msg;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  fprintf (stderr, "%s: %s\nTry '%s --help' for more information.\n", cli_tool, msg, cli_tool);
  /* Freed by hand: exit() runs no scope cleanups, and LeakSanitizer would report it. */
  g_free (msg);
  exit (NZ_EXIT_USAGE);
}

void
nz_cli_parse (GOptionContext *ctx, int *argc, char ***argv)
{
  static const GOptionEntry version_entries[] = {
    { "version", 0, 0, G_OPTION_ARG_NONE, &cli_version, "Print the version and exit", NULL },
    { NULL }
  };
  g_autoptr (GError) error = NULL;

  g_option_context_add_main_entries (ctx, version_entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &error))
    {
      g_autofree char *msg = g_strdup (error->message);

      g_clear_error (&error);
      g_option_context_free (ctx);
      nz_cli_usage_error ("%s", msg);
    }
  if (cli_version)
    {
      printf ("%s %s\n", cli_tool, NZ_VERSION);
      exit (NZ_EXIT_OK);
    }
}

gboolean
nz_cli_print_json (JsonNode *node)
{
  gsize len = 0;
  g_autofree char *text = nz_json_to_string (node, &len);

  if (fwrite (text, 1, len, stdout) != len || fputc ('\n', stdout) == EOF || fflush (stdout) != 0)
    return FALSE;
  return TRUE;
}

gboolean
nz_cli_print_object (JsonObject *obj)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, obj);
  return nz_cli_print_json (node);
}

int
nz_cli_fail (const GError *error, gboolean json_on_stdout)
{
  nz_cli_warn ("%s", error->message);
  if (json_on_stdout)
    {
      g_autoptr (JsonObject) outer = json_object_new ();
      JsonObject *inner = json_object_new ();

      json_object_set_string_member (inner, "code", nz_error_code_name (error));
      json_object_set_string_member (inner, "message", error->message);
      json_object_set_object_member (outer, "error", inner);
      nz_cli_print_object (outer);
    }
  return nz_error_to_exit_code (error);
}
