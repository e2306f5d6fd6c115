/* nz-lite-exec: the execute op's pieces that need no terminal or process state, in plain C
 * (no GLib), for namzu-exec's front: the request body as tools/namzu-exec/main.c builds it,
 * an execute refusal worded as lib/client words it, the result's exit status, and
 * cancel-with-confirmation (spec D.2.5). */
#pragma once

#include <stdbool.h>

#include "nz-jsonlite.h"
#include "nz-lite-buf.h"
#include "nz-lite-wire.h"

/* main.c's parse_timeout_ms ("500ms", "2s", "3m", "1h", "250"); -1 for anything it would
 * refuse, so that it can word the refusal. */
long long nz_lite_exec_parse_timeout_ms (const char *text);

/* The execute body as main.c's build_body() makes it, without the closing brace so that the
 * execution id can follow. @command is NULL-terminated and non-empty; @env holds @n_env
 * "KEY=VALUE" strings; @cwd and @timeout may be NULL. False for what main.c must decide:
 * text that is not UTF-8, an env entry without a key, a timeout it would refuse. */
bool nz_lite_exec_build_body (char *const *command, const char *cwd, const char *const *env,
                              int n_env, const char *timeout, NzLiteBuf *b);

/* nz_exec_exit_status(): timeout, then the signal, then the code; -1 if none is usable. */
int nz_lite_exec_exit_status (const NzJlValue *result);

/* lib/client's set_agent_error() for an execute refusal @code (@message may be NULL) by the
 * agent @desc. */
void nz_lite_exec_refusal (const char *desc, const char *code, const char *message, NzLiteErr *e);

/* Cancels execution @id and waits for the agent's confirmation within the budget, retrying
 * lost connections (spec D.2.5); signals are not watched. */
bool nz_lite_exec_cancel (NzLiteWire *w, const char *id, NzLiteErr *e);
