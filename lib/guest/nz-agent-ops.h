/* nz-agent-ops.h: dispatch of an authorised first frame to the op handlers (spec A.5, A.6). */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* Runs the global refusals (retiring) then the op. The handler owns the rest of the
 * connection's life: it ends, streams on, or destroys it. */
void nz_agent_ops_dispatch (NzAgentConn *conn, NzEnvelope *env);

G_END_DECLS
