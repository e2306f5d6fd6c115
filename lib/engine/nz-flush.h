/* nz-flush.h: flush the workspace filesystem (spec C.14): `sync -f WORKSPACE` (syncfs(2)), or
 * `/bin/sh -c $NAMZU_AGENT_FLUSH_COMMAND`, bounded by a timeout; never a bare `sync`. */
#pragma once

#include <glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

/* "sync", or "/bin/sh" when a flush command is configured. */
const char *nz_flush_program (NzGuest *guest);
/* canFlush: the program resolves like execvp would (PATH search unless it holds a '/') to an
 * executable regular file. Computed once per process. */
gboolean nz_flush_available (NzGuest *guest);

/* @error_message NULL on success (then @duration_ms is set). The messages are the wire's. */
typedef void (*NzFlushFunc) (gint64 duration_ms, const char *error_message, gpointer user_data);

/* runFlush: spawns the program with the agent's full (unscrubbed) environment, stdin and
 * stdout on /dev/null, stderr captured (about 4096 characters); SIGKILL and an error after
 * @timeout_ms, naming @source. @func runs exactly once, from the main loop or before this
 * returns. Requires nz_exec_reaper_install(). */
void nz_flush_run (NzGuest *guest, gint64 timeout_ms, const char *source, NzFlushFunc func,
                   gpointer user_data);

/* The flush_unsupported message for @guest. Returns a new string. */
char *nz_flush_unsupported_message (NzGuest *guest);

G_END_DECLS
