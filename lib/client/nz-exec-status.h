/* nz-exec-status.h: a remote execution's outcome as a shell-style exit status (DESIGN.md "CLI
 * contract"): the command's code, 128+N for a signal, 124 on timeout. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-lite-exec.h"

G_BEGIN_DECLS

/* lib/lite's table (nz-lite-exec.h), the one both namzu-exec programs use. */
#define NZ_EXEC_EXIT_TIMEOUT NZ_LITE_EXIT_TIMEOUT
#define NZ_EXEC_EXIT_NAMZU NZ_LITE_EXIT_NAMZU
#define NZ_EXEC_EXIT_NOEXEC NZ_LITE_EXIT_NOEXEC
#define NZ_EXEC_EXIT_NOTFOUND NZ_LITE_EXIT_NOTFOUND

/* Linux signal number of "SIGTERM" etc. (the wire names signals, spec A.6.3), or 0. */
int nz_signal_from_name (const char *name);
/* "SIGTERM" etc. for @signo, or NULL when it has no standard name. */
const char *nz_signal_name (int signo);

/* The exit status for an execute `result` frame: 124 when timedOut, 128+N when signal N ended
 * the command, else exitCode. -1 when the frame carries none of these usably. */
int nz_exec_exit_status (JsonObject *result);

G_END_DECLS
