/* nz-frame.h: the agent wire's framing (spec A.2): a 9-byte header of 8 hex digits and a
 * newline, then that many bytes of UTF-8 JSON; the zero-length frame is the terminator. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define NZ_FRAME_HEADER_BYTES 9
#define NZ_FRAME_TERMINATOR "00000000\n"

/* Appends header (lowercase hex) + payload to @out. */
void nz_frame_append (GByteArray *out, const void *payload, gsize len);
/* A new GBytes holding one encoded frame. */
GBytes *nz_frame_encode (const void *payload, gsize len);
GBytes *nz_frame_encode_object (JsonObject *obj);

/* The payload length a frame header announces (eight hex digits, either case, then a
 * newline, at @header[0..8]), or -1 when it is not one. */
gint64 nz_frame_header_length (const guint8 *header);

typedef struct _NzFrameReader NzFrameReader;

typedef enum
{
  NZ_FRAME_NONE,     /* need more bytes */
  NZ_FRAME_OK,       /* *out_payload holds one frame (empty for the terminator) */
  NZ_FRAME_OVERFLOW, /* announced length is over the current cap; see _get_overflow() */
  NZ_FRAME_MALFORMED /* bad header; *error says why, the connection must be destroyed */
} NzFrameResult;

NzFrameReader *nz_frame_reader_new (guint64 max_frame_bytes);
void nz_frame_reader_free (NzFrameReader *reader);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzFrameReader, nz_frame_reader_free)

void nz_frame_reader_push (NzFrameReader *reader, const void *data, gsize len);
/* Pops the next complete frame. On NZ_FRAME_OK *out_payload is a new GBytes. A header that is
 * malformed fails on its 9th byte (spec: a peer streaming bytes with no newline is refused
 * on the 9th byte). */
NzFrameResult nz_frame_reader_next (NzFrameReader *reader, GBytes **out_payload, GError **error);
/* Raising the cap (after authentication) clears an overflow whose announced length now fits. */
void nz_frame_reader_set_max (NzFrameReader *reader, guint64 max_frame_bytes);
guint64 nz_frame_reader_get_max (NzFrameReader *reader);
void nz_frame_reader_get_overflow (NzFrameReader *reader, guint64 *announced, guint64 *limit);
/* Bytes currently buffered (the pre-auth budget charges these). */
gsize nz_frame_reader_buffered (NzFrameReader *reader);
void nz_frame_reader_reset (NzFrameReader *reader);
/* Like reset, but returns the unconsumed bytes (new GBytes): what a peer sent after a first
 * frame, for the stream handler that takes over. */
GBytes *nz_frame_reader_steal_buffered (NzFrameReader *reader);

G_END_DECLS
