#include "nz-agent-conn.h"

#include <string.h>
#include <sys/socket.h>

#include "nz-agent-ops.h"
#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-json.h"
#include "nz-preauth.h"

#define READ_CHUNK_BYTES 65536

struct _NzAgentConn
{
  gint ref_count;
  NzAgentServer *server;
  GSocketConnection *connection;
  GSocket *sock;
  NzFrameReader *reader;
  GSource *read_source;
  GSource *write_source;
  GQueue out; /* GBytes */
  gsize out_offset;
  guint backstop_id;
  /* Credential gate state (spec A.4.2): pool membership, charged bytes, and the idle and
   * deadline timers, all only while gated and unauthenticated. */
  gboolean gated;
  gboolean authed;
  NzPreauthSlot slot;
  guint deadline_id;
  guint idle_id;
  gint64 last_byte_us;
  gboolean dispatched;
  gboolean end_requested;
  gboolean destroy_requested;
  gboolean write_shut;
  gboolean peer_eof;
  gboolean closed;
  /* The stream op's hold on the connection (nz_agent_conn_set_stream). */
  gboolean has_stream;
  gboolean stream_closed;
  NzAgentStreamFuncs stream;
  gpointer stream_data;
  GDestroyNotify stream_destroy;
  gboolean reading_paused;
  gsize queued_bytes;
  GBytes *early; /* bytes that arrived behind the first frame */
  gboolean in_dispatch;
  gboolean send_failed;
  guint send_failed_id; /* the deferred destroy after a failed send outside dispatch */
  /* A reply sink in place of a socket (nz_agent_conn_start_sink): @sock is NULL and
   * @write_source is the idle that hands queued frames to the sink. */
  gboolean has_sink;
  NzAgentSinkFuncs sink;
  gpointer sink_data;
  gboolean sink_done; /* sink.end ran, or the sink was detached: no sink call after it */
  gboolean pumping;
  /* A request past the gate (not healthz) holds the server's lifetime until the connection
   * closes, so an idle timeout never ends a sandbox under a host's open request. */
  gboolean holds_lifetime;
};

NzAgentConn *
nz_agent_conn_ref (NzAgentConn *conn)
{
  conn->ref_count++;
  return conn;
}

void
nz_agent_conn_unref (NzAgentConn *conn)
{
  if (conn == NULL || --conn->ref_count > 0)
    return;
  g_warn_if_fail (conn->closed);
  g_queue_clear_full (&conn->out, (GDestroyNotify)g_bytes_unref);
  g_clear_pointer (&conn->early, g_bytes_unref);
  nz_frame_reader_free (conn->reader);
  g_clear_object (&conn->connection);
  g_free (conn);
}

NzAgentServer *
nz_agent_conn_get_server (NzAgentConn *conn)
{
  return conn->server;
}

gboolean
nz_agent_conn_is_closed (NzAgentConn *conn)
{
  return conn->closed;
}

/* Runs the stream's close handler once; its data is released right after. */
static void
conn_stream_closed (NzAgentConn *conn)
{
  gpointer data = conn->stream_data;
  GDestroyNotify destroy = conn->stream_destroy;

  if (!conn->has_stream || conn->stream_closed)
    return;
  conn->stream_closed = TRUE;
  conn->stream_data = NULL;
  conn->stream_destroy = NULL;
  if (conn->stream.close != NULL)
    conn->stream.close (conn, data);
  if (destroy != NULL)
    destroy (data);
}

/* Leaves the pre-auth pool: slot, charged bytes and both timers. */
static void
conn_leave_preauth (NzAgentConn *conn)
{
  NzPreauthPool *pool = nz_agent_server_get_preauth_pool (conn->server);

  if (pool != NULL)
    nz_preauth_pool_leave (pool, &conn->slot);
  g_clear_handle_id (&conn->deadline_id, g_source_remove);
  g_clear_handle_id (&conn->idle_id, g_source_remove);
}

/* The reference's abandon(): stop reading, release the pool slot and the charged bytes, and
 * drop what was buffered. */
static void
conn_abandon (NzAgentConn *conn)
{
  nz_clear_source (&conn->read_source);
  conn_leave_preauth (conn);
  nz_frame_reader_reset (conn->reader);
}

gsize
nz_agent_conn_get_queued_bytes (NzAgentConn *conn)
{
  /* Kept as a running count: attach and session streams ask after every chunk. A sink's
   * own backlog counts too: its peer has not taken those bytes either. */
  if (conn->has_sink && !conn->sink_done && conn->sink.queued != NULL)
    return conn->queued_bytes + conn->sink.queued (conn->sink_data);
  return conn->queued_bytes;
}

/* The sink's end of the op's output, once. */
static void
conn_sink_finish (NzAgentConn *conn)
{
  if (!conn->has_sink || conn->sink_done)
    return;
  conn->sink_done = TRUE;
  conn->sink.end (conn->sink_data);
}

void
nz_agent_conn_destroy (NzAgentConn *conn)
{
  if (conn->closed)
    return;
  conn->closed = TRUE;
  nz_clear_source (&conn->read_source);
  nz_clear_source (&conn->write_source);
  g_clear_handle_id (&conn->backstop_id, g_source_remove);
  g_clear_handle_id (&conn->send_failed_id, g_source_remove);
  /* Out of the pre-auth pool: its slot and charged bytes, and both timers. */
  conn_leave_preauth (conn);
  g_queue_clear_full (&conn->out, (GDestroyNotify)g_bytes_unref);
  conn->queued_bytes = 0;
  nz_agent_conn_ref (conn);
  if (conn->sock != NULL)
    g_socket_close (conn->sock, NULL);
  /* What a closed socket is to its peer: the end of the response, a result or not. */
  conn_sink_finish (conn);
  conn_stream_closed (conn);
  if (conn->holds_lifetime)
    {
      conn->holds_lifetime = FALSE;
      nz_agent_server_release (conn->server);
    }
  nz_agent_conn_unref (conn);
  /* Drop the reference the open connection held on itself. */
  nz_agent_conn_unref (conn);
}

static gboolean conn_writable (GSocket *sock, GIOCondition cond, gpointer user_data);
static void conn_stream_bytes (NzAgentConn *conn, const guint8 *buf, gsize n);

/* A write failed because the peer is gone, but what it sent before hanging up may still sit
 * in our receive queue (a terminal's last input, say). Node hands every received frame over
 * before the error surfaces, so apply those frames to the stream before the connection goes. */
static void
conn_drain_received (NzAgentConn *conn)
{
  guint8 buf[READ_CHUNK_BYTES];

  while (conn->sock != NULL && conn->dispatched && conn->has_stream && !conn->stream_closed && !conn->closed
         && !conn->peer_eof)
    {
      gssize n = g_socket_receive_with_blocking (conn->sock, (char *)buf, sizeof buf, FALSE,
                                                 NULL, NULL);

      if (n <= 0)
        return;
      conn_stream_bytes (conn, buf, (gsize)n);
    }
}

/* After a send failed outside dispatch: apply what the peer sent before it hung up, then go. */
static gboolean
conn_send_failed_idle (gpointer user_data)
{
  NzAgentConn *conn = user_data;

  conn->send_failed_id = 0;
  conn_drain_received (conn);
  nz_agent_conn_destroy (conn);
  return G_SOURCE_REMOVE;
}

/* Sends what the socket takes. FALSE when the rest waits (the socket is full: @write_source
 * watches it) or nothing more can be sent. */
static gboolean
conn_socket_send (NzAgentConn *conn)
{
  while (!g_queue_is_empty (&conn->out))
    {
      GBytes *head = g_queue_peek_head (&conn->out);
      gsize len = 0;
      const guint8 *data = g_bytes_get_data (head, &len);
      g_autoptr (GError) error = NULL;
      gssize n = g_socket_send (conn->sock, (const char *)data + conn->out_offset,
                                len - conn->out_offset, NULL, &error);

      if (n < 0)
        {
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            {
              if (conn->write_source == NULL)
                {
                  conn->write_source = g_socket_create_source (conn->sock, G_IO_OUT, NULL);
                  g_source_set_callback (conn->write_source,
                                         (GSourceFunc)(void (*) (void))conn_writable, conn, NULL);
                  g_source_attach (conn->write_source, g_main_context_get_thread_default ());
                }
              return FALSE;
            }
          g_debug ("agent connection: send: %s", error->message);
          /* A peer that sent its request and its first stream frames and hung up: what it
           * sent is still applied (Node hands over every frame of a read before a write
           * error surfaces), then the connection goes. */
          /* Nothing more can be sent. The destroy waits until whoever is writing has
           * returned: a write from inside a stream's own callback (a terminal's pty output,
           * a session's output) would otherwise free that stream, and the pty it is being
           * called from, under its feet. In dispatch the dispatcher destroys afterwards;
           * elsewhere an idle does. */
          conn->send_failed = TRUE;
          g_queue_clear_full (&conn->out, (GDestroyNotify)g_bytes_unref);
          conn->out_offset = 0;
          conn->queued_bytes = 0;
          if (!conn->in_dispatch && conn->send_failed_id == 0)
            conn->send_failed_id
                = g_idle_add_full (G_PRIORITY_HIGH, conn_send_failed_idle,
                                   nz_agent_conn_ref (conn), (GDestroyNotify)nz_agent_conn_unref);
          return FALSE;
        }
      conn->out_offset += (gsize)n;
      conn->queued_bytes -= (gsize)n;
      if (conn->out_offset == len)
        {
          g_bytes_unref (g_queue_pop_head (&conn->out));
          conn->out_offset = 0;
        }
    }
  return TRUE;
}

static gboolean conn_sink_pump (gpointer user_data);

/* A sink's send: every queued frame handed over, from the main loop (the pump) so that no
 * sink callback runs inside an op's own stack. FALSE while the pump is pending or the sink's
 * peer has not taken everything yet (nz_agent_conn_sink_drained resumes). */
static gboolean
conn_sink_send (NzAgentConn *conn)
{
  if (!conn->pumping)
    {
      if (conn->write_source == NULL)
        {
          conn->write_source = g_idle_source_new ();
          g_source_set_callback (conn->write_source, conn_sink_pump, conn, NULL);
          g_source_attach (conn->write_source, g_main_context_get_thread_default ());
        }
      return FALSE;
    }
  while (!g_queue_is_empty (&conn->out))
    {
      g_autoptr (GBytes) framed = g_queue_pop_head (&conn->out);
      gsize len = 0;
      const char *data = g_bytes_get_data (framed, &len);

      conn->queued_bytes -= len;
      if (len <= NZ_FRAME_HEADER_BYTES)
        {
          /* The terminator: the op's output is over, and so is the connection. */
          conn_sink_finish (conn);
          conn->destroy_requested = TRUE;
        }
      else if (!conn->sink_done)
        conn->sink.frame (data + NZ_FRAME_HEADER_BYTES, len - NZ_FRAME_HEADER_BYTES,
                          conn->sink_data);
    }
  return conn->sink_done || conn->sink.queued == NULL || conn->sink.queued (conn->sink_data) == 0;
}

static void
conn_flush (NzAgentConn *conn)
{
  if (!(conn->has_sink ? conn_sink_send (conn) : conn_socket_send (conn)))
    return;
  nz_clear_source (&conn->write_source);
  if (conn->destroy_requested)
    {
      nz_agent_conn_destroy (conn);
      return;
    }
  if (conn->has_stream && !conn->stream_closed && conn->stream.drain != NULL)
    {
      gboolean stop;

      nz_agent_conn_ref (conn);
      conn->stream.drain (conn, conn->stream_data);
      stop = conn->closed || !g_queue_is_empty (&conn->out);
      nz_agent_conn_unref (conn);
      if (stop)
        return;
    }
  if (conn->end_requested && !conn->write_shut)
    {
      conn->write_shut = TRUE;
      if (conn->has_sink)
        {
          /* No peer half to wait for: a sink's connection is over once its output is. */
          nz_agent_conn_destroy (conn);
          return;
        }
      g_socket_shutdown (conn->sock, FALSE, TRUE, NULL);
      /* Both directions done: nothing more can happen on this connection. */
      if (conn->peer_eof)
        nz_agent_conn_destroy (conn);
    }
}

static gboolean
conn_writable (GSocket *sock, GIOCondition cond, gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = nz_agent_conn_ref (user_data);

  g_clear_pointer (&conn->write_source, g_source_unref);
  conn_flush (conn);
  return G_SOURCE_REMOVE;
}

static gboolean
conn_sink_pump (gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = nz_agent_conn_ref (user_data);

  g_clear_pointer (&conn->write_source, g_source_unref);
  conn->pumping = TRUE;
  conn_flush (conn);
  conn->pumping = FALSE;
  return G_SOURCE_REMOVE;
}

void
nz_agent_conn_write_framed (NzAgentConn *conn, GBytes *framed)
{
  if (conn->closed || conn->end_requested || conn->destroy_requested || conn->send_failed)
    return;
  g_queue_push_tail (&conn->out, g_bytes_ref (framed));
  conn->queued_bytes += g_bytes_get_size (framed);
  if (conn->write_source == NULL)
    conn_flush (conn);
}

void
nz_agent_conn_write_frame (NzAgentConn *conn, const void *payload, gsize len)
{
  g_autoptr (GBytes) framed = NULL;

  if (conn->closed || conn->end_requested || conn->destroy_requested || conn->send_failed)
    return;
  framed = nz_frame_encode (payload, len);
  nz_agent_conn_write_framed (conn, framed);
}

void
nz_agent_conn_write_object (NzAgentConn *conn, JsonObject *obj)
{
  gsize len = 0;
  g_autofree char *text = nz_json_object_to_string (obj, &len);

  nz_agent_conn_write_frame (conn, text, len);
}

void
nz_agent_conn_write_terminator (NzAgentConn *conn)
{
  nz_agent_conn_write_frame (conn, NULL, 0);
}

void
nz_agent_conn_end (NzAgentConn *conn)
{
  if (conn->closed || conn->end_requested)
    return;
  conn->end_requested = TRUE;
  if (conn->write_source == NULL)
    conn_flush (conn);
}

void
nz_agent_conn_reply (NzAgentConn *conn, JsonObject *reply)
{
  nz_agent_conn_write_object (conn, reply);
  nz_agent_conn_end (conn);
}

void
nz_agent_conn_reply_error (NzAgentConn *conn, const char *message)
{
  g_autoptr (JsonObject) reply = json_object_new ();

  json_object_set_boolean_member (reply, "ok", FALSE);
  json_object_set_string_member (reply, "error", message);
  nz_agent_conn_reply (conn, reply);
}

void
nz_agent_conn_stream_error (NzAgentConn *conn, const char *message)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "error");
  json_object_set_string_member (frame, "error", message);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

static gboolean
refusal_backstop (gpointer user_data)
{
  NzAgentConn *conn = user_data;

  conn->backstop_id = 0;
  nz_agent_conn_destroy (conn);
  return G_SOURCE_REMOVE;
}

/* The reference's refuse(): a refused connection is destroyed, not merely half-closed, and
 * nothing more is read from it. */
static void
conn_refuse (NzAgentConn *conn, const char *message)
{
  g_autoptr (JsonObject) reply = json_object_new ();
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);

  conn_abandon (conn);
  if (conn->write_shut || conn->end_requested)
    {
      nz_agent_conn_destroy (conn);
      return;
    }
  json_object_set_boolean_member (reply, "ok", FALSE);
  json_object_set_string_member (reply, "error", message);
  nz_agent_conn_write_object (conn, reply);
  if (conn->closed)
    return;
  conn->destroy_requested = TRUE;
  /* Backstop: a peer that never drains cannot pin the socket open. */
  conn->backstop_id = g_timeout_add ((guint)MIN (config->refusal_flush_grace_ms, G_MAXUINT),
                                     refusal_backstop, conn);
  if (conn->write_source == NULL)
    conn_flush (conn);
}

static void conn_stream_bytes (NzAgentConn *conn, const guint8 *buf, gsize n);

/* A first frame that does not parse: too deep is refused by name, anything else abandoned and
 * destroyed with no reply (spec A.3). */
static void
conn_refuse_unparsed (NzAgentConn *conn, const GError *error)
{
  g_debug ("agent connection: %s", error->message);
  if (g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ":"))
    {
      conn_refuse (conn, error->message);
      return;
    }
  conn_abandon (conn);
  nz_agent_conn_destroy (conn);
}

/* The first frame of a gated, unauthenticated connection. Nothing the peer sent is built into
 * a tree before its token checks out: the peek reads op and token in place, so an 8 MiB frame
 * costs its 8 MiB buffer and no more. Returns the envelope to dispatch, or NULL when the
 * connection has been refused. */
static NzEnvelope *
conn_gate_first_frame (NzAgentConn *conn, GBytes *payload)
{
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);
  NzPreauthPool *pool = nz_agent_server_get_preauth_pool (conn->server);
  g_auto (NzEnvelopePeek) peek = { 0 };
  g_autoptr (GError) error = NULL;
  NzEnvelope *env;

  if (!nz_envelope_peek (payload, &peek, &error))
    {
      conn_refuse_unparsed (conn, error);
      return NULL;
    }
  conn->dispatched = TRUE;
  if (peek.healthz)
    {
      /* healthz: answered unauthenticated; the reader is emptied below, so nothing stays
       * charged, but the connection keeps its pool slot and its deadline until it closes. */
      if (pool != NULL)
        nz_preauth_pool_charge (pool, &conn->slot, 0);
      return nz_envelope_new_healthz ();
    }
  if (!nz_agent_server_authorize (conn->server, peek.token, peek.token_len))
    {
      conn_refuse (conn, "unauthorized");
      return NULL;
    }
  /* Authenticated: out of the pool, never timed out by it again. */
  conn->authed = TRUE;
  conn_leave_preauth (conn);
  nz_frame_reader_set_max (conn->reader, (guint64)config->max_frame_bytes);
  if ((env = nz_envelope_parse (payload, &error)) == NULL)
    conn_refuse_unparsed (conn, error);
  return env;
}

static void
conn_handle_first_frame (NzAgentConn *conn, GBytes *payload)
{
  g_autoptr (NzEnvelope) env = NULL;
  g_autoptr (GError) error = NULL;

  if (conn->gated && !conn->authed)
    env = conn_gate_first_frame (conn, payload);
  else if ((env = nz_envelope_parse (payload, &error)) == NULL)
    conn_refuse_unparsed (conn, error);
  if (env == NULL)
    return;
  conn->dispatched = TRUE;
  if (conn->sock != NULL && g_strcmp0 (env->op, "healthz") != 0)
    {
      conn->holds_lifetime = TRUE;
      nz_agent_server_hold (conn->server);
    }
  /* Frames sent right behind the first one (terminal input, tcp data) belong to the stream
   * the op may start; the reader itself starts empty either way. */
  g_clear_pointer (&conn->early, g_bytes_unref);
  conn->early = nz_frame_reader_steal_buffered (conn->reader);
  nz_agent_conn_ref (conn);
  conn->in_dispatch = TRUE;
  nz_agent_ops_dispatch (conn, env, payload);
  if (conn->early != NULL)
    {
      g_autoptr (GBytes) early = g_steal_pointer (&conn->early);
      gsize len = 0;
      const guint8 *data = g_bytes_get_data (early, &len);

      if (len > 0 && conn->has_stream && !conn->stream_closed && !conn->closed)
        conn_stream_bytes (conn, data, len);
    }
  conn->in_dispatch = FALSE;
  /* The peer hung up while the op answered: frames it sent after the request (a terminal's
   * input, say) may still sit unread in the socket; apply them before the connection goes. */
  if (conn->send_failed)
    {
      conn_drain_received (conn);
      nz_agent_conn_destroy (conn);
    }
  nz_agent_conn_unref (conn);
}

static void
conn_process (NzAgentConn *conn)
{
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (GError) error = NULL;
  guint64 announced = 0, limit = 0;

  switch (nz_frame_reader_next (conn->reader, &payload, &error))
    {
    case NZ_FRAME_NONE:
      return;
    case NZ_FRAME_MALFORMED:
      g_debug ("agent connection: %s", error->message);
      conn_abandon (conn);
      nz_agent_conn_destroy (conn);
      return;
    case NZ_FRAME_OVERFLOW:
      {
        g_autofree char *msg = NULL;

        nz_frame_reader_get_overflow (conn->reader, &announced, &limit);
        msg = g_strdup_printf ("frame_too_large: announced %" G_GUINT64_FORMAT
                               " bytes, limit %" G_GUINT64_FORMAT " (%s)",
                               announced, limit,
                               conn->gated && !conn->authed ? "NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES"
                                                            : "NAMZU_AGENT_MAX_FRAME_BYTES");
        conn_refuse (conn, msg);
        return;
      }
    case NZ_FRAME_OK:
      conn_handle_first_frame (conn, payload);
      return;
    default:
      g_assert_not_reached ();
    }
}

static void
conn_on_eof (NzAgentConn *conn)
{
  conn->peer_eof = TRUE;
  nz_clear_source (&conn->read_source);
  if (conn->has_stream)
    {
      /* Node's allowHalfOpen:false: a peer hang-up ends the stream; what is queued still
       * goes out, then the socket closes. */
      conn_stream_closed (conn);
      if (conn->write_shut)
        nz_agent_conn_destroy (conn);
      else
        nz_agent_conn_end (conn);
      return;
    }
  if (!conn->dispatched || conn->write_shut)
    nz_agent_conn_destroy (conn);
  /* Otherwise an op is still answering; conn_flush destroys after the half-close. */
}

static void
conn_stream_bytes (NzAgentConn *conn, const guint8 *buf, gsize n)
{
  if (conn->stream.bytes != NULL)
    conn->stream.bytes (conn, conn->stream_data);
  nz_frame_reader_push (conn->reader, buf, n);
  while (!conn->closed && !conn->stream_closed)
    {
      g_autoptr (GBytes) payload = NULL;
      g_autoptr (GError) error = NULL;

      switch (nz_frame_reader_next (conn->reader, &payload, &error))
        {
        case NZ_FRAME_NONE:
          return;
        case NZ_FRAME_OK:
          if (conn->stream.frame != NULL)
            conn->stream.frame (conn, payload, conn->stream_data);
          break;
        case NZ_FRAME_OVERFLOW:
        case NZ_FRAME_MALFORMED:
        default:
          /* The reference's reader throws on a bad header: the socket is destroyed. */
          g_debug ("agent stream: bad frame from peer");
          nz_agent_conn_destroy (conn);
          return;
        }
    }
}

static gboolean conn_readable (GSocket *sock, GIOCondition cond, gpointer user_data);

static void
conn_watch_readable (NzAgentConn *conn)
{
  conn->read_source = g_socket_create_source (conn->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (conn->read_source, (GSourceFunc)(void (*) (void))conn_readable, conn,
                         NULL);
  g_source_attach (conn->read_source, g_main_context_get_thread_default ());
}

void
nz_agent_conn_set_stream (NzAgentConn *conn, const NzAgentStreamFuncs *funcs, gpointer user_data,
                          GDestroyNotify destroy)
{
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);

  g_return_if_fail (conn != NULL && funcs != NULL && !conn->has_stream);
  if (conn->closed)
    {
      if (destroy != NULL)
        destroy (user_data);
      return;
    }
  conn->has_stream = TRUE;
  conn->stream = *funcs;
  conn->stream_data = user_data;
  conn->stream_destroy = destroy;
  nz_frame_reader_set_max (conn->reader, (guint64)config->max_frame_bytes);
}

void
nz_agent_conn_set_send_buffer (NzAgentConn *conn, gsize bytes)
{
  int v = (int)MIN (bytes, (gsize)G_MAXINT);

  /* Best effort: the kernel caps it at net.core.wmem_max. */
  if (!conn->closed && conn->sock != NULL)
    setsockopt (g_socket_get_fd (conn->sock), SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

gboolean
nz_agent_conn_is_ending (NzAgentConn *conn)
{
  return conn->closed || conn->end_requested || conn->destroy_requested || conn->send_failed;
}

gboolean
nz_agent_conn_is_reading_paused (NzAgentConn *conn)
{
  return conn->reading_paused;
}

void
nz_agent_conn_set_reading_paused (NzAgentConn *conn, gboolean paused)
{
  if (conn->closed || conn->reading_paused == paused)
    return;
  conn->reading_paused = paused;
  if (paused)
    nz_clear_source (&conn->read_source);
  else if (!conn->peer_eof && conn->read_source == NULL && conn->sock != NULL)
    conn_watch_readable (conn);
}

/* The shared pre-auth budget: whichever connection pushes the total over is refused, even a
 * legitimate one; the bound on memory is what matters. FALSE when refused. */
static gboolean
conn_charge_preauth (NzAgentConn *conn)
{
  NzPreauthPool *pool = nz_agent_server_get_preauth_pool (conn->server);
  g_autofree char *msg = NULL;

  if (pool == NULL
      || nz_preauth_pool_charge (pool, &conn->slot, nz_frame_reader_buffered (conn->reader)))
    return TRUE;
  msg = g_strdup_printf ("preauth_buffer_exhausted: limit %" G_GUINT64_FORMAT
                         " bytes (NAMZU_AGENT_MAX_PREAUTH_BUFFER_BYTES)",
                         nz_preauth_pool_get_max_buffer (pool));
  conn_refuse (conn, msg);
  return FALSE;
}

static gboolean
conn_readable (GSocket *sock, GIOCondition cond, gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = nz_agent_conn_ref (user_data);
  g_autoptr (GError) error = NULL;
  guint8 buf[READ_CHUNK_BYTES];
  gssize n;

  if (conn->closed || conn->read_source == NULL)
    return G_SOURCE_REMOVE;
  n = g_socket_receive (sock, (char *)buf, sizeof buf, NULL, &error);
  if (n < 0)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        return G_SOURCE_CONTINUE;
      /* Socket errors are ignored: a severed connection never kills the agent (spec A.1). */
      g_debug ("agent connection: receive: %s", error->message);
      nz_agent_conn_destroy (conn);
      return G_SOURCE_REMOVE;
    }
  if (n == 0)
    {
      conn_on_eof (conn);
      return G_SOURCE_REMOVE;
    }
  /* Pre-auth idle clock: every received byte resets it. */
  if (conn->gated && !conn->authed)
    conn->last_byte_us = g_get_monotonic_time ();
  /* One request per connection: after the first frame, bytes go to the active stream
   * handler; reply ops ignore them. */
  if (conn->dispatched)
    {
      if (conn->has_stream && !conn->stream_closed)
        conn_stream_bytes (conn, buf, (gsize)n);
      return conn->read_source != NULL ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
    }
  nz_frame_reader_push (conn->reader, buf, (gsize)n);
  if (conn->gated && !conn->authed && !conn_charge_preauth (conn))
    return G_SOURCE_REMOVE;
  conn_process (conn);
  return conn->read_source != NULL ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

/* Deadline or idle expiry while unauthenticated: abandon and destroy, no reply frame. */
static void
conn_expire (NzAgentConn *conn, const char *why)
{
  g_debug ("agent connection: pre-auth %s expired", why);
  conn_abandon (conn);
  nz_agent_conn_destroy (conn);
}

static gboolean
preauth_deadline (gpointer user_data)
{
  NzAgentConn *conn = user_data;

  conn->deadline_id = 0;
  conn_expire (conn, "deadline");
  return G_SOURCE_REMOVE;
}

static gboolean
preauth_idle (gpointer user_data)
{
  NzAgentConn *conn = user_data;
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);
  gint64 idle_us = config->preauth_idle_timeout_ms * G_TIME_SPAN_MILLISECOND;
  gint64 left_us = conn->last_byte_us + idle_us - g_get_monotonic_time ();

  conn->idle_id = 0;
  /* Every byte resets the idle clock: re-arm for what is left since the last one. */
  if (left_us > 0)
    {
      conn->idle_id = g_timeout_add ((guint)MIN ((left_us + 999) / 1000, G_MAXUINT), preauth_idle,
                                     conn);
      return G_SOURCE_REMOVE;
    }
  conn_expire (conn, "idle timeout");
  return G_SOURCE_REMOVE;
}

static void
conn_join_preauth (NzAgentConn *conn)
{
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);
  NzPreauthPool *pool = nz_agent_server_get_preauth_pool (conn->server);
  NzAgentConn *evicted;

  conn->last_byte_us = g_get_monotonic_time ();
  /* From accept, reset by nothing: a trickling peer cannot hold a slot forever. */
  conn->deadline_id = g_timeout_add ((guint)MIN (config->preauth_deadline_ms, G_MAXUINT),
                                     preauth_deadline, conn);
  conn->idle_id = g_timeout_add ((guint)MIN (config->preauth_idle_timeout_ms, G_MAXUINT),
                                 preauth_idle, conn);
  evicted = nz_preauth_pool_join (pool, &conn->slot, conn);
  if (evicted != NULL)
    {
      g_autofree char *msg
          = g_strdup_printf ("too_many_unauthenticated_connections: limit %" G_GUINT64_FORMAT
                             " (NAMZU_AGENT_MAX_PREAUTH_CONNECTIONS)",
                             nz_preauth_pool_get_max_members (pool));

      conn_refuse (evicted, msg);
    }
}

void
nz_agent_conn_start (NzAgentServer *server, GSocketConnection *connection)
{
  NzAgentConn *conn = g_new0 (NzAgentConn, 1);
  const NzAgentConfig *config = nz_agent_server_get_config (server);

  conn->ref_count = 1; /* held by the open connection; dropped by destroy() */
  conn->server = server;
  conn->connection = g_object_ref (connection);
  conn->sock = g_socket_connection_get_socket (connection);
  g_socket_set_blocking (conn->sock, FALSE);
  g_queue_init (&conn->out);
  conn->gated = nz_agent_config_is_gated (config);
  conn->reader = nz_frame_reader_new (
      (guint64)(conn->gated ? config->max_preauth_frame_bytes : config->max_frame_bytes));
  conn_watch_readable (conn);
  /* No gate, no pool: quiet connections are never aged out (spec A.4.3). */
  if (conn->gated && nz_agent_server_get_preauth_pool (server) != NULL)
    conn_join_preauth (conn);
}

NzAgentConn *
nz_agent_conn_start_sink (NzAgentServer *server, NzEnvelope *env, const NzAgentSinkFuncs *funcs,
                          gpointer user_data)
{
  NzAgentConn *conn = g_new0 (NzAgentConn, 1);
  const NzAgentConfig *config = nz_agent_server_get_config (server);

  g_return_val_if_fail (funcs != NULL && funcs->frame != NULL && funcs->end != NULL, NULL);
  /* One reference for the open connection (dropped by destroy()), one for the caller. */
  conn->ref_count = 2;
  conn->server = server;
  conn->has_sink = TRUE;
  conn->sink = *funcs;
  conn->sink_data = user_data;
  g_queue_init (&conn->out);
  /* Already authenticated and framed by the caller's own wire; nothing more is read. */
  conn->authed = TRUE;
  conn->dispatched = TRUE;
  conn->reader = nz_frame_reader_new ((guint64)config->max_frame_bytes);
  nz_agent_conn_ref (conn);
  nz_agent_ops_dispatch (conn, env, NULL);
  nz_agent_conn_unref (conn);
  return conn;
}

void
nz_agent_conn_sink_drained (NzAgentConn *conn)
{
  g_return_if_fail (conn != NULL && conn->has_sink);
  if (!conn->closed && conn->write_source == NULL)
    conn_flush (conn);
}

void
nz_agent_conn_detach_sink (NzAgentConn *conn)
{
  g_return_if_fail (conn != NULL && conn->has_sink);
  conn->sink_done = TRUE;
  nz_agent_conn_destroy (conn);
}
