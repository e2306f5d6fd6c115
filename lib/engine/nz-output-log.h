/* nz-output-log.h: the retained output ring (spec C.5 OutputLog): one ordered byte ring per
 * execution or session, across stdout and stderr, addressed by absolute byte offsets. Pure
 * bookkeeping, no I/O: unit-tested with the spec's examples. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  int stream;     /* caller's tag: 0 stdout, 1 stderr */
  GBytes *data;   /* never empty */
  guint64 offset; /* absolute offset of the first byte */
} NzOutputChunk;

typedef struct _NzOutputLog NzOutputLog;

NzOutputLog *nz_output_log_new (guint64 max_bytes);
void nz_output_log_free (NzOutputLog *log);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzOutputLog, nz_output_log_free)

/* Appends one chunk and trims the ring to its size (the head of a straddling chunk is cut).
 * Returns the chunk's start offset (the end before the append); an empty chunk is not stored
 * and returns the current end. */
guint64 nz_output_log_append (NzOutputLog *log, int stream, const void *data, gsize len);

/* Drops everything held (trim(0)): startOffset = endOffset, all counted in droppedBytes. */
void nz_output_log_discard (NzOutputLog *log);
gboolean nz_output_log_is_discarded (NzOutputLog *log);

guint64 nz_output_log_start_offset (NzOutputLog *log);
guint64 nz_output_log_end_offset (NzOutputLog *log);
guint64 nz_output_log_dropped_bytes (NzOutputLog *log);
guint64 nz_output_log_held_bytes (NzOutputLog *log);

/* read(from): FALSE when @from > endOffset (the caller answers invalid_offset). Otherwise
 * *@out_chunks (new array of NzOutputChunk, data referenced) holds the chunks from
 * max(@from, startOffset), the first sliced if it starts inside; *@out_dropped is
 * max(0, startOffset - @from), *@out_from the effective start. The end is
 * nz_output_log_end_offset(). */
gboolean nz_output_log_read (NzOutputLog *log, guint64 from, GArray **out_chunks,
                             guint64 *out_dropped, guint64 *out_from);

G_END_DECLS
