/* nz-agent-drain.h: the wire side of `quiesce` and `flush` (spec A.6.15, A.6.16), and the
 * SIGTERM drain built from them (spec C.15). */
#pragma once

#include "nz-agent-conn.h"
#include "nz-agent-server.h"

G_BEGIN_DECLS

void nz_agent_drain_op_quiesce (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_drain_op_flush (NzAgentConn *conn, NzEnvelope *env);

/* Receives one log line (without the "[namzu-fc-agent] " prefix); libraries never log. */
typedef void (*NzAgentLogFunc) (const char *line, gpointer user_data);

/* terminate(SIGTERM) minus the process exit: stops accepting, raises the quiesce gate for
 * good, quiesces with a deadline that leaves room for the flush, flushes, then calls @done.
 * Errors go to @log. The caller owns the whole-drain watchdog (SHUTDOWN_DEADLINE_MS) and the
 * "already stopping" answer to a repeat signal; nz_agent_drain_deadline_ms() gives the bound. */
void nz_agent_drain_shutdown (NzAgentServer *server, NzAgentLogFunc log, GSourceFunc done,
                              gpointer user_data);

G_END_DECLS
