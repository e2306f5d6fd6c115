#include "nz-worker-client.h"

#include <string.h>

#include <libsoup/soup.h>

#include "nz-errors.h"
#include "nz-json.h"

/* I/O inactivity bound on control requests, in seconds (a /cancel waits for the worker's
 * 5 s confirmation, so it must be longer than that). The execute stream has none: a command
 * may be silent for its whole timeout. */
#define CONTROL_IO_TIMEOUT_S 15

#define UNAUTHORIZED_HINT                                                                          \
  "the worker refused the credential: the token given (NAMZU_TOKEN or the sandbox handle's) "   \
  "is not the NAMZU_SANDBOX_TOKEN this worker was started with"

struct _NzWorkerClient
{
  char *base; /* without a trailing '/' */
  char *token;
  SoupSession *control;
  SoupSession *stream;
};

gboolean
nz_worker_endpoint_is_http (const char *endpoint)
{
  return endpoint != NULL && g_ascii_strncasecmp (endpoint, "http://", 7) == 0;
}

NzWorkerClient *
nz_worker_client_new (const char *base_url, const char *token)
{
  NzWorkerClient *wc;
  gsize len;

  g_return_val_if_fail (base_url != NULL, NULL);
  wc = g_new0 (NzWorkerClient, 1);
  wc->base = g_strdup (base_url);
  len = strlen (wc->base);
  while (len > 0 && wc->base[len - 1] == '/')
    wc->base[--len] = '\0';
  wc->token = g_strdup (token);
  return wc;
}

void
nz_worker_client_free (NzWorkerClient *wc)
{
  if (wc == NULL)
    return;
  g_free (wc->base);
  if (wc->token != NULL)
    explicit_bzero (wc->token, strlen (wc->token));
  g_free (wc->token);
  g_clear_object (&wc->control);
  g_clear_object (&wc->stream);
  g_free (wc);
}

static SoupSession *
session_for (NzWorkerClient *wc, gboolean stream)
{
  SoupSession **slot = stream ? &wc->stream : &wc->control;

  if (*slot == NULL)
    *slot = soup_session_new_with_options ("timeout", stream ? 0 : CONTROL_IO_TIMEOUT_S,
                                           "user-agent", "namzu", NULL);
  return *slot;
}

static SoupMessage *
new_message (NzWorkerClient *wc, const char *method, const char *path, JsonObject *body,
             gboolean with_token, GError **error)
{
  g_autofree char *url = g_strconcat (wc->base, path, NULL);
  g_autoptr (GUri) uri = g_uri_parse (url, SOUP_HTTP_URI_FLAGS, error);
  SoupMessage *msg;

  if (uri == NULL)
    return (nz_prefix_error (error, "worker endpoint %s: ", wc->base), NULL);
  msg = soup_message_new_from_uri (method, uri);
  /* Like the reference client: no header at all without a token. */
  if (with_token && wc->token != NULL && *wc->token != '\0')
    {
      g_autofree char *value = g_strconcat ("Bearer ", wc->token, NULL);

      soup_message_headers_replace (soup_message_get_request_headers (msg), "Authorization",
                                    value);
      explicit_bzero (value, strlen (value));
    }
  if (body != NULL)
    {
      gsize len = 0;
      char *json = nz_json_object_to_string (body, &len);
      g_autoptr (GBytes) bytes = g_bytes_new_take (json, len);

      soup_message_set_request_body_from_bytes (msg, "application/json", bytes);
    }
  return msg;
}

/* Transport failures: which worker, never the token; cancellation keeps its own error. */
static gboolean
transport_error (NzWorkerClient *wc, GError **error, GError *local, const char *what)
{
  if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  nz_throw (error, NZ_ERROR_FAILED, "worker %s: %s: %s", wc->base, what, local->message);
  g_error_free (local);
  return FALSE;
}

typedef struct
{
  const char *op;
  const char *method;
  const char *path;
  gboolean send_body;
} RouteMap;

static const RouteMap routes[] = {
  { "healthz", "GET", "/healthz", FALSE },
  /* No body: the worker mints the id and ignores a body anyway. */
  { "reserve-execution", "POST", "/executions/reserve", FALSE },
  { "cancel-execution", "POST", "/cancel", TRUE },
  { "read-file", "POST", "/read-file", TRUE },
  { "write-file", "POST", "/write-file", TRUE },
};

static gboolean
unsupported (NzWorkerClient *wc, GError **error, const char *what)
{
  return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                   "%s is not available on the namzu-worker endpoint %s (it has no "
                   "/v1/agent route: a worker from another release?)",
                   what, wc->base);
}

static gboolean stream_lines (NzWorkerClient *wc, const char *what, const char *path,
                              JsonObject *body, NzWorkerEventFunc func, gpointer user_data,
                              GCancellable *cancellable, GError **error);

static gboolean
first_frame (JsonObject *frame, gpointer user_data, GError **error)
{
  JsonObject **out = user_data;

  /* A reply op answers exactly one frame; anything after it is ignored like trailing data. */
  if (*out == NULL)
    *out = json_object_ref (frame);
  return TRUE;
}

/* A reply op over POST /v1/agent/<op>: its one frame. */
static JsonObject *
agent_call (NzWorkerClient *wc, const char *op, JsonObject *body, GCancellable *cancellable,
            GError **error)
{
  g_autofree char *path = g_strconcat ("/v1/agent/", op, NULL);
  JsonObject *reply = NULL;

  if (!stream_lines (wc, op, path, body, first_frame, &reply, cancellable, error))
    {
      g_clear_pointer (&reply, json_object_unref);
      return NULL;
    }
  if (reply == NULL)
    nz_throw (error, NZ_ERROR_PROTOCOL, "%s: the worker ended the reply without a frame", op);
  return reply;
}

JsonObject *
nz_worker_client_call (NzWorkerClient *wc, const char *op, JsonObject *body,
                       GCancellable *cancellable, GError **error)
{
  const RouteMap *route = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GBytes) reply = NULL;
  g_autoptr (JsonObject) obj = NULL;
  GError *local = NULL;
  guint status;
  gsize len = 0;
  const char *data;

  g_return_val_if_fail (wc != NULL && op != NULL, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (routes); i++)
    if (g_str_equal (routes[i].op, op))
      route = &routes[i];
  /* Ops without a reference route, and the agent-only variants of the file ops (which the
   * reference route would silently read or write whole), go over the additive route. */
  if (route == NULL
      /* A caller-chosen id (namzu-exec --detach --id): the reference route only mints. */
      || (g_str_equal (op, "reserve-execution") && body != NULL)
      || (body != NULL
          && (json_object_has_member (body, "offset") || json_object_has_member (body, "length")
              || json_object_has_member (body, "part"))))
    return agent_call (wc, op, body, cancellable, error);

  /* The readiness probe carries no token: /healthz is never gated. */
  msg = new_message (wc, route->method, route->path, route->send_body ? body : NULL,
                     !g_str_equal (op, "healthz"), error);
  if (msg == NULL)
    return NULL;
  reply = soup_session_send_and_read (session_for (wc, FALSE), msg, cancellable, &local);
  if (reply == NULL)
    return (transport_error (wc, error, local, op), NULL);
  status = soup_message_get_status (msg);
  data = g_bytes_get_data (reply, &len);
  if (status == SOUP_STATUS_UNAUTHORIZED)
    return (nz_throw (error, NZ_ERROR_PERMISSION_DENIED, "%s failed: HTTP 401 %.*s (%s)", op,
                      (int)MIN (len, 256), data != NULL ? data : "", UNAUTHORIZED_HINT),
            NULL);
  if (g_str_equal (op, "healthz") && !SOUP_STATUS_IS_SUCCESSFUL (status))
    /* 503 worker_retiring, a proxy's 502, ...: "not ready yet" to a readiness loop. */
    return (nz_throw (error, NZ_ERROR_FAILED, "worker %s: healthz HTTP %u %.*s", wc->base,
                      status, (int)MIN (len, 256), data != NULL ? data : ""),
            NULL);
  if (status == SOUP_STATUS_NOT_FOUND && g_str_equal (op, "reserve-execution"))
    return (nz_throw (error, NZ_ERROR_PROTOCOL,
                      "The sandbox worker does not implement the required execution protocol. "
                      "Rebuild the worker image from the same namzu release before admitting "
                      "commands."),
            NULL);
  obj = nz_json_parse_object (data != NULL ? data : "", (gssize)len, &local);
  if (obj == NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "%s failed: HTTP %u: %s", op, status, local->message);
      g_error_free (local);
      return NULL;
    }
  if (!SOUP_STATUS_IS_SUCCESSFUL (status) && !json_object_has_member (obj, "ok"))
    json_object_set_boolean_member (obj, "ok", FALSE);
  return g_steal_pointer (&obj);
}

static gboolean
deliver_line (NzWorkerClient *wc, const char *line, gsize len, NzWorkerEventFunc func,
              gpointer user_data, GError **error)
{
  g_autoptr (JsonObject) event = NULL;
  GError *local = NULL;

  if (len == 0)
    return TRUE; /* blank lines are ignored */
  event = nz_json_parse_object (line, (gssize)len, &local);
  if (event == NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "worker emitted malformed NDJSON: %s", local->message);
      g_error_free (local);
      return FALSE;
    }
  return func (event, user_data, error);
}

gboolean
nz_worker_client_execute (NzWorkerClient *wc, JsonObject *body, NzWorkerEventFunc func,
                          gpointer user_data, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (wc != NULL && body != NULL && func != NULL, FALSE);
  /* Retained output (for a later attach) is the agent's execute; the reference route would
   * run the command without it. */
  return stream_lines (wc, "execute",
                       nz_json_get_bool (body, "retainOutput", FALSE) ? "/v1/agent/execute"
                                                                      : "/execute",
                       body, func, user_data, cancellable, error);
}

gboolean
nz_worker_client_agent_stream (NzWorkerClient *wc, const char *op, JsonObject *body,
                               NzWorkerEventFunc func, gpointer user_data,
                               GCancellable *cancellable, GError **error)
{
  g_autofree char *path = NULL;

  g_return_val_if_fail (wc != NULL && op != NULL && func != NULL, FALSE);
  path = g_strconcat ("/v1/agent/", op, NULL);
  return stream_lines (wc, op, path, body, func, user_data, cancellable, error);
}

/* POST @path with @body; each NDJSON line to @func until the worker ends the response. A 4xx
 * with a JSON {"error"} body becomes one {"ok":false,...} object to @func. */
static gboolean
stream_lines (NzWorkerClient *wc, const char *what, const char *path, JsonObject *body,
              NzWorkerEventFunc func, gpointer user_data, GCancellable *cancellable,
              GError **error)
{
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GInputStream) in = NULL;
  g_autoptr (GByteArray) pending = g_byte_array_new ();
  GError *local = NULL;
  guint status;
  guint8 buf[65536];

  msg = new_message (wc, "POST", path, body, TRUE, error);
  if (msg == NULL)
    return FALSE;
  in = soup_session_send (session_for (wc, TRUE), msg, cancellable, &local);
  if (in == NULL)
    return transport_error (wc, error, local, what);
  status = soup_message_get_status (msg);
  if (status != SOUP_STATUS_OK)
    {
      g_autoptr (GBytes) rest = NULL;
      g_autoptr (JsonObject) obj = NULL;
      gsize len = 0;
      const char *data;

      /* Refusals are small JSON bodies; read them whole. */
      rest = g_input_stream_read_bytes (in, 65536, cancellable, NULL);
      data = rest != NULL ? g_bytes_get_data (rest, &len) : NULL;
      if (status == SOUP_STATUS_UNAUTHORIZED)
        return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, "%s failed: HTTP 401 %.*s (%s)",
                         what, (int)MIN (len, 256), data != NULL ? data : "", UNAUTHORIZED_HINT);
      if (status == SOUP_STATUS_NOT_FOUND && g_str_has_prefix (path, "/v1/agent/"))
        return unsupported (wc, error, what);
      obj = data != NULL ? nz_json_parse_object (data, (gssize)len, NULL) : NULL;
      if (obj == NULL || nz_json_get_string (obj, "error") == NULL)
        return nz_throw (error, NZ_ERROR_PROTOCOL, "%s failed: HTTP %u %.*s", what, status,
                         (int)MIN (len, 256), data != NULL ? data : "");
      json_object_set_boolean_member (obj, "ok", FALSE);
      return func (obj, user_data, error);
    }
  /* Lines are split on raw bytes, so a multibyte character split across reads is whole again
   * before it is decoded. */
  for (;;)
    {
      gssize n = g_input_stream_read (in, buf, sizeof buf, cancellable, &local);
      guint8 *nl;

      if (n < 0)
        return transport_error (wc, error, local, what);
      if (n == 0)
        break;
      g_byte_array_append (pending, buf, (guint)n);
      while ((nl = memchr (pending->data, '\n', pending->len)) != NULL)
        {
          gsize line_len = (gsize)(nl - pending->data);
          gboolean ok = deliver_line (wc, (const char *)pending->data, line_len, func, user_data,
                                      error);

          g_byte_array_remove_range (pending, 0, (guint)line_len + 1);
          if (!ok)
            return FALSE;
        }
    }
  /* A trailing partial line at EOF is parsed too. */
  return deliver_line (wc, (const char *)pending->data, pending->len, func, user_data, error);
}
