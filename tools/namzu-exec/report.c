/* namzu-exec-full's report: how a run's outcome becomes the exit status (the command's, or
 * 124-127 and 128+N) and the one stderr line, with --json the closing error event. The
 * failures go through lib/lite's one outcome table, the front's (nz_lite_core_outcome). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "nz-agent-client.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-json.h"
#include "nz-lite-core.h"
#include "nz-lite-exec.h"

#include "exec-full.h"

static gboolean report_json;

void
nz_exec_report_json (gboolean json)
{
  report_json = json;
}

/* Reports a failure: one stderr line, and in --json mode the closing error event. */
int
nz_exec_fail (int status, const char *code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  nz_cli_warn ("%s", msg);
  if (report_json)
    {
      g_autoptr (JsonObject) ev = json_object_new ();
      JsonObject *inner = json_object_new ();

      json_object_set_string_member (ev, "type", "error");
      json_object_set_string_member (inner, "code", code);
      json_object_set_string_member (inner, "message", msg);
      json_object_set_object_member (ev, "error", inner);
      nz_cli_print_object (ev);
    }
  return status;
}

/* The remote outcome is unknown (spec D.2 RemoteCancellationUnknownError): what ran may still
 * run, so the sandbox is retired (spec B.7 retire(): the container is removed) rather than
 * left to be reused. */
int
nz_exec_retire_unconfirmed (NzHandle *handle, const GError *e)
{
  g_autoptr (GError) local = NULL;

  if (handle == NULL)
    return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed", NZ_LITE_CORE_NO_RETIRE_FORMAT,
                         e->message);
  if (!nz_backend_retire (handle, &local))
    return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed",
                         "%s; retiring sandbox %s failed too: %s; tear it down with namzu-destroy",
                         e->message, handle->id, local->message);
  return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed",
                       "%s; sandbox %s was retired (torn down), since what ran in it may still run",
                       e->message, handle->id);
}

/* @e's kind in the one outcome table (nz-lite-core.h). */
static NzLiteErrKind
lite_kind (const GError *e)
{
  if (g_error_matches (e, G_SPAWN_ERROR, G_SPAWN_ERROR_NOENT))
    return NZ_LITE_ERR_NOENT;
  if (e->domain == G_SPAWN_ERROR)
    return NZ_LITE_ERR_NOEXEC;
  if (g_error_matches (e, NZ_ERROR, NZ_ERROR_INVALID_ARGS))
    return NZ_LITE_ERR_INVALID;
  if (g_error_matches (e, NZ_ERROR, NZ_ERROR_PROTOCOL))
    return NZ_LITE_ERR_PROTOCOL;
  if (g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED))
    return NZ_LITE_ERR_DIAL;
  return NZ_LITE_ERR_FAILED;
}

/* The result line as docs/cli.md documents it, rebuilt from the agent's frame: only the
 * members we know, each of its type, so a workload that owns its agent cannot add members to
 * (or change the shape of) what a script reads from namzu-exec --json. */
static JsonObject *
checked_result (JsonObject *result, const char *execution_id)
{
  static const char *const flags[] = { "timedOut", "stdoutTruncated", "stderrTruncated" };
  JsonObject *out = json_object_new ();
  JsonObject *timing = nz_json_get_object (result, "timing");
  const char *sig = nz_json_get_string (result, "signal");
  double code = -1, duration = 0;

  json_object_set_string_member (out, "type", "result");
  if (!nz_json_get_number (result, "exitCode", &code)
      || !(code >= -2147483648.0 && code <= 2147483647.0) || code != (double)(gint64)code)
    code = -1;
  json_object_set_int_member (out, "exitCode", (gint64)code);
  if (sig != NULL && nz_signal_from_name (sig) > 0)
    json_object_set_string_member (out, "signal", sig);
  for (guint i = 0; i < G_N_ELEMENTS (flags); i++)
    json_object_set_boolean_member (out, flags[i], nz_json_get_bool (result, flags[i], FALSE));
  if (!nz_json_get_number (result, "durationMs", &duration) || !(duration >= 0) || duration > 1e15)
    duration = 0;
  json_object_set_int_member (out, "durationMs", (gint64)duration);
  json_object_set_string_member (out, "executionId", execution_id);
  /* Ours, measured on this host (nz-agent-client); still rebuilt member by member, should a
   * path have left the agent's own. */
  if (timing != NULL)
    {
      static const char *const phases[]
          = { "reserveMs", "dialMs", "executeMs", "drainMs", "firstFrameMs", "totalMs" };
      JsonObject *t = json_object_new ();

      for (guint i = 0; i < G_N_ELEMENTS (phases); i++)
        {
          double v = 0;

          if (!nz_json_get_number (timing, phases[i], &v) || !(v >= 0) || v > 1e15)
            v = 0;
          json_object_set_int_member (t, phases[i], (gint64)v);
        }
      json_object_set_object_member (out, "timing", t);
    }
  return out;
}

int
nz_exec_finish (NzExecRun *run, NzHandle *handle, const char *target, const char *command)
{
  const GError *e = run->error;
  g_autofree char *msg = NULL;
  const char *code = NULL;
  gsize msg_size;
  int status;

  if (run->result != NULL)
    {
      if (report_json)
        {
          g_autoptr (JsonObject) line = checked_result (run->result, run->execution_id);

          nz_cli_print_object (line);
        }
      status = nz_exec_exit_status (run->result);
      if (status >= 0)
        return status;
      return nz_exec_fail (EXIT_NAMZU, "protocol", NZ_LITE_CORE_NO_STATUS_WORDS);
    }
  if (g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_CANCEL_UNCONFIRMED))
    return nz_exec_retire_unconfirmed (handle, e);
  /* Room for the longest line of the table: the message, the target and the command. */
  msg_size = strlen (e->message) + (target ? strlen (target) : 0) + strlen (command) + 256;
  msg = g_malloc (msg_size);
  if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      status = nz_lite_core_cancelled (run->signo, e->message, msg, msg_size);
      return *msg != '\0' ? nz_exec_fail (status, "cancelled", "%s", msg) : status;
    }
  status = nz_lite_core_outcome (lite_kind (e), e->message, NULL, command, target,
                                 run->execution_id != NULL, msg, msg_size, &code);
  return nz_exec_fail (status, code != NULL ? code : nz_error_code_name (e), "%s", msg);
}
