/* nz-agent-streams.h: the agent's stream and session ops (spec A.6.5, A.6.10-A.6.14, A.6.17):
 * attach-execution, terminal, attach-session, start-detached, list-sessions, kill-session and
 * tcp-connect, plus the small body helpers they share. Internal to namzu-agent's server. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-agent-conn.h"
#include "nz-envelope.h"

G_BEGIN_DECLS

void nz_agent_op_attach_execution (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_terminal (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_attach_session (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_start_detached (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_list_sessions (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_kill_session (NzAgentConn *conn, NzEnvelope *env);
void nz_agent_op_tcp_connect (NzAgentConn *conn, NzEnvelope *env);

/* Body helpers (members and strings: nz_json_member, nz_json_node_string). */
/* TRUE and *@out when @n is a JSON number that is an integer (safe integer range). */
gboolean nz_agent_node_safe_int (JsonNode *n, gint64 *out);
/* A {type:"..."} frame parsed from a client frame payload, or NULL when it is not a JSON
 * object (unparseable client frames are ignored). */
JsonObject *nz_agent_parse_client_frame (GBytes *payload);
/* Writes `{"type":@type,<extra>"data":<lossy utf-8 of @data>,<suffix>}` without going through
 * a C-string JSON builder (the decoded text may hold U+0000). @prefix_members and
 * @suffix_members are raw JSON member lists ("" for none; each ends/starts with ','). */
void nz_agent_write_text_frame (NzAgentConn *conn, const char *prefix_members, const guint8 *data,
                                gsize len, const char *suffix_members);

G_END_DECLS
