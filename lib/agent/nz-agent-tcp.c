/* tcp-connect (spec A.6.17, C.12): a loopback port-forward into the sandbox. Base64 data frames
 * both ways, backpressure both ways, half-close, and never a terminator. */
#include "nz-agent-streams.h"

#include <errno.h>
#include <string.h>

#include <gio/gio.h>

#include "nz-agent-heartbeat.h"
#include "nz-autofd.h"
#include "nz-base64.h"
#include "nz-guest.h"
#include "nz-json.h"
#include "nz-jstext.h"

/* Host->guest chunks above this many decoded bytes are dropped (spec B.2). */
#define TCP_MAX_CHUNK_BYTES (8u * 1024 * 1024)
/* Pause the upstream above this much unsent data towards the host. */
#define TCP_HIGH_WATER_BYTES 65536
#define TCP_READ_BYTES 65536

typedef struct
{
  NzAgentConn *conn; /* ref */
  GSocket *up;
  char *target; /* "127.0.0.1:PORT" for error messages */
  GSource *connect_source;
  GSource *read_source;
  GSource *write_source;
  GByteArray *pending; /* host -> upstream bytes not yet written */
  NzStreamHeartbeat *hb;
  gint64 heartbeat_ms;
  gboolean connected;
  gboolean up_paused;     /* we stopped reading the upstream (host slow) */
  gboolean host_paused;   /* we stopped reading the host (upstream slow) */
  gboolean end_requested; /* host sent {type:"end"}: shut upstream writes once flushed */
  gboolean finished;
  GBytes *guest_boot_id_ready; /* the ready frame, kept until connected */
} TcpStream;

static void
tcp_close_upstream (TcpStream *t)
{
  nz_clear_source (&t->connect_source);
  nz_clear_source (&t->read_source);
  nz_clear_source (&t->write_source);
  if (t->up != NULL)
    g_socket_close (t->up, NULL);
  g_clear_object (&t->up);
}

static void
tcp_stream_free (TcpStream *t)
{
  tcp_close_upstream (t);
  nz_stream_heartbeat_free (t->hb);
  g_byte_array_unref (t->pending);
  g_clear_pointer (&t->guest_boot_id_ready, g_bytes_unref);
  g_free (t->target);
  nz_agent_conn_unref (t->conn);
  g_free (t);
}

/* The stream is over: the upstream goes, and the host socket is ended (no terminator). */
static void
tcp_finish (TcpStream *t, const char *type, const char *error_message)
{
  if (t->finished)
    return;
  t->finished = TRUE;
  tcp_close_upstream (t);
  g_clear_pointer (&t->hb, nz_stream_heartbeat_free);
  if (type != NULL)
    {
      g_autoptr (JsonObject) frame = json_object_new ();

      json_object_set_string_member (frame, "type", type);
      if (error_message != NULL)
        json_object_set_string_member (frame, "error", error_message);
      nz_agent_conn_write_object (t->conn, frame);
    }
  nz_agent_conn_end (t->conn);
}

/* Node's message: "connect ECONNREFUSED 127.0.0.1:9", "read ECONNRESET". */
static void
tcp_fail_errno (TcpStream *t, const char *syscall, int errsv)
{
  g_autofree char *msg
      = g_strcmp0 (syscall, "connect") == 0
            ? g_strdup_printf ("connect %s %s", nz_jstext_errno_name (errsv), t->target)
            : g_strdup_printf ("%s %s", syscall, nz_jstext_errno_name (errsv));

  tcp_finish (t, "error", msg);
}

static gboolean tcp_up_readable (GSocket *sock, GIOCondition cond, gpointer user_data);
static gboolean tcp_up_writable (GSocket *sock, GIOCondition cond, gpointer user_data);

static void
tcp_watch (TcpStream *t, GSource **slot, GIOCondition cond, gpointer func)
{
  if (*slot != NULL || t->up == NULL)
    return;
  *slot = g_socket_create_source (t->up, cond, NULL);
  g_source_set_callback (*slot, (GSourceFunc)(void (*) (void))func, t, NULL);
  g_source_attach (*slot, g_main_context_get_thread_default ());
}

static void
tcp_set_host_paused (TcpStream *t, gboolean paused)
{
  t->host_paused = paused;
  nz_agent_conn_set_reading_paused (t->conn, paused);
  /* Silence caused by our own pause is not the host's. */
  nz_stream_heartbeat_set_suspended (t->hb, paused);
}

/* Writes what is pending; FALSE when the stream finished on an error. */
static gboolean
tcp_flush_upstream (TcpStream *t)
{
  while (t->pending->len > 0)
    {
      g_autoptr (GError) error = NULL;
      gssize n
          = g_socket_send (t->up, (const char *)t->pending->data, t->pending->len, NULL, &error);

      if (n < 0)
        {
          if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            {
              tcp_watch (t, &t->write_source, G_IO_OUT, tcp_up_writable);
              if (!t->host_paused)
                tcp_set_host_paused (t, TRUE);
              return TRUE;
            }
          tcp_fail_errno (t, "write", EPIPE);
          return FALSE;
        }
      g_byte_array_remove_range (t->pending, 0, (guint)n);
    }
  nz_clear_source (&t->write_source);
  if (t->host_paused)
    tcp_set_host_paused (t, FALSE);
  if (t->end_requested)
    g_socket_shutdown (t->up, FALSE, TRUE, NULL);
  return TRUE;
}

static gboolean
tcp_up_writable (GSocket *sock, GIOCondition cond, gpointer user_data)
{
  TcpStream *t = user_data;

  g_clear_pointer (&t->write_source, g_source_unref);
  tcp_flush_upstream (t);
  return G_SOURCE_REMOVE;
}

static gboolean
tcp_up_readable (GSocket *sock, GIOCondition cond, gpointer user_data)
{
  TcpStream *t = user_data;
  guint8 buf[TCP_READ_BYTES];
  g_autoptr (GError) error = NULL;
  gssize n = g_socket_receive (sock, (char *)buf, sizeof buf, NULL, &error);

  if (n < 0)
    {
      if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        return G_SOURCE_CONTINUE;
      g_clear_pointer (&t->read_source, g_source_unref);
      tcp_fail_errno (t, "read", ECONNRESET);
      return G_SOURCE_REMOVE;
    }
  if (n == 0)
    {
      /* Upstream end: {type:"end"}, then both sides go. */
      g_clear_pointer (&t->read_source, g_source_unref);
      tcp_finish (t, "end", NULL);
      return G_SOURCE_REMOVE;
    }
  {
    g_autofree char *b64 = g_base64_encode (buf, (gsize)n);
    g_autofree char *frame = g_strdup_printf ("{\"type\":\"data\",\"data\":\"%s\"}", b64);

    nz_agent_conn_write_frame (t->conn, frame, strlen (frame));
  }
  if (nz_agent_conn_get_queued_bytes (t->conn) > TCP_HIGH_WATER_BYTES)
    {
      /* Backpressure towards the service: stop reading it until the host drains. */
      t->up_paused = TRUE;
      g_clear_pointer (&t->read_source, g_source_unref);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

static void
tcp_host_drain (NzAgentConn *conn, gpointer user_data)
{
  TcpStream *t = user_data;

  if (t->up_paused && t->connected && !t->finished)
    {
      t->up_paused = FALSE;
      tcp_watch (t, &t->read_source, G_IO_IN | G_IO_HUP | G_IO_ERR, tcp_up_readable);
    }
}

static void
tcp_host_frame (NzAgentConn *conn, GBytes *payload, gpointer user_data)
{
  TcpStream *t = user_data;
  g_autoptr (JsonObject) ev = nz_agent_parse_client_frame (payload);
  const char *type = ev != NULL ? nz_json_get_string (ev, "type") : NULL;

  if (type == NULL || t->finished)
    return;
  if (strcmp (type, "data") == 0)
    {
      const char *b64 = nz_json_get_string (ev, "data");
      g_autofree guchar *bytes = NULL;
      gsize len = 0;

      if (b64 == NULL)
        return;
      bytes = nz_base64_decode_lenient (b64, &len);
      /* An oversized chunk is dropped, silently, like the reference. */
      if (len == 0 || len > TCP_MAX_CHUNK_BYTES)
        return;
      g_byte_array_append (t->pending, bytes, (guint)len);
      if (t->connected)
        tcp_flush_upstream (t);
    }
  else if (strcmp (type, "end") == 0)
    {
      /* Half-close: the service sees EOF once what we hold is written. */
      t->end_requested = TRUE;
      if (t->connected)
        tcp_flush_upstream (t);
    }
  else if (strcmp (type, "destroy") == 0)
    tcp_finish (t, NULL, NULL);
  /* heartbeat: ignored (the bytes already counted as life) */
}

static void
tcp_host_bytes (NzAgentConn *conn, gpointer user_data)
{
  nz_stream_heartbeat_touch (((TcpStream *)user_data)->hb);
}

static void
tcp_host_closed (NzAgentConn *conn, gpointer user_data)
{
  TcpStream *t = user_data;

  t->finished = TRUE;
  g_clear_pointer (&t->hb, nz_stream_heartbeat_free);
  tcp_close_upstream (t);
}

static const NzAgentStreamFuncs tcp_stream_funcs = {
  .frame = tcp_host_frame,
  .bytes = tcp_host_bytes,
  .drain = tcp_host_drain,
  .close = tcp_host_closed,
};

static gboolean
tcp_connected (GSocket *sock, GIOCondition cond, gpointer user_data)
{
  TcpStream *t = user_data;
  g_autoptr (GError) error = NULL;

  g_clear_pointer (&t->connect_source, g_source_unref);
  if (!g_socket_check_connect_result (sock, &error))
    {
      int errsv = error->domain == G_IO_ERROR && error->code == G_IO_ERROR_CONNECTION_REFUSED
                      ? ECONNREFUSED
                      : ECONNRESET;

      tcp_fail_errno (t, "connect", errsv);
      return G_SOURCE_REMOVE;
    }
  t->connected = TRUE;
  {
    gsize len = 0;
    const char *ready = g_bytes_get_data (t->guest_boot_id_ready, &len);

    nz_agent_conn_write_frame (t->conn, ready, len);
  }
  if (t->heartbeat_ms > 0)
    t->hb = nz_stream_heartbeat_new (t->conn, t->heartbeat_ms);
  tcp_watch (t, &t->read_source, G_IO_IN | G_IO_HUP | G_IO_ERR, tcp_up_readable);
  if (t->pending->len > 0 || t->end_requested)
    tcp_flush_upstream (t);
  return G_SOURCE_REMOVE;
}

void
nz_agent_op_tcp_connect (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
  JsonNode *host_node = nz_json_member (env->body, "host");
  const char *host = "127.0.0.1";
  gint64 port = 0;
  g_autoptr (GInetAddress) addr = NULL;
  g_autoptr (GSocketAddress) sa = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) ready = json_object_new ();
  gsize ready_len = 0;
  char *ready_text;
  TcpStream *t;

  if (host_node != NULL && !JSON_NODE_HOLDS_NULL (host_node))
    host = nz_json_node_string (host_node);
  /* Loopback services inside the sandbox only: never a relay to anywhere else. */
  if ((g_strcmp0 (host, "127.0.0.1") != 0 && g_strcmp0 (host, "::1") != 0)
      || !nz_agent_node_safe_int (nz_json_member (env->body, "port"), &port) || port < 1
      || port > 65535)
    {
      g_autoptr (JsonObject) frame = json_object_new ();

      json_object_set_string_member (frame, "type", "error");
      json_object_set_string_member (frame, "error", "invalid_loopback_target");
      nz_agent_conn_write_object (conn, frame);
      nz_agent_conn_end (conn);
      return;
    }

  t = g_new0 (TcpStream, 1);
  t->conn = nz_agent_conn_ref (conn);
  t->pending = g_byte_array_new ();
  t->target = g_strdup_printf ("%s:%" G_GINT64_FORMAT, host, port);
  t->heartbeat_ms = nz_stream_heartbeat_normalize (nz_json_member (env->body, "heartbeatMs"));
  json_object_set_string_member (ready, "type", "ready");
  json_object_set_string_member (ready, "guestBootId", guest->boot_id);
  if (t->heartbeat_ms > 0)
    json_object_set_int_member (ready, "heartbeatMs", t->heartbeat_ms);
  ready_text = nz_json_object_to_string (ready, &ready_len);
  t->guest_boot_id_ready = g_bytes_new_take (ready_text, ready_len);
  nz_agent_conn_set_stream (conn, &tcp_stream_funcs, t, (GDestroyNotify)tcp_stream_free);

  addr = g_inet_address_new_from_string (host);
  sa = g_inet_socket_address_new (addr, (guint16)port);
  t->up = g_socket_new (g_inet_address_get_family (addr), G_SOCKET_TYPE_STREAM,
                        G_SOCKET_PROTOCOL_TCP, &error);
  if (t->up == NULL)
    {
      tcp_fail_errno (t, "connect", EAFNOSUPPORT);
      return;
    }
  g_socket_set_blocking (t->up, FALSE);
  if (!g_socket_connect (t->up, sa, NULL, &error))
    {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_PENDING))
        {
          tcp_fail_errno (t, "connect",
                          g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED)
                              ? ECONNREFUSED
                              : ECONNRESET);
          return;
        }
      tcp_watch (t, &t->connect_source, G_IO_OUT, tcp_connected);
      return;
    }
  tcp_connected (t->up, G_IO_OUT, t);
}
