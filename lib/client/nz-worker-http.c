#define _GNU_SOURCE
#include "nz-worker-http.h"

#include <string.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-lite-upgrade.h"

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
  NzLiteUpgradeHead h;
  GByteArray *buf; /* the head, then what followed it */
} Response;

static void
response_clear (Response *r)
{
  if (r->buf != NULL)
    g_byte_array_unref (r->buf);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Response, response_clear)

/* @buf's bytes; an empty GByteArray may have no buffer at all. */
static const char *
bytes_of (GByteArray *buf)
{
  return buf->len > 0 ? (const char *)buf->data : "";
}

/* nz-lite-upgrade's words for @h (the ones namzu-exec's front prints), under our codes. */
static gboolean
throw_words (GError **error, const NzLiteUpgradeHead *h, GByteArray *buf, const char *what)
{
  NzLiteBuf words = { 0 };
  NzErrorCode code = NZ_ERROR_FAILED;

  switch (nz_lite_upgrade_words (h, bytes_of (buf), buf->len, what, &words))
    {
    case NZ_LITE_UPGRADE_ERR_PROTOCOL:
      code = NZ_ERROR_PROTOCOL;
      break;
    case NZ_LITE_UPGRADE_ERR_PERMISSION_DENIED:
      code = NZ_ERROR_PERMISSION_DENIED;
      break;
    case NZ_LITE_UPGRADE_ERR_UNSUPPORTED:
      code = NZ_ERROR_UNSUPPORTED;
      break;
    case NZ_LITE_UPGRADE_ERR_FAILED:
    default:
      break;
    }
  nz_throw (error, code, "%s", words.data);
  free (words.data);
  return FALSE;
}

/* Sends @request (@len bytes; the caller wipes it: it may carry the token) and reads the
 * response head into @r (nz-lite-upgrade reads it, and words what is wrong with it). */
static gboolean
exchange (GSocket *sock, const char *request, gsize len, gint64 deadline, Response *r,
          GCancellable *cancellable, GError **error)
{
  gboolean eof = FALSE;

  if (!send_all (sock, request, len, deadline, cancellable, error))
    return FALSE;
  r->buf = g_byte_array_new ();
  while (nz_lite_upgrade_parse (bytes_of (r->buf), r->buf->len, eof, &r->h)
         == NZ_LITE_UPGRADE_MORE)
    {
      gssize n = receive_some (sock, r->buf, deadline, cancellable, error);

      if (n < 0)
        return FALSE;
      eof = n == 0;
    }
  if (r->h.step != NZ_LITE_UPGRADE_UPGRADED && r->h.step != NZ_LITE_UPGRADE_REFUSED)
    return throw_words (error, &r->h, r->buf, NULL);
  return TRUE;
}

/* Reads the body after the head, as far as nz_lite_upgrade_parse bounded it: by Content-Length
 * when there is one, else to EOF. *@complete tells whether all of it arrived before @deadline. */
static void
read_body (GSocket *sock, Response *r, gint64 deadline, gboolean *complete,
           GCancellable *cancellable)
{
  gsize want = r->h.head_len + r->h.body_len;

  *complete = FALSE;
  while (r->buf->len < want)
    {
      g_autoptr (GError) local = NULL;
      gssize n = receive_some (sock, r->buf, deadline, cancellable, &local);

      if (n < 0)
        return;
      if (n == 0)
        {
          *complete = !r->h.body_sized;
          return;
        }
    }
  g_byte_array_set_size (r->buf, (guint)want);
  *complete = r->h.body_sized;
}

/* The body after the head. */
static const char *
body_of (Response *r, gsize *len)
{
  *len = r->buf->len - r->h.head_len;
  return (const char *)r->buf->data + r->h.head_len;
}

gboolean
nz_worker_http_upgrade (GSocket *sock, const char *host, guint port, const char *token,
                        const char *what, gint64 deadline, GByteArray *rest,
                        GCancellable *cancellable, GError **error)
{
  g_auto (Response) r = { 0 };
  NzLiteBuf req = { 0 };
  gboolean complete = FALSE, ok;
  const char *body;
  gsize len;

  g_return_val_if_fail (G_IS_SOCKET (sock) && host != NULL && what != NULL, FALSE);
  nz_lite_upgrade_request (&req, host, port, token);
  ok = exchange (sock, req.data, req.len, deadline, &r, cancellable, error);
  explicit_bzero (req.data, req.len);
  free (req.data);
  if (!ok)
    return FALSE;
  if (r.h.step == NZ_LITE_UPGRADE_UPGRADED)
    {
      /* What came after the head already belongs to the agent. */
      body = body_of (&r, &len);
      g_byte_array_append (rest, (const guint8 *)body, (guint)len);
      return TRUE;
    }
  read_body (sock, &r, deadline, &complete, cancellable);
  return throw_words (error, &r.h, r.buf, what);
}

/* The worker's additive features come in a header of their own, so that its healthz body
 * stays exactly the reference's: they join @obj as "features", the agent's healthz member the
 * client reads (spec A.9). A body that lists them itself (an older namzu-worker) keeps its. */
static void
add_features (JsonObject *obj, Response *r)
{
  const char *value, *end;
  g_autofree char *list = NULL;
  g_auto (GStrv) items = NULL;
  JsonArray *features;

  if (json_object_has_member (obj, "features")
      || !nz_lite_upgrade_header ((const char *)r->buf->data, r->h.head_len,
                                  NZ_LITE_UPGRADE_FEATURES_HEADER, &value, &end))
    return;
  list = g_strndup (value, (gsize)(end - value));
  items = g_strsplit (list, ",", -1);
  features = json_array_new ();
  for (guint i = 0; items[i] != NULL; i++)
    if (*g_strstrip (items[i]) != '\0' && g_utf8_validate (items[i], -1, NULL))
      json_array_add_string_element (features, items[i]);
  json_object_set_array_member (obj, "features", features);
}

JsonObject *
nz_worker_http_healthz (GSocket *sock, const char *authority, gint64 deadline,
                        GCancellable *cancellable, GError **error)
{
  g_auto (Response) r = { 0 };
  g_autofree char *req = NULL;
  NzLiteBuf shown = { 0 };
  GError *local = NULL;
  gboolean complete = FALSE;
  JsonObject *obj = NULL;
  const char *body;
  gsize len;

  g_return_val_if_fail (G_IS_SOCKET (sock) && authority != NULL, NULL);
  /* The readiness probe carries no token: /healthz is never gated. */
  req = g_strdup_printf ("GET /healthz HTTP/1.1\r\nHost: %s\r\nUser-Agent: namzu\r\n"
                         "Connection: close\r\n\r\n", authority);
  if (!exchange (sock, req, strlen (req), deadline, &r, cancellable, error))
    return NULL;
  read_body (sock, &r, deadline, &complete, cancellable);
  body = body_of (&r, &len);
  nz_lite_upgrade_shown (&shown, body, len);
  if (r.h.status < 200 || r.h.status > 299)
    nz_throw (error, NZ_ERROR_FAILED, "healthz HTTP %u %s", r.h.status, shown.data);
  else if (!complete)
    nz_throw (error, NZ_ERROR_PROTOCOL, "healthz reply was cut short: %s", shown.data);
  else if ((obj = nz_agent_reply_parse (body, len, &local)) == NULL)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "healthz reply is not a JSON object: %s",
                local->message);
      g_error_free (local);
    }
  else
    add_features (obj, &r);
  free (shown.data);
  return obj;
}
