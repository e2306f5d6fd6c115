/* follow.c: namzu-attach --execution and --session: a retained execution's or a session's
 * output, replayed from a byte offset and followed until it ends; its exit status is ours. */
#include "attach.h"

#include <stdio.h>

#include "nz-agent-sessions.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-host-timing.h"
#include "nz-json.h"

void
nz_attach_write_output (int stream, const char *data, gsize len, gpointer user_data)
{
  FILE *f = stream == NZ_EXEC_STDERR ? stderr : stdout;

  fwrite (data, 1, len, f);
  fflush (f);
}

static void
on_gap (guint64 dropped, guint64 offset, gpointer user_data)
{
  nz_cli_warn ("%" G_GUINT64_FORMAT " bytes of output were dropped before offset %" G_GUINT64_FORMAT
               " (the agent's ring no longer holds them)",
               dropped, offset);
}

static const NzAttachCallbacks attach_callbacks = { nz_attach_write_output, on_gap };

int
nz_attach_fail (const GError *cause)
{
  nz_cli_warn ("%s", cause->message);
  return NZ_EXEC_EXIT_NAMZU;
}

/* A followed command's status is ours, and every message about it is already out. */
gboolean
nz_attach_exit_status (GError **error, int status)
{
  return status == NZ_EXIT_OK ? TRUE : nz_cli_exit_status (error, status);
}

/* An execution ends at its timeout, NAMZU_SANDBOX_MAX_TIMEOUT_MS (30 min) at the most: a
 * stream still open 10 s past the longest it may run is a peer that lies or hangs. */
static guint64
observation_ms (long long timeout_ms)
{
  return (guint64)timeout_ms + NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS;
}

gboolean
nz_attach_follow_execution (NzAgentClient *c, const char *execution_id, guint64 from,
                            long long timeout_ms, gint64 heartbeat_ms, GError **error)
{
  g_autoptr (GError) local_error = NULL;
  g_autoptr (JsonObject) end
      = nz_agent_attach_execution (c, execution_id, from, observation_ms (timeout_ms), heartbeat_ms,
                                   &attach_callbacks, NULL, NULL, &local_error);
  JsonObject *result;
  int status;

  if (end == NULL)
    return nz_attach_exit_status (error, nz_attach_fail (local_error));
  result = nz_json_get_object (end, "result");
  if (result == NULL)
    {
      nz_cli_warn ("execution %s ended %s without a result: %s", execution_id,
                   nz_json_get_string (end, "outcome"),
                   nz_json_get_string (end, "error") ? nz_json_get_string (end, "error") : "-");
      return nz_cli_exit_status (error, NZ_EXEC_EXIT_NAMZU);
    }
  status = nz_exec_exit_status (result);
  return nz_attach_exit_status (error, status >= 0 ? status : NZ_EXEC_EXIT_NAMZU);
}

/* Session exit frames carry a numeric signal. */
int
nz_attach_session_status (JsonObject *exit_frame)
{
  double code = -1, sig = 0;
  gboolean has_code = nz_json_get_number (exit_frame, "exitCode", &code);
  int status;

  /* The frame is the agent's: only a real signal number or exit status counts. */
  if (!nz_json_get_number (exit_frame, "signal", &sig) || sig != (int)sig)
    sig = 0;
  status = nz_lite_exit_status (FALSE, sig >= 1 && sig <= 64 ? (int)sig : 0, has_code, code);
  if (status >= 0)
    return status;
  nz_cli_warn ("the agent's exit frame carries no usable exit status");
  return NZ_EXEC_EXIT_NAMZU;
}

gboolean
nz_attach_follow_session (NzAgentClient *c, const char *session_id, guint64 from,
                          gint64 heartbeat_ms, GError **error)
{
  g_autoptr (GError) local_error = NULL;
  g_autoptr (JsonObject) end = nz_agent_attach_session (
      c, session_id, from, heartbeat_ms, &attach_callbacks, NULL, NULL, &local_error);

  if (end == NULL)
    return nz_attach_exit_status (error, nz_attach_fail (local_error));
  return nz_attach_exit_status (error, nz_attach_session_status (end));
}
