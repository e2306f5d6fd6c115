#include "nz-agent-conn.h"

#include <string.h>

#include "nz-agent-ops.h"
#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-json.h"

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
  /* Credential gate state (spec A.4.2). The pre-auth pool membership, charged bytes, idle
   * and deadline timers of the pre-auth bounds hang off these two flags. */
  gboolean gated;
  gboolean authed;
  gboolean dispatched;
  gboolean end_requested;
  gboolean destroy_requested;
  gboolean write_shut;
  gboolean peer_eof;
  gboolean closed;
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

static void
stop_source (GSource **source)
{
  if (*source == NULL)
    return;
  g_source_destroy (*source);
  g_clear_pointer (source, g_source_unref);
}

/* The reference's abandon(): stop reading and drop what was buffered. */
static void
conn_abandon (NzAgentConn *conn)
{
  stop_source (&conn->read_source);
  nz_frame_reader_reset (conn->reader);
}

void
nz_agent_conn_destroy (NzAgentConn *conn)
{
  if (conn->closed)
    return;
  conn->closed = TRUE;
  stop_source (&conn->read_source);
  stop_source (&conn->write_source);
  g_clear_handle_id (&conn->backstop_id, g_source_remove);
  g_queue_clear_full (&conn->out, (GDestroyNotify)g_bytes_unref);
  g_socket_close (conn->sock, NULL);
  /* Drop the reference the open connection held on itself. */
  nz_agent_conn_unref (conn);
}

static gboolean conn_writable (GSocket *sock, GIOCondition cond, gpointer user_data);

static void
conn_flush (NzAgentConn *conn)
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
              return;
            }
          g_debug ("agent connection: send: %s", error->message);
          nz_agent_conn_destroy (conn);
          return;
        }
      conn->out_offset += (gsize)n;
      if (conn->out_offset == len)
        {
          g_bytes_unref (g_queue_pop_head (&conn->out));
          conn->out_offset = 0;
        }
    }
  stop_source (&conn->write_source);
  if (conn->destroy_requested)
    {
      nz_agent_conn_destroy (conn);
      return;
    }
  if (conn->end_requested && !conn->write_shut)
    {
      conn->write_shut = TRUE;
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

void
nz_agent_conn_write_frame (NzAgentConn *conn, const void *payload, gsize len)
{
  if (conn->closed || conn->end_requested || conn->destroy_requested)
    return;
  g_queue_push_tail (&conn->out, nz_frame_encode (payload, len));
  if (conn->write_source == NULL)
    conn_flush (conn);
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

static void
conn_handle_first_frame (NzAgentConn *conn, GBytes *payload)
{
  g_autoptr (NzEnvelope) env = NULL;
  g_autoptr (GError) error = NULL;
  const NzAgentConfig *config = nz_agent_server_get_config (conn->server);

  env = nz_envelope_parse (payload, &error);
  if (env == NULL)
    {
      /* Not JSON: abandon and destroy, no reply (spec A.3). */
      g_debug ("agent connection: %s", error->message);
      conn_abandon (conn);
      nz_agent_conn_destroy (conn);
      return;
    }
  conn->dispatched = TRUE;
  nz_frame_reader_reset (conn->reader);
  /* healthz is answered without authenticating and never lifts the gate. */
  if (g_strcmp0 (env->op, "healthz") != 0 && conn->gated && !conn->authed)
    {
      if (!nz_agent_server_authorize (conn->server, env->token))
        {
          conn_refuse (conn, "unauthorized");
          return;
        }
      conn->authed = TRUE;
      nz_frame_reader_set_max (conn->reader, (guint64)config->max_frame_bytes);
    }
  nz_agent_ops_dispatch (conn, env, payload);
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
  stop_source (&conn->read_source);
  if (!conn->dispatched || conn->write_shut)
    nz_agent_conn_destroy (conn);
  /* Otherwise an op is still answering; conn_flush destroys after the half-close. */
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
  /* One request per connection: after the first frame, bytes go to the active stream
   * handler; the ops implemented here ignore them. */
  if (conn->dispatched)
    return G_SOURCE_CONTINUE;
  nz_frame_reader_push (conn->reader, buf, (gsize)n);
  conn_process (conn);
  return conn->read_source != NULL ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
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
  conn->read_source = g_socket_create_source (conn->sock, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (conn->read_source, (GSourceFunc)(void (*) (void))conn_readable, conn,
                         NULL);
  g_source_attach (conn->read_source, g_main_context_get_thread_default ());
}
