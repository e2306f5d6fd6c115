#define _GNU_SOURCE
#include "splice.h"

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
  /* Plain sockets on both sides: splice(2) through a pipe, no copy through user space. The
   * pipe is the whole buffer: nothing is read while it holds bytes. */
  int from_fd, to_fd;
  int pipe_r, pipe_w;
  gsize in_pipe;
  guint watch;
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
  gboolean fd_mode;
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
      for (int i = 0; i < 2; i++)
        if (s->dir[i].watch != 0)
          {
            g_source_remove (s->dir[i].watch);
            s->dir[i].watch = 0;
          }
      /* Never finish (and so free) from inside a pump that is still running. */
      if (s->finish_source == 0)
        s->finish_source = g_idle_add (on_finish_idle, s);
    }
}

static void fd_pump (Direction *d);

static gboolean
on_fd_ready (gint fd, GIOCondition cond, gpointer user_data)
{
  Direction *d = user_data;

  d->watch = 0;
  fd_pump (d);
  return G_SOURCE_REMOVE;
}

static void
fd_wait (Direction *d, int fd, GIOCondition cond)
{
  d->watch = g_unix_fd_add (fd, cond | G_IO_HUP | G_IO_ERR, on_fd_ready, d);
}

/* Moves what it can without blocking, then waits for the one fd that blocked it. */
static void
fd_pump (Direction *d)
{
  NzSplice *s = d->owner;

  while (!d->done)
    {
      ssize_t n;

      if (d->in_pipe > 0)
        {
          n = splice (d->pipe_r, NULL, d->to_fd, NULL, d->in_pipe,
                      SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
          if (n > 0)
            {
              d->in_pipe -= n;
              d->bytes += n;
              s->last_activity = g_get_monotonic_time ();
              continue;
            }
          if (n < 0 && (errno == EAGAIN || errno == EINTR))
            {
              fd_wait (d, d->to_fd, G_IO_OUT);
              return;
            }
          end_all (s);
          return;
        }
      n = splice (d->from_fd, NULL, d->pipe_w, NULL, NZ_SPLICE_CHUNK,
                  SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
      if (n > 0)
        {
          d->in_pipe += n;
          continue;
        }
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        {
          fd_wait (d, d->from_fd, G_IO_IN);
          return;
        }
      if (n == 0 && s->half_close)
        {
          d->done = TRUE;
          shutdown (d->to_fd, SHUT_WR);
          if (s->dir[0].done && s->dir[1].done && s->finish_source == 0)
            s->finish_source = g_idle_add (on_finish_idle, s);
          return;
        }
      end_all (s);
      return;
    }
}

static gboolean
fd_mode_setup (NzSplice *s, GIOStream *a, GIOStream *b)
{
  int fds[2][2] = { { -1, -1 }, { -1, -1 } };

  if (!G_IS_SOCKET_CONNECTION (a) || !G_IS_SOCKET_CONNECTION (b))
    return FALSE;
  for (int i = 0; i < 2; i++)
    if (pipe2 (fds[i], O_NONBLOCK | O_CLOEXEC) != 0)
      {
        for (int k = 0; k < i; k++)
          close (fds[k][0]), close (fds[k][1]);
        return FALSE;
      }
  for (int i = 0; i < 2; i++)
    {
      Direction *d = &s->dir[i];

      d->from_fd = g_socket_get_fd (g_socket_connection_get_socket (G_SOCKET_CONNECTION (d->from)));
      d->to_fd = g_socket_get_fd (g_socket_connection_get_socket (G_SOCKET_CONNECTION (d->to)));
      d->pipe_r = fds[i][0];
      d->pipe_w = fds[i][1];
    }
  s->fd_mode = TRUE;
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
      s->dir[i].buf = g_malloc (NZ_SPLICE_CHUNK);
    }
  if (idle_timeout_s > 0)
    s->idle_source = g_timeout_add_seconds (1, on_idle_check, s);
  for (int i = 0; i < 2; i++)
    s->dir[i].pipe_r = s->dir[i].pipe_w = -1;
  if ((a_head == NULL || g_bytes_get_size (a_head) == 0) && fd_mode_setup (s, a, b))
    {
      fd_pump (&s->dir[0]);
      fd_pump (&s->dir[1]);
      return s;
    }
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
  for (int i = 0; i < 2; i++)
    {
      if (s->dir[i].watch != 0)
        g_source_remove (s->dir[i].watch);
      if (s->dir[i].pipe_r >= 0)
        close (s->dir[i].pipe_r);
      if (s->dir[i].pipe_w >= 0)
        close (s->dir[i].pipe_w);
    }
  g_object_unref (s->cancel);
  g_free (s->dir[0].buf);
  g_free (s->dir[1].buf);
  g_free (s);
}
