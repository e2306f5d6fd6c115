/* nz-worker-agent.h: the worker's two additive agent routes, both served by the agent's own
 * connection state machine and op dispatch (nz-agent-conn.c, nz-agent-ops.c) over the
 * worker's engine, so no op has a second copy:
 *   - GET /v1/agent upgraded to namzu-agent/2: the whole connection speaks the agent's framing,
 *     one request per connection, every op including the duplex ones (terminal,
 *     attach-session, tcp-connect) — nz_worker_agent_accept();
 *   - POST /v1/agent/<op>: one one-way op, its frames handed back one by one as NDJSON
 *     through the agent connection's reply sink (no socket in between) —
 *     nz_worker_agent_call(). */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-agent-conn.h"
#include "nz-guest.h"

G_BEGIN_DECLS

typedef struct _NzWorkerAgent NzWorkerAgent;

/* An agent server over @guest (borrowed; shared with the worker's own routes), configured from
 * the same environment as namzu-agent but never gated: the worker's bearer gate already
 * authenticated the request. */
NzWorkerAgent *nz_worker_agent_new (NzGuest *guest, GError **error);
void nz_worker_agent_free (NzWorkerAgent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzWorkerAgent, nz_worker_agent_free)

/* Serves @connection (a new reference is taken) exactly as the agent serves an accepted unix
 * socket, minus the token check (the bearer gate already ran). */
void nz_worker_agent_accept (NzWorkerAgent *agent, GSocketConnection *connection);

/* Runs {op, body} through the agent's op dispatch, its frames handed to @funcs (see
 * NzAgentSinkFuncs) rather than written to a socket. Returns the connection's reference:
 * unref it after @funcs->end, or nz_agent_conn_detach_sink() it when the HTTP peer leaves. */
NzAgentConn *nz_worker_agent_call (NzWorkerAgent *agent, const char *op, JsonObject *body,
                                   const NzAgentSinkFuncs *funcs, gpointer user_data);

G_END_DECLS
