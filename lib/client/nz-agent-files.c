#include "nz-agent-files.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "nz-base64.h"
#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-host-timing.h"
#include "nz-json.h"
#include "nz-token.h"

#define DOWNLOAD_IDLE_TIMEOUT_MS NZ_HOST_READ_IDLE_TIMEOUT_MS

char *
nz_agent_files_temp_path (const char *target)
{
  g_autofree char *dir = g_path_get_dirname (target);
  g_autofree char *base = g_path_get_basename (target);
  g_autofree char *uuid = nz_uuid_v4 ();
  g_autofree char *short_base = NULL;
  g_autofree char *name = NULL;
  const char *end = base;

  /* basename.slice(0, 96): 96 characters, never half a UTF-8 sequence. */
  for (int i = 0; i < 96 && *end != '\0'; i++)
    end = g_utf8_next_char (end);
  short_base = g_strndup (base, end - base);
  name = g_strdup_printf (".namzu-write-%s-%s.part", uuid, short_base);
  if (g_str_equal (dir, "."))
    return g_steal_pointer (&name);
  return g_build_filename (dir, name, NULL);
}

/* Reads up to @len bytes (short only at EOF). */
static gssize
read_full (int fd, guint8 *buf, gsize len, GError **error)
{
  gsize got = 0;

  while (got < len)
    {
      ssize_t n = read (fd, buf + got, len - got);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          nz_throw_errno_prefix (error, "read");
          return -1;
        }
      if (n == 0)
        break;
      got += (gsize)n;
    }
  return (gssize)got;
}

static gboolean
reply_ok (JsonObject *reply, const char *what, GError **error)
{
  const char *code;
  const char *message;

  if (nz_json_get_bool (reply, "ok", FALSE))
    return TRUE;
  code = nz_json_get_string (reply, "error");
  message = nz_json_get_string (reply, "message");
  return nz_throw (error, nz_agent_error_class (code), "%s refused: %s%s%s%s", what,
                   code != NULL ? code : "(no error)", message != NULL ? " (" : "",
                   message != NULL ? message : "", message != NULL ? ")" : "");
}

static gboolean
require_feature (NzAgentClient *c, const char *feature, GCancellable *cancellable, GError **error)
{
  if (nz_agent_client_get_features (c) == NULL)
    {
      g_autoptr (JsonObject) h = nz_agent_client_healthz (c, cancellable, error);

      if (h == NULL)
        return FALSE;
    }
  if (!nz_agent_client_has_feature (c, feature))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "the agent does not advertise '%s'; run a namzu-agent from the same "
                     "namzu release",
                     feature);
  return TRUE;
}

/* Best effort, errors swallowed: the upload already failed for a reason worth reporting. */
static void
discard_temp (NzAgentClient *c, const char *temp)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) part = json_object_new ();
  g_autoptr (JsonObject) reply = NULL;

  json_object_set_string_member (body, "path", temp);
  json_object_set_string_member (body, "content", "");
  json_object_set_string_member (body, "encoding", "base64");
  json_object_set_boolean_member (part, "discard", TRUE);
  json_object_set_object_member (body, "part", g_steal_pointer (&part));
  reply = nz_agent_client_call (c, "write-file", body, NULL, NULL);
}

static gboolean
send_part (NzAgentClient *c, const char *temp, const char *path, const guint8 *data, gsize len,
           gint64 offset, gboolean final, GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  JsonObject *part = json_object_new ();
  g_autofree char *b64 = g_malloc (NZ_BASE64_ENCODED_LEN (len) + 1);
  g_autoptr (JsonObject) reply = NULL;
  double size = -1;

  b64[nz_base64_encode (data, len, b64)] = '\0';
  json_object_set_string_member (body, "path", temp);
  json_object_set_string_member (body, "content", b64);
  json_object_set_string_member (body, "encoding", "base64");
  json_object_set_int_member (part, "offset", offset);
  if (final)
    {
      json_object_set_boolean_member (part, "final", TRUE);
      json_object_set_string_member (part, "renameTo", path);
    }
  json_object_set_object_member (body, "part", part);
  reply = nz_agent_client_call (c, "write-file", body, cancellable, error);
  if (reply == NULL || !reply_ok (reply, "write-file", error))
    return FALSE;
  /* The temp must have grown to exactly what we sent so far. */
  if (!nz_json_get_number (reply, "sizeBytes", &size) || size != (double)(offset + (gint64)len))
    return nz_throw (error, NZ_ERROR_PROTOCOL,
                     "write-file part at offset %" G_GINT64_FORMAT " left the temp at %.0f bytes, "
                     "expected %" G_GINT64_FORMAT,
                     offset, size, offset + (gint64)len);
  return TRUE;
}

gboolean
nz_agent_files_upload (NzAgentClient *c, int in_fd, const char *path, gsize part_bytes,
                       NzAgentProgressFunc progress, gpointer user_data, gint64 *out_bytes,
                       GCancellable *cancellable, GError **error)
{
  g_autofree char *temp = NULL;
  g_autofree guint8 *cur = NULL;
  g_autofree guint8 *next = NULL;
  gssize cur_len, next_len;
  gint64 offset = 0;

  g_return_val_if_fail (c != NULL && path != NULL && in_fd >= 0, FALSE);
  if (part_bytes == 0)
    part_bytes = NZ_AGENT_FILES_DEFAULT_PART_BYTES;
  if (!require_feature (c, "write-file-parts", cancellable, error))
    return FALSE;
  temp = nz_agent_files_temp_path (path);
  cur = g_malloc (part_bytes);
  next = g_malloc (part_bytes);
  /* Read one part ahead: the last part must say final, and a pipe has no size. */
  if ((cur_len = read_full (in_fd, cur, part_bytes, error)) < 0)
    return FALSE;
  for (;;)
    {
      gboolean final;

      next_len = (gsize)cur_len < part_bytes ? 0 : read_full (in_fd, next, part_bytes, error);
      if (next_len < 0)
        {
          if (offset > 0)
            discard_temp (c, temp);
          return FALSE;
        }
      final = next_len == 0;
      if (!send_part (c, temp, path, cur, (gsize)cur_len, offset, final, cancellable, error))
        {
          discard_temp (c, temp);
          return FALSE;
        }
      offset += cur_len;
      if (progress != NULL)
        progress (offset, -1, user_data);
      if (final)
        break;
      {
        guint8 *t = cur;

        cur = next;
        next = t;
        cur_len = next_len;
      }
    }
  if (out_bytes != NULL)
    *out_bytes = offset;
  return TRUE;
}

typedef struct
{
  int fd;
  gboolean have_meta;
  gboolean have_end;
  gint64 length;
  gint64 received;
  gint64 bytes_sent;
  NzAgentProgressFunc progress;
  gpointer user_data;
} Download;

static gboolean
download_frame (JsonObject *frame, gpointer user_data, GError **error)
{
  Download *d = user_data;
  const char *type = nz_json_get_string (frame, "type");
  guint64 v = 0;

  if (g_strcmp0 (type, "error") == 0)
    {
      const char *code = nz_json_get_string (frame, "error");

      return nz_throw (error, nz_agent_error_class (code), "read-file-stream refused: %s",
                       code != NULL ? code : "(no error code)");
    }
  if (g_strcmp0 (type, "meta") == 0)
    {
      if (d->have_meta)
        return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream sent a second meta frame");
      if (!nz_agent_reply_count (frame, "length", &v))
        return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream meta has no valid length");
      d->have_meta = TRUE;
      d->length = (gint64)v;
      return TRUE;
    }
  if (g_strcmp0 (type, "data") == 0)
    {
      const char *b64 = nz_json_get_string (frame, "data");
      g_autofree guchar *data = NULL;
      gsize len = 0, off = 0;

      if (!d->have_meta)
        return nz_throw (error, NZ_ERROR_PROTOCOL,
                         "read-file-stream sent data before its meta frame");
      data = nz_base64_decode_lenient (b64 != NULL ? b64 : "", &len);
      while (off < len)
        {
          ssize_t n = write (d->fd, data + off, len - off);

          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return nz_throw_errno_prefix (error, "write");
          off += (gsize)n;
        }
      d->received += (gint64)len;
      if (d->progress != NULL)
        d->progress (d->received, d->length, d->user_data);
      return TRUE;
    }
  if (g_strcmp0 (type, "end") == 0)
    {
      if (!nz_agent_reply_count (frame, "bytesSent", &v))
        return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream end has no bytesSent");
      d->have_end = TRUE;
      d->bytes_sent = (gint64)v;
    }
  return TRUE;
}

static gboolean
write_all (int fd, const guint8 *data, gsize len, GError **error)
{
  gsize off = 0;

  while (off < len)
    {
      ssize_t n = write (fd, data + off, len - off);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nz_throw_errno_prefix (error, "write");
      off += (gsize)n;
    }
  return TRUE;
}

#define DATA_PREFIX "{\"type\":\"data\",\"data\":\""
#define DATA_SUFFIX "\"}"

/* The agent builds data frames byte-exactly (spec A.2), so they are decoded straight from the
 * frame: a JSON parse of every 256 KiB chunk would cost more than everything else here.
 * FALSE with no error when the frame is not plain base64 of that shape (the JSON path then
 * takes it); FALSE with @error when the output cannot be written. */
static gboolean
fast_data_frame (Download *d, const char *p, gsize len, guint8 **buf, gsize *buf_len,
                 GError **error)
{
  const gsize pre = strlen (DATA_PREFIX), suf = strlen (DATA_SUFFIX);
  gsize b64_len, need;
  gssize n;

  if (len < pre + suf || memcmp (p, DATA_PREFIX, pre) != 0
      || memcmp (p + len - suf, DATA_SUFFIX, suf) != 0)
    return FALSE;
  if (!d->have_meta)
    return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream sent data before its meta frame");
  b64_len = len - pre - suf;
  need = NZ_BASE64_DECODED_MAX (b64_len);
  if (*buf_len < need)
    {
      g_free (*buf);
      *buf = g_malloc (need);
      *buf_len = need;
    }
  /* Strict: anything but plain base64 between the quotes takes the JSON path. */
  if ((n = nz_base64_decode (p + pre, b64_len, *buf)) < 0)
    return FALSE;
  if (!write_all (d->fd, *buf, (gsize)n, error))
    return FALSE;
  d->received += (gint64)n;
  if (d->progress != NULL)
    d->progress (d->received, d->length, d->user_data);
  return TRUE;
}

/* Names a read that hit the idle bound; other errors pass as they are. */
static gboolean
idle_error (GError **error)
{
  if (error != NULL && g_error_matches (*error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT))
    {
      g_clear_error (error);
      return nz_throw (error, NZ_ERROR_TIMED_OUT, "read-file-stream idle timeout after %ums",
                       DOWNLOAD_IDLE_TIMEOUT_MS);
    }
  return FALSE;
}

/* read-file-stream on a raw connection. Each frame is read whole, header then payload, into
 * one buffer that data frames are decoded from in place: no copy between the socket and the
 * decoder, which at these rates costs as much as the decode. */
static gboolean
download_raw (NzAgentClient *c, JsonObject *body, Download *d, GCancellable *cancellable,
              GError **error)
{
  g_autoptr (GSocketConnection) conn = NULL;
  g_autofree guint8 *frame = NULL;
  g_autofree guint8 *decoded = NULL;
  gsize frame_cap = 0, decoded_len = 0;
  GInputStream *in;

  conn = nz_agent_client_open (c, "read-file-stream", body, cancellable, error);
  if (conn == NULL)
    return FALSE;
  /* An agent that stops sending is gone: the host's read-idle bound, on every read (spec
   * D.2.8 "read-file-stream idle timeout"). */
  g_socket_set_timeout (g_socket_connection_get_socket (conn), DOWNLOAD_IDLE_TIMEOUT_MS / 1000);
  in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      g_autoptr (JsonObject) obj = NULL;
      guint8 header[NZ_FRAME_HEADER_BYTES];
      gsize got = 0;
      gint64 len;

      if (!g_input_stream_read_all (in, header, sizeof header, &got, cancellable, error))
        return idle_error (error);
      if (got < sizeof header)
        return nz_throw (error, NZ_ERROR_PROTOCOL,
                         d->have_end ? "read-file-stream socket closed before its terminator"
                                     : "read-file-stream socket closed before its end frame");
      if ((len = nz_frame_header_length (header)) < 0)
        return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream: malformed frame header");
      if (len == 0)
        return TRUE; /* the terminator */
      if ((guint64)len > NZ_AGENT_REPLY_FRAME_LIMIT)
        return nz_throw (error, NZ_ERROR_PROTOCOL, "read-file-stream sent an oversized frame");
      if (frame_cap < (gsize)len)
        {
          g_free (frame);
          frame = g_malloc ((gsize)len);
          frame_cap = (gsize)len;
        }
      if (!g_input_stream_read_all (in, frame, (gsize)len, &got, cancellable, error))
        return idle_error (error);
      if (got < (gsize)len)
        return nz_throw (error, NZ_ERROR_PROTOCOL,
                         "read-file-stream socket closed in the middle of a frame");
      if (fast_data_frame (d, (const char *)frame, (gsize)len, &decoded, &decoded_len, &local))
        continue;
      if (local != NULL)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      obj = nz_agent_reply_parse ((const char *)frame, (gsize)len, error);
      if (obj == NULL || !download_frame (obj, d, error))
        return FALSE;
    }
}

gboolean
nz_agent_files_download (NzAgentClient *c, const char *path, int out_fd,
                         NzAgentProgressFunc progress, gpointer user_data, gint64 *out_bytes,
                         GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  Download d = { .fd = out_fd, .progress = progress, .user_data = user_data };

  g_return_val_if_fail (c != NULL && path != NULL && out_fd >= 0, FALSE);
  if (!require_feature (c, "read-file-stream", cancellable, error))
    return FALSE;
  json_object_set_string_member (body, "path", path);
  if (!download_raw (c, body, &d, cancellable, error))
    return FALSE;
  if (!d.have_end)
    return nz_throw (error, NZ_ERROR_PROTOCOL,
                     "read-file-stream socket closed before its end frame");
  /* A file that shrank mid-read is a short copy, never a silent success. */
  if (d.bytes_sent != d.received)
    return nz_throw (error, NZ_ERROR_PROTOCOL,
                     "read-file-stream declared %" G_GINT64_FORMAT
                     " bytes and delivered %" G_GINT64_FORMAT,
                     d.bytes_sent, d.received);
  if (d.received != d.length)
    return nz_throw (error, NZ_ERROR_FAILED,
                     "read-file-stream announced %" G_GINT64_FORMAT
                     " bytes and delivered %" G_GINT64_FORMAT
                     " (the file changed while it was read)",
                     d.length, d.received);
  if (out_bytes != NULL)
    *out_bytes = d.received;
  return TRUE;
}

JsonObject *
nz_agent_client_quiesce (NzAgentClient *c, gint64 grace_ms, GCancellable *cancellable,
                         GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  if (grace_ms > 0)
    json_object_set_int_member (body, "graceMs", grace_ms);
  return nz_agent_client_call (c, "quiesce", body, cancellable, error);
}

JsonObject *
nz_agent_client_flush (NzAgentClient *c, gint64 timeout_ms, GCancellable *cancellable,
                       GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();

  if (timeout_ms > 0)
    json_object_set_int_member (body, "timeoutMs", timeout_ms);
  return nz_agent_client_call (c, "flush", body, cancellable, error);
}
