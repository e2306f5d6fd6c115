/* nz-worker-agent.h: the worker's two additive agent routes, both served by the agent's own
 * connection state machine and op dispatch (nz-agent-conn.c, nz-agent-ops.c) over the
 * worker's engine, so no op has a second copy:
 *   - GET /v1/agent upgraded to namzu-agent/2: the whole connection speaks the agent's framing,
 *     one request per connection, every op including the duplex ones (terminal,
 *     attach-session, tcp-connect) — nz_worker_agent_accept();
 *   - POST /v1/agent/<op>: one one-way op, its frames handed back one by one as NDJSON —
 *     nz_worker_agent_call(). */
#pragma once

#include <gio/gio.h>
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

/* Serves @connection (a new reference is taken) exactly as the agent serves an accepted unix
 * socket, minus the token check (the bearer gate already ran). */
void nz_worker_agent_accept (NzWorkerAgent *agent, GSocketConnection *connection);

/* Sends {op, body} as the first frame of a fresh in-process connection. The call frees itself
 * after `end`, or when cancelled. */
NzWorkerAgentCall *nz_worker_agent_call (NzWorkerAgent *agent, const char *op, JsonObject *body,
                                         const NzWorkerAgentFuncs *funcs, gpointer user_data);
/* The HTTP peer went away: hang up on the agent side; no callback runs after this. */
void nz_worker_agent_call_cancel (NzWorkerAgentCall *call);

G_END_DECLS
