#include "nz-agent-client.h"

#include <errno.h>
#include <gio/gunixsocketaddress.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-host-timing.h"
#include "nz-lite-core.h"
#include "nz-lite-frame.h"
#include "nz-json.h"
#include "nz-worker-http.h"

/* Timings from the reference host (spec D.2.2, D.2.4, D.2.5), shared with namzu-exec's front. */
#define CONNECT_TIMEOUT_S (NZ_HOST_CONNECT_TIMEOUT_MS / 1000)
#define READ_IDLE_TIMEOUT_MS NZ_HOST_READ_IDLE_TIMEOUT_MS
#define POST_RESPONSE_CLOSE_TIMEOUT_MS NZ_HOST_POST_RESPONSE_CLOSE_TIMEOUT_MS
#define DEFAULT_EXECUTION_TIMEOUT_MS NZ_HOST_DEFAULT_EXECUTION_TIMEOUT_MS
#define EXECUTION_TRANSPORT_GRACE_MS NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS
#define TCP_KEEPALIVE_INITIAL_DELAY_S NZ_HOST_TCP_KEEPALIVE_INITIAL_DELAY_S
#define CANCEL_CONFIRM_BUDGET_MS NZ_HOST_CANCEL_CONFIRM_BUDGET_MS
#define CANCEL_ATTEMPT_TIMEOUT_MS NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS
#define CANCEL_RETRY_INTERVAL_MS NZ_HOST_CANCEL_RETRY_INTERVAL_MS
/* wait_ready's poll interval: the agent binds in milliseconds, so poll at that scale. */
#define READY_POLL_INTERVAL_MS 15
#define READ_CHUNK_BYTES 65536
#define DIAL_RETRY_INTERVAL_MS 100

G_DEFINE_QUARK (nz - agent - error - quark, nz_agent_error)

struct _NzAgentClient
{
  char *raw_endpoint;
  char *description;
  NzAgentEndpoint *ep; /* NULL when raw_endpoint did not parse */
  GError *parse_error;
  char *token;
  GStrv features;
  guint dial_retry_ms;
  GPtrArray *replay; /* GBytes per connection (the last repeats), nz_agent_client_new_replay */
  guint replayed;
  NzTransportRebindFunc rebind; /* spec D.7, from the transport; NULL: never rebinds */
  char *sandbox_id;
  char *guest_boot_id; /* from the last reserve-execution ok reply */
};

/* ---- untrusted replies -------------------------------------------------------------------- */

JsonObject *
nz_agent_reply_parse (const char *data, gsize len, GError **error)
{
  g_return_val_if_fail (data != NULL || len == 0, NULL);
  /* nz_json_parse_object refuses nesting past NZ_JSON_MAX_DEPTH before json-glib recurses. */
  return nz_json_parse_object (data, (gssize)len, error);
}

int
nz_agent_error_class (const char *err)
{
  if (err == NULL)
    return NZ_ERROR_FAILED;
  if (g_str_has_prefix (err, "ENOENT:"))
    return NZ_ERROR_NOT_FOUND;
  if (g_str_has_prefix (err, "path escapes") || g_str_has_prefix (err, "symlink escapes")
      || g_str_has_suffix (err, "_refused") || strstr (err, "_refused:") != NULL
      || g_str_has_prefix (err, "EACCES:") || g_str_has_prefix (err, "EPERM:"))
    return NZ_ERROR_PERMISSION_DENIED;
  if (g_str_has_prefix (err, "invalid_") || g_str_has_prefix (err, "missing_"))
    return NZ_ERROR_INVALID_ARGS;
  return NZ_ERROR_FAILED;
}

gboolean
nz_agent_reply_count (JsonObject *obj, const char *member, guint64 *out)
{
  double v = -1;

  if (!nz_json_get_number (obj, member, &v) || !(v >= 0 && v <= 9007199254740992.0)
      || v != (double)(guint64)v)
    return FALSE;
  *out = (guint64)v;
  return TRUE;
}

/* ---- endpoints ---------------------------------------------------------------------------- */

void
nz_agent_endpoint_free (NzAgentEndpoint *ep)
{
  if (ep == NULL)
    return;
  nz_lite_endpoint_clear (ep);
  g_free (ep);
}

NzAgentEndpoint *
nz_agent_endpoint_parse (const char *endpoint, GError **error)
{
  g_autoptr (NzAgentEndpoint) ep = g_new0 (NzAgentEndpoint, 1);
  char why[PATH_MAX + 512];

  g_return_val_if_fail (endpoint != NULL, NULL);
  if (!nz_lite_endpoint_parse (endpoint, ep, why, sizeof why))
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s", why);
      return NULL;
    }
  return g_steal_pointer (&ep);
}

char *
nz_agent_endpoint_describe (const NzAgentEndpoint *ep)
{
  return g_strdup (ep->desc);
}

/* ---- client ------------------------------------------------------------------------------- */

/* Forgets where @c dials and with what token (wiped). */
static void
client_clear_target (NzAgentClient *c)
{
  g_clear_pointer (&c->raw_endpoint, g_free);
  g_clear_pointer (&c->description, g_free);
  g_clear_pointer (&c->ep, nz_agent_endpoint_free);
  g_clear_error (&c->parse_error);
  if (c->token != NULL)
    explicit_bzero (c->token, strlen (c->token));
  g_clear_pointer (&c->token, g_free);
}

/* Points @c at @endpoint and @token: what the next connection dials (a new client, or a
 * rebind). */
static void
client_set_target (NzAgentClient *c, const char *endpoint, const char *token)
{
  client_clear_target (c);
  c->raw_endpoint = g_strdup (endpoint);
  c->ep = nz_agent_endpoint_parse (endpoint, &c->parse_error);
  c->description = c->ep != NULL ? nz_agent_endpoint_describe (c->ep) : g_strdup (endpoint);
  c->token = g_strdup (token);
}

NzAgentClient *
nz_agent_client_new (const char *endpoint, const char *token)
{
  NzAgentClient *c;

  g_return_val_if_fail (endpoint != NULL, NULL);
  c = g_new0 (NzAgentClient, 1);
  client_set_target (c, endpoint, token);
  return c;
}

NzAgentClient *
nz_agent_client_new_for (const NzTransport *t, GError **error)
{
  NzAgentClient *c = NULL;

  g_return_val_if_fail (t != NULL && t->endpoint != NULL, NULL);
  switch (t->credential.kind)
    {
    case NZ_CREDENTIAL_NONE:
      c = nz_agent_client_new (t->endpoint, NULL);
      break;
    case NZ_CREDENTIAL_BEARER:
      c = nz_agent_client_new (t->endpoint, t->credential.token);
      break;
    case NZ_CREDENTIAL_TLS_CLIENT:
      break;
    }
  if (c != NULL)
    {
      c->rebind = t->sandbox_id != NULL ? t->rebind : NULL;
      c->sandbox_id = g_strdup (t->sandbox_id);
      return c;
    }
  return (nz_throw (error, NZ_ERROR_UNSUPPORTED,
                    "%s needs a TLS client certificate, and this build's clients cannot present "
                    "one yet",
                    t->endpoint),
          NULL);
}

void
nz_agent_client_free (NzAgentClient *c)
{
  if (c == NULL)
    return;
  client_clear_target (c);
  g_strfreev (c->features);
  g_free (c->guest_boot_id);
  g_clear_pointer (&c->replay, g_ptr_array_unref);
  g_free (c->sandbox_id);
  g_free (c);
}

void
nz_agent_client_set_dial_retry (NzAgentClient *c, guint budget_ms)
{
  g_return_if_fail (c != NULL);
  c->dial_retry_ms = budget_ms;
}

const char *
nz_agent_client_describe (NzAgentClient *c)
{
  g_return_val_if_fail (c != NULL, NULL);
  return c->description;
}

const char *const *
nz_agent_client_get_features (NzAgentClient *c)
{
  g_return_val_if_fail (c != NULL, NULL);
  return (const char *const *)c->features;
}

gboolean
nz_agent_client_has_feature (NzAgentClient *c, const char *feature)
{
  g_return_val_if_fail (c != NULL, FALSE);
  return c->features != NULL && g_strv_contains ((const char *const *)c->features, feature);
}

/* An envelope's bytes hold the token: wiped before they are freed. */
typedef NzLiteBuf NzLiteBufSecret;

static void
lite_buf_secret_clear (NzLiteBufSecret *b)
{
  if (b->data != NULL)
    explicit_bzero (b->data, b->len);
  free (b->data);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzLiteBufSecret, lite_buf_secret_clear)

/* ---- one connection ----------------------------------------------------------------------- */

typedef struct
{
  NzAgentClient *client;
  GSocketConnection *conn;
  GSocket *sock; /* borrowed from conn */
  NzFrameReader *reader;
  gboolean eof;
  int replay_peer; /* a replay connection's other end, or -1 */
} Conn;

static void
conn_free (Conn *k)
{
  if (k == NULL)
    return;
  if (k->conn != NULL)
    g_io_stream_close (G_IO_STREAM (k->conn), NULL, NULL);
  g_clear_object (&k->conn);
  nz_frame_reader_free (k->reader);
  if (k->replay_peer >= 0)
    close (k->replay_peer);
  g_free (k);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Conn, conn_free)

/* Prefixes transport errors with where we were dialling; the token never appears. */
static gboolean
fail_io (NzAgentClient *c, GError **error, GError *local)
{
  if (!g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      nz_error_convert (&local);
      g_prefix_error (&local, "agent %s: ", c->description);
    }
  g_propagate_error (error, local);
  return FALSE;
}

static gboolean fail (NzAgentClient *c, GError **error, NzErrorCode code, const char *fmt, ...)
    G_GNUC_PRINTF (4, 5);

static gboolean
fail (NzAgentClient *c, GError **error, NzErrorCode code, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return nz_throw (error, code, "agent %s: %s", c->description, msg);
}

static gint64
deadline_after (guint64 ms)
{
  if (ms == 0 || ms > (guint64)G_MAXINT64 / 2000)
    return G_MAXINT64;
  return g_get_monotonic_time () + (gint64)ms * 1000;
}

/* Waits for @cond until @deadline. Returns FALSE with G_IO_ERROR_TIMED_OUT at the deadline. */
static gboolean
conn_wait (Conn *k, GIOCondition cond, gint64 deadline, GCancellable *cancellable, GError **error)
{
  return nz_socket_wait_until (k->sock, cond, deadline, cancellable, error);
}

static gboolean
conn_send_all (Conn *k, const guint8 *data, gsize len, GCancellable *cancellable, GError **error)
{
  while (len > 0)
    {
      GError *local = NULL;
      gssize n;

      /* Write-idle bound: an agent that stops reading for this long is gone. */
      if (!conn_wait (k, G_IO_OUT, deadline_after (READ_IDLE_TIMEOUT_MS), cancellable, &local))
        return fail_io (k->client, error, local);
      n = g_socket_send (k->sock, (const char *)data, len, cancellable, &local);
      if (n < 0)
        {
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            {
              g_clear_error (&local);
              continue;
            }
          return fail_io (k->client, error, local);
        }
      data += n;
      len -= (gsize)n;
    }
  return TRUE;
}

/* Firecracker's hybrid vsock (spec D.2.1): "CONNECT <port>\n" on the host-side UDS, then one
 * line that must start with the word OK. Bytes after that line already belong to the agent. */
static gboolean
vsock_handshake (Conn *k, GCancellable *cancellable, GError **error)
{
  g_autofree char *hello = g_strdup_printf ("CONNECT %u\n", k->client->ep->vsock_port);
  gint64 deadline = deadline_after (CONNECT_TIMEOUT_S * 1000);
  g_autoptr (GString) line = g_string_new (NULL);
  const char *nl;

  if (!conn_send_all (k, (const guint8 *)hello, strlen (hello), cancellable, error))
    return FALSE;
  /* The reply is one short line; more than 1 KiB without a newline is not Firecracker. */
  while ((nl = memchr (line->str, '\n', line->len)) == NULL && line->len < 1024)
    {
      char buf[256];
      GError *local = NULL;
      gssize n;

      if (!conn_wait (k, G_IO_IN, deadline, cancellable, &local))
        {
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
            {
              g_error_free (local);
              return fail (k->client, error, NZ_ERROR_TIMED_OUT,
                           "connect/handshake timed out after %dms", CONNECT_TIMEOUT_S * 1000);
            }
          return fail_io (k->client, error, local);
        }
      n = g_socket_receive (k->sock, buf, sizeof buf, cancellable, &local);
      if (n < 0 && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        {
          g_error_free (local);
          continue;
        }
      if (n < 0)
        return fail_io (k->client, error, local);
      if (n == 0)
        break;
      g_string_append_len (line, buf, n);
    }
  if (nl == NULL || !g_str_has_prefix (line->str, "OK") || g_ascii_isalnum (line->str[2])
      || line->str[2] == '_')
    {
      g_autofree char *shown
          = g_strndup (line->str, nl != NULL ? (gsize)(nl - line->str) : MIN (line->len, 200));

      return fail (k->client, error, NZ_ERROR_FAILED, "vsock CONNECT %u rejected: \"%s\"",
                   k->client->ep->vsock_port, g_strchomp (shown));
    }
  nz_frame_reader_push (k->reader, nl + 1, line->len - (gsize)(nl + 1 - line->str));
  return TRUE;
}

/* *@transient is set when a later attempt can fix the failure: nothing listening yet (an
 * agent starting, or re-listening after a snapshot resume), or a vsock CONNECT the guest did
 * not accept yet. */
static Conn *
conn_open_once (NzAgentClient *c, gboolean *transient, GCancellable *cancellable, GError **error)
{
  g_autoptr (GSocketClient) sc = g_socket_client_new ();
  g_autoptr (Conn) k = g_new0 (Conn, 1);
  GError *local = NULL;

  k->replay_peer = -1;
  if (c->ep == NULL)
    {
      if (error != NULL)
        *error = g_error_copy (c->parse_error);
      return NULL;
    }
  k->client = c;
  g_socket_client_set_timeout (sc, CONNECT_TIMEOUT_S);
  /* A control channel that carries the token goes straight to the sandbox, never through a
   * proxy named by the environment; it also spares every call loading libproxy, the GNOME
   * proxy module and GSettings (about half of namzu-exec's start on this path). */
  g_socket_client_set_enable_proxy (sc, FALSE);
  if (c->ep->kind == NZ_LITE_EP_UNIX || c->ep->kind == NZ_LITE_EP_VSOCK)
    {
      g_autoptr (GSocketAddress) addr = g_unix_socket_address_new (c->ep->path);

      k->conn = g_socket_client_connect (sc, G_SOCKET_CONNECTABLE (addr), cancellable, &local);
    }
  else
    {
      g_autoptr (GSocketConnectable) addr = g_network_address_new (c->ep->host, c->ep->port);

      k->conn = g_socket_client_connect (sc, addr, cancellable, &local);
    }
  if (k->conn == NULL)
    {
      *transient = g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED)
                   || g_error_matches (local, G_IO_ERROR, G_IO_ERROR_NOT_FOUND)
                   || g_error_matches (local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
      fail_io (c, error, local);
      return NULL;
    }
  k->sock = g_socket_connection_get_socket (k->conn);
  /* Deadlines are ours (per phase, in µs), not the client's one-size socket timeout. */
  g_socket_set_timeout (k->sock, 0);
  g_socket_set_blocking (k->sock, FALSE);
  if (c->ep->kind == NZ_LITE_EP_TCP || c->ep->kind == NZ_LITE_EP_HTTP)
    {
      int idle = TCP_KEEPALIVE_INITIAL_DELAY_S;

      /* Same keepalive as the agent side (spec D.2.1), so a dead peer is noticed. */
      g_socket_set_keepalive (k->sock, TRUE);
      (void)g_socket_set_option (k->sock, IPPROTO_TCP, TCP_KEEPIDLE, idle, NULL);
    }
  k->reader = nz_frame_reader_new (NZ_AGENT_REPLY_FRAME_LIMIT);
  if (c->ep->kind == NZ_LITE_EP_VSOCK && !vsock_handshake (k, cancellable, error))
    {
      *transient = !g_error_matches (*error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
      return NULL;
    }
  return g_steal_pointer (&k);
}

/* How a read ended is lib/lite's NzLiteReadStatus, which words a read's failure for both
 * namzu-exec programs (nz_lite_frame_read_failed). */

/* Whether @st, how a read of @k that waited for @await ended, is a failure: TRUE with @error
 * set (NZ_LITE_READ_ERROR's as the read set it). */
static gboolean
read_failed (Conn *k, NzLiteAwait await, NzLiteReadStatus st, const char *what, guint64 window_ms,
             GError **error)
{
  char words[512];
  bool timed_out;

  if (!nz_lite_frame_read_failed (await, st, nz_frame_reader_buffered (k->reader) > 0, what,
                                  window_ms, &timed_out, words, sizeof words))
    return st == NZ_LITE_READ_ERROR;
  fail (k->client, error, timed_out ? NZ_ERROR_TIMED_OUT : NZ_ERROR_PROTOCOL, "%s", words);
  return TRUE;
}

/* Next frame (an empty GBytes is the terminator), or EOF, or @deadline passing. */
static NzLiteReadStatus
conn_read_frame (Conn *k, gint64 deadline, GCancellable *cancellable, GBytes **out, GError **error)
{
  for (;;)
    {
      guint8 buf[READ_CHUNK_BYTES];
      GError *local = NULL;
      gssize n;

      switch (nz_frame_reader_next (k->reader, out, &local))
        {
        case NZ_FRAME_OK:
          return NZ_LITE_READ_FRAME;
        case NZ_FRAME_MALFORMED:
          fail (k->client, error, NZ_ERROR_PROTOCOL, "%s", local->message);
          g_error_free (local);
          return NZ_LITE_READ_ERROR;
        case NZ_FRAME_OVERFLOW:
          {
            guint64 announced, limit;
            char why[160];

            nz_frame_reader_get_overflow (k->reader, &announced, &limit);
            nz_lite_frame_header_overflow_words (announced, limit, why, sizeof why);
            fail (k->client, error, NZ_ERROR_PROTOCOL, "%s", why);
            return NZ_LITE_READ_ERROR;
          }
        case NZ_FRAME_NONE:
        default:
          break;
        }
      if (k->eof)
        return NZ_LITE_READ_EOF;
      if (!conn_wait (k, G_IO_IN, deadline, cancellable, &local))
        {
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
            {
              g_error_free (local);
              return NZ_LITE_READ_TIMEOUT;
            }
          fail_io (k->client, error, local);
          return NZ_LITE_READ_ERROR;
        }
      n = g_socket_receive (k->sock, (char *)buf, sizeof buf, cancellable, &local);
      if (n < 0)
        {
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            {
              g_clear_error (&local);
              continue;
            }
          /* A reset after the peer's last frame reads like a close (ECONNRESET on unix). */
          if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED)
              || g_error_matches (local, G_IO_ERROR, G_IO_ERROR_BROKEN_PIPE))
            {
              g_clear_error (&local);
              k->eof = TRUE;
              continue;
            }
          fail_io (k->client, error, local);
          return NZ_LITE_READ_ERROR;
        }
      if (n == 0)
        k->eof = TRUE;
      else
        nz_frame_reader_push (k->reader, buf, (gsize)n);
    }
}

/* A replay connection: a socketpair whose other end already holds the recorded answer and
 * is shut for writing, so every read path (frames, raw streams, duplex) runs as on a real
 * connection; what we send lands in the peer's buffer unread. */
static Conn *
conn_open_replay (NzAgentClient *c, GError **error)
{
  GBytes *answer = g_ptr_array_index (c->replay, MIN (c->replayed, c->replay->len - 1));
  g_autoptr (Conn) k = g_new0 (Conn, 1);
  g_autoptr (GSocket) sock = NULL;
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (answer, &len);
  int sv[2];

  c->replayed++;
  k->client = c;
  k->replay_peer = -1;
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return (nz_throw_errno_prefix (error, "socketpair"), NULL);
  k->replay_peer = sv[1];
  sock = g_socket_new_from_fd (sv[0], error);
  if (sock == NULL)
    {
      close (sv[0]);
      return NULL;
    }
  /* The answer must fit the socket buffer: a fuzz input or a test's shape does. */
  (void)setsockopt (sv[1], SOL_SOCKET, SO_SNDBUF, &(int){ 4 << 20 }, sizeof (int));
  while (len > 0)
    {
      ssize_t n = send (sv[1], data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

      if (n <= 0)
        break;
      data += n;
      len -= (gsize)n;
    }
  shutdown (sv[1], SHUT_WR);
  k->conn = g_socket_connection_factory_create_connection (sock);
  k->sock = g_socket_connection_get_socket (k->conn);
  g_socket_set_blocking (k->sock, FALSE);
  k->reader = nz_frame_reader_new (NZ_AGENT_REPLY_FRAME_LIMIT);
  return g_steal_pointer (&k);
}

NzAgentClient *
nz_agent_client_new_replay (const char *endpoint, GBytes *const *answers, guint n_answers)
{
  NzAgentClient *c = nz_agent_client_new (endpoint, NULL);

  g_return_val_if_fail (answers != NULL && n_answers > 0, c);
  c->replay = g_ptr_array_new_with_free_func ((GDestroyNotify)g_bytes_unref);
  for (guint i = 0; i < n_answers; i++)
    g_ptr_array_add (c->replay, g_bytes_ref (answers[i]));
  return c;
}

static Conn *
conn_open (NzAgentClient *c, GCancellable *cancellable, GError **error)
{
  gint64 deadline = deadline_after (c->dial_retry_ms);

  if (c->replay != NULL)
    return conn_open_replay (c, error);

  for (;;)
    {
      GError *local = NULL;
      gboolean transient = FALSE;
      Conn *k = conn_open_once (c, &transient, cancellable, &local);

      if (k != NULL)
        return k;
      if (c->dial_retry_ms == 0 || !transient
          || g_get_monotonic_time () + DIAL_RETRY_INTERVAL_MS * 1000 > deadline
          || g_cancellable_is_cancelled (cancellable))
        {
          if (c->dial_retry_ms > 0 && transient)
            g_prefix_error (&local, "could not connect within %ums: ", c->dial_retry_ms);
          /* Callers need "nothing was sent" (spec D.2.3); cancellation and a bad endpoint
           * keep their own meaning. */
          if (c->ep != NULL && !g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            {
              local->domain = NZ_AGENT_ERROR;
              local->code = NZ_AGENT_ERROR_DIAL_FAILED;
            }
          g_propagate_error (error, local);
          return NULL;
        }
      g_error_free (local);
      g_usleep (DIAL_RETRY_INTERVAL_MS * 1000);
    }
}

static char *
http_authority (const NzAgentEndpoint *ep)
{
  NzLiteBuf b = { 0 };
  char *text;

  nz_lite_upgrade_authority (&b, ep->host, ep->port);
  text = g_strdup (b.data);
  free (b.data);
  return text;
}

/* A namzu-worker: GET /v1/agent upgraded to namzu-agent/2 (its bearer gate runs first), after
 * which the connection is an agent connection like any other. */
static gboolean
conn_upgrade (Conn *k, const char *op, GCancellable *cancellable, GError **error)
{
  g_autoptr (GByteArray) rest = g_byte_array_new ();
  GError *local = NULL;

  if (!nz_worker_http_upgrade (k->sock, k->client->ep->host, k->client->ep->port, k->client->token,
                               op, deadline_after (CONNECT_TIMEOUT_S * 1000), rest, cancellable,
                               &local))
    {
      if (local->domain == NZ_ERROR)
        {
          g_prefix_error (&local, "agent %s: ", k->client->description);
          g_propagate_error (error, local);
          return FALSE;
        }
      return fail_io (k->client, error, local);
    }
  nz_frame_reader_push (k->reader, rest->data, rest->len);
  return TRUE;
}

/* GET /healthz, the worker's unauthenticated probe (spec D.3). */
static JsonObject *
http_healthz (NzAgentClient *c, guint idle_ms, GCancellable *cancellable, GError **error)
{
  g_autoptr (Conn) k = conn_open (c, cancellable, error);
  g_autofree char *authority = NULL;
  JsonObject *reply;
  GError *local = NULL;

  if (k == NULL)
    return NULL;
  authority = http_authority (c->ep);
  reply
      = nz_worker_http_healthz (k->sock, authority, deadline_after (idle_ms), cancellable, &local);
  if (reply == NULL)
    {
      if (local->domain == NZ_ERROR)
        {
          g_prefix_error (&local, "worker %s: ", c->description);
          g_propagate_error (error, local);
        }
      else
        fail_io (c, error, local);
    }
  return reply;
}

/* Frames, serialises and sends the request envelope {op, body?, token?} (the reference's key
 * order, spec D.2.4). */
static Conn *
conn_request_text (NzAgentClient *c, const char *op, const char *text, GCancellable *cancellable,
                   GError **error)
{
  g_auto (NzLiteBufSecret) frame = { 0 };
  g_autoptr (Conn) k = NULL;
  gsize len;
  const guint8 *data;

  /* A worker takes the token in its bearer header instead (the upgrade below). */
  if (!nz_lite_frame_envelope (&frame, op, text, text != NULL ? strlen (text) : 0,
                               c->ep == NULL || c->ep->kind != NZ_LITE_EP_HTTP ? c->token : NULL))
    {
      fail (c, error, NZ_ERROR_INVALID_ARGS, "%s request: the token or the op is not UTF-8", op);
      return NULL;
    }
  data = (const guint8 *)frame.data;
  len = frame.len;
  /* Refuse before dialling what a token-gated agent would refuse unread (spec D.2.4). */
  if (c->ep != NULL && c->ep->kind == NZ_LITE_EP_TCP
      && len - NZ_FRAME_HEADER_BYTES > NZ_AGENT_TCP_PREAUTH_FRAME_LIMIT)
    {
      fail (c, error, NZ_ERROR_INVALID_ARGS,
            "%s request of %" G_GSIZE_FORMAT " bytes exceeds the agent's pre-authentication "
            "frame limit of %u bytes (NAMZU_AGENT_MAX_PREAUTH_FRAME_BYTES)",
            op, len - NZ_FRAME_HEADER_BYTES, NZ_AGENT_TCP_PREAUTH_FRAME_LIMIT);
      return NULL;
    }
  k = conn_open (c, cancellable, error);
  if (k == NULL)
    return NULL;
  if (c->ep->kind == NZ_LITE_EP_HTTP && !conn_upgrade (k, op, cancellable, error))
    return NULL;
  if (!conn_send_all (k, data, len, cancellable, error))
    return NULL;
  return g_steal_pointer (&k);
}

static Conn *
conn_request (NzAgentClient *c, const char *op, JsonObject *body, GCancellable *cancellable,
              GError **error)
{
  g_autofree char *text = body != NULL ? nz_json_object_to_string (body, NULL) : NULL;

  return conn_request_text (c, op, text, cancellable, error);
}

/* After the last frame the agent closes its side; anything else is a protocol error (the
 * reference's strings, spec D.2.4). @control: a reply op rather than a stream. */
static gboolean
conn_expect_close (Conn *k, const char *what, gboolean control, GCancellable *cancellable,
                   GError **error)
{
  g_autoptr (GBytes) extra = NULL;
  NzLiteReadStatus st = conn_read_frame (k, deadline_after (POST_RESPONSE_CLOSE_TIMEOUT_MS),
                                         cancellable, &extra, error);

  return !read_failed (k, control ? NZ_LITE_AWAIT_CLOSE_CONTROL : NZ_LITE_AWAIT_CLOSE, st, what,
                       POST_RESPONSE_CLOSE_TIMEOUT_MS, error);
}

/* One reply op on its own connection: the reply, and its text in *@out_text (may be NULL). */
static JsonObject *
call_text (NzAgentClient *c, const char *op, const char *body, guint idle_ms,
           GCancellable *cancellable, GBytes **out_text, GError **error)
{
  g_autoptr (Conn) k = NULL;
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (JsonObject) reply = NULL;
  gsize len = 0;
  const char *data;
  GError *local = NULL;

  if (c->ep != NULL && c->ep->kind == NZ_LITE_EP_HTTP && g_str_equal (op, "healthz"))
    return http_healthz (c, idle_ms, cancellable, error);
  k = conn_request_text (c, op, body, cancellable, error);
  if (k == NULL)
    return NULL;
  if (read_failed (k, NZ_LITE_AWAIT_REPLY,
                   conn_read_frame (k, deadline_after (idle_ms), cancellable, &payload, error),
                   "control reply", idle_ms, error))
    return NULL;
  data = g_bytes_get_data (payload, &len);
  if (len == 0)
    {
      fail (c, error, NZ_ERROR_PROTOCOL, "control reply was an empty frame");
      return NULL;
    }
  reply = nz_agent_reply_parse (data, len, &local);
  if (reply == NULL)
    {
      fail (c, error, NZ_ERROR_PROTOCOL, "%s reply: %s", op, local->message);
      g_error_free (local);
      return NULL;
    }
  if (!conn_expect_close (k, "control reply", TRUE, cancellable, error))
    return NULL;
  if (out_text != NULL)
    *out_text = g_steal_pointer (&payload);
  return g_steal_pointer (&reply);
}

static JsonObject *
call_internal (NzAgentClient *c, const char *op, JsonObject *body, guint idle_ms,
               GCancellable *cancellable, GError **error)
{
  g_autofree char *text = body != NULL ? nz_json_object_to_string (body, NULL) : NULL;

  return call_text (c, op, text, idle_ms, cancellable, NULL, error);
}

/* ---- rebind (spec D.7) -------------------------------------------------------------------- */

/* Exactly {ok:false, error:"unauthorized"}: the agent refused our token unread. */
static gboolean
reply_is_unauthorized (JsonObject *reply)
{
  return reply != NULL && !nz_json_get_bool (reply, "ok", TRUE)
         && g_strcmp0 (nz_json_get_string (reply, "error"), "unauthorized") == 0;
}

static void
set_unauthorized (NzAgentClient *c, GError **error, const char *op)
{
  g_set_error (error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_UNAUTHORIZED,
               "agent %s: %s: unauthorized (the agent there does not hold this sandbox's token)",
               c->description, op);
}

/* Whether the failed call (*@error) is tried again: once per call (*@tried), after a dial
 * failure or an unauthorized answer, when the hook says the agent now holds another token. A
 * failed re-read replaces *@error with its own words (say, the Sandbox is gone). */
static gboolean
rebind_once (NzAgentClient *c, gboolean *tried, GError **error)
{
  g_autoptr (NzTransport) t = NULL;
  GError *local = NULL;

  if (c->rebind == NULL || *tried
      || (!g_error_matches (*error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED)
          && !g_error_matches (*error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_UNAUTHORIZED)))
    return FALSE;
  *tried = TRUE;
  t = c->rebind (c->sandbox_id, &local);
  if (t == NULL)
    {
      g_prefix_error (&local, "%s; then re-reading where its agent is: ", (*error)->message);
      g_clear_error (error);
      g_propagate_error (error, local);
      return FALSE;
    }
  /* The same token is the same pod: a second try would only fail alike. */
  if (g_strcmp0 (t->credential.token, c->token) == 0)
    return FALSE;
  client_set_target (c, t->endpoint, t->credential.token);
  g_clear_error (error);
  return TRUE;
}

JsonObject *
nz_agent_client_call (NzAgentClient *c, const char *op, JsonObject *body, GCancellable *cancellable,
                      GError **error)
{
  gboolean tried = FALSE;

  g_return_val_if_fail (c != NULL, NULL);
  g_return_val_if_fail (op != NULL, NULL);
  for (;;)
    {
      GError *local = NULL;
      JsonObject *reply = call_internal (c, op, body, READ_IDLE_TIMEOUT_MS, cancellable, &local);

      if (c->rebind != NULL && reply_is_unauthorized (reply))
        {
          g_clear_pointer (&reply, json_object_unref);
          set_unauthorized (c, &local, op);
        }
      if (reply != NULL)
        return reply;
      if (!rebind_once (c, &tried, &local))
        {
          g_propagate_error (error, local);
          return NULL;
        }
    }
}

/* ---- healthz and readiness ---------------------------------------------------------------- */

static char *
member_json (JsonObject *obj, const char *name)
{
  JsonNode *n = json_object_get_member (obj, name);

  return n != NULL ? nz_json_to_string (n, NULL) : g_strdup ("missing");
}

/* Protocol admission of a healthz reply (spec A.9), and the features cache. */
static gboolean
admit_healthz (NzAgentClient *c, JsonObject *reply, GError **error)
{
  JsonArray *features;
  double version = 0;

  if (!nz_json_get_number (reply, "protocolVersion", &version)
      || version != NZ_AGENT_PROTOCOL_VERSION)
    {
      g_autofree char *got = member_json (reply, "protocolVersion");

      return fail (c, error, NZ_ERROR_PROTOCOL,
                   "guest agent protocol version mismatch: expected %d, received %s. Run a "
                   "namzu-agent from the same namzu release as this host",
                   NZ_AGENT_PROTOCOL_VERSION, got);
    }
  if (nz_json_get_bool (reply, "retiring", FALSE))
    return fail (c, error, NZ_ERROR_FAILED,
                 "agent is retiring: it fenced itself after a process-group shutdown could not "
                 "be confirmed, so the sandbox must be recreated");
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      g_autofree char *got = member_json (reply, "ok");

      return fail (c, error, NZ_ERROR_FAILED, "agent is not ready (healthz ok=%s)", got);
    }
  /* Only string entries count (spec A.9). */
  features = nz_json_get_array (reply, "features");
  if (features != NULL)
    {
      g_autoptr (GPtrArray) list = g_ptr_array_new ();

      for (guint i = 0; i < json_array_get_length (features); i++)
        {
          JsonNode *n = json_array_get_element (features, i);

          if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING)
            g_ptr_array_add (list, g_strdup (json_node_get_string (n)));
        }
      g_ptr_array_add (list, NULL);
      g_strfreev (c->features);
      c->features = (GStrv)g_ptr_array_steal (list, NULL);
    }
  return TRUE;
}

JsonObject *
nz_agent_client_healthz (NzAgentClient *c, GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) reply = NULL;

  g_return_val_if_fail (c != NULL, NULL);
  reply = call_internal (c, "healthz", NULL, READ_IDLE_TIMEOUT_MS, cancellable, error);
  if (reply == NULL || !admit_healthz (c, reply, error))
    return NULL;
  return g_steal_pointer (&reply);
}

gboolean
nz_agent_client_wait_ready (NzAgentClient *c, guint timeout_ms, GError **error)
{
  gint64 deadline;

  g_return_val_if_fail (c != NULL, FALSE);
  deadline = deadline_after (timeout_ms);
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonObject) reply = NULL;
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;

      reply = call_internal (c, "healthz", NULL, (guint)CLAMP (left_ms, 100, G_MAXUINT), NULL,
                             &local);
      if (reply != NULL && admit_healthz (c, reply, &local))
        return TRUE;
      /* Neither a bad endpoint, a wrong protocol nor a fenced agent heals by waiting. */
      if (c->ep == NULL || g_error_matches (local, NZ_ERROR, NZ_ERROR_PROTOCOL)
          || g_error_matches (local, NZ_ERROR, NZ_ERROR_PERMISSION_DENIED)
          || strstr (local->message, "agent is retiring") != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      left_ms = (deadline - g_get_monotonic_time ()) / 1000;
      if (left_ms <= 0)
        return nz_throw (error, NZ_ERROR_TIMED_OUT, "agent %s did not become ready within %ums: %s",
                         c->description, timeout_ms, local->message);
      g_usleep (MIN (left_ms, READY_POLL_INTERVAL_MS) * 1000);
    }
}

/* ---- streams ------------------------------------------------------------------------------ */

/* Reads frames until the terminator. */
static gboolean
run_stream (Conn *k, const char *op, guint64 observation_ms, gint64 probe_ms,
            NzAgentFrameFunc on_frame, gpointer user_data, GCancellable *cancellable,
            GError **error)
{
  gint64 deadline = deadline_after (observation_ms);
  guint frames = 0;

  for (;;)
    {
      g_autoptr (GBytes) payload = NULL;
      g_autoptr (JsonObject) frame = NULL;
      GError *local = NULL;
      gsize len = 0;
      const char *data;
      gint64 wait
          = probe_ms > 0 ? MIN (deadline, g_get_monotonic_time () + probe_ms * 1000) : deadline;
      NzLiteReadStatus st = conn_read_frame (k, wait, cancellable, &payload, error);

      /* Silent for one interval on a stream whose wire has no heartbeat: is the peer there?
       * A healthz on a connection of its own, bounded by the same interval, says. */
      if (st == NZ_LITE_READ_TIMEOUT && wait < deadline)
        {
          g_autoptr (JsonObject) alive
              = call_internal (k->client, "healthz", NULL, (guint)probe_ms, cancellable, &local);

          if (alive != NULL)
            continue;
          g_set_error (error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_PEER_GONE,
                       "%s: the peer sent nothing for %" G_GINT64_FORMAT
                       "ms and did not answer a healthz within as long (%s); it is treated as "
                       "gone",
                       op, probe_ms, local->message);
          g_error_free (local);
          return FALSE;
        }
      if (read_failed (k, NZ_LITE_AWAIT_FRAME, st, "stream", observation_ms, error))
        return FALSE;
      data = g_bytes_get_data (payload, &len);
      if (len == 0)
        return conn_expect_close (k, "stream", FALSE, cancellable, error);
      frame = nz_agent_reply_parse (data, len, &local);
      if (frame == NULL)
        {
          fail (k->client, error, NZ_ERROR_PROTOCOL, "stream frame: %s", local->message);
          g_error_free (local);
          return FALSE;
        }
      /* The token refused before anything ran: the caller may rebind and ask again. */
      if (frames++ == 0 && k->client->rebind != NULL && reply_is_unauthorized (frame))
        {
          set_unauthorized (k->client, error, op);
          return FALSE;
        }
      if (!on_frame (frame, user_data, error))
        return FALSE;
    }
}

gboolean
nz_agent_client_stream_probed (NzAgentClient *c, const char *op, JsonObject *body,
                               guint64 observation_ms, gint64 probe_ms, NzAgentFrameFunc on_frame,
                               gpointer user_data, GCancellable *cancellable, GError **error)
{
  gboolean tried = FALSE;

  g_return_val_if_fail (c != NULL, FALSE);
  g_return_val_if_fail (op != NULL && on_frame != NULL, FALSE);
  for (;;)
    {
      GError *local = NULL;
      g_autoptr (Conn) k = conn_request (c, op, body, cancellable, &local);

      if (k != NULL
          && run_stream (k, op, observation_ms, probe_ms, on_frame, user_data, cancellable, &local))
        return TRUE;
      if (!rebind_once (c, &tried, &local))
        {
          g_propagate_error (error, local);
          return FALSE;
        }
    }
}

gboolean
nz_agent_client_stream (NzAgentClient *c, const char *op, JsonObject *body, guint64 observation_ms,
                        NzAgentFrameFunc on_frame, gpointer user_data, GCancellable *cancellable,
                        GError **error)
{
  return nz_agent_client_stream_probed (c, op, body, observation_ms, 0, on_frame, user_data,
                                        cancellable, error);
}

GSocketConnection *
nz_agent_client_open (NzAgentClient *c, const char *op, JsonObject *body, GCancellable *cancellable,
                      GError **error)
{
  g_autoptr (Conn) k = NULL;
  gboolean tried = FALSE;

  g_return_val_if_fail (c != NULL && op != NULL, NULL);
  /* The caller reads the answer, so only a dial failure rebinds here. */
  for (;;)
    {
      GError *local = NULL;

      k = conn_request (c, op, body, cancellable, &local);
      if (k != NULL)
        break;
      if (!rebind_once (c, &tried, &local))
        {
          g_propagate_error (error, local);
          return NULL;
        }
    }
  /* The caller reads the raw connection: nothing may sit in our buffer (a worker sends
   * nothing before it has our request). */
  if (nz_frame_reader_buffered (k->reader) > 0)
    {
      fail (c, error, NZ_ERROR_PROTOCOL, "%s: the peer spoke before it had the request", op);
      return NULL;
    }
  return g_steal_pointer (&k->conn);
}

/* The core's words of a failure (nz-lite-core.h) as our error: spawn ENOENT/EACCES keep their
 * shell meaning. */
static void
set_core_error (GError **error, const NzLiteErr *e)
{
  switch (e->kind)
    {
    case NZ_LITE_ERR_NOENT:
      g_set_error_literal (error, G_SPAWN_ERROR, G_SPAWN_ERROR_NOENT, e->msg);
      break;
    case NZ_LITE_ERR_NOEXEC:
      g_set_error_literal (error, G_SPAWN_ERROR, G_SPAWN_ERROR_ACCES, e->msg);
      break;
    case NZ_LITE_ERR_INVALID:
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s", e->msg);
      break;
    case NZ_LITE_ERR_PROTOCOL:
      nz_throw (error, NZ_ERROR_PROTOCOL, "%s", e->msg);
      break;
    case NZ_LITE_ERR_TIMED_OUT:
      nz_throw (error, NZ_ERROR_TIMED_OUT, "%s", e->msg);
      break;
    default:
      nz_throw (error, NZ_ERROR_FAILED, "%s", e->msg);
      break;
    }
}

/* Maps an agent's error string to our error (the core's table). */
static void
set_agent_error (NzAgentClient *c, GError **error, const char *context, const char *code,
                 const char *message)
{
  NzLiteErr e = { 0 };

  nz_lite_core_refusal (c->description, context, code, message, &e);
  set_core_error (error, &e);
}

static gint64
now_ms (void)
{
  return g_get_monotonic_time () / 1000;
}

/* One run of the exec core (nz-lite-core.h) over GIO: the driver side of the machine that
 * namzu-exec's front drives with blocking poll I/O. */
typedef struct
{
  NzAgentClient *client;
  NzLiteCore core;
  NzExecOutputFunc on_output;
  NzAgentFrameFunc on_frame;
  gpointer user_data;
  GCancellable *cancellable;
  GError *io_error;  /* the failure fed to the core last, in our words */
  GError *bad_frame; /* a frame that is no JSON, in json-glib's words */
  /* The phases of one nz_agent_client_exec, monotonic µs (0: not reached). */
  gint64 t_start, t_reserved, t_dial, t_connected, t_first, t_result, t_end;
} ExecRun;

static gint64
phase_ms (gint64 from, gint64 to)
{
  return from != 0 && to >= from ? (to - from) / 1000 : 0;
}

/* "timing" in the result: reserveMs (the reserve-execution round trip, its connection
 * included), dialMs (connecting for execute: socket, worker upgrade, credential), executeMs
 * (the execute request to its result frame), drainMs (the result frame to the stream's end),
 * firstFrameMs (the execute request to the first frame) and totalMs (all of it). */
static void
exec_add_timing (ExecRun *r, JsonObject *result)
{
  JsonObject *t = json_object_new ();

  json_object_set_int_member (t, "reserveMs", phase_ms (r->t_start, r->t_reserved));
  json_object_set_int_member (t, "dialMs", phase_ms (r->t_dial, r->t_connected));
  json_object_set_int_member (t, "executeMs", phase_ms (r->t_connected, r->t_result));
  json_object_set_int_member (t, "drainMs", phase_ms (r->t_result, r->t_end));
  json_object_set_int_member (t, "firstFrameMs", phase_ms (r->t_connected, r->t_first));
  json_object_set_int_member (t, "totalMs", phase_ms (r->t_start, r->t_end));
  json_object_set_object_member (result, "timing", t);
}

static void
exec_run_clear (ExecRun *r)
{
  nz_lite_core_clear (&r->core);
  g_clear_error (&r->io_error);
  g_clear_error (&r->bad_frame);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (ExecRun, exec_run_clear)

/* Feeds the core a failure of ours (taking @local). The caller's cancellable is checked here
 * because a fired one is what ended the wait. */
static NzLiteCoreAction
exec_failed (ExecRun *r, GError *local)
{
  NzLiteErrKind kind = g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED)
                           ? NZ_LITE_ERR_CANCELLED
                           : NZ_LITE_ERR_FAILED;

  if (g_cancellable_is_cancelled (r->cancellable))
    nz_lite_core_want_cancel (&r->core);
  g_clear_error (&r->io_error);
  r->io_error = local;
  return nz_lite_core_failed (&r->core, kind, local->message, now_ms ());
}

static NzLiteCoreAction
exec_read (ExecRun *r, Conn *k, gint64 deadline, guint64 observation_ms)
{
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (JsonObject) frame = NULL;
  GError *local = NULL;
  NzLiteCoreAction a;
  NzLiteReadStatus st;
  gsize len = 0;
  const char *data;

  st = conn_read_frame (k, deadline, r->cancellable, &payload, &local);
  if (read_failed (k, NZ_LITE_AWAIT_FRAME, st, "exec stream", observation_ms, &local))
    return exec_failed (r, local);
  data = g_bytes_get_data (payload, &len);
  a = nz_lite_core_frame (&r->core, data, len, now_ms ());
  /* json-glib's words for a frame that is no JSON, as before the core read the frames. */
  if (a == NZ_LITE_CORE_DONE && r->core.bad_frame
      && (frame = nz_agent_reply_parse (data, len, &local)) == NULL)
    {
      fail (r->client, &r->bad_frame, NZ_ERROR_PROTOCOL, "exec stream frame: %s", local->message);
      g_error_free (local);
    }
  /* Frames that are neither the result nor an error go to the caller that asked for them. */
  if ((a == NZ_LITE_CORE_READ || a == NZ_LITE_CORE_OUTPUT) && r->on_frame != NULL
      && r->core.result == NULL && r->core.error_code == NULL)
    {
      frame = nz_agent_reply_parse (data, len, NULL);
      if (frame != NULL && !r->on_frame (frame, r->user_data, &local))
        return exec_failed (r, local);
    }
  return a;
}

/* One cancel-execution attempt. Deliberately ignores the caller's (already fired)
 * cancellable. */
static NzLiteCoreAction
exec_cancel_once (ExecRun *r)
{
  g_autoptr (GBytes) text = NULL;
  g_autoptr (JsonObject) reply = NULL;
  GError *local = NULL;
  gsize len = 0;
  const char *data;

  reply = call_text (r->client, "cancel-execution", r->core.cancel_body.data, r->core.attempt_ms,
                     NULL, &text, &local);
  if (reply == NULL)
    return exec_failed (r, local);
  data = g_bytes_get_data (text, &len);
  return nz_lite_core_cancel_reply (&r->core, data, len, now_ms ());
}

/* Runs the core from @a to its end: @k is the execute stream when the caller opened it. The
 * result (a new reference), or NULL with @error. */
static JsonObject *
exec_drive (ExecRun *r, Conn *k, NzLiteCoreAction a, guint64 observation_ms, GError **error)
{
  gint64 deadline = deadline_after (observation_ms);
  JsonObject *result;
  GError *local = NULL;

  while (a != NZ_LITE_CORE_DONE)
    switch (a)
      {
      case NZ_LITE_CORE_EXECUTE:
        if (r->t_dial == 0) /* a retried execute's dial counts from the first try */
          r->t_dial = g_get_monotonic_time ();
        k = conn_request_text (r->client, "execute", r->core.request.data, r->cancellable, &local);
        r->t_connected = g_get_monotonic_time ();
        a = k != NULL ? NZ_LITE_CORE_READ : exec_failed (r, local);
        break;
      case NZ_LITE_CORE_READ:
        a = exec_read (r, k, deadline, observation_ms);
        if (r->t_first == 0)
          r->t_first = g_get_monotonic_time ();
        break;
      case NZ_LITE_CORE_OUTPUT:
        if (r->on_output != NULL)
          r->on_output (r->core.out_stream == 1 ? NZ_EXEC_STDOUT : NZ_EXEC_STDERR, r->core.out,
                        r->core.out_len, r->user_data);
        a = NZ_LITE_CORE_READ;
        break;
      case NZ_LITE_CORE_CLOSE:
        r->t_result = g_get_monotonic_time ();
        if (conn_expect_close (k, "exec stream", FALSE, r->cancellable, &local))
          a = nz_lite_core_closed (&r->core);
        else
          a = exec_failed (r, local);
        break;
      case NZ_LITE_CORE_CANCEL:
        g_clear_pointer (&k, conn_free);
        a = exec_cancel_once (r);
        break;
      case NZ_LITE_CORE_PAUSE:
        g_usleep (NZ_HOST_CANCEL_RETRY_INTERVAL_MS * 1000);
        a = nz_lite_core_tick (&r->core, now_ms ());
        break;
      case NZ_LITE_CORE_DONE:
      default:
        break;
      }
  g_clear_pointer (&k, conn_free);
  r->t_end = g_get_monotonic_time ();
  switch (r->core.end)
    {
    case NZ_LITE_CORE_RESULT:
      result = nz_agent_reply_parse (r->core.result, strlen (r->core.result), &local);
      if (result == NULL)
        {
          fail (r->client, error, NZ_ERROR_PROTOCOL, "exec stream frame: %s", local->message);
          g_error_free (local);
        }
      else if (r->t_start != 0)
        exec_add_timing (r, result);
      return result;
    case NZ_LITE_CORE_IO_FAILED:
      g_propagate_error (error, g_steal_pointer (&r->io_error));
      return NULL;
    case NZ_LITE_CORE_CANCELLED:
      g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_CANCELLED, r->core.err.msg);
      return NULL;
    case NZ_LITE_CORE_UNCONFIRMED:
      g_set_error_literal (error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_CANCEL_UNCONFIRMED,
                           r->core.err.msg);
      return NULL;
    case NZ_LITE_CORE_FAILED:
    default:
      break;
    }
  if (r->bad_frame != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&r->bad_frame));
      return NULL;
    }
  if (r->client->rebind != NULL && g_strcmp0 (r->core.error_code, "unauthorized") == 0)
    {
      set_unauthorized (r->client, error, "execute");
      return NULL;
    }
  set_core_error (error, &r->core.err);
  return NULL;
}

static guint64
observation_ms_for (JsonObject *body)
{
  double t = 0;

  return nz_lite_core_observation_ms (nz_json_get_number (body, "timeoutMs", &t) ? t : 0);
}

static JsonObject *
execute_once (NzAgentClient *c, JsonObject *body, NzAgentFrameFunc on_frame, gpointer user_data,
              GCancellable *cancellable, GError **error)
{
  g_auto (ExecRun) r
      = { .client = c, .on_frame = on_frame, .user_data = user_data, .cancellable = cancellable };
  Conn *k;

  g_return_val_if_fail (c != NULL, NULL);
  g_return_val_if_fail (body != NULL, NULL);
  k = conn_request (c, "execute", body, cancellable, error);
  if (k == NULL)
    return NULL;
  nz_lite_core_init (&r.core, c->description, NULL, 0);
  nz_lite_core_stream (&r.core);
  return exec_drive (&r, k, NZ_LITE_CORE_READ, observation_ms_for (body), error);
}

JsonObject *
nz_agent_client_execute (NzAgentClient *c, JsonObject *body, NzAgentFrameFunc on_frame,
                         gpointer user_data, GCancellable *cancellable, GError **error)
{
  gboolean tried = FALSE;

  g_return_val_if_fail (c != NULL, NULL);
  for (;;)
    {
      GError *local = NULL;
      JsonObject *result = execute_once (c, body, on_frame, user_data, cancellable, &local);

      if (result != NULL)
        return result;
      if (!rebind_once (c, &tried, &local))
        {
          g_propagate_error (error, local);
          return NULL;
        }
    }
}

/* ---- reserve -> execute -> cancel --------------------------------------------------------- */

JsonObject *
nz_agent_client_cancel (NzAgentClient *c, const char *execution_id, GCancellable *cancellable,
                        GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) reply = NULL;

  g_return_val_if_fail (c != NULL, NULL);
  g_return_val_if_fail (execution_id != NULL, NULL);
  json_object_set_string_member (body, "executionId", execution_id);
  reply = call_internal (c, "cancel-execution", body, READ_IDLE_TIMEOUT_MS, cancellable, error);
  if (reply == NULL)
    return NULL;
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      const char *err = nz_json_get_string (reply, "error");

      set_agent_error (c, error, "cancel-execution", err != NULL ? err : "unknown error",
                       nz_json_get_string (reply, "message"));
      return NULL;
    }
  return g_steal_pointer (&reply);
}

static void
note_guest_boot_id (NzAgentClient *c, JsonObject *reply)
{
  const char *boot
      = nz_json_get_bool (reply, "ok", FALSE) ? nz_json_get_string (reply, "guestBootId") : NULL;

  if (boot != NULL && strlen (boot) <= 64)
    {
      g_free (c->guest_boot_id);
      c->guest_boot_id = g_strdup (boot);
    }
}

const char *
nz_agent_client_get_guest_boot_id (NzAgentClient *c)
{
  g_return_val_if_fail (c != NULL, NULL);
  return c->guest_boot_id;
}

static JsonObject *
exec_once (NzAgentClient *c, JsonObject *body, NzExecOutputFunc on_output, gpointer user_data,
           char **out_execution_id, GCancellable *cancellable, GError **error)
{
  g_auto (ExecRun) r = { .client = c,
                         .on_output = on_output,
                         .user_data = user_data,
                         .cancellable = cancellable,
                         .t_start = g_get_monotonic_time () };
  g_autoptr (JsonObject) reserved = NULL;
  g_autoptr (GBytes) text = NULL;
  g_autofree char *open = NULL;
  NzLiteCoreAction a;
  gsize len = 0, n;
  const char *data;

  g_return_val_if_fail (c != NULL, NULL);
  g_return_val_if_fail (body != NULL, NULL);
  /* Like the reference host (spec D.2.5): the id is always the one reserved here. */
  g_return_val_if_fail (!json_object_has_member (body, "executionId"), NULL);
  /* No body: the agent mints the id (spec A.3). */
  reserved
      = call_text (c, "reserve-execution", NULL, READ_IDLE_TIMEOUT_MS, cancellable, &text, error);
  r.t_reserved = g_get_monotonic_time ();
  if (reserved == NULL)
    return NULL;
  if (c->rebind != NULL && reply_is_unauthorized (reserved))
    {
      set_unauthorized (c, error, "reserve-execution");
      return NULL;
    }
  note_guest_boot_id (c, reserved);
  /* The core closes the body with the id: it takes it without its closing brace. */
  open = nz_json_object_to_string (body, &n);
  while (n > 0 && open[n - 1] != '}')
    n--;
  nz_lite_core_init (&r.core, c->description, open, n > 0 ? n - 1 : 0);
  /* A reserved-but-unstarted record is cancelled too, so it can never start later. */
  if (g_cancellable_is_cancelled (cancellable))
    nz_lite_core_want_cancel (&r.core);
  data = g_bytes_get_data (text, &len);
  a = nz_lite_core_reserved (&r.core, data, len, now_ms ());
  if (a == NZ_LITE_CORE_DONE)
    {
      set_core_error (error, &r.core.err);
      return NULL;
    }
  if (out_execution_id != NULL)
    *out_execution_id = g_strdup (r.core.id);
  return exec_drive (&r, NULL, a, observation_ms_for (body), error);
}

JsonObject *
nz_agent_client_exec (NzAgentClient *c, JsonObject *body, NzExecOutputFunc on_output,
                      gpointer user_data, char **out_execution_id, GCancellable *cancellable,
                      GError **error)
{
  gboolean tried = FALSE;

  g_return_val_if_fail (c != NULL, NULL);
  for (;;)
    {
      GError *local = NULL;
      JsonObject *result
          = exec_once (c, body, on_output, user_data, out_execution_id, cancellable, &local);

      if (result != NULL)
        return result;
      /* A dial failure or a refused token: nothing ran, not even the reservation. */
      if (!rebind_once (c, &tried, &local))
        {
          g_propagate_error (error, local);
          return NULL;
        }
      if (out_execution_id != NULL)
        g_clear_pointer (out_execution_id, g_free);
    }
}
