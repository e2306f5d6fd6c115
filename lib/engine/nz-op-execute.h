/* nz-op-execute.h: the execute op parsed and validated once, for both wires (spec A.6.3 for
 * namzu-agent's framed wire, C.4 for namzu-worker's POST /execute): a typed request ready to
 * start, or a refusal {code, detail, ...} in the spec's exact strings, which each wire words in
 * its own reply shape. The checks run in the references' order; where the two references
 * differ, @wire says which one is asked. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-exec.h"
#include "nz-guest.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_WIRE_AGENT,  /* the framed wire: its refusals are "code: detail" strings */
  NZ_WIRE_WORKER, /* the HTTP wire: {error: code, message?: detail} with a status */
} NzWire;

/* Why an op was refused: the spec's code, and what each wire adds. */
typedef struct
{
  const char *code;   /* "missing_command", "invalid_cwd", ...; NULL: @detail is all of it */
  char *detail;       /* after the code (agent "code: detail"; worker "message"), or NULL */
  guint http_status;  /* the worker's status (400, 404, 409) */
  const char *state;  /* execution_not_reserved: the record's state, as the wire spells it */
} NzRefusal;

void nz_refusal_clear (NzRefusal *refusal);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzRefusal, nz_refusal_clear)

/* The agent's string for @refusal: "code" or "code: detail". Returns a new string. */
char *nz_refusal_agent_message (const NzRefusal *refusal);

typedef struct
{
  NzExecRecord *rec;   /* the reserved record (tracked), or a private one (untracked) */
  NzExecSpec spec;     /* ready for nz_exec_start; its strings are owned here */
  char *cwd;
  GPtrArray *args;     /* char *, NULL-terminated */
  GStrv envp;
  GBytes *stdin_bytes;
} NzExecRequest;

/* Parses and checks execute's @body (may be NULL; it must outlive nz_exec_start, which the
 * spec's command points into) for @wire: command, (worker) the normal-exit
 * policy, the execution id, (agent) retainOutput needing an id, cwd in the jail, the timeout
 * in range, maxOutputBytes, the reservation, (agent) a retained-output slot, the arguments.
 * NULL with *@refusal set (a refusal after the reservation was found leaves the record
 * terminal `failed`, as the reference does). */
NzExecRequest *nz_op_execute_parse (NzGuest *guest, JsonObject *body, NzWire wire,
                                    NzRefusal *refusal);
void nz_exec_request_free (NzExecRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzExecRequest, nz_exec_request_free)

/* cancel-execution's and POST /cancel's target (spec A.6.4, C.4): the record @body's
 * executionId names, or NULL with invalid_execution_id (400) or unknown_execution (404). The
 * worker prunes expired records first and takes its looser id pattern. Borrowed. */
NzExecRecord *nz_op_cancel_target (NzGuest *guest, JsonObject *body, NzWire wire,
                                   NzRefusal *refusal);

/* reserve-execution and POST /reserve-execution (spec A.6.2, C.4), after expired records are
 * pruned at @now_ms: the record reserved (or, on the agent, the one @body's executionId names
 * already: *@existing, may be NULL), or NULL with agent_retiring (503), invalid_execution_id
 * (400) or execution_capacity (503; the worker's detail says how many it tracks). The worker
 * takes no id from the host: it always mints one. Borrowed. */
NzExecRecord *nz_op_reserve (NzGuest *guest, JsonObject *body, NzWire wire, gint64 now_ms,
                             gboolean *existing, NzRefusal *refusal);

G_END_DECLS
