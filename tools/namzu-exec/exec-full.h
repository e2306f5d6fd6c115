/* exec-full.h: what namzu-exec-full's main.c and report.c share. */
#pragma once

#include "nz-agent-client.h"
#include "nz-state.h"

G_BEGIN_DECLS

#define EXIT_NAMZU NZ_EXEC_EXIT_NAMZU

typedef struct
{
  NzAgentClient *client;
  JsonObject *body;
  GCancellable *cancellable;
  JsonObject *result;
  GError *error;
  char *execution_id;
  int signo;              /* signal that made us cancel, 0 if none */
  gboolean broken_output; /* our stdout/stderr went away: cancel, like SIGPIPE would */
} NzExecRun;

/* --json: failures also end the event stream with {"type":"error",...}. */
void nz_exec_report_json (gboolean json);

/* Reports a failure: one stderr line, and in --json mode the closing error event. Returns
 * @status. */
int nz_exec_fail (int status, const char *code, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

/* The remote outcome is unknown: retires the sandbox (if any), reports, returns 125. */
int nz_exec_retire_unconfirmed (NzHandle *handle, const GError *e);

/* The exit status of a finished @run (reported when it failed); @target names the sandbox
 * ("sandbox ID") or is NULL with --endpoint; @command is what ran. */
int nz_exec_finish (NzExecRun *run, NzHandle *handle, const char *target, const char *command);

G_END_DECLS
