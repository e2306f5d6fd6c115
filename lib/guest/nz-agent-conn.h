/* nz-agent-conn.h: one accepted agent connection (spec A.4.2, A.4.3): framing, the credential
 * gate, refusals (reply, then destroy) and the reply/stream write path. Internal to the agent
 * server and its op handlers. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "nz-agent-config.h"
#include "nz-envelope.h"
#include "nz-guest.h"

G_BEGIN_DECLS

typedef struct _NzAgentServer NzAgentServer;
typedef struct _NzAgentConn NzAgentConn;

/* Server internals shared with the connection and op handlers (nz-agent-server.c). */
const NzAgentConfig *nz_agent_server_get_config (NzAgentServer *server);
NzGuest *nz_agent_server_get_guest (NzAgentServer *server);
/* Applies the preset or trust-on-first-use rule (spec A.4.1) to @token. */
gboolean nz_agent_server_authorize (NzAgentServer *server, const char *token);

/* Takes over @connection (a new reference is taken) and starts reading. */
void nz_agent_conn_start (NzAgentServer *server, GSocketConnection *connection);

NzAgentConn *nz_agent_conn_ref (NzAgentConn *conn);
void nz_agent_conn_unref (NzAgentConn *conn);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentConn, nz_agent_conn_unref)

NzAgentServer *nz_agent_conn_get_server (NzAgentConn *conn);
gboolean nz_agent_conn_is_closed (NzAgentConn *conn);

/* Queues one frame. Dropped silently once the connection is closed or ending: a severed
 * peer never affects the execution behind it. */
void nz_agent_conn_write_frame (NzAgentConn *conn, const void *payload, gsize len);
void nz_agent_conn_write_object (NzAgentConn *conn, JsonObject *obj);
void nz_agent_conn_write_terminator (NzAgentConn *conn);
/* Half-close once everything queued is written (the reference's end()). */
void nz_agent_conn_end (NzAgentConn *conn);
/* Close now, unflushed bytes dropped (the reference's destroy()). */
void nz_agent_conn_destroy (NzAgentConn *conn);

/* Reply op: one frame, then end(). */
void nz_agent_conn_reply (NzAgentConn *conn, JsonObject *reply);
/* {ok:false, error:@message} then end(). */
void nz_agent_conn_reply_error (NzAgentConn *conn, const char *message);
/* Stream op failure: {type:"error", error:@message}, terminator, end(). */
void nz_agent_conn_stream_error (NzAgentConn *conn, const char *message);

G_END_DECLS
