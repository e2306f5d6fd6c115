#include "nz-frame.h"

#include <string.h>

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-lite-frame.h"

struct _NzFrameReader
{
  GByteArray *buf;
  gsize pos; /* consumed prefix of buf, compacted lazily */
  guint64 max;
  guint64 overflow_announced;
  guint64 overflow_limit;
  gboolean overflow;
};

void
nz_frame_append (GByteArray *out, const void *payload, gsize len)
{
  char header[NZ_FRAME_HEADER_BYTES];

  g_return_if_fail (len <= G_MAXUINT32);
  nz_lite_frame_header_write (header, len);
  g_byte_array_append (out, (const guint8 *)header, NZ_FRAME_HEADER_BYTES);
  if (len > 0)
    g_byte_array_append (out, payload, len);
}

GBytes *
nz_frame_encode (const void *payload, gsize len)
{
  GByteArray *out = g_byte_array_sized_new (NZ_FRAME_HEADER_BYTES + len);

  nz_frame_append (out, payload, len);
  return g_byte_array_free_to_bytes (out);
}

GBytes *
nz_frame_encode_object (JsonObject *obj)
{
  gsize len = 0;
  g_autofree char *text = nz_json_object_to_string (obj, &len);

  return nz_frame_encode (text, len);
}

NzFrameReader *
nz_frame_reader_new (guint64 max_frame_bytes)
{
  NzFrameReader *r = g_new0 (NzFrameReader, 1);

  r->buf = g_byte_array_new ();
  r->max = max_frame_bytes;
  return r;
}

void
nz_frame_reader_free (NzFrameReader *reader)
{
  if (reader == NULL)
    return;
  g_byte_array_unref (reader->buf);
  g_free (reader);
}

static void
compact (NzFrameReader *r)
{
  if (r->pos == 0)
    return;
  g_byte_array_remove_range (r->buf, 0, r->pos);
  r->pos = 0;
}

gint64
nz_frame_header_length (const guint8 *p)
{
  guint64 len = 0;

  if (nz_lite_frame_header_check ((const char *)p, NZ_FRAME_HEADER_BYTES, G_MAXUINT64, &len,
                                  NULL, 0)
      != NZ_LITE_FRAME_HEADER_OK)
    return -1;
  return (gint64)len;
}

void
nz_frame_reader_push (NzFrameReader *reader, const void *data, gsize len)
{
  /* Compact before growing so buffered bytes stay bounded by one partial frame. */
  if (reader->pos > 0 && reader->pos >= reader->buf->len / 2)
    compact (reader);
  /* A frame that starts here, with an acceptable length: room for all of it at once, rather
   * than a doubling (a copy, and fresh pages) every time a read does not fit. */
  if (reader->buf->len == 0 && len >= NZ_FRAME_HEADER_BYTES)
    {
      gint64 announced = nz_frame_header_length (data);

      if (announced > 0 && (guint64)announced <= reader->max && announced < G_MAXUINT / 2
          && (guint64)announced + NZ_FRAME_HEADER_BYTES > len)
        {
          gsize want = (gsize)announced + NZ_FRAME_HEADER_BYTES;

          /* Exactly that much: GArray rounds a set_size up to a power of two, which is up to
           * twice a frame's size in address space, all of it touched where malloc perturbs
           * (or a pre-auth peer picks a length just past a power of two). */
          g_byte_array_unref (reader->buf);
          reader->buf = g_byte_array_new_take (g_malloc (want), want);
          g_byte_array_set_size (reader->buf, 0);
        }
    }
  g_byte_array_append (reader->buf, data, len);
}

gsize
nz_frame_reader_buffered (NzFrameReader *reader)
{
  return reader->buf->len - reader->pos;
}

void
nz_frame_reader_reset (NzFrameReader *reader)
{
  g_byte_array_set_size (reader->buf, 0);
  reader->pos = 0;
  reader->overflow = FALSE;
}

GBytes *
nz_frame_reader_steal_buffered (NzFrameReader *reader)
{
  GBytes *rest = g_bytes_new (reader->buf->data + reader->pos, reader->buf->len - reader->pos);

  nz_frame_reader_reset (reader);
  return rest;
}

void
nz_frame_reader_set_max (NzFrameReader *reader, guint64 max_frame_bytes)
{
  reader->max = max_frame_bytes;
  if (reader->overflow && reader->overflow_announced <= max_frame_bytes)
    reader->overflow = FALSE;
}

guint64
nz_frame_reader_get_max (NzFrameReader *reader)
{
  return reader->max;
}

void
nz_frame_reader_get_overflow (NzFrameReader *reader, guint64 *announced, guint64 *limit)
{
  *announced = reader->overflow_announced;
  *limit = reader->overflow_limit;
}

NzFrameResult
nz_frame_reader_next (NzFrameReader *reader, GBytes **out_payload, GError **error)
{
  gsize avail = reader->buf->len - reader->pos;
  /* An empty array has no data pointer to offset (UBSan: zero offset to NULL). */
  const guint8 *p = avail > 0 ? reader->buf->data + reader->pos : NULL;
  char why[160];
  guint64 len = 0;

  if (reader->overflow)
    return NZ_FRAME_OVERFLOW;
  if (avail == 0)
    return NZ_FRAME_NONE;
  switch (nz_lite_frame_header_check ((const char *)p, avail, reader->max, &len, why,
                                      sizeof why))
    {
    case NZ_LITE_FRAME_HEADER_PARTIAL:
      return NZ_FRAME_NONE;
    case NZ_LITE_FRAME_HEADER_BAD:
      nz_throw (error, NZ_ERROR_PROTOCOL, "%s", why);
      return NZ_FRAME_MALFORMED;
    case NZ_LITE_FRAME_HEADER_OVER:
      reader->overflow = TRUE;
      reader->overflow_announced = len;
      reader->overflow_limit = reader->max;
      return NZ_FRAME_OVERFLOW;
    case NZ_LITE_FRAME_HEADER_OK:
    default:
      break;
    }
  if (avail < NZ_FRAME_HEADER_BYTES + len)
    return NZ_FRAME_NONE;
  if (reader->pos == 0 && reader->buf->len == NZ_FRAME_HEADER_BYTES + len && len > 4096)
    {
      /* The buffer holds exactly this frame (a request, a reply): hand its memory over
       * instead of copying the payload out. */
      g_autoptr (GBytes) whole = g_byte_array_free_to_bytes (reader->buf);

      reader->buf = g_byte_array_new ();
      *out_payload = g_bytes_new_from_bytes (whole, NZ_FRAME_HEADER_BYTES, len);
      return NZ_FRAME_OK;
    }
  *out_payload = g_bytes_new (p + NZ_FRAME_HEADER_BYTES, len);
  reader->pos += NZ_FRAME_HEADER_BYTES + len;
  if (reader->pos == reader->buf->len)
    {
      g_byte_array_set_size (reader->buf, 0);
      reader->pos = 0;
    }
  return NZ_FRAME_OK;
}
