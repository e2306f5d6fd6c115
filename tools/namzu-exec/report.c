/* namzu-exec-full's report: how a run's outcome becomes the exit status (the command's, or
 * 124-127 and 128+N) and the one stderr line, with --json the closing error event. */
#include <signal.h>
#include <stdio.h>

#include "nz-agent-client.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-json.h"
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
    return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed",
                         "%s; no sandbox to retire with --endpoint: stop that agent yourself",
                         e->message);
  if (!nz_backend_retire (handle, &local))
    return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed",
                         "%s; retiring sandbox %s failed too: %s; tear it down with namzu-destroy",
                         e->message, handle->id, local->message);
  return nz_exec_fail (EXIT_NAMZU, "cancellation_unconfirmed",
                       "%s; sandbox %s was retired (torn down), since what ran in it may still run",
                       e->message, handle->id);
}

int
nz_exec_finish (NzExecRun *run, NzHandle *handle, const char *target, const char *command)
{
  const GError *e = run->error;
  int status;

  if (run->result != NULL)
    {
      if (report_json)
        {
          json_object_set_string_member (run->result, "executionId", run->execution_id);
          nz_cli_print_object (run->result);
        }
      status = nz_exec_exit_status (run->result);
      if (status >= 0)
        return status;
      return nz_exec_fail (EXIT_NAMZU, "protocol", "the agent reported no usable exit status");
    }
  if (g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_CANCEL_UNCONFIRMED))
    return nz_exec_retire_unconfirmed (handle, e);
  if (g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      int signo = run->signo != 0 ? run->signo : SIGPIPE;

      if (run->signo != 0)
        nz_exec_fail (128 + signo, "cancelled", "%s: %s", nz_signal_name (signo), e->message);
      return 128 + signo;
    }
  if (g_error_matches (e, G_SPAWN_ERROR, G_SPAWN_ERROR_NOENT))
    return nz_exec_fail (NZ_EXEC_EXIT_NOTFOUND, "not_found",
                         "%s: command not found in the sandbox (%s)", command, e->message);
  if (e->domain == G_SPAWN_ERROR)
    return nz_exec_fail (NZ_EXEC_EXIT_NOEXEC, "permission_denied", "%s: cannot execute (%s)",
                         command, e->message);
  if (e->domain == NZ_ERROR && e->code == NZ_ERROR_INVALID_ARGS)
    return nz_exec_fail (EXIT_NAMZU, "invalid_args", "%s", e->message);
  if (e->domain == NZ_ERROR && e->code == NZ_ERROR_PROTOCOL)
    return nz_exec_fail (EXIT_NAMZU, "protocol", "%s", e->message);
  if (g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED) && target == NULL)
    return nz_exec_fail (EXIT_NAMZU, "unreachable",
                         "cannot reach %s; is namzu-agent running there? (namzu-ls lists the "
                         "sandboxes)",
                         e->message);
  if (g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED))
    return nz_exec_fail (EXIT_NAMZU, "unreachable",
                         "cannot reach %s (%s); it may have stopped: check namzu-ls, or create a "
                         "new sandbox with namzu-create",
                         target, e->message);
  /* Reserved, so it may have run: say the outcome is unknown and where to look. */
  if (run->execution_id != NULL && target != NULL)
    return nz_exec_fail (EXIT_NAMZU, nz_error_code_name (e),
                         "%s; the command's outcome in %s is unknown (check it with namzu-ls)",
                         e->message, target);
  if (target != NULL)
    return nz_exec_fail (EXIT_NAMZU, nz_error_code_name (e), "%s (%s; check it with namzu-ls)",
                         e->message, target);
  return nz_exec_fail (EXIT_NAMZU, nz_error_code_name (e), "%s", e->message);
}
