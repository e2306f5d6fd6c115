#define _GNU_SOURCE
#include "nz-worker-http.h"

#include <string.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-json.h"

/* A worker's response head is a status line and a handful of headers; more is not a worker. */
#define HEAD_LIMIT_BYTES 16384
/* Refusal and healthz bodies are small JSON objects. */
#define BODY_LIMIT_BYTES 65536
/* How much of a refusal body an error message shows. */
#define SHOWN_BODY_BYTES 256

#define UNAUTHORIZED_HINT                                                                          \
  "the worker refused the credential: the token given (NAMZU_TOKEN or the sandbox handle's) "   \
  "is not the NAMZU_SANDBOX_TOKEN this worker was started with"

gboolean
nz_worker_endpoint_is_http (const char *endpoint)
{
  return endpoint != NULL && g_ascii_strncasecmp (endpoint, "http://", 7) == 0;
}

gboolean
nz_socket_wait_until (GSocket *sock, GIOCondition cond, gint64 deadline,
                      GCancellable *cancellable, GError **error)
{
  gint64 timeout_us = -1;

  if (deadline != G_MAXINT64)
    {
      timeout_us = deadline - g_get_monotonic_time ();
      if (timeout_us <= 0)
        return g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "timed out"), FALSE;
    }
  return g_socket_condition_timed_wait (sock, cond, timeout_us, cancellable, error);
}

static gboolean
wait_for (GSocket *sock, GIOCondition cond, gint64 deadline, GCancellable *cancellable,
          GError **error)
{
  if (!nz_socket_wait_until (sock, cond, deadline, cancellable, error))
    {
      if (g_error_matches (*error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
        {
          g_clear_error (error);
          return nz_throw (error, NZ_ERROR_TIMED_OUT, "the worker did not answer in time");
        }
      return FALSE;
    }
  return TRUE;
}

static gboolean
send_all (GSocket *sock, const char *data, gsize len, gint64 deadline,
          GCancellable *cancellable, GError **error)
{
  while (len > 0)
    {
      GError *local = NULL;
      gssize n;

      if (!wait_for (sock, G_IO_OUT, deadline, cancellable, error))
        return FALSE;
      n = g_socket_send (sock, data, len, cancellable, &local);
      if (n < 0 && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        {
          g_error_free (local);
          continue;
        }
      if (n < 0)
        {
          g_propagate_error (error, local);
          return FALSE;
        }
      data += n;
      len -= (gsize)n;
    }
  return TRUE;
}

/* Appends what the peer sends next to @buf. Returns the byte count, 0 at EOF, -1 on error. */
static gssize
receive_some (GSocket *sock, GByteArray *buf, gint64 deadline, GCancellable *cancellable,
              GError **error)
{
  for (;;)
    {
      guint8 chunk[8192];
      GError *local = NULL;
      gssize n;

      if (!wait_for (sock, G_IO_IN, deadline, cancellable, error))
        return -1;
      n = g_socket_receive (sock, (char *)chunk, sizeof chunk, cancellable, &local);
      if (n < 0 && g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
        {
          g_error_free (local);
          continue;
        }
      if (n < 0)
        {
          g_propagate_error (error, local);
          return -1;
        }
      g_byte_array_append (buf, chunk, (guint)n);
      return n;
    }
}

typedef struct
{
  guint status;
  char *head;      /* status line and headers, without the blank line */
  GByteArray *rest; /* what followed the head */
} Response;

static void
response_clear (Response *r)
{
  g_free (r->head);
  if (r->rest != NULL)
    g_byte_array_unref (r->rest);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Response, response_clear)

/* Sends @request (taken; zeroed and freed: it may carry the token) and reads the response
 * head. */
static gboolean
exchange (GSocket *sock, char *request, gint64 deadline, Response *r,
          GCancellable *cancellable, GError **error)
{
  g_autoptr (GByteArray) buf = g_byte_array_new ();
  gboolean sent = send_all (sock, request, strlen (request), deadline, cancellable, error);
  const guint8 *end = NULL;
  guint64 status = 0;

  explicit_bzero (request, strlen (request));
  g_free (request);
  if (!sent)
    return FALSE;
  while ((end = buf->len >= 4 ? memmem (buf->data, buf->len, "\r\n\r\n", 4) : NULL) == NULL)
    {
      gssize n;

      if (buf->len > HEAD_LIMIT_BYTES)
        return nz_throw (error, NZ_ERROR_PROTOCOL,
                         "the peer's response head exceeds %u bytes: not a namzu-worker",
                         HEAD_LIMIT_BYTES);
      n = receive_some (sock, buf, deadline, cancellable, error);
      if (n < 0)
        return FALSE;
      /* Not a protocol error: a port published before the worker listens (docker-proxy)
       * accepts and closes, and a readiness loop must wait that out. */
      if (n == 0)
        return nz_throw (error, NZ_ERROR_FAILED,
                         "the peer closed the connection before a complete HTTP response");
    }
  r->head = g_strndup ((const char *)buf->data, end - buf->data);
  if (g_str_has_prefix (r->head, "HTTP/1.") && strlen (r->head) >= 12 && r->head[8] == ' '
      && (r->head[12] == ' ' || r->head[12] == '\r' || r->head[12] == '\0'))
    {
      char code[4] = { r->head[9], r->head[10], r->head[11], '\0' };

      if (!g_ascii_string_to_unsigned (code, 10, 100, 599, &status, NULL))
        status = 0;
    }
  if (status == 0)
    {
      g_autofree char *shown = g_strndup (r->head, strcspn (r->head, "\r\n"));

      return nz_throw (error, NZ_ERROR_PROTOCOL, "not an HTTP response: \"%.*s\"",
                       SHOWN_BODY_BYTES, shown);
    }
  r->status = (guint)status;
  r->rest = g_byte_array_new ();
  g_byte_array_append (r->rest, end + 4, buf->len - (guint)(end + 4 - buf->data));
  return TRUE;
}

/* The value of header @name in @head (first occurrence), or NULL. */
static char *
header_value (const char *head, const char *name)
{
  g_auto (GStrv) lines = g_strsplit (head, "\r\n", -1);
  gsize len = strlen (name);

  for (guint i = 1; lines[i] != NULL; i++)
    if (g_ascii_strncasecmp (lines[i], name, len) == 0 && lines[i][len] == ':')
      return g_strstrip (g_strdup (lines[i] + len + 1));
  return NULL;
}

static gboolean
header_has_token (const char *head, const char *name, const char *token)
{
  g_autofree char *value = header_value (head, name);
  g_auto (GStrv) items = value != NULL ? g_strsplit (value, ",", -1) : NULL;

  for (guint i = 0; items != NULL && items[i] != NULL; i++)
    if (g_ascii_strcasecmp (g_strstrip (items[i]), token) == 0)
      return TRUE;
  return FALSE;
}

/* Reads the body after the head: by Content-Length when there is one, else to EOF, at most
 * BODY_LIMIT_BYTES. *@complete tells whether all of it arrived before @deadline. */
static void
read_body (GSocket *sock, Response *r, gint64 deadline, gboolean *complete,
           GCancellable *cancellable)
{
  g_autofree char *length = header_value (r->head, "Content-Length");
  guint64 want = BODY_LIMIT_BYTES;
  gboolean sized = length != NULL
                   && g_ascii_string_to_unsigned (length, 10, 0, G_MAXUINT64, &want, NULL);

  want = MIN (want, BODY_LIMIT_BYTES);
  *complete = FALSE;
  while (r->rest->len < want)
    {
      g_autoptr (GError) local = NULL;
      gssize n = receive_some (sock, r->rest, deadline, cancellable, &local);

      if (n < 0)
        return;
      if (n == 0)
        {
          *complete = !sized;
          return;
        }
    }
  g_byte_array_set_size (r->rest, (guint)want);
  *complete = sized;
}

/* The body for a message: at most SHOWN_BODY_BYTES, one line. */
static char *
shown_body (Response *r)
{
  g_autofree char *text = r->rest->len > 0 ? g_strndup ((const char *)r->rest->data,
                                                        MIN (r->rest->len, SHOWN_BODY_BYTES))
                                            : g_strdup ("");

  return g_strdelimit (g_utf8_make_valid (text, -1), "\r\n\t", ' ');
}

static char *
request_text (const char *path, const char *authority, const char *token, gboolean upgrade)
{
  g_autoptr (GString) req = g_string_new (NULL);

  g_string_append_printf (req, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: namzu\r\n", path,
                          authority);
  if (upgrade)
    g_string_append (req, "Connection: Upgrade\r\nUpgrade: " NZ_WORKER_UPGRADE_PROTOCOL "\r\n");
  else
    g_string_append (req, "Connection: close\r\n");
  /* Like the reference client: no header at all without a token (spec D.1). */
  if (token != NULL && *token != '\0')
    g_string_append_printf (req, "Authorization: Bearer %s\r\n", token);
  g_string_append (req, "\r\n");
  return g_string_free (g_steal_pointer (&req), FALSE);
}

gboolean
nz_worker_http_upgrade (GSocket *sock, const char *authority, const char *token,
                        const char *what, gint64 deadline, GByteArray *rest,
                        GCancellable *cancellable, GError **error)
{
  g_auto (Response) r = { 0 };
  g_autofree char *body = NULL;
  g_autoptr (JsonObject) obj = NULL;
  gboolean complete = FALSE;
  const char *code;

  g_return_val_if_fail (G_IS_SOCKET (sock) && authority != NULL && what != NULL, FALSE);
  if (!exchange (sock, request_text (NZ_WORKER_UPGRADE_PATH, authority, token, TRUE), deadline,
                 &r, cancellable, error))
    return FALSE;
  if (r.status == 101)
    {
      if (!header_has_token (r.head, "Upgrade", NZ_WORKER_UPGRADE_PROTOCOL))
        return nz_throw (error, NZ_ERROR_PROTOCOL,
                         "%s: the worker switched to a protocol other than "
                         NZ_WORKER_UPGRADE_PROTOCOL, what);
      g_byte_array_append (rest, r.rest->data, r.rest->len);
      return TRUE;
    }
  read_body (sock, &r, deadline, &complete, cancellable);
  body = shown_body (&r);
  if (r.status == 401)
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED, "%s failed: HTTP 401 %s (%s)", what,
                     body, UNAUTHORIZED_HINT);
  obj = nz_agent_reply_parse ((const char *)r.rest->data, r.rest->len, NULL);
  code = obj != NULL ? nz_json_get_string (obj, "error") : NULL;
  if (r.status == 503 && g_strcmp0 (code, "worker_retiring") == 0)
    return nz_throw (error, NZ_ERROR_FAILED,
                     "%s failed: HTTP 503 worker_retiring: the worker fenced itself after a "
                     "process-group shutdown could not be confirmed, so the sandbox must be "
                     "recreated", what);
  if (r.status == 404)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "%s is not available: the worker has no GET " NZ_WORKER_UPGRADE_PATH
                     " upgrade route (HTTP 404 %s); run a namzu-worker from the same namzu "
                     "release", what, body);
  return nz_throw (error, NZ_ERROR_FAILED, "%s failed: HTTP %u %s", what, r.status, body);
}

JsonObject *
nz_worker_http_healthz (GSocket *sock, const char *authority, gint64 deadline,
                        GCancellable *cancellable, GError **error)
{
  g_auto (Response) r = { 0 };
  g_autofree char *body = NULL;
  GError *local = NULL;
  gboolean complete = FALSE;
  JsonObject *obj;

  g_return_val_if_fail (G_IS_SOCKET (sock) && authority != NULL, NULL);
  /* The readiness probe carries no token: /healthz is never gated. */
  if (!exchange (sock, request_text ("/healthz", authority, NULL, FALSE), deadline, &r,
                 cancellable, error))
    return NULL;
  read_body (sock, &r, deadline, &complete, cancellable);
  body = shown_body (&r);
  if (r.status < 200 || r.status > 299)
    return (nz_throw (error, NZ_ERROR_FAILED, "healthz HTTP %u %s", r.status, body), NULL);
  if (!complete)
    return (nz_throw (error, NZ_ERROR_PROTOCOL, "healthz reply was cut short: %s", body), NULL);
  obj = nz_agent_reply_parse ((const char *)r.rest->data, r.rest->len, &local);
  if (obj == NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "healthz reply is not a JSON object: %s",
                local->message);
      g_error_free (local);
    }
  return obj;
}
