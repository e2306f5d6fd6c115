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
  json_object_remove_member (reply, "ok");
  nz_cli_print_object (reply);
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
