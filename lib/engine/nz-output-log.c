#include "nz-output-log.h"

struct _NzOutputLog
{
  GQueue chunks; /* NzOutputChunk*, oldest first */
  guint64 max_bytes;
  guint64 bytes;
  guint64 start_offset;
  guint64 end_offset;
  guint64 dropped_bytes;
  gboolean discarded;
};

static void
chunk_free (NzOutputChunk *c)
{
  g_bytes_unref (c->data);
  g_free (c);
}

static void
chunk_clear (gpointer p)
{
  g_bytes_unref (((NzOutputChunk *)p)->data);
}

NzOutputLog *
nz_output_log_new (guint64 max_bytes)
{
  NzOutputLog *log = g_new0 (NzOutputLog, 1);

  g_queue_init (&log->chunks);
  log->max_bytes = max_bytes;
  return log;
}

void
nz_output_log_free (NzOutputLog *log)
{
  if (log == NULL)
    return;
  g_queue_clear_full (&log->chunks, (GDestroyNotify)chunk_free);
  g_free (log);
}

/* Drops from the front until at most @limit bytes are held; a chunk straddling the limit keeps
 * only its tail, so one chunk larger than the ring keeps its last @limit bytes. */
static void
log_trim (NzOutputLog *log, guint64 limit)
{
  while (log->bytes > limit)
    {
      NzOutputChunk *head = g_queue_peek_head (&log->chunks);
      gsize len = g_bytes_get_size (head->data);
      guint64 excess = log->bytes - limit;

      if (excess >= len)
        {
          g_queue_pop_head (&log->chunks);
          log->bytes -= len;
          log->dropped_bytes += len;
          log->start_offset = head->offset + len;
          chunk_free (head);
          continue;
        }
      {
        GBytes *tail = g_bytes_new_from_bytes (head->data, (gsize)excess, len - (gsize)excess);

        g_bytes_unref (head->data);
        head->data = tail;
        head->offset += excess;
        log->bytes -= excess;
        log->dropped_bytes += excess;
        log->start_offset = head->offset;
      }
    }
  if (g_queue_is_empty (&log->chunks))
    log->start_offset = log->end_offset;
}

guint64
nz_output_log_append (NzOutputLog *log, int stream, const void *data, gsize len)
{
  NzOutputChunk *c;
  guint64 offset;

  g_return_val_if_fail (log != NULL, 0);
  offset = log->end_offset;
  if (len == 0)
    return offset;
  c = g_new0 (NzOutputChunk, 1);
  c->stream = stream;
  c->data = g_bytes_new (data, len);
  c->offset = offset;
  g_queue_push_tail (&log->chunks, c);
  log->bytes += len;
  log->end_offset += len;
  log_trim (log, log->max_bytes);
  return offset;
}

void
nz_output_log_discard (NzOutputLog *log)
{
  g_return_if_fail (log != NULL);
  log_trim (log, 0);
  log->discarded = TRUE;
}

gboolean
nz_output_log_is_discarded (NzOutputLog *log)
{
  return log->discarded;
}

guint64
nz_output_log_start_offset (NzOutputLog *log)
{
  return log->start_offset;
}

guint64
nz_output_log_end_offset (NzOutputLog *log)
{
  return log->end_offset;
}

guint64
nz_output_log_dropped_bytes (NzOutputLog *log)
{
  return log->dropped_bytes;
}

guint64
nz_output_log_held_bytes (NzOutputLog *log)
{
  return log->bytes;
}

gboolean
nz_output_log_read (NzOutputLog *log, guint64 from, GArray **out_chunks, guint64 *out_dropped,
                    guint64 *out_from)
{
  GArray *chunks;
  guint64 start;

  g_return_val_if_fail (log != NULL && out_chunks != NULL, FALSE);
  if (from > log->end_offset)
    return FALSE;
  start = MAX (from, log->start_offset);
  chunks = g_array_new (FALSE, FALSE, sizeof (NzOutputChunk));
  g_array_set_clear_func (chunks, chunk_clear);
  for (GList *l = log->chunks.head; l != NULL; l = l->next)
    {
      NzOutputChunk *c = l->data;
      gsize len = g_bytes_get_size (c->data);
      NzOutputChunk copy = { c->stream, NULL, c->offset };

      if (c->offset + len <= start)
        continue;
      if (c->offset < start)
        {
          gsize skip = (gsize)(start - c->offset);

          copy.data = g_bytes_new_from_bytes (c->data, skip, len - skip);
          copy.offset = start;
        }
      else
        copy.data = g_bytes_ref (c->data);
      g_array_append_val (chunks, copy);
    }
  *out_chunks = chunks;
  if (out_dropped != NULL)
    *out_dropped = log->start_offset > from ? log->start_offset - from : 0;
  if (out_from != NULL)
    *out_from = start;
  return TRUE;
}
