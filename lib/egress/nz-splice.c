#define _GNU_SOURCE
#include "nz-splice.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct
{
  NzSplice *owner;
  GIOStream *from, *to;
  guint8 *buf;
  gboolean done;
  guint64 bytes;
  /* Plain sockets on both sides: non-blocking read(2)/send(2) straight on the fds, driven by
   * one GSource. buf is the whole buffer of this direction: reading stops while it is full,
   * so a slow reader stops the other side's socket (flow control) instead of growing
   * memory. (splice(2) through a pipe measured slower here: the pipe's pages go out as small
   * skbs, while a copy leaves the kernel free to build full-size ones.) */
  int from_fd, to_fd;
  gsize size;        /* of buf */
  gsize off, len;    /* bytes buf[off, off+len) are read and not yet written */
  gboolean eof;      /* the source said EOF; buf may still hold bytes */
  gboolean want_in;  /* blocked reading from_fd (buf has room) */
  gboolean want_out; /* blocked writing to_fd (buf holds bytes) */
} Direction;

/* One GSource per fd-mode splice, watching both sockets for both directions and changed in
 * place (g_source_modify_unix_fd), instead of a new source for every EAGAIN. */
typedef struct
{
  GSource base;
  NzSplice *owner;
  gpointer tag[2]; /* socket a, socket b */
  int fd[2];
  GIOCondition armed[2]; /* what each is watched for now: modifying wakes the context */
} PumpSource;

struct NzSplice
{
  Direction dir[2];
  GCancellable *cancel;
  guint idle_timeout_s;
  gboolean half_close;
  gint64 last_activity;
  guint idle_source;
  int pending; /* outstanding async operations */
  gboolean fd_mode;
  GSource *pump;
  guint finish_source;
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

static gboolean
on_finish_idle (gpointer user_data)
{
  NzSplice *s = user_data;

  s->finish_source = 0;
  maybe_finish (s);
  return G_SOURCE_REMOVE;
}

static void
end_all (NzSplice *s)
{
  s->dir[0].done = s->dir[1].done = TRUE;
  g_cancellable_cancel (s->cancel);
  if (s->fd_mode)
    {
      if (s->pump != NULL)
        {
          g_source_destroy (s->pump);
          g_source_unref (g_steal_pointer (&s->pump));
        }
      /* Never finish (and so free) from inside a pump that is still running. */
      if (s->finish_source == 0)
        s->finish_source = g_idle_add (on_finish_idle, s);
    }
}

static void fd_pump (Direction *d);

/* Each socket is watched for what a blocked direction needs of it: readable as a source,
 * writable as a destination. Only changes are applied (each one is a context wakeup). */
static void
pump_rearm (NzSplice *s)
{
  PumpSource *ps = (PumpSource *)s->pump;

  if (ps == NULL)
    return;
  for (int k = 0; k < 2; k++)
    {
      /* Socket k is dir[k]'s source and dir[1-k]'s destination. */
      Direction *src = &s->dir[k], *dst = &s->dir[1 - k];
      GIOCondition want = (!src->done && src->want_in ? G_IO_IN : 0)
                          | (!dst->done && dst->want_out ? G_IO_OUT : 0);

      if (ps->tag[k] == NULL)
        {
          /* Dropped after a hang-up (pump_dispatch); back when something waits on it. */
          if (want != 0)
            ps->tag[k] = g_source_add_unix_fd (s->pump, ps->fd[k], want);
        }
      else if (want != ps->armed[k])
        g_source_modify_unix_fd (s->pump, ps->tag[k], want);
      ps->armed[k] = want;
    }
}

static gboolean
pump_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  PumpSource *ps = (PumpSource *)source;
  NzSplice *s = ps->owner;
  GIOCondition ready[2];

  for (int k = 0; k < 2; k++)
    {
      ready[k] = ps->tag[k] != NULL ? g_source_query_unix_fd (source, ps->tag[k]) : 0;
      /* poll(2) reports a hang-up whatever the events asked, and GLib makes a source with such
       * an fd ready: a socket whose peer had gone while nothing waited on it (its direction
       * done, the other idle) made this pump run again at once, forever, and its default
       * priority starved the idle callback that finishes the tunnel. Such a socket leaves
       * the poll set until a direction waits on it again. */
      if (ps->armed[k] == 0 && (ready[k] & (G_IO_HUP | G_IO_ERR)) != 0)
        {
          g_source_remove_unix_fd (source, ps->tag[k]);
          ps->tag[k] = NULL;
        }
    }
  for (int i = 0; i < 2 && s->pump != NULL; i++)
    {
      Direction *d = &s->dir[i];
      GIOCondition in = ready[i], out = ready[1 - i];

      if (!d->done
          && ((d->want_in && (in & (G_IO_IN | G_IO_HUP | G_IO_ERR)) != 0)
              || (d->want_out && (out & (G_IO_OUT | G_IO_HUP | G_IO_ERR)) != 0)))
        fd_pump (d);
    }
  pump_rearm (s);
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs pump_funcs = { NULL, NULL, pump_dispatch, NULL, NULL, NULL };

static void
finish_soon (NzSplice *s)
{
  if (s->dir[0].done && s->dir[1].done && s->finish_source == 0)
    s->finish_source = g_idle_add (on_finish_idle, s);
}

/* Moves what it can without blocking (reading while buf has room at its end, writing while
 * it holds bytes, so both sockets stay busy), then notes what it waits for. */
static void
fd_pump (Direction *d)
{
  NzSplice *s = d->owner;
  gboolean progress = TRUE;

  while (!d->done && progress)
    {
      ssize_t n;

      progress = FALSE;
      if (!d->eof && d->off + d->len < d->size)
        {
          n = read (d->from_fd, d->buf + d->off + d->len, d->size - d->off - d->len);
          if (n > 0)
            d->len += n, progress = TRUE;
          else if (n == 0)
            d->eof = progress = TRUE;
          else if (errno != EAGAIN && errno != EINTR)
            {
              end_all (s);
              return;
            }
        }
      if (d->len > 0)
        {
          n = send (d->to_fd, d->buf + d->off, d->len, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n > 0)
            {
              d->len -= n;
              /* Drained: the next read starts at the front again. */
              d->off = d->len == 0 ? 0 : d->off + n;
              d->bytes += n;
              s->last_activity = g_get_monotonic_time ();
              progress = TRUE;
            }
          else if (n < 0 && errno != EAGAIN && errno != EINTR)
            {
              end_all (s);
              return;
            }
        }
      if (d->eof && d->len == 0)
        {
          /* A one-shot exchange ends with either side; a tunnel half-closes. */
          if (!s->half_close)
            {
              end_all (s);
              return;
            }
          d->done = TRUE;
          shutdown (d->to_fd, SHUT_WR);
          finish_soon (s);
          return;
        }
    }
  /* No progress: each side that could move returned EAGAIN. */
  d->want_in = !d->eof && d->off + d->len < d->size;
  d->want_out = d->len > 0;
}

/* Plain sockets both ways: @head (bytes for @b read past a request head, may be NULL) starts
 * out in the a -> b buffer. */
static gboolean
fd_mode_setup (NzSplice *s, GIOStream *a, GIOStream *b, GBytes *head)
{
  gsize head_len = head != NULL ? g_bytes_get_size (head) : 0;
  PumpSource *ps;

  if (!G_IS_SOCKET_CONNECTION (a) || !G_IS_SOCKET_CONNECTION (b) || head_len > NZ_SPLICE_BUFFER)
    return FALSE;
  for (int i = 0; i < 2; i++)
    {
      Direction *d = &s->dir[i];

      d->from_fd = g_socket_get_fd (g_socket_connection_get_socket (G_SOCKET_CONNECTION (d->from)));
      d->to_fd = g_socket_get_fd (g_socket_connection_get_socket (G_SOCKET_CONNECTION (d->to)));
      d->size = NZ_SPLICE_BUFFER;
      d->buf = g_malloc (d->size);
    }
  if (head_len > 0)
    memcpy (s->dir[0].buf, g_bytes_get_data (head, NULL), head_len);
  s->dir[0].len = head_len;
  s->fd_mode = TRUE;
  ps = (PumpSource *)g_source_new (&pump_funcs, sizeof (PumpSource));
  ps->owner = s;
  ps->fd[0] = s->dir[0].from_fd;
  ps->fd[1] = s->dir[1].from_fd;
  for (int k = 0; k < 2; k++)
    ps->tag[k] = g_source_add_unix_fd (&ps->base, ps->fd[k], 0);
  s->pump = &ps->base;
  g_source_attach (s->pump, NULL);
  return TRUE;
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
    }
  if (idle_timeout_s > 0)
    s->idle_source = g_timeout_add_seconds (1, on_idle_check, s);
  if (fd_mode_setup (s, a, b, a_head))
    {
      fd_pump (&s->dir[0]);
      fd_pump (&s->dir[1]);
      pump_rearm (s);
      return s;
    }
  for (int i = 0; i < 2; i++)
    s->dir[i].buf = g_malloc (NZ_SPLICE_CHUNK);
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
  if (s->finish_source != 0)
    g_source_remove (s->finish_source);
  if (s->pump != NULL)
    {
      g_source_destroy (s->pump);
      g_source_unref (s->pump);
    }
  g_object_unref (s->cancel);
  g_free (s->dir[0].buf);
  g_free (s->dir[1].buf);
  g_free (s);
}
