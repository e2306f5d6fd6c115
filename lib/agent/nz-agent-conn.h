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
/* A connection's request begins / ends: holds the server's lifetime (no-op without one). */
void nz_agent_server_hold (NzAgentServer *server);
void nz_agent_server_release (NzAgentServer *server);
NzGuest *nz_agent_server_get_guest (NzAgentServer *server);
/* The pre-auth pool (nz-preauth.h); NULL when the credential gate is off. */
struct _NzPreauthPool *nz_agent_server_get_preauth_pool (NzAgentServer *server);
/* Applies the preset or trust-on-first-use rule (spec A.4.1) to @token. */
gboolean nz_agent_server_authorize (NzAgentServer *server, const char *token, gsize token_len);

/* Takes over @connection (a new reference is taken) and starts reading. */
void nz_agent_conn_start (NzAgentServer *server, GSocketConnection *connection);

/* The reply sink a wire other than the agent's socket implements: where a connection's frames
 * go when no socket carries them (namzu-worker's POST /v1/agent/<op> writes each as one NDJSON
 * line of its HTTP response). Never called from inside an op: frames are handed over from the
 * main loop, in order, as a socket would send them. */
typedef struct
{
  /* One frame's payload (never the terminator). */
  void (*frame) (const char *json, gsize len, gpointer user_data);
  /* The op's output is over (its terminator, end() or destroy()); called once, last. */
  void (*end) (gpointer user_data);
  /* Bytes handed to @frame that the sink's own peer has not taken yet, so that bulk streams
   * keep their bounded memory; NULL counts as 0. When it falls back to 0, the sink calls
   * nz_agent_conn_sink_drained(). */
  gsize (*queued) (gpointer user_data);
} NzAgentSinkFuncs;

/* Runs @env (authenticated, from a wire that framed and parsed it itself; borrowed) through
 * the op dispatch with its replies going to @funcs instead of a socket. A duplex op receives
 * no frames on it. Returns a reference for the caller: unref it after @funcs->end, or give it
 * to nz_agent_conn_detach_sink(). */
NzAgentConn *nz_agent_conn_start_sink (NzAgentServer *server, NzEnvelope *env,
                                       const NzAgentSinkFuncs *funcs, gpointer user_data);
/* The sink's peer took everything: what a writable socket is (a stream's drain, a pending
 * end). */
void nz_agent_conn_sink_drained (NzAgentConn *conn);
/* The sink's peer left: the connection is destroyed as on a peer hang-up, and no sink
 * callback runs after this. */
void nz_agent_conn_detach_sink (NzAgentConn *conn);

NzAgentConn *nz_agent_conn_ref (NzAgentConn *conn);
void nz_agent_conn_unref (NzAgentConn *conn);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentConn, nz_agent_conn_unref)

NzAgentServer *nz_agent_conn_get_server (NzAgentConn *conn);
gboolean nz_agent_conn_is_closed (NzAgentConn *conn);

/* Queues one frame. Dropped silently once the connection is closed or ending: a severed
 * peer never affects the execution behind it. */
void nz_agent_conn_write_frame (NzAgentConn *conn, const void *payload, gsize len);
/* The same for bytes that already carry their 9-byte header; a reference is taken, nothing is
 * copied (read-file-stream hands over its one reusable frame buffer this way). */
void nz_agent_conn_write_framed (NzAgentConn *conn, GBytes *framed);
void nz_agent_conn_write_object (NzAgentConn *conn, JsonObject *obj);
void nz_agent_conn_write_terminator (NzAgentConn *conn);
/* Half-close once everything queued is written (the reference's end()). */
void nz_agent_conn_end (NzAgentConn *conn);
/* Close now, unflushed bytes dropped (the reference's destroy()). */
void nz_agent_conn_destroy (NzAgentConn *conn);

/* Asks the kernel for a send buffer of @bytes (SO_SNDBUF), for streams that move bulk data:
 * fewer wake-ups per byte on both ends, and the bytes wait in the kernel, not in our heap. */
void nz_agent_conn_set_send_buffer (NzAgentConn *conn, gsize bytes);

/* Bytes queued for the peer and not yet accepted by the socket. */
gsize nz_agent_conn_get_queued_bytes (NzAgentConn *conn);

/* Reply op: one frame, then end(). */
void nz_agent_conn_reply (NzAgentConn *conn, JsonObject *reply);
/* {ok:false, error:@message} then end(). */
void nz_agent_conn_reply_error (NzAgentConn *conn, const char *message);
/* Stream op failure: {type:"error", error:@message}, terminator, end(). */
void nz_agent_conn_stream_error (NzAgentConn *conn, const char *message);

/* A stream op's hold on the rest of the connection (spec A.1: later frames go to the stream's
 * onFrame). Every member may be NULL. */
typedef struct
{
  /* One later complete frame (empty for a terminator). */
  void (*frame) (NzAgentConn *conn, GBytes *payload, gpointer user_data);
  /* Any received bytes, before framing: proof of life for stream heartbeats (spec C.11). */
  void (*bytes) (NzAgentConn *conn, gpointer user_data);
  /* Everything queued has been written (Node's 'drain'). */
  void (*drain) (NzAgentConn *conn, gpointer user_data);
  /* The connection closed (peer hang-up, error, destroy); called once, then @destroy. */
  void (*close) (NzAgentConn *conn, gpointer user_data);
} NzAgentStreamFuncs;

/* Installs the stream handler; after it, peer bytes are framed (at MAX_FRAME_BYTES) and go to
 * @funcs, and a peer hang-up closes the connection (the reference's allowHalfOpen:false). */
void nz_agent_conn_set_stream (NzAgentConn *conn, const NzAgentStreamFuncs *funcs,
                               gpointer user_data, GDestroyNotify destroy);
/* Backpressure: stop or restart reading from the peer. */
void nz_agent_conn_set_reading_paused (NzAgentConn *conn, gboolean paused);
gboolean nz_agent_conn_is_reading_paused (NzAgentConn *conn);
/* TRUE once end() or destroy() was asked for: nothing more will be written. */
gboolean nz_agent_conn_is_ending (NzAgentConn *conn);

G_END_DECLS
