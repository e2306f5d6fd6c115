/* nz-agent-filestream.h: the read-file-stream op (spec A.6.7, C.7): meta, data chunks read
 * only once the socket took the previous one (bounded memory), end, terminator. Internal to
 * nz-agent-ops; it holds the connection through the stream hooks of nz-agent-conn. */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

void nz_agent_filestream_op (NzAgentConn *conn, NzEnvelope *env);

G_END_DECLS
