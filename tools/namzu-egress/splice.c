#include "splice.h"

#include <string.h>
#include <sys/socket.h>

typedef struct
{
  NzSplice *owner;
  GIOStream *from, *to;
  guint8 *buf;
  gboolean done;
  guint64 bytes;
} Direction;

struct NzSplice
{
  Direction dir[2];
  GCancellable *cancel;
  guint idle_timeout_s;
  gboolean half_close;
  gint64 last_activity;
  guint idle_source;
  int pending; /* outstanding async operations */
  gboolean finished;
  NzSpliceDone done;
  gpointer user_data;
};

static void direction_read (Direction *d);

static void
maybe_finish (NzSplice *s)
{
  if (s->finished || s->pending > 0)
    return;
  if (!(s->dir[0].done && s->dir[1].done))
    return;
  s->finished = TRUE;
  if (s->idle_source != 0)
    g_source_remove (s->idle_source);
  s->idle_source = 0;
  s->done (s->user_data);
}

static void
end_all (NzSplice *s)
{
  s->dir[0].done = s->dir[1].done = TRUE;
  g_cancellable_cancel (s->cancel);
}

/* Half-close the writing side of a plain socket, so the peer sees EOF for this direction. */
static void
shutdown_write (GIOStream *io)
{
  if (G_IS_SOCKET_CONNECTION (io))
    g_socket_shutdown (g_socket_connection_get_socket (G_SOCKET_CONNECTION (io)), FALSE, TRUE,
                       NULL);
}

static void
on_written (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Direction *d = user_data;
  NzSplice *s = d->owner;
  g_autoptr (GError) error = NULL;
  gsize written = 0;

  s->pending--;
  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (src), res, &written, &error))
    end_all (s);
  else
    {
      d->bytes += written;
      s->last_activity = g_get_monotonic_time ();
      if (!d->done)
        direction_read (d);
    }
  maybe_finish (s);
}

static void
on_read (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Direction *d = user_data;
  NzSplice *s = d->owner;
  g_autoptr (GError) error = NULL;
  gssize n;

  s->pending--;
  n = g_input_stream_read_finish (G_INPUT_STREAM (src), res, &error);
  if (n < 0)
    end_all (s);
  else if (n == 0)
    {
      d->done = TRUE;
      if (s->half_close)
        shutdown_write (d->to);
      else
        end_all (s);
    }
  else if (!d->done)
    {
      s->last_activity = g_get_monotonic_time ();
      s->pending++;
      g_output_stream_write_all_async (g_io_stream_get_output_stream (d->to), d->buf, n,
                                       G_PRIORITY_DEFAULT, s->cancel, on_written, d);
    }
  maybe_finish (s);
}

static void
direction_read (Direction *d)
{
  NzSplice *s = d->owner;

  s->pending++;
  g_input_stream_read_async (g_io_stream_get_input_stream (d->from), d->buf, NZ_SPLICE_CHUNK,
                             G_PRIORITY_DEFAULT, s->cancel, on_read, d);
}

static gboolean
on_idle_check (gpointer user_data)
{
  NzSplice *s = user_data;

  if (g_get_monotonic_time () - s->last_activity >= (gint64)s->idle_timeout_s * G_USEC_PER_SEC)
    {
      s->idle_source = 0;
      end_all (s);
      return G_SOURCE_REMOVE;
    }
  return G_SOURCE_CONTINUE;
}

NzSplice *
nz_splice_start (GIOStream *a, GIOStream *b, GBytes *a_head, guint idle_timeout_s,
                 gboolean half_close, NzSpliceDone done, gpointer user_data)
{
  NzSplice *s = g_new0 (NzSplice, 1);

  s->cancel = g_cancellable_new ();
  s->idle_timeout_s = idle_timeout_s;
  s->half_close = half_close;
  s->done = done;
  s->user_data = user_data;
  s->last_activity = g_get_monotonic_time ();
  for (int i = 0; i < 2; i++)
    {
      s->dir[i].owner = s;
      s->dir[i].from = i == 0 ? a : b;
      s->dir[i].to = i == 0 ? b : a;
      s->dir[i].buf = g_malloc (NZ_SPLICE_CHUNK);
    }
  if (idle_timeout_s > 0)
    s->idle_source = g_timeout_add_seconds (1, on_idle_check, s);
  if (a_head != NULL && g_bytes_get_size (a_head) > 0)
    {
      gsize len = MIN (g_bytes_get_size (a_head), NZ_SPLICE_CHUNK);

      /* The head remainder is at most one chunk (the request head buffer is smaller). */
      memcpy (s->dir[0].buf, g_bytes_get_data (a_head, NULL), len);
      s->pending++;
      g_output_stream_write_all_async (g_io_stream_get_output_stream (b), s->dir[0].buf, len,
                                       G_PRIORITY_DEFAULT, s->cancel, on_written, &s->dir[0]);
    }
  else
    direction_read (&s->dir[0]);
  direction_read (&s->dir[1]);
  return s;
}

void
nz_splice_cancel (NzSplice *s)
{
  end_all (s);
}

guint64
nz_splice_bytes (NzSplice *s, gboolean a_to_b)
{
  return s->dir[a_to_b ? 0 : 1].bytes;
}

void
nz_splice_free (NzSplice *s)
{
  if (s == NULL)
    return;
  if (s->idle_source != 0)
    g_source_remove (s->idle_source);
  g_object_unref (s->cancel);
  g_free (s->dir[0].buf);
  g_free (s->dir[1].buf);
  g_free (s);
}
