/* sessions.c: namzu-attach --list, --kill and --start-detached: one agent call each, its reply
 * printed on stdout as JSON (a refusal too, as an error object). */
#include "attach.h"

#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"

void
nz_attach_set_command (JsonObject *body, char **command)
{
  JsonArray *args = json_array_new ();

  json_object_set_string_member (body, "command", command[0]);
  for (int i = 1; command[i] != NULL; i++)
    json_array_add_string_element (args, command[i]);
  json_object_set_array_member (body, "args", args);
}

/* docs/cli.md's session-summary and session-list: all that is printed of the agent's reply. */
static const NzJsonPick summary[] = {
  { "sessionId", NZ_JSON_PICK_STRING }, { "kind", NZ_JSON_PICK_STRING },
  { "command", NZ_JSON_PICK_STRING },   { "args", NZ_JSON_PICK_STRINGS },
  { "startedAt", NZ_JSON_PICK_INT },    { "lastInputAt", NZ_JSON_PICK_INT },
  { "lastOutputAt", NZ_JSON_PICK_INT }, { "nextOffset", NZ_JSON_PICK_INT },
  { "droppedBytes", NZ_JSON_PICK_INT }, { "state", NZ_JSON_PICK_STRING },
  { "attached", NZ_JSON_PICK_BOOL },    { "exitCode", NZ_JSON_PICK_INT },
  { "signal", NZ_JSON_PICK_INT },       { "pid", NZ_JSON_PICK_INT },
  { "signalled", NZ_JSON_PICK_INT },    { NULL },
};
static const NzJsonPick list[] = { { "sessions", NZ_JSON_PICK_OBJECTS, summary }, { NULL } };

static gboolean
print_call (NzAgentClient *c, const char *op, JsonObject *body, GError **error)
{
  g_autoptr (JsonObject) reply = nz_agent_client_call (c, op, body, NULL, error);

  /* nz_cli_main() reports it, error object on stdout too: main.c turns that on in these modes. */
  if (reply == NULL)
    return FALSE;
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      g_autoptr (JsonObject) out = json_object_new ();
      JsonObject *inner = json_object_new ();
      const char *code = nz_json_get_string (reply, "error");

      json_object_set_string_member (inner, "code", code != NULL ? code : "failed");
      json_object_set_string_member (inner, "message", code != NULL ? code : "refused");
      json_object_set_object_member (out, "error", inner);
      nz_cli_print_object (out);
      nz_cli_warn ("%s: %s", op, code != NULL ? code : "refused");
      return nz_cli_exit_status (error, NZ_EXIT_FAILURE);
    }
  {
    g_autoptr (JsonObject) out
        = nz_json_pick (reply, g_str_equal (op, "list-sessions") ? list : summary);

    nz_cli_print_object (out);
  }
  return TRUE;
}

gboolean
nz_attach_list_sessions (NzAgentClient *c, GError **error)
{
  return print_call (c, "list-sessions", NULL, error);
}

gboolean
nz_attach_start_detached (NzAgentClient *c, const char *session_id, char **command, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "sessionId", session_id);
  nz_attach_set_command (body, command);
  return print_call (c, "start-detached", body, error);
}

gboolean
nz_attach_kill_session (NzAgentClient *c, const char *session_id, const char *signame,
                        GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  json_object_set_string_member (body, "sessionId", session_id);
  if (signame != NULL)
    json_object_set_string_member (body, "signal", signame);
  return print_call (c, "kill-session", body, error);
}
