/* namzu-quiesce: stop every workload process in a sandbox (the agent keeps serving), and with
 * --flush also flush the workspace filesystem; prints the agent's result JSON. */
#include <stdio.h>

#include "nz-agent-files.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-state.h"
#include "nz-tools.h"

static char *opt_sandbox, *opt_endpoint;
static gint opt_grace;
static gboolean opt_flush;

static const GOptionEntry entries[] = {
  { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { "grace", 'g', 0, G_OPTION_ARG_INT, &opt_grace,
    "Milliseconds between SIGTERM and SIGKILL in each round (default: the agent's, 1000; "
    "at most 4999)",
    "MS" },
  { "flush", 'f', 0, G_OPTION_ARG_NONE, &opt_flush,
    "Then flush the workspace filesystem (syncfs) and report that too", NULL },
  { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
    "For testing and direct agent use: talk to the agent at unix:/PATH, tcp:HOST:PORT or "
    "a namzu-worker's http://HOST:PORT instead of a sandbox; the token comes from $NAMZU_TOKEN",
    "ENDPOINT" },
  { NULL }
};

static const char description[]
    = "Prints the agent's quiesce result: "
      "{\"ok\":true,\"scope\":...,\"graceMs\":...,\"rounds\":...,\n"
      "\"stopped\":[{\"pid\":...,\"command\":...,\"signal\":\"SIGTERM\"|\"SIGKILL\"}]}. With "
      "--flush:\n"
      "{\"quiesce\":<that>,\"flush\":{\"ok\":true,\"durationMs\":...,\"workspace\":...}}.\n"
      "Reads, writes and copies keep working afterwards; new commands may start again.\n"
      "Exit status: 0 stopped (and flushed), 1 the agent refused or could not confirm, 2 bad "
      "usage.";

/* docs/cli.md's quiesce-result and flush-result: all that is printed of the agent's replies. */
static const NzJsonPick stopped_schema[] = {
  { "pid", NZ_JSON_PICK_INT },
  { "command", NZ_JSON_PICK_STRING },
  { "signal", NZ_JSON_PICK_STRING },
  { NULL },
};
static const NzJsonPick quiesce_schema[] = {
  { "ok", NZ_JSON_PICK_BOOL },
  { "scope", NZ_JSON_PICK_STRING },
  { "graceMs", NZ_JSON_PICK_INT },
  { "rounds", NZ_JSON_PICK_INT },
  { "stopped", NZ_JSON_PICK_OBJECTS, stopped_schema },
  { "error", NZ_JSON_PICK_STRING },
  { "message", NZ_JSON_PICK_STRING },
  { NULL },
};
static const NzJsonPick flush_schema[] = {
  { "ok", NZ_JSON_PICK_BOOL },          { "durationMs", NZ_JSON_PICK_INT },
  { "workspace", NZ_JSON_PICK_STRING }, { "error", NZ_JSON_PICK_STRING },
  { "message", NZ_JSON_PICK_STRING },   { NULL },
};

/* @reply (taken) with only @schema's members; NULL stays NULL. */
static JsonObject *
pick (JsonObject *reply, const NzJsonPick *schema)
{
  g_autoptr (JsonObject) owned = reply;

  return owned != NULL ? nz_json_pick (owned, schema) : NULL;
}

/* The reply is the agent's, so untrusted: a refusal may lack its code or message. */
static gboolean
reply_failed (JsonObject *reply, const char *what)
{
  const char *code = nz_json_get_string (reply, "error");
  const char *message = nz_json_get_string (reply, "message");

  if (nz_json_get_bool (reply, "ok", FALSE))
    return FALSE;
  nz_cli_warn ("%s: %s%s%s", what, code != NULL ? code : "refused with no error code",
               message != NULL ? ": " : "", message != NULL ? message : "");
  return TRUE;
}

gboolean
nz_tool_quiesce (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- stop every process in a sandbox");
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) quiesce = NULL;
  g_autoptr (JsonObject) flush = NULL;
  gboolean failed;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (argc > 1)
    return nz_cli_usage (error, "unexpected argument '%s'", argv[1]);
  if (opt_grace < 0)
    return nz_cli_usage (error, "--grace wants a positive number of milliseconds");

  client = nz_sandbox_open_client (opt_endpoint, opt_sandbox, TRUE, &handle, error);
  if (client == NULL)
    return FALSE;
  quiesce = pick (nz_agent_client_quiesce (client, opt_grace, cancellable, error), quiesce_schema);
  if (quiesce == NULL)
    return FALSE;
  failed = reply_failed (quiesce, "quiesce");
  if (!opt_flush)
    {
      nz_cli_print_object (quiesce);
      return failed ? nz_cli_exit_status (error, NZ_EXIT_FAILURE) : TRUE;
    }
  /* Flush even after a refused quiesce: what was written so far should still reach disk. */
  flush = pick (nz_agent_client_flush (client, 0, cancellable, error), flush_schema);
  if (flush == NULL)
    return FALSE;
  failed = reply_failed (flush, "flush") || failed;
  {
    g_autoptr (JsonObject) out = json_object_new ();

    json_object_set_object_member (out, "quiesce", json_object_ref (quiesce));
    json_object_set_object_member (out, "flush", json_object_ref (flush));
    nz_cli_print_object (out);
  }
  return failed ? nz_cli_exit_status (error, NZ_EXIT_FAILURE) : TRUE;
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-quiesce", nz_tool_quiesce, argc, argv);
}
