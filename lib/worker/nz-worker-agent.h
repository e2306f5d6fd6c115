/* nz-worker-agent.h: the additive route POST /v1/agent/<op>: one agent-protocol op run by the
 * agent's own dispatch (nz-agent-ops.c, over an in-process connection), its frames handed back
 * one by one. So every one-way agent op (attach-execution, read-file-stream, ranged reads,
 * parts writes, sessions, quiesce, flush, ...) works on a worker with no second copy of it. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

typedef struct _NzWorkerAgent NzWorkerAgent;
typedef struct _NzWorkerAgentCall NzWorkerAgentCall;

/* An agent server over @guest (borrowed; shared with the worker's own routes), configured from
 * the same environment as namzu-agent but never gated: the worker's bearer gate already
 * authenticated the request. */
NzWorkerAgent *nz_worker_agent_new (NzGuest *guest, GError **error);
void nz_worker_agent_free (NzWorkerAgent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzWorkerAgent, nz_worker_agent_free)

typedef struct
{
  /* One frame's JSON (never the terminator). */
  void (*frame) (const char *json, gsize len, gpointer user_data);
  /* The op ended (terminator, the agent closed, or a transport error); called once, last. */
  void (*end) (gpointer user_data);
} NzWorkerAgentFuncs;

/* Sends {op, body} as the first frame of a fresh in-process connection. The call frees itself
 * after `end`, or when cancelled. */
NzWorkerAgentCall *nz_worker_agent_call (NzWorkerAgent *agent, const char *op, JsonObject *body,
                                         const NzWorkerAgentFuncs *funcs, gpointer user_data);
/* The HTTP peer went away: hang up on the agent side; no callback runs after this. */
void nz_worker_agent_call_cancel (NzWorkerAgentCall *call);

G_END_DECLS
