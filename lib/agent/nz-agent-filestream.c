#include "nz-agent-filestream.h"

#include <stdio.h>
#include <string.h>

#include "nz-base64.h"
#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-fileread.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-op-files.h"
#include "nz-request.h"

static NzGuest *
conn_guest (NzAgentConn *conn)
{
  return nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
}

/* ---- read-file-stream ---- */

typedef struct
{
  gint ref;
  NzAgentConn *conn; /* borrowed: the stream lives no longer than its connection */
  NzFileReader *reader;
  gint64 pos;
  gint64 wanted;
  gint64 sent;
  guint8 *buf;
  gsize buf_len;
  /* One reusable data frame, header included, handed to the connection without a copy: the
   * next chunk is encoded only once the connection let go of it, so the agent's memory stays
   * one chunk and one frame whatever the file size, and no page is faulted in per chunk. */
  char *frame;
  gsize frame_cap;
  gboolean frame_busy;
  gboolean closed;
  guint step_id; /* the next chunk, scheduled once the socket drained */
} FileStream;

static FileStream *
file_stream_ref (FileStream *s)
{
  s->ref++;
  return s;
}

static void
file_stream_unref (FileStream *s)
{
  if (--s->ref > 0)
    return;
  g_clear_handle_id (&s->step_id, g_source_remove);
  nz_file_reader_free (s->reader);
  g_free (s->buf);
  g_free (s->frame);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (FileStream, file_stream_unref)

/* The peer hung up: close the fd now, whatever the loop was doing. */
static void
file_stream_closed (NzAgentConn *conn, gpointer user_data)
{
  FileStream *s = user_data;

  s->closed = TRUE;
  g_clear_handle_id (&s->step_id, g_source_remove);
  g_clear_pointer (&s->reader, nz_file_reader_free);
}

static gboolean file_stream_step (gpointer user_data);

/* Called when the write queue drained. The next chunk runs from the main loop rather than
 * from inside the write path, so a fast reader cannot recurse us once per chunk. */
static void
file_stream_drained (NzAgentConn *conn, gpointer user_data)
{
  FileStream *s = user_data;

  if (!s->closed && s->reader != NULL && s->step_id == 0 && !s->frame_busy)
    s->step_id = g_idle_add (file_stream_step, s);
}

static const NzAgentStreamFuncs file_stream_funcs = {
  .drain = file_stream_drained,
  .close = file_stream_closed,
};

static void
file_stream_end (FileStream *s)
{
  g_autofree char *end = g_strdup_printf ("{\"type\":\"end\",\"bytesSent\":%" G_GINT64_FORMAT "}",
                                          s->sent);

  g_clear_pointer (&s->reader, nz_file_reader_free);
  nz_agent_conn_write_frame (s->conn, end, strlen (end));
  nz_agent_conn_write_terminator (s->conn);
  nz_agent_conn_end (s->conn);
}

#define DATA_PREFIX "{\"type\":\"data\",\"data\":\""
#define DATA_SUFFIX "\"}"

/* The connection wrote (or dropped) the frame: it may be filled again. */
static void
frame_released (gpointer user_data)
{
  FileStream *s = user_data;

  s->frame_busy = FALSE;
  file_stream_unref (s);
}

/* Exactly {"type":"data","data":"<base64>"}, built by concatenation like the reference (spec
 * A.2), behind its header, in the stream's one frame buffer. */
static GBytes *
data_frame (FileStream *s, gsize n)
{
  const gsize pre = strlen (DATA_PREFIX), suf = strlen (DATA_SUFFIX);
  gsize payload = pre + NZ_BASE64_ENCODED_LEN (n) + suf;
  char *p;

  if (s->frame == NULL)
    {
      s->frame_cap = NZ_FRAME_HEADER_BYTES + pre + NZ_BASE64_ENCODED_LEN (s->buf_len) + suf;
      s->frame = g_malloc (s->frame_cap);
    }
  p = s->frame;
  snprintf (p, NZ_FRAME_HEADER_BYTES + 1, "%08x", (guint)payload);
  p[NZ_FRAME_HEADER_BYTES - 1] = '\n';
  p += NZ_FRAME_HEADER_BYTES;
  memcpy (p, DATA_PREFIX, pre);
  p += pre;
  p += nz_base64_encode (s->buf, n, p);
  memcpy (p, DATA_SUFFIX, suf);
  s->frame_busy = TRUE;
  return g_bytes_new_with_free_func (s->frame, NZ_FRAME_HEADER_BYTES + payload, frame_released,
                                     file_stream_ref (s));
}

/* Chunks sent per main-loop turn while the socket keeps taking them whole: fewer loop turns
 * per byte, and still a turn for every other connection every 1 MiB. */
#define CHUNKS_PER_TURN 4

/* Reads, encodes and queues one chunk; TRUE when the socket took it whole and more remain. */
static gboolean
file_stream_chunk (FileStream *s, NzAgentConn *conn)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) frame = NULL;
  gssize n;
  gsize want;

  if (s->sent >= s->wanted)
    {
      file_stream_end (s);
      return FALSE;
    }
  want = (gsize)MIN ((gint64)s->buf_len, s->wanted - s->sent);
  n = nz_file_reader_pread (s->reader, s->buf, want, s->pos, &error);
  if (n < 0)
    {
      g_clear_pointer (&s->reader, nz_file_reader_free);
      nz_agent_conn_stream_error (conn, error->message);
      return FALSE;
    }
  /* The file shrank: stop early; end.bytesSent < meta.length tells the host. */
  if (n == 0)
    {
      file_stream_end (s);
      return FALSE;
    }
  frame = data_frame (s, (gsize)n);
  s->pos += n;
  s->sent += n;
  /* Bounded memory: the next chunk is read only once the socket took this one (the drain
   * callback, or right away when it took it at once). */
  nz_agent_conn_write_framed (conn, frame);
  g_clear_pointer (&frame, g_bytes_unref);
  return !nz_agent_conn_is_closed (conn) && nz_agent_conn_get_queued_bytes (conn) == 0
         && !s->closed && s->reader != NULL;
}

static gboolean
file_stream_step (gpointer user_data)
{
  g_autoptr (FileStream) s = file_stream_ref (user_data);
  g_autoptr (NzAgentConn) conn = nz_agent_conn_ref (s->conn);

  s->step_id = 0;
  if (s->closed || s->reader == NULL)
    return G_SOURCE_REMOVE;
  for (int i = 0; i < CHUNKS_PER_TURN; i++)
    if (!file_stream_chunk (s, conn))
      return G_SOURCE_REMOVE;
  file_stream_drained (conn, s);
  return G_SOURCE_REMOVE;
}

void
nz_agent_filestream_op (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  JsonNode *path_node = env->body != NULL ? json_object_get_member (env->body, "path") : NULL;
  const char *path = env->body != NULL ? nz_json_get_string (env->body, "path") : NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *real = NULL;
  g_autofree char *meta = NULL;
  NzFileReader *reader;
  FileStream *s;
  gint64 offset, length;
  int fd;

  if (path_node == NULL || JSON_NODE_HOLDS_NULL (path_node) || (path != NULL && *path == '\0'))
    {
      nz_agent_conn_stream_error (conn, "missing_path");
      return;
    }
  if (path == NULL)
    {
      nz_agent_conn_stream_error (conn, NZ_FILE_PATH_TYPE_WORDS);
      return;
    }
  if ((fd = nz_request_open_read (guest, path, &real, &error)) < 0
      || (reader = nz_file_reader_new (fd, real, &error)) == NULL)
    {
      nz_agent_conn_stream_error (conn, error->message);
      return;
    }
  /* The range is validated after the open and the regular-file check, as the reference. */
  if (!nz_request_range_member (env->body, "offset", 0, &offset)
      || !nz_request_range_member (env->body, "length", -1, &length))
    {
      nz_file_reader_free (reader);
      nz_agent_conn_stream_error (conn, NZ_REQUEST_INVALID_RANGE);
      return;
    }
  s = g_new0 (FileStream, 1);
  s->ref = 1; /* held by the connection's close func */
  s->conn = conn;
  s->reader = reader;
  s->pos = offset;
  s->wanted = nz_file_reader_wanted (reader, offset, length);
  /* One reusable buffer of max(1, min(chunk, wanted)) bytes. */
  s->buf_len = (gsize)MAX (1, MIN (guest->limits.read_file_stream_chunk_bytes, s->wanted));
  s->buf = g_malloc (s->buf_len);
  /* Room in the kernel for a few data frames: the client decodes one while we encode the
   * next, instead of the two taking turns on a default-sized socket buffer. */
  nz_agent_conn_set_send_buffer (conn, 8 * NZ_BASE64_ENCODED_LEN (s->buf_len));
  /* Client frames are ignored; a hang-up closes the connection and with it the fd. */
  nz_agent_conn_set_stream (conn, &file_stream_funcs, s, (GDestroyNotify)file_stream_unref);
  meta = g_strdup_printf ("{\"type\":\"meta\",\"sizeBytes\":%" G_GINT64_FORMAT
                          ",\"offset\":%" G_GINT64_FORMAT ",\"length\":%" G_GINT64_FORMAT "}",
                          nz_file_reader_get_size (reader), offset, s->wanted);
  nz_agent_conn_write_frame (conn, meta, strlen (meta));
  if (!nz_agent_conn_is_closed (conn) && nz_agent_conn_get_queued_bytes (conn) == 0)
    file_stream_drained (conn, s);
}
