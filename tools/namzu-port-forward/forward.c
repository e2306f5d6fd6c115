/* forward.c: one forwarded connection (forward.h). */
#include "forward.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-agent-sessions.h"
#include "nz-base64.h"
#include "nz-cli.h"
#include "nz-json.h"

/* Bytes read from the local side per data frame: large enough that framing and base64 are
 * a small share, far below the 8 MiB the agent drops a chunk above (spec A.6.17). */
#define CHUNK_BYTES (128 * 1024)

typedef struct
{
  const char *label;
  int fd;
  NzAgentDuplex *d;
  NzLiveness live;
  gboolean ready, local_open, remote_open, done;
} Forward;

/* The agent's words are untrusted: escaped before they reach a terminal. */
static void
say (Forward *f, const char *fmt, const char *agent_text)
{
  g_autofree char *safe = g_strescape (agent_text != NULL ? agent_text : "(no message)", NULL);

  nz_cli_warn ("%s: %s%s", f->label, fmt, safe);
}

static gboolean
send_type (Forward *f, const char *type, const char *data)
{
  g_autoptr (JsonObject) frame = json_object_new ();
  g_autoptr (GError) error = NULL;

  json_object_set_string_member (frame, "type", type);
  if (data != NULL)
    json_object_set_string_member (frame, "data", data);
  if (nz_agent_duplex_send (f->d, frame, &error))
    return TRUE;
  say (f, "", error->message);
  return FALSE;
}

static gboolean
write_all (int fd, const guint8 *data, gsize len)
{
  while (len > 0)
    {
      ssize_t n = send (fd, data, len, MSG_NOSIGNAL);

      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return FALSE;
      data += n;
      len -= (gsize)n;
    }
  return TRUE;
}

static void
on_error_frame (Forward *f, const char *code)
{
  if (code != NULL && g_str_has_prefix (code, "connect ECONNREFUSED"))
    say (f, "nothing listens on that port inside the sandbox: ", code);
  else if (g_strcmp0 (code, "invalid_loopback_target") == 0)
    say (f, "the agent refused the target: ", code);
  else
    say (f, "the sandbox side failed: ", code);
}

/* Every frame the agent has for us; f->done once the connection is over. */
static void
from_agent (Forward *f, gboolean may_read)
{
  for (;; may_read = FALSE)
    {
      g_autoptr (JsonObject) frame = NULL;
      g_autoptr (GError) error = NULL;
      NzDuplexResult r = nz_agent_duplex_next (f->d, may_read, &frame, &error);
      const char *type;

      if (r == NZ_DUPLEX_AGAIN)
        return;
      if (r != NZ_DUPLEX_FRAME)
        {
          /* The agent ends the stream by closing it, after `end` or `error`. */
          if (r == NZ_DUPLEX_ERROR)
            say (f, "", error->message);
          else if (f->remote_open)
            say (f, "",
                 f->ready ? "the sandbox closed the connection before its end"
                          : "the sandbox closed the connection before it was ready");
          f->done = TRUE;
          return;
        }
      type = nz_json_get_string (frame, "type");
      if (g_strcmp0 (type, "ready") == 0 && !f->ready)
        {
          f->ready = TRUE;
          nz_liveness_ready (&f->live, frame);
        }
      else if (g_strcmp0 (type, "data") == 0 && f->ready && f->remote_open)
        {
          const char *data = nz_json_get_string (frame, "data");
          gsize len = 0;
          g_autofree guint8 *bytes = nz_base64_decode_lenient (data != NULL ? data : "", &len);

          /* Our peer went away: the sandbox side is torn down with it. */
          if (!write_all (f->fd, bytes, len))
            {
              send_type (f, "destroy", NULL);
              f->done = TRUE;
              return;
            }
        }
      else if (g_strcmp0 (type, "end") == 0 && f->remote_open)
        {
          f->remote_open = FALSE;
          shutdown (f->fd, SHUT_WR);
        }
      else if (g_strcmp0 (type, "error") == 0)
        {
          on_error_frame (f, nz_json_get_string (frame, "error"));
          f->done = TRUE;
          return;
        }
    }
}

static void
from_local (Forward *f)
{
  g_autofree guint8 *buf = g_malloc (CHUNK_BYTES);
  g_autofree char *text = NULL;
  ssize_t n = read (f->fd, buf, CHUNK_BYTES);

  if (n < 0 && errno == EINTR)
    return;
  if (n < 0)
    {
      /* A reset, not an end: nothing more is owed to the sandbox side. */
      send_type (f, "destroy", NULL);
      f->done = TRUE;
      return;
    }
  if (n == 0)
    {
      f->local_open = FALSE;
      f->done = !send_type (f, "end", NULL);
      return;
    }
  text = g_malloc (NZ_BASE64_ENCODED_LEN (n) + 1);
  text[nz_base64_encode (buf, (gsize)n, text)] = '\0';
  f->done = !send_type (f, "data", text);
}

void
nz_forward_connection (const NzForwardTarget *target, int fd, const char *label)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (NzAgentDuplex) d = NULL;
  g_autoptr (GError) error = NULL;
  Forward f = { .label = label, .fd = fd, .local_open = TRUE, .remote_open = TRUE };

  json_object_set_string_member (body, "host", "127.0.0.1");
  json_object_set_int_member (body, "port", target->remote_port);
  nz_liveness_start (&f.live, body, target->heartbeat_ms);
  g_mutex_lock (target->open_lock);
  d = nz_agent_duplex_open (target->client, "tcp-connect", body, &error);
  g_mutex_unlock (target->open_lock);
  if (d == NULL)
    {
      nz_cli_warn ("%s: %s", label, error->message);
      close (fd);
      return;
    }
  f.d = d;
  while (!f.done && (f.local_open || f.remote_open))
    {
      /* Local bytes wait for ready, so nothing is buffered for a connect that fails. */
      struct pollfd fds[2] = {
        { .fd = nz_agent_duplex_get_fd (d), .events = POLLIN },
        { .fd = f.ready && f.local_open ? fd : -1, .events = POLLIN },
      };
      int n = poll (fds, 2, nz_liveness_poll_ms (&f.live));

      if (n < 0 && errno != EINTR)
        break;
      if (n > 0 && fds[0].revents != 0)
        {
          nz_liveness_seen (&f.live);
          from_agent (&f, TRUE);
        }
      if (!f.done && n > 0 && fds[1].revents != 0)
        from_local (&f);
      if (!f.done && !nz_liveness_tick (&f.live, d, "tcp-connect", &error))
        {
          nz_cli_warn ("%s: %s", label, error->message);
          break;
        }
    }
  close (fd);
}
