#include "nz-worker-server.h"
#include "nz-privsep.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
#include <libsoup/soup.h>

#include "nz-errors.h"
#include "nz-exec.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"
#include "nz-lifetime.h"
#include "nz-agent-ops.h"
#include "nz-worker-preauth.h"
#include "nz-request.h"
#include "nz-token.h"
#include "nz-worker-agent.h"
#include "nz-worker-head.h"
#include "nz-worker-body.h"
#include "nz-fileread.h"
#include "nz-op-execute.h"
#include "nz-op-files.h"
#include "nz-lite-upgrade.h"

#define JSON_TYPE "application/json; charset=utf-8"
#define NDJSON_TYPE "application/x-ndjson; charset=utf-8"
#define REALM_HEADER "Bearer realm=\"namzu-sandbox-worker\""
#define REQ_KEY "nz-worker-request"

struct _NzWorkerServer
{
  const NzWorkerConfig *config;
  NzGuest *guest;
  SoupServer *soup;
  GSocketService *service;
  guint16 port;
  NzWorkerAgent *agent; /* the /v1/agent routes; NULL when the agent knobs did not parse */
  GPtrArray *upgraded;  /* live upgraded connections (weak), each holding an activity lease */
  /* Its holds are the activity leases: requests in flight and running commands (spec C.6). */
  NzLifetime *lifetime;
  NzWorkerPreauth *preauth; /* connections that have not sent an authorised request yet */
  GCancellable *cancellable; /* cancelled when the server goes: pending heads let go */
  guint exit_id;
  gboolean stopped;
  NzWorkerExitFunc exit_func;
  gpointer exit_data;
};

typedef enum
{
  ROUTE_NONE,
  ROUTE_HEALTHZ,
  ROUTE_EXECUTE,
  ROUTE_RESERVE,
  ROUTE_CANCEL,
  ROUTE_READ_FILE,
  ROUTE_WRITE_FILE,
  ROUTE_AGENT,   /* additive: POST /v1/agent/<op> */
  ROUTE_UPGRADE, /* additive: GET /v1/agent, Upgrade: namzu-agent/2 */
} Route;

#define AGENT_ROUTE_PREFIX "/v1/agent/"
#define UPGRADE_ROUTE "/v1/agent"
/* The protocol named in Upgrade: the agent's framing at its protocol version (spec A.9). */
#define UPGRADE_PROTOCOL "namzu-agent/2"
/* What this worker serves beyond the agent engine's own features, for GET /healthz. */
#define UPGRADE_FEATURE "agent-upgrade"

/* ---- idle timer and activity leases (spec C.6), and the deadline (nz-lifetime.h) ---- */

static void
lifetime_ended (NzLifetime *lt, NzLifetimeEnd why, const char *message, gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autofree char *msg = NULL;

  if (why == NZ_LIFETIME_IDLE)
    {
      /* The reference's line and status, exactly (spec C.6). */
      msg = g_strdup_printf ("idle for %" G_GINT64_FORMAT "ms — exiting (container --rm cleans up)",
                             server->config->idle_timeout_ms);
      server->exit_func (server, 0, msg, server->exit_data);
      return;
    }
  msg = g_strdup_printf ("%s (container --rm cleans up)", message);
  server->exit_func (server, NZ_LIFETIME_EXIT_STATUS, msg, server->exit_data);
}

/* A command still running keeps the worker alive even with no request open. */
static gboolean
lifetime_busy (gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autoptr (GArray) owned = nz_guest_collect_owned_sessions (server->guest);

  return owned->len > 0;
}

static void
lease_acquire (NzWorkerServer *server)
{
  nz_lifetime_hold (server->lifetime);
}

static void
lease_release (NzWorkerServer *server)
{
  nz_lifetime_release (server->lifetime);
}

/* One per accepted request that passed the gate (except /healthz): released when libsoup
 * drops the message, so a body still arriving keeps the worker alive. */
typedef struct
{
  NzWorkerServer *server;
  Route route;
} Request;

static void
request_free (Request *req)
{
  lease_release (req->server);
  g_free (req);
}

/* ---- poisoning (spec C.4 poisonWorker) ---- */

static gboolean
poison_exit (gpointer user_data)
{
  NzWorkerServer *server = user_data;

  server->exit_id = 0;
  server->exit_func (server, 1, NULL, server->exit_data);
  return G_SOURCE_REMOVE;
}

static void
on_retire (NzGuest *guest, const char *message, gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autofree char *msg
      = g_strdup_printf ("termination could not be confirmed; retiring worker: %s", message);

  /* Once: the latch in nz_guest_retire calls us only the first time. Poison disarms the idle
   * timer (spec C.6), and the deadline with it: the poison exit comes first. */
  nz_lifetime_disarm (server->lifetime);
  server->exit_func (server, -1, msg, server->exit_data);
  /* No new connections; open ones get 503 worker_retiring until the process ends. */
  nz_worker_server_stop (server);
  server->exit_id = g_timeout_add ((guint)MIN (server->config->poison_exit_delay_ms, G_MAXUINT),
                                   poison_exit, server);
}

/* ---- replies ---- */

static void
reply_raw (SoupServerMessage *msg, guint status, char *json, gsize len)
{
  soup_server_message_set_status (msg, status, NULL);
  soup_server_message_set_response (msg, JSON_TYPE, SOUP_MEMORY_TAKE, json, len);
}

static void
reply_object (SoupServerMessage *msg, guint status, JsonObject *obj)
{
  gsize len = 0;
  char *json = nz_json_object_to_string (obj, &len);

  reply_raw (msg, status, json, len);
}

/* {"error":code[,"message":message]} */
static void
reply_error (SoupServerMessage *msg, guint status, const char *code, const char *message)
{
  g_autoptr (JsonObject) obj = json_object_new ();

  json_object_set_string_member (obj, "error", code);
  if (message != NULL)
    json_object_set_string_member (obj, "message", message);
  reply_object (msg, status, obj);
}

/* File-op failures: 400 {"ok":false,"error":message}. */
static void
reply_file_error (SoupServerMessage *msg, const char *message)
{
  g_autoptr (JsonObject) obj = json_object_new ();

  json_object_set_boolean_member (obj, "ok", FALSE);
  json_object_set_string_member (obj, "error", message);
  reply_object (msg, SOUP_STATUS_BAD_REQUEST, obj);
}

/* ---- the gate (spec C.3) ---- */

static Route
route_of (SoupServerMessage *msg)
{
  const char *method = soup_server_message_get_method (msg);
  GUri *uri = soup_server_message_get_uri (msg);
  const char *path = g_uri_get_path (uri);

  /* Exact request-target compare, no query parsing: /execute?x=1 is not /execute. */
  if (g_uri_get_query (uri) != NULL || g_uri_get_fragment (uri) != NULL)
    return ROUTE_NONE;
  if (method == SOUP_METHOD_GET && g_strcmp0 (path, "/healthz") == 0)
    return ROUTE_HEALTHZ;
  if (method == SOUP_METHOD_GET && g_strcmp0 (path, UPGRADE_ROUTE) == 0)
    return ROUTE_UPGRADE;
  if (method != SOUP_METHOD_POST)
    return ROUTE_NONE;
  if (g_strcmp0 (path, "/execute") == 0)
    return ROUTE_EXECUTE;
  if (g_strcmp0 (path, "/executions/reserve") == 0)
    return ROUTE_RESERVE;
  if (g_strcmp0 (path, "/cancel") == 0)
    return ROUTE_CANCEL;
  if (g_strcmp0 (path, "/read-file") == 0)
    return ROUTE_READ_FILE;
  if (g_strcmp0 (path, "/write-file") == 0)
    return ROUTE_WRITE_FILE;
  if (g_str_has_prefix (path, AGENT_ROUTE_PREFIX) && path[strlen (AGENT_ROUTE_PREFIX)] != '\0'
      && strchr (path + strlen (AGENT_ROUTE_PREFIX), '/') == NULL)
    return ROUTE_AGENT;
  return ROUTE_NONE;
}

/* The FIRST Authorization header, whatever else arrives (Node's parser keeps the first). */
static const char *
first_authorization (SoupServerMessage *msg)
{
  SoupMessageHeadersIter iter;
  const char *name, *value;

  soup_message_headers_iter_init (&iter, soup_server_message_get_request_headers (msg));
  while (soup_message_headers_iter_next (&iter, &name, &value))
    if (g_ascii_strcasecmp (name, "Authorization") == 0)
      return value;
  return NULL;
}

/* The presented credential as latin-1 bytes, the way the configured one is held. libsoup
 * hands header values over as UTF-8 (it replaces invalid bytes with U+FFFD), so a character
 * up to U+00FF is mapped back to its byte; anything above can never match. */
static char *
latin1_from_header (const char *value)
{
  g_autofree char *token = nz_worker_presented_token (value);
  g_autoptr (GString) out = NULL;

  if (token == NULL || !g_utf8_validate (token, -1, NULL))
    return NULL;
  out = g_string_new (NULL);
  for (const char *p = token; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);

      if (c > 0xff)
        {
          explicit_bzero (token, strlen (token));
          return NULL;
        }
      g_string_append_c (out, (char)c);
    }
  explicit_bzero (token, strlen (token));
  return g_string_free (g_steal_pointer (&out), FALSE);
}

static gboolean
is_authorized (NzWorkerServer *server, SoupServerMessage *msg)
{
  g_autofree char *presented = NULL;
  gboolean ok;

  if (!server->config->auth)
    return TRUE;
  presented = latin1_from_header (first_authorization (msg));
  if (presented == NULL)
    return FALSE;
  /* Fixed-width SHA-256 digests compared in constant time: neither the value nor its length
   * can be learnt by probing. */
  ok = nz_token_equal (server->config->token, presented);
  explicit_bzero (presented, strlen (presented));
  return ok;
}

#define UNAUTHORIZED_BODY "{\"error\":\"unauthorized\"}"
/* The same 401 libsoup would send, for a connection we took over. */
#define RAW_UNAUTHORIZED                                                                           \
  "HTTP/1.1 401 Unauthorized\r\n"                                                                  \
  "WWW-Authenticate: " REALM_HEADER "\r\n"                                                         \
  "Content-Type: " JSON_TYPE "\r\n"                                                                \
  "Content-Length: 24\r\n"                                                                        \
  "Connection: close\r\n"                                                                         \
  "\r\n" UNAUTHORIZED_BODY
/* How long a taken-over connection may keep sending the refused body before we close it. */
#define RAW_LINGER_MS 2000

static gboolean
has_body (SoupMessageHeaders *headers)
{
  SoupEncoding enc = soup_message_headers_get_encoding (headers);

  return enc == SOUP_ENCODING_CHUNKED || enc == SOUP_ENCODING_EOF
         || (enc == SOUP_ENCODING_CONTENT_LENGTH
             && soup_message_headers_get_content_length (headers) > 0);
}

typedef struct
{
  GIOStream *stream;
  GSocket *socket; /* ref: libsoup's stolen stream is a wrapper, not the GSocketConnection */
  guint timer;
  guint8 sink[4096];
} Taken;

static void
taken_close (Taken *t)
{
  g_clear_handle_id (&t->timer, g_source_remove);
  g_io_stream_close (t->stream, NULL, NULL);
  g_object_unref (t->stream);
  g_clear_object (&t->socket);
  g_free (t);
}

static gboolean
taken_linger_expired (gpointer user_data)
{
  Taken *t = user_data;

  t->timer = 0;
  /* Closing cancels the pending read, whose callback frees. */
  g_io_stream_close (t->stream, NULL, NULL);
  return G_SOURCE_REMOVE;
}

static void
taken_drained (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Taken *t = user_data;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (source), res, NULL);

  /* Discarded unparsed: closing with unread input would reset the connection and could
   * destroy the 401 before the peer reads it. */
  if (n > 0 && !g_io_stream_is_closed (t->stream))
    {
      g_input_stream_read_async (G_INPUT_STREAM (source), t->sink, sizeof t->sink,
                                 G_PRIORITY_DEFAULT, NULL, taken_drained, t);
      return;
    }
  taken_close (t);
}

static void
taken_written (GObject *source, GAsyncResult *res, gpointer user_data)
{
  Taken *t = user_data;

  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (source), res, NULL, NULL))
    {
      taken_close (t);
      return;
    }
  /* EOF to the peer, so it stops waiting for more and closes its side. */
  if (t->socket != NULL)
    g_socket_shutdown (t->socket, FALSE, TRUE, NULL);
  t->timer = g_timeout_add (RAW_LINGER_MS, taken_linger_expired, t);
  g_input_stream_read_async (g_io_stream_get_input_stream (t->stream), t->sink, sizeof t->sink,
                             G_PRIORITY_DEFAULT, NULL, taken_drained, t);
}

/* Takes the connection away from libsoup: its stream (*@stream, new reference) and the socket
 * under it (new reference, NULL if there is none). */
static GSocket *
steal_connection (SoupServerMessage *msg, GIOStream **stream)
{
  GSocket *socket = soup_server_message_get_socket (msg);

  socket = socket != NULL ? g_object_ref (socket) : NULL;
  *stream = soup_server_message_steal_connection (msg);
  if (socket == NULL && g_object_class_find_property (G_OBJECT_GET_CLASS (*stream),
                                                      "base-iostream") != NULL)
    {
      g_autoptr (GIOStream) base = NULL;

      /* libsoup hands back its SoupIOStream around the connection we accepted. */
      g_object_get (*stream, "base-iostream", &base, NULL);
      if (G_IS_SOCKET_CONNECTION (base))
        socket = g_object_ref (g_socket_connection_get_socket (G_SOCKET_CONNECTION (base)));
    }
  return socket;
}

/* Answers @response on @stream (taken, with @socket under it, taken too, or NULL), lets the
 * peer's remaining input drain unread for a while, and closes. */
static void
answer_raw (GIOStream *stream, GSocket *socket, const char *response)
{
  Taken *t = g_new0 (Taken, 1);

  t->stream = stream;
  t->socket = socket;
  g_output_stream_write_all_async (g_io_stream_get_output_stream (t->stream), response,
                                   strlen (response), G_PRIORITY_DEFAULT, NULL, taken_written,
                                   t);
}

/* Answers @response on the raw connection, which libsoup gives up. */
static void
refuse_raw (SoupServerMessage *msg, const char *response)
{
  GIOStream *stream = NULL;
  GSocket *socket = steal_connection (msg, &stream);

  answer_raw (stream, socket, response);
}

/* GET /v1/agent must ask for exactly our protocol, and carry no body (the agent's first frame
 * comes after the 101). Anything else is answered here. */
static gboolean
upgrade_acceptable (NzWorkerServer *server, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  SoupMessageHeaders *response = soup_server_message_get_response_headers (msg);

  if (server->agent == NULL)
    {
      reply_error (msg, SOUP_STATUS_NOT_FOUND, "not_found", NULL);
      return FALSE;
    }
  if (!soup_message_headers_header_contains (headers, "Connection", "upgrade")
      || !soup_message_headers_header_contains (headers, "Upgrade", UPGRADE_PROTOCOL))
    {
      soup_message_headers_replace (response, "Upgrade", UPGRADE_PROTOCOL);
      soup_message_headers_replace (response, "Connection", "Upgrade");
      reply_error (msg, 426 /* Upgrade Required */, "upgrade_required",
                   "GET " UPGRADE_ROUTE " needs Connection: Upgrade and Upgrade: " UPGRADE_PROTOCOL);
      return FALSE;
    }
  if (has_body (headers))
    {
      reply_error (msg, SOUP_STATUS_BAD_REQUEST, "invalid_body",
                   "send the agent request after the 101, not as a request body");
      return FALSE;
    }
  return TRUE;
}

/* Runs once the request headers are in and before any body byte is read: a status set here
 * makes libsoup answer without reading the body, so a refused /write-file writes nothing. */
static void
early_handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
               gpointer user_data)
{
  NzWorkerServer *server = user_data;
  Route route = route_of (msg);
  SoupMessageHeaders *headers = soup_server_message_get_request_headers (msg);
  goffset length;
  Request *req;

  /* libsoup keeps a connection alive only for a server with listeners of its own; ours come
   * from our socket service (the pre-auth bounds see them at accept), so it closes each after
   * one response. Say so, so a pooled client never reuses a connection that is going away
   * (RFC 9112 9.6); the upgrade replaces it with "Upgrade". */
  soup_message_headers_replace (soup_server_message_get_response_headers (msg), "Connection",
                                "close");
  /* 1. The gate: first, before the retiring check and before routing (incl. the 404). */
  if (route != ROUTE_HEALTHZ && !is_authorized (server, msg))
    {
      if (has_body (headers))
        {
          /* libsoup would read (and buffer) the body before answering; take the connection
           * instead, so not one body byte is parsed, let alone handed to a route. */
          refuse_raw (msg, RAW_UNAUTHORIZED);
          return;
        }
      soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                    "WWW-Authenticate", REALM_HEADER);
      reply_raw (msg, SOUP_STATUS_UNAUTHORIZED, g_strdup (UNAUTHORIZED_BODY),
                 strlen (UNAUTHORIZED_BODY));
      return;
    }
  /* Through the gate: healthz, which is never gated, lifts nothing where a token is required. */
  if (route != ROUTE_HEALTHZ || !server->config->auth)
    nz_worker_preauth_lift (server->preauth, soup_server_message_get_remote_address (msg));
  /* 2. A poisoned worker answers nothing else (the one bit /healthz shows anonymously). */
  if (server->guest->retiring)
    {
      reply_error (msg, SOUP_STATUS_SERVICE_UNAVAILABLE, "worker_retiring", NULL);
      return;
    }
  if (route == ROUTE_NONE)
    {
      reply_error (msg, SOUP_STATUS_NOT_FOUND, "not_found", NULL);
      return;
    }
  if (route == ROUTE_HEALTHZ)
    return;
  if (route == ROUTE_UPGRADE && !upgrade_acceptable (server, msg))
    return;
  /* The body cap, before reading a byte of a body we would refuse anyway. */
  length = soup_message_headers_get_content_length (headers);
  if (route != ROUTE_RESERVE
      && soup_message_headers_get_encoding (headers) == SOUP_ENCODING_CONTENT_LENGTH
      && length > server->config->max_body_bytes)
    {
      g_autofree char *m = g_strdup_printf ("request body exceeds %" G_GINT64_FORMAT " bytes",
                                            server->config->max_body_bytes);

      reply_error (msg, SOUP_STATUS_BAD_REQUEST, "invalid_body", m);
      return;
    }
  req = g_new0 (Request, 1);
  req->server = server;
  req->route = route;
  lease_acquire (server);
  g_object_set_data_full (G_OBJECT (msg), REQ_KEY, req, (GDestroyNotify)request_free);
}

/* ---- bodies ---- */

/* readBody (nz-worker-body.h); a refusal is answered here. */
static JsonObject *
read_body (NzWorkerServer *server, SoupServerMessage *msg)
{
  SoupMessageBody *body = soup_server_message_get_request_body (msg);
  g_autoptr (GBytes) bytes = soup_message_body_flatten (body);
  g_auto (NzWorkerBodyRefusal) refusal = { 0 };
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);
  JsonObject *obj = nz_worker_body_parse (data, len, server->config->max_body_bytes, &refusal);

  if (obj == NULL)
    reply_error (msg, refusal.status, refusal.code, refusal.message);
  return obj;
}

/* ---- GET /healthz, POST /executions/reserve ---- */

static void
route_healthz (NzWorkerServer *server, SoupServerMessage *msg)
{
  g_autoptr (JsonObject) reply = json_object_new ();

  /* Exactly the reference's body (spec C.4): a strict host compares it. */
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_int_member (reply, "protocolVersion", NZ_GUEST_PROTOCOL_VERSION);
  /* What this worker serves beyond it, through GET /v1/agent, named as the agent names it
   * (spec A.9), goes in a header of its own (docs/worker.md). */
  if (server->agent != NULL)
    {
      g_autoptr (JsonArray) features = nz_agent_ops_features (server->guest);
      g_autoptr (GString) list = g_string_new (NULL);

      for (guint i = 0; i < json_array_get_length (features); i++)
        g_string_append_printf (list, "%s, ", json_array_get_string_element (features, i));
      g_string_append (list, UPGRADE_FEATURE);
      soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                    NZ_LITE_UPGRADE_FEATURES_HEADER, list->str);
    }
  reply_object (msg, SOUP_STATUS_OK, reply);
}

static void
route_reserve (NzWorkerServer *server, SoupServerMessage *msg)
{
  g_auto (NzRefusal) refusal = { 0 };
  g_autoptr (JsonObject) reply = NULL;
  NzExecRecord *rec = nz_op_reserve (server->guest, NULL, NZ_WIRE_WORKER, nz_guest_now_ms (),
                                     NULL, &refusal);

  if (rec == NULL)
    {
      reply_error (msg, refusal.http_status, refusal.code, refusal.detail);
      return;
    }
  reply = json_object_new ();
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_int_member (reply, "protocolVersion", NZ_GUEST_PROTOCOL_VERSION);
  json_object_set_string_member (reply, "executionId", rec->id);
  json_object_set_int_member (reply, "leaseExpiresAt", rec->expires_at);
  json_object_set_string_member (reply, "normalExitPolicy", "strict");
  reply_object (msg, SOUP_STATUS_CREATED, reply);
}

/* ---- POST /execute: the NDJSON stream ---- */

typedef struct
{
  NzWorkerServer *server;
  SoupServerMessage *msg; /* ref; NULL once libsoup is done with it (peer gone or complete) */
  gulong finished_id;
} Stream;

static void
stream_detach (Stream *s)
{
  if (s->msg == NULL)
    return;
  g_clear_signal_handler (&s->finished_id, s->msg);
  g_clear_object (&s->msg);
}

static void
stream_on_finished (SoupServerMessage *msg, gpointer user_data)
{
  /* The peer went away (or the response is complete): the execution goes on regardless,
   * its output is simply dropped. */
  stream_detach (user_data);
}

static void
stream_free (Stream *s)
{
  stream_detach (s);
  /* The command's own lease (spec C.6: a spawned command holds one until it settles). */
  lease_release (s->server);
  g_free (s);
}

static void
stream_write (Stream *s, GString *line, gboolean complete)
{
  SoupMessageBody *body;

  if (s->msg == NULL)
    return;
  body = soup_server_message_get_response_body (s->msg);
  g_string_append_c (line, '\n');
  soup_message_body_append (body, SOUP_MEMORY_COPY, line->str, line->len);
  if (complete)
    soup_message_body_complete (body);
  soup_server_message_unpause (s->msg);
}

static void
exec_output (NzExecRecord *rec, NzExecStream stream, const guint8 *data, gsize len,
             gpointer user_data)
{
  g_autoptr (GString) line = g_string_sized_new (len + 48);

  /* The reference worker's events carry no offsets. */
  nz_request_append_delta (line, rec, stream, data, len, FALSE);
  stream_write (user_data, line, FALSE);
}

static void
exec_finished (NzExecRecord *rec, const NzExecResult *result, const char *error_message,
               gboolean fenced, gpointer user_data)
{
  Stream *s = user_data;
  g_autoptr (JsonObject) event = json_object_new ();
  g_autoptr (GString) line = NULL;
  g_autofree char *text = NULL;

  /* Fenced: the engine poisoned the worker; no terminal event is ever sent, and the stream
   * stays open until the process exits, so the host cannot mistake it for a result. */
  if (fenced)
    return;
  if (result != NULL)
    {
      json_object_set_string_member (event, "type", "result");
      nz_request_set_result_members (event, result);
    }
  else
    {
      json_object_set_string_member (event, "type", "error");
      json_object_set_string_member (event, "error", error_message);
    }
  text = nz_json_object_to_string (event, NULL);
  line = g_string_new (text);
  stream_write (s, line, TRUE);
}

static const NzExecCallbacks exec_callbacks = {
  .output = exec_output,
  .finished = exec_finished,
};

/* A 200 NDJSON response written chunk by chunk as events come (nothing accumulated), paused
 * until the first. */
static void
ndjson_begin (SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);

  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_replace (headers, "Content-Type", NDJSON_TYPE);
  soup_message_headers_replace (headers, "Cache-Control", "no-store");
  soup_message_headers_set_encoding (headers, SOUP_ENCODING_CHUNKED);
  soup_message_body_set_accumulate (soup_server_message_get_response_body (msg), FALSE);
  soup_server_message_pause (msg);
}

static void
stream_begin (Stream *s, SoupServerMessage *msg)
{
  s->msg = g_object_ref (msg);
  s->finished_id = g_signal_connect (msg, "finished", G_CALLBACK (stream_on_finished), s);
  ndjson_begin (msg);
}

static void
route_execute (NzWorkerServer *server, SoupServerMessage *msg, JsonObject *body)
{
  g_auto (NzRefusal) refusal = { 0 };
  g_autoptr (NzExecRequest) req = nz_op_execute_parse (server->guest, body, NZ_WIRE_WORKER,
                                                       &refusal);
  g_autoptr (GError) error = NULL;
  Stream *s;

  /* Every refusal precedes the 200. */
  if (req == NULL && refusal.state != NULL)
    {
      g_autoptr (JsonObject) reply = json_object_new ();

      json_object_set_string_member (reply, "error", refusal.code);
      json_object_set_string_member (reply, "state", refusal.state);
      reply_object (msg, refusal.http_status, reply);
      return;
    }
  if (req == NULL)
    {
      reply_error (msg, refusal.http_status, refusal.code, refusal.detail);
      return;
    }
  s = g_new0 (Stream, 1);
  s->server = server;
  lease_acquire (server);
  if (!nz_exec_start (server->guest, req->rec, &req->spec, &exec_callbacks, s,
                      (GDestroyNotify)stream_free, &error))
    {
      /* The record is terminal `failed` now. mkdir is a 400; a spawn error arrives on the
       * stream like Node's asynchronous 'error' event (ENOENT is not a 400). */
      if (g_str_has_prefix (error->message, "mkdir_failed: "))
        reply_error (msg, SOUP_STATUS_BAD_REQUEST, "mkdir_failed",
                     error->message + strlen ("mkdir_failed: "));
      else
        {
          g_autoptr (JsonObject) event = json_object_new ();
          g_autofree char *text = NULL;
          g_autoptr (GString) line = NULL;

          stream_begin (s, msg);
          json_object_set_string_member (event, "type", "error");
          json_object_set_string_member (event, "error", error->message);
          text = nz_json_object_to_string (event, NULL);
          line = g_string_new (text);
          stream_write (s, line, TRUE);
        }
      stream_free (s);
      return;
    }
  stream_begin (s, msg);
}

/* ---- POST /cancel ---- */

typedef struct
{
  NzWorkerServer *server;
  SoupServerMessage *msg;
} Pending;

static void
cancel_confirmed (NzExecRecord *rec, const char *error_message, gpointer user_data)
{
  Pending *p = user_data;

  if (error_message != NULL)
    {
      reply_error (p->msg, SOUP_STATUS_GATEWAY_TIMEOUT, "cancellation_unconfirmed",
                   error_message);
      /* An unconfirmed kill leaves a workload nobody owns: poison the worker. */
      nz_guest_retire (p->server->guest, error_message);
    }
  else
    {
      g_autoptr (JsonObject) reply = nz_request_terminal_payload (rec, NULL);

      reply_object (p->msg, SOUP_STATUS_OK, reply);
    }
  soup_server_message_unpause (p->msg);
  g_object_unref (p->msg);
  g_free (p);
}

static void
route_cancel (NzWorkerServer *server, SoupServerMessage *msg, JsonObject *body)
{
  NzGuest *guest = server->guest;
  g_auto (NzRefusal) refusal = { 0 };
  NzExecRecord *rec = nz_op_cancel_target (guest, body, NZ_WIRE_WORKER, &refusal);
  Pending *p;

  if (rec == NULL)
    {
      reply_error (msg, refusal.http_status, refusal.code, NULL);
      return;
    }
  nz_request_cancel_unadmitted (guest, rec);
  p = g_new0 (Pending, 1);
  p->server = server;
  p->msg = g_object_ref (msg);
  soup_server_message_pause (msg);
  nz_exec_terminate (guest, rec, NZ_EXEC_CAUSE_CANCELLED, cancel_confirmed, p);
}

/* ---- POST /read-file, POST /write-file (spec C.4, C.5) ---- */

/* The parsed file op, or FALSE when it was refused (the refusal is the reply). */
static gboolean
file_request (SoupServerMessage *msg, JsonObject *body, NzFileOp op, NzFileRequest *req)
{
  g_auto (NzRefusal) refusal = { 0 };

  if (nz_op_file_parse (body, op, NZ_WIRE_WORKER, req, &refusal))
    return TRUE;
  if (refusal.code != NULL)
    reply_error (msg, refusal.http_status, refusal.code, refusal.detail);
  else
    reply_file_error (msg, refusal.detail);
  return FALSE;
}

/* POST /read-file with a `range` (spec C.5, post-23.0.0): exactly those bytes of a regular
 * file, opened race-free, never more than NZ_FILE_RANGE_MAX_BYTES; past EOF is empty. */
static void
read_file_range (NzWorkerServer *server, SoupServerMessage *msg, const NzFileRequest *req)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *real = NULL;
  g_autofree guint8 *buf = NULL;
  g_autoptr (NzFileReader) r = NULL;
  g_autoptr (GBytes) content = NULL;
  GString *reply;
  gint64 wanted;
  gssize n = 0;
  gsize len;
  int fd;

  if ((fd = nz_request_open_read (server->guest, req->path, &real, &error)) < 0
      || (r = nz_file_reader_new (fd, real, &error)) == NULL)
    {
      reply_file_error (msg, error->message);
      return;
    }
  wanted = nz_file_reader_wanted (r, req->range_offset, req->range_length);
  /* A range without a length is the remainder, bounded like any other. */
  if (wanted > NZ_FILE_RANGE_MAX_BYTES)
    {
      g_autofree char *words = nz_op_file_range_too_large (wanted);

      reply_file_error (msg, words);
      return;
    }
  buf = g_malloc (MAX (wanted, 1));
  if (wanted > 0 && (n = nz_file_reader_pread (r, buf, (gsize)wanted, req->range_offset, &error)) < 0)
    {
      reply_file_error (msg, error->message);
      return;
    }
  content = g_bytes_new_take (g_steal_pointer (&buf), (gsize)n);
  reply = g_string_sized_new ((gsize)n * 4 / 3 + 160);
  g_string_append (reply, "{\"ok\":true,");
  nz_request_append_content (reply, content, req->base64);
  /* The content's object stays open for the range it served. */
  g_string_truncate (reply, reply->len - 1);
  g_string_append_printf (reply, ",\"range\":{\"version\":%d,\"offset\":%" G_GINT64_FORMAT
                                 ",\"length\":",
                          NZ_FILE_RANGE_VERSION, req->range_offset);
  if (req->range_length >= 0)
    g_string_append_printf (reply, "%" G_GINT64_FORMAT "}}", req->range_length);
  else
    g_string_append (reply, "null}}");
  len = reply->len;
  reply_raw (msg, SOUP_STATUS_OK, g_string_free (reply, FALSE), len);
}

static void
route_read_file (NzWorkerServer *server, SoupServerMessage *msg, JsonObject *body)
{
  NzFileRequest req;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) content = NULL;
  GString *reply;
  gsize len;

  if (!file_request (msg, body, NZ_FILE_OP_READ, &req))
    return;
  if (req.capabilities_only)
    {
      char *probe = g_strdup_printf ("{\"ok\":true,\"readFileRanges\":{\"version\":%d,"
                                     "\"maxBytes\":%d}}",
                                     NZ_FILE_RANGE_VERSION, NZ_FILE_RANGE_MAX_BYTES);

      reply_raw (msg, SOUP_STATUS_OK, probe, strlen (probe));
      return;
    }
  if (req.has_range)
    {
      read_file_range (server, msg, &req);
      return;
    }
  if ((content = nz_request_read_file (server->guest, req.path, &error)) == NULL)
    {
      reply_file_error (msg, error->message);
      return;
    }
  /* The reference worker's reply carries no guestBootId. */
  reply = g_string_sized_new (g_bytes_get_size (content) + 96);
  g_string_append (reply, "{\"ok\":true,");
  nz_request_append_content (reply, content, req.base64);
  len = reply->len;
  reply_raw (msg, SOUP_STATUS_OK, g_string_free (reply, FALSE), len);
}

static void
route_write_file (NzWorkerServer *server, SoupServerMessage *msg, JsonObject *body)
{
  NzFileRequest req;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = NULL;
  gsize len = 0;

  if (!file_request (msg, body, NZ_FILE_OP_WRITE, &req))
    return;
  if (!nz_request_write_file (server->guest, req.path, req.content, req.encoding, &len, &error))
    {
      reply_file_error (msg, error->message);
      return;
    }
  reply = json_object_new ();
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_int_member (reply, "bytesWritten", (gint64)len);
  reply_object (msg, SOUP_STATUS_OK, reply);
}

/* ---- POST /v1/agent/<op> (additive) ---- */

typedef struct
{
  SoupServerMessage *msg; /* ref */
  gulong finished_id, wrote_id;
  NzAgentConn *conn;      /* ref */
  guint64 appended;       /* response bytes handed to libsoup */
  guint64 written;        /* ... and written by it to the peer */
} AgentStream;

static void
agent_stream_free (AgentStream *as)
{
  g_clear_signal_handler (&as->finished_id, as->msg);
  g_clear_signal_handler (&as->wrote_id, as->msg);
  g_clear_object (&as->msg);
  g_clear_pointer (&as->conn, nz_agent_conn_unref);
  g_free (as);
}

static void
agent_frame (const char *json, gsize len, gpointer user_data)
{
  AgentStream *as = user_data;
  SoupMessageBody *body = soup_server_message_get_response_body (as->msg);
  char *line = g_malloc (len + 1);

  /* One agent frame per NDJSON line (agent frames are single-line JSON), one chunk each. */
  memcpy (line, json, len);
  line[len] = '\n';
  soup_message_body_append_take (body, (guchar *)line, len + 1);
  as->appended += len + 1;
  soup_server_message_unpause (as->msg);
}

static gsize
agent_queued (gpointer user_data)
{
  AgentStream *as = user_data;

  return (gsize)(as->appended - as->written);
}

static void
agent_wrote (SoupServerMessage *msg, guint chunk_size, gpointer user_data)
{
  AgentStream *as = user_data;

  /* A bulk stream (read-file-stream) reads its next chunk only once the HTTP peer took the
   * last, as it would from a socket: the worker never holds a whole file in its heap. */
  as->written = MIN (as->written + chunk_size, as->appended);
  if (as->written == as->appended)
    nz_agent_conn_sink_drained (as->conn);
}

static void
agent_end (gpointer user_data)
{
  AgentStream *as = user_data;

  /* The end of the response is the op's terminator (or the agent's close). */
  soup_message_body_complete (soup_server_message_get_response_body (as->msg));
  soup_server_message_unpause (as->msg);
  agent_stream_free (as);
}

static void
agent_peer_gone (SoupServerMessage *msg, gpointer user_data)
{
  AgentStream *as = user_data;
  NzAgentConn *conn = g_steal_pointer (&as->conn);

  /* The HTTP peer left: the op sees a host that closed its socket (a stream op stops). */
  agent_stream_free (as);
  nz_agent_conn_detach_sink (conn);
  nz_agent_conn_unref (conn);
}

static const NzAgentSinkFuncs agent_sink = {
  .frame = agent_frame,
  .end = agent_end,
  .queued = agent_queued,
};

static void
route_agent (NzWorkerServer *server, SoupServerMessage *msg, JsonObject *body)
{
  const char *op = g_uri_get_path (soup_server_message_get_uri (msg)) + strlen (AGENT_ROUTE_PREFIX);
  AgentStream *as;

  if (server->agent == NULL)
    {
      reply_error (msg, SOUP_STATUS_NOT_FOUND, "not_found", NULL);
      return;
    }
  as = g_new0 (AgentStream, 1);
  as->msg = g_object_ref (msg);
  ndjson_begin (msg);
  as->finished_id = g_signal_connect (msg, "finished", G_CALLBACK (agent_peer_gone), as);
  as->wrote_id = g_signal_connect (msg, "wrote-body-data", G_CALLBACK (agent_wrote), as);
  /* The agent sees exactly the request a host would have framed (minus the token, which the
   * bearer header replaced). No sink call runs before this returns. */
  as->conn = nz_worker_agent_call (server->agent, op, body, &agent_sink, as);
}

/* ---- GET /v1/agent upgraded to namzu-agent/2 (additive) ---- */

static void
upgraded_gone (gpointer user_data, GObject *where_the_object_was)
{
  NzWorkerServer *server = user_data;

  g_ptr_array_remove_fast (server->upgraded, where_the_object_was);
  lease_release (server);
}

/* After the 101 is on the wire: the connection leaves libsoup and becomes an agent
 * connection, exactly as if the agent had accepted it on its socket. */
static void
upgrade_complete (SoupServerMessage *msg, gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autoptr (GIOStream) stream = NULL;
  g_autoptr (GSocket) socket = steal_connection (msg, &stream);
  g_autoptr (GSocket) own = NULL;
  g_autoptr (GSocketConnection) conn = NULL;
  int fd = socket != NULL ? dup (g_socket_get_fd (socket)) : -1;

  /* A descriptor of our own, so closing libsoup's stream (which owns the accepted socket)
   * leaves the connection open; nothing is buffered in that stream, since the client sends
   * its first frame only after reading the 101. */
  if (fd >= 0 && (own = g_socket_new_from_fd (fd, NULL)) == NULL)
    close (fd);
  g_io_stream_close (stream, NULL, NULL);
  if (own == NULL || server->agent == NULL || server->stopped)
    return;
  conn = g_socket_connection_factory_create_connection (own);
  /* The worker stays up while an upgraded connection (a terminal, a tunnel) is open. */
  lease_acquire (server);
  g_ptr_array_add (server->upgraded, conn);
  g_object_weak_ref (G_OBJECT (conn), upgraded_gone, server);
  nz_worker_agent_accept (server->agent, conn);
}

static void
route_upgrade (NzWorkerServer *server, SoupServerMessage *msg)
{
  SoupMessageHeaders *headers = soup_server_message_get_response_headers (msg);

  soup_server_message_set_status (msg, SOUP_STATUS_SWITCHING_PROTOCOLS, NULL);
  soup_message_headers_replace (headers, "Upgrade", UPGRADE_PROTOCOL);
  soup_message_headers_replace (headers, "Connection", "Upgrade");
  /* libsoup's own WebSocket upgrade takes the connection at the same point. */
  g_signal_connect (msg, "wrote-informational", G_CALLBACK (upgrade_complete), server);
}

/* ---- dispatch ---- */

static void
handler (SoupServer *soup, SoupServerMessage *msg, const char *path, GHashTable *query,
         gpointer user_data)
{
  NzWorkerServer *server = user_data;
  Request *req = g_object_get_data (G_OBJECT (msg), REQ_KEY);
  g_autoptr (JsonObject) body = NULL;
  Route route = route_of (msg);

  /* The early handler ran for every request; re-check what may have changed while the body
   * arrived (a poisoning). */
  if (server->guest->retiring)
    {
      reply_error (msg, SOUP_STATUS_SERVICE_UNAVAILABLE, "worker_retiring", NULL);
      return;
    }
  if (route == ROUTE_HEALTHZ)
    {
      route_healthz (server, msg);
      return;
    }
  if (req == NULL || route == ROUTE_NONE)
    {
      reply_error (msg, SOUP_STATUS_NOT_FOUND, "not_found", NULL);
      return;
    }
  if (route == ROUTE_UPGRADE)
    {
      route_upgrade (server, msg);
      return;
    }
  if (route == ROUTE_RESERVE)
    {
      /* The body is ignored. */
      route_reserve (server, msg);
      return;
    }
  body = read_body (server, msg);
  if (body == NULL)
    return;
  switch (route)
    {
    case ROUTE_EXECUTE:
      route_execute (server, msg, body);
      break;
    case ROUTE_CANCEL:
      route_cancel (server, msg, body);
      break;
    case ROUTE_READ_FILE:
      {
        NZ_PRIVSEP_FS_SCOPE;
        route_read_file (server, msg, body);
      }
      break;
    case ROUTE_WRITE_FILE:
      {
        NZ_PRIVSEP_FS_SCOPE;
        route_write_file (server, msg, body);
      }
      break;
    case ROUTE_AGENT:
      route_agent (server, msg, body);
      break;
    case ROUTE_NONE:
    case ROUTE_HEALTHZ:
    case ROUTE_RESERVE:
    case ROUTE_UPGRADE:
    default:
      reply_error (msg, SOUP_STATUS_NOT_FOUND, "not_found", NULL);
      break;
    }
}

/* ---- listener ---- */

static void
head_arrived (GSocketConnection *connection, const char *refused, gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autoptr (GSocketAddress) local = NULL;
  g_autoptr (GSocketAddress) remote = NULL;
  g_autoptr (GError) error = NULL;

  /* Stopped (retiring) still serves what was accepted before: its answer is worker_retiring. */
  if (connection == NULL)
    return;
  if (refused != NULL)
    {
      g_debug ("worker connection: refused before parsing: %s", refused);
      answer_raw (G_IO_STREAM (g_object_ref (connection)),
                  g_object_ref (g_socket_connection_get_socket (connection)),
                  NZ_WORKER_HEAD_REFUSAL);
      return;
    }
  local = g_socket_connection_get_local_address (connection, NULL);
  remote = g_socket_connection_get_remote_address (connection, NULL);
  if (!soup_server_accept_iostream (server->soup, G_IO_STREAM (connection), local, remote,
                                    &error))
    g_debug ("accept: %s", error->message);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source,
             gpointer user_data)
{
  NzWorkerServer *server = user_data;
  g_autoptr (GSocketAddress) remote = g_socket_connection_get_remote_address (connection, NULL);

  if (server->stopped)
    return TRUE;
  nz_worker_preauth_start (server->preauth, server->config, connection, remote);
  /* libsoup gets the connection once its head passed the checks libsoup does not make. */
  nz_worker_head_wait (connection, server->cancellable, head_arrived, server);
  return TRUE;
}

NzWorkerServer *
nz_worker_server_new (const NzWorkerConfig *config, NzGuest *guest, NzWorkerExitFunc exit_func,
                      gpointer user_data)
{
  NzWorkerServer *server;

  g_return_val_if_fail (config != NULL && guest != NULL && exit_func != NULL, NULL);
  server = g_new0 (NzWorkerServer, 1);
  server->config = config;
  server->guest = guest;
  server->exit_func = exit_func;
  server->exit_data = user_data;
  server->lifetime = nz_lifetime_new (config->expires_at_ms, config->idle_timeout_ms, lifetime_busy,
                                      lifetime_ended, server);
  /* No Server header: the reference sends none, and it is one more fingerprint. */
  server->soup = soup_server_new ("server-header", NULL, NULL);
  soup_server_add_early_handler (server->soup, NULL, early_handler, server, NULL);
  soup_server_add_handler (server->soup, NULL, handler, server, NULL);
  nz_guest_set_retire_func (guest, on_retire, server);
  /* A bad NAMZU_AGENT_* knob only disables the additive route (it answers 404). */
  server->agent = nz_worker_agent_new (guest, NULL);
  server->upgraded = g_ptr_array_new ();
  server->preauth = nz_worker_preauth_new (config);
  server->cancellable = g_cancellable_new ();
  return server;
}

void
nz_worker_server_stop (NzWorkerServer *server)
{
  if (server->stopped)
    return;
  server->stopped = TRUE;
  if (server->service != NULL)
    {
      g_socket_service_stop (server->service);
      g_socket_listener_close (G_SOCKET_LISTENER (server->service));
    }
}

void
nz_worker_server_free (NzWorkerServer *server)
{
  if (server == NULL)
    return;
  nz_worker_server_stop (server);
  g_cancellable_cancel (server->cancellable);
  g_clear_object (&server->cancellable);
  g_clear_pointer (&server->lifetime, nz_lifetime_free);
  g_clear_handle_id (&server->exit_id, g_source_remove);
  nz_guest_set_retire_func (server->guest, NULL, NULL);
  if (server->soup != NULL)
    soup_server_disconnect (server->soup);
  g_clear_object (&server->soup);
  g_clear_object (&server->service);
  /* Connections still open outlive us only until the process exits; they must not call back. */
  for (guint i = 0; i < server->upgraded->len; i++)
    g_object_weak_unref (server->upgraded->pdata[i], upgraded_gone, server);
  g_ptr_array_unref (server->upgraded);
  /* Connections still pending outlive the pool only until the process exits. */
  nz_worker_preauth_free (server->preauth);
  nz_worker_agent_free (server->agent);
  g_free (server);
}

/* NAMZU_SANDBOX_BIND as an address: a literal (brackets allowed), or a name resolved once. */
static GInetAddress *
bind_address (const char *bind, GError **error)
{
  g_autofree char *s = g_strstrip (g_strdup (bind));
  g_autolist (GInetAddress) list = NULL;
  gsize len = strlen (s);
  GInetAddress *addr;

  if (len >= 2 && s[0] == '[' && s[len - 1] == ']')
    {
      memmove (s, s + 1, len - 2);
      s[len - 2] = '\0';
    }
  addr = g_inet_address_new_from_string (s);
  if (addr != NULL)
    return addr;
  if (g_ascii_strcasecmp (s, "localhost") == 0)
    return g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  list = g_resolver_lookup_by_name (g_resolver_get_default (), s, NULL, error);
  if (list == NULL)
    return NULL;
  return g_object_ref (list->data);
}

gboolean
nz_worker_server_listen (NzWorkerServer *server, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autoptr (GInetAddress) addr = NULL;
  g_autoptr (GSocketAddress) sa = NULL;
  g_autoptr (GSocketAddress) effective = NULL;

  g_return_val_if_fail (server->service == NULL, FALSE);
  addr = bind_address (server->config->bind, &local);
  if (addr != NULL)
    {
      sa = g_inet_socket_address_new (addr, server->config->port);
      server->service = g_socket_service_new ();
      /* GLib's default backlog is 10: a burst of connections (a flood, or just many hosts)
       * filled it and every SYN past it waited a second for its retransmit. The kernel caps
       * this at net.core.somaxconn. */
      g_socket_listener_set_backlog (G_SOCKET_LISTENER (server->service), 1024);
      if (g_socket_listener_add_address (G_SOCKET_LISTENER (server->service), sa,
                                         G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL,
                                         &effective, &local))
        {
          server->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective));
          g_signal_connect (server->service, "incoming", G_CALLBACK (on_incoming), server);
          g_socket_service_start (server->service);
          nz_lifetime_start (server->lifetime);
          return TRUE;
        }
    }
  return nz_throw (error, NZ_ERROR_FAILED, "could not listen on %s:%u: %s", server->config->bind,
                   server->config->port, local->message);
}

guint16
nz_worker_server_get_port (NzWorkerServer *server)
{
  return server->port;
}
