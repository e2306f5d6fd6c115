/* nz-agent-ops.h: dispatch of an authorised first frame to the op handlers (spec A.5, A.6). */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* Runs the global refusals (retiring) then the op. The handler owns the rest of the
 * connection's life: it ends, streams on, or destroys it. @payload is the raw first frame. */
void nz_agent_ops_dispatch (NzAgentConn *conn, NzEnvelope *env, GBytes *payload);

/* TRUE when a JSON text holds a \u0000 escape (not itself escaped). json-glib strings are
 * C strings and would silently stop there, so ops that carry data refuse such requests. */
gboolean nz_agent_ops_has_nul_escape (const char *json, gsize len);

/* The features this engine serves right now, in the reference's order (spec A.9); a new
 * array. namzu-worker lists the same ones in its /healthz, since every op reaches this engine
 * through its upgrade route. */
JsonArray *nz_agent_ops_features (NzGuest *guest);

G_END_DECLS
