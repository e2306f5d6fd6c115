/* nz-lite-exec: the execute op's pieces that need no terminal or process state, in plain C
 * (no GLib), for namzu-exec's front: the request body as tools/namzu-exec/main.c builds it,
 * and the exit-status table of a result, for every tool. The state machine around them is
 * nz-lite-core. */
#pragma once

#include <stdbool.h>

#include "nz-jsonlite.h"
#include "nz-lite-buf.h"

/* main.c's parse_timeout_ms ("500ms", "2s", "3m", "1h", "250"); -1 for anything it would
 * refuse, so that it can word the refusal. */
long long nz_lite_exec_parse_timeout_ms (const char *text);

/* The execute body as main.c's build_body() makes it, without the closing brace so that the
 * execution id can follow. @command is NULL-terminated and non-empty; @env holds @n_env
 * "KEY=VALUE" strings; @cwd and @timeout may be NULL. False for what main.c must decide:
 * text that is not UTF-8, an env entry without a key, a timeout it would refuse. */
bool nz_lite_exec_build_body (char *const *command, const char *cwd, const char *const *env,
                              int n_env, const char *timeout, NzLiteBuf *b);

/* The shell-style exit statuses of a remote execution (DESIGN.md "CLI contract"), one table
 * for every tool: the command's code, 128+N for a signal, and these. */
#define NZ_LITE_EXIT_TIMEOUT 124  /* like timeout(1) */
#define NZ_LITE_EXIT_NAMZU 125    /* namzu itself failed */
#define NZ_LITE_EXIT_NOEXEC 126   /* found but not executable, like a shell */
#define NZ_LITE_EXIT_NOTFOUND 127 /* not found, like a shell */

/* The one rule for an ended command, whatever reads its result: the timeout first (a
 * timed-out command also carries the signal that ended it), then a signal 1..64 (128+N), then
 * an integral @code in 0..255 (@has_code); -1 when none of them is usable (an agent's frame is
 * untrusted). */
int nz_lite_exit_status (bool timed_out, int signo, bool has_code, double code);

/* nz_lite_exit_status() of an execute `result` frame (signal by name, spec A.6.3). */
int nz_lite_exec_exit_status (const NzJlValue *result);
