/* nz-agent-ops.h: dispatch of an authorised first frame to the op handlers (spec A.5, A.6). */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* Runs the global refusals (retiring) then the op. The handler owns the rest of the
 * connection's life: it ends, streams on, or destroys it. @payload is the raw first frame, or
 * NULL when the caller's wire already refused a \u0000 escape (namzu-worker's body parse). */
void nz_agent_ops_dispatch (NzAgentConn *conn, NzEnvelope *env, GBytes *payload);

/* TRUE when a JSON text holds a \u0000 escape (not itself escaped). json-glib strings are
 * C strings and would silently stop there, so ops that carry data refuse such requests. */
gboolean nz_agent_ops_has_nul_escape (const char *json, gsize len);
/* The refusal of such a request, on every wire (the worker answers it 400 with the code as
 * its error and the whole string as its message). */
#define NZ_JSON_NUL_UNSUPPORTED_CODE "json_nul_unsupported"
#define NZ_JSON_NUL_UNSUPPORTED                                                                    \
  NZ_JSON_NUL_UNSUPPORTED_CODE ": a JSON string holding U+0000 cannot be represented by this "     \
                               "agent; send binary data base64-encoded"

/* The features this engine serves right now, in the reference's order (spec A.9); a new
 * array. namzu-worker lists the same ones in its /healthz, since every op reaches this engine
 * through its upgrade route. */
JsonArray *nz_agent_ops_features (NzGuest *guest);

G_END_DECLS
