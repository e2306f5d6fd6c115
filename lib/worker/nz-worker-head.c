/* nz-worker-head: see nz-worker-head.h. */
#include "nz-worker-head.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

gsize
nz_worker_head_length (const char *data, gsize len)
{
  for (gsize i = 0; i + 1 < len; i++)
    if (data[i] == '\n'
        && (data[i + 1] == '\n' || (data[i + 1] == '\r' && i + 2 < len && data[i + 2] == '\n')))
      return i + (data[i + 1] == '\n' ? 2 : 3);
  return 0;
}

static gboolean
is_digits (const char *s, gsize n)
{
  if (n == 0)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return FALSE;
  return TRUE;
}

gboolean
nz_worker_head_check (const char *head, gsize len, const char **why)
{
  const char *end = head + len;
  const char *line = memchr (head, '\n', len);
  const char *length = NULL;
  gsize length_len = 0;
  gboolean chunked = FALSE;

  if (memchr (head, '\0', len) != NULL)
    return (*why = "a NUL in the request head", FALSE);
  for (gsize i = 0; i < len; i++)
    if (head[i] == '\r' && (i + 1 == len || head[i + 1] != '\n'))
      return (*why = "a CR not followed by LF", FALSE);
  /* After the request line, each header line up to the blank one. */
  for (line = line != NULL ? line + 1 : end; line < end;)
    {
      const char *eol = memchr (line, '\n', (gsize)(end - line));
      gsize n = (gsize)(eol - line);
      const char *colon, *value, *vend;

      if (n > 0 && line[n - 1] == '\r')
        n--;
      if (n == 0)
        break;
      if (line[0] == ' ' || line[0] == '\t')
        return (*why = "an obs-folded header line", FALSE);
      colon = memchr (line, ':', n);
      if (colon == NULL || colon == line)
        return (*why = "a header line with no name", FALSE);
      for (const char *p = line; p < colon; p++)
        if (*p == ' ' || *p == '\t')
          return (*why = "whitespace in a header name", FALSE);
      value = colon + 1;
      vend = line + n;
      while (value < vend && (*value == ' ' || *value == '\t'))
        value++;
      while (vend > value && (vend[-1] == ' ' || vend[-1] == '\t'))
        vend--;
      if ((gsize)(colon - line) == 14 && g_ascii_strncasecmp (line, "content-length", 14) == 0)
        {
          if (!is_digits (value, (gsize)(vend - value)))
            return (*why = "a Content-Length that is not a number", FALSE);
          if (length != NULL
              && (length_len != (gsize)(vend - value) || memcmp (length, value, length_len) != 0))
            return (*why = "two Content-Length values that disagree", FALSE);
          length = value;
          length_len = (gsize)(vend - value);
        }
      if ((gsize)(colon - line) == 17 && g_ascii_strncasecmp (line, "transfer-encoding", 17) == 0)
        chunked = TRUE;
      line = eol + 1;
    }
  if (chunked && length != NULL)
    return (*why = "Transfer-Encoding beside Content-Length", FALSE);
  return TRUE;
}

typedef struct
{
  GSocketConnection *connection; /* ref */
  GSocket *socket;
  GCancellable *cancellable; /* ref, or NULL */
  NzWorkerHeadFunc func;
  gpointer user_data;
  char *buf; /* NZ_WORKER_HEAD_LIMIT + 1 */
} HeadWait;

static void
set_lowat (GSocket *socket, int bytes)
{
  int v = MAX (bytes, 1);

  setsockopt (g_socket_get_fd (socket), SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v);
}

static void
head_done (HeadWait *hw, gboolean arrived, const char *refused)
{
  set_lowat (hw->socket, 1);
  if (!g_cancellable_is_cancelled (hw->cancellable))
    hw->func (arrived ? hw->connection : NULL, refused, hw->user_data);
  g_clear_object (&hw->cancellable);
  g_object_unref (hw->connection);
  g_free (hw->buf);
  g_free (hw);
}

static gboolean
head_ready (GSocket *socket, GIOCondition cond, gpointer user_data)
{
  HeadWait *hw = user_data;
  ssize_t n
      = recv (g_socket_get_fd (socket), hw->buf, NZ_WORKER_HEAD_LIMIT + 1, MSG_PEEK | MSG_DONTWAIT);
  gsize head;
  const char *why = NULL;

  if (g_cancellable_is_cancelled (hw->cancellable))
    {
      head_done (hw, FALSE, NULL);
      return G_SOURCE_REMOVE;
    }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return G_SOURCE_CONTINUE;
  if (n <= 0)
    {
      /* The peer left (or the pre-auth bounds shut it down): nothing to answer. */
      head_done (hw, FALSE, NULL);
      return G_SOURCE_REMOVE;
    }
  head = nz_worker_head_length (hw->buf, (gsize)n);
  if (head == 0 && n > NZ_WORKER_HEAD_LIMIT)
    {
      head_done (hw, TRUE, "a request head over the limit");
      return G_SOURCE_REMOVE;
    }
  if (head == 0)
    {
      /* Wake again only when more has arrived. */
      set_lowat (socket, (int)n + 1);
      return G_SOURCE_CONTINUE;
    }
  head_done (hw, TRUE, nz_worker_head_check (hw->buf, head, &why) ? NULL : why);
  return G_SOURCE_REMOVE;
}

void
nz_worker_head_wait (GSocketConnection *connection, GCancellable *cancellable,
                     NzWorkerHeadFunc func, gpointer user_data)
{
  HeadWait *hw = g_new0 (HeadWait, 1);
  GSource *source;

  hw->connection = g_object_ref (connection);
  hw->socket = g_socket_connection_get_socket (connection);
  hw->cancellable = cancellable != NULL ? g_object_ref (cancellable) : NULL;
  hw->func = func;
  hw->user_data = user_data;
  hw->buf = g_malloc (NZ_WORKER_HEAD_LIMIT + 1);
  source = g_socket_create_source (hw->socket, G_IO_IN | G_IO_HUP | G_IO_ERR, cancellable);
  g_source_set_callback (source, (GSourceFunc)(void (*) (void))head_ready, hw, NULL);
  g_source_attach (source, NULL);
  g_source_unref (source);
}
