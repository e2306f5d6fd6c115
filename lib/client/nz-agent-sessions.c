#include "nz-agent-sessions.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-host-timing.h"
#include "nz-json.h"
#include "nz-lite-exec.h"
#include "nz-token.h"

/* How often a detaching exec asks whether its command started. */
#define DETACH_POLL_MS 20
/* Give up waiting for the start after this long (the agent starts a command at once). */
#define DETACH_START_TIMEOUT_MS 30000
/* Reconnects of an attach that lost its connection before the end. */
#define ATTACH_RESUMES 3

/* ---- exec --detach ---- */

typedef struct
{
  NzAgentClient *client;
  JsonObject *body;
  GCancellable *cancellable;
  JsonObject *result;
  GError *error;
  gint done; /* atomic */
} DetachRun;

static gpointer
detach_thread (gpointer user_data)
{
  DetachRun *r = user_data;

  r->result = nz_agent_client_execute (r->client, r->body, NULL, NULL, r->cancellable, &r->error);
  g_atomic_int_set (&r->done, 1);
  return NULL;
}

static JsonObject *
reserve_by_id (NzAgentClient *c, const char *id, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) reply = NULL;

  json_object_set_string_member (body, "executionId", id);
  reply = nz_agent_client_call (c, "reserve-execution", body, NULL, error);
  if (reply == NULL)
    return NULL;
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      nz_throw (error, NZ_ERROR_FAILED, "reserve-execution %s: %s", id,
                nz_json_get_string (reply, "error") ? nz_json_get_string (reply, "error")
                                                    : "refused");
      return NULL;
    }
  return g_steal_pointer (&reply);
}

JsonObject *
nz_agent_exec_detach (const NzTransport *t, JsonObject *body, const char *execution_id,
                      GError **error)
{
  g_autoptr (NzAgentClient) control = NULL;
  g_autoptr (NzAgentClient) streamer = NULL;
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_autoptr (JsonObject) reserved = NULL;
  g_autoptr (JsonObject) exec_body = NULL;
  g_autoptr (JsonObject) out = NULL;
  g_autofree char *minted = NULL;
  g_autofree char *state = NULL;
  DetachRun run = { 0 };
  GThread *thread;
  gint64 deadline;

  g_return_val_if_fail (t != NULL && body != NULL, NULL);
  control = nz_agent_client_new_for (t, error);
  streamer = control != NULL ? nz_agent_client_new_for (t, error) : NULL;
  if (streamer == NULL)
    return NULL;
  if (execution_id == NULL)
    {
      g_autofree char *uuid = nz_uuid_v4 ();

      execution_id = minted = g_strconcat ("exec_", uuid, NULL);
    }
  reserved = reserve_by_id (control, execution_id, error);
  if (reserved == NULL)
    return NULL;
  /* A held id never runs twice (spec C.2): say so instead of attaching by surprise. */
  if (g_strcmp0 (nz_json_get_string (reserved, "state"), "reserved") != 0)
    {
      nz_throw (error, NZ_ERROR_BUSY,
                "execution %s already exists (state %s); follow it with namzu-attach "
                "--execution %s",
                execution_id, nz_json_get_string (reserved, "state"), execution_id);
      return NULL;
    }
  {
    g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);
    g_autoptr (JsonNode) copy = NULL;

    json_node_set_object (node, body);
    copy = json_node_copy (node);
    exec_body = json_object_ref (json_node_get_object (copy));
  }
  json_object_set_string_member (exec_body, "executionId", execution_id);
  json_object_set_boolean_member (exec_body, "retainOutput", TRUE);

  run.client = streamer;
  run.body = exec_body;
  run.cancellable = cancellable;
  thread = g_thread_new ("exec-detach", detach_thread, &run);
  deadline = g_get_monotonic_time () + DETACH_START_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
  while (!g_atomic_int_get (&run.done) && g_get_monotonic_time () < deadline)
    {
      g_autoptr (JsonObject) now = NULL;
      g_autoptr (GError) local = NULL;
      const char *st;

      g_usleep (DETACH_POLL_MS * 1000);
      now = reserve_by_id (control, execution_id, &local);
      st = now != NULL ? nz_json_get_string (now, "state") : NULL;
      /* "starting" can still fail (mkdir, spawn): wait for running or an end. */
      if (st != NULL && strcmp (st, "reserved") != 0 && strcmp (st, "starting") != 0)
        {
          state = g_strdup (st);
          break;
        }
    }
  /* Hang up on the stream: the agent keeps running the command and its retained output. */
  g_cancellable_cancel (cancellable);
  g_thread_join (thread);
  if (run.error != NULL && !g_error_matches (run.error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    {
      g_propagate_error (error, run.error);
      g_clear_pointer (&run.result, json_object_unref);
      return NULL;
    }
  g_clear_error (&run.error);
  if (run.result != NULL)
    {
      g_free (state);
      state = g_strdup ("terminal");
      json_object_unref (run.result);
    }
  if (state == NULL)
    {
      nz_throw (error, NZ_ERROR_TIMED_OUT, "execution %s did not start within %d ms", execution_id,
                DETACH_START_TIMEOUT_MS);
      return NULL;
    }
  out = json_object_new ();
  json_object_set_string_member (out, "executionId", execution_id);
  json_object_set_string_member (out, "state", state);
  return g_steal_pointer (&out);
}

/* ---- attach-execution ---- */

typedef struct
{
  const NzAttachCallbacks *cb;
  gpointer user_data;
  guint64 next_offset;
  JsonObject *end;
  gboolean superseded;
  gboolean slow;
  char *refusal;
  gint64 heartbeat_ms; /* attach-session: the heartbeat to ask for (0: none) */
} AttachState;

static void
report_gap (AttachState *st, JsonObject *frame)
{
  guint64 dropped = 0, from = 0;
  gboolean have_from = nz_agent_reply_count (frame, "fromOffset", &from);

  if (nz_agent_reply_count (frame, "droppedBytes", &dropped) && dropped > 0 && st->cb->gap != NULL)
    st->cb->gap (dropped, from, st->user_data);
  if (have_from)
    st->next_offset = from;
}

static gboolean
attach_frame (JsonObject *frame, gpointer user_data, GError **error)
{
  AttachState *st = user_data;
  const char *type = nz_json_get_string (frame, "type");
  guint64 next = 0;

  if (type == NULL)
    return nz_throw (error, NZ_ERROR_PROTOCOL, "attach frame without a type");
  /* The final frame (a result, an exit, a refusal) is final: a second one is not taken. */
  if (st->end != NULL || st->refusal != NULL)
    return nz_throw (error, NZ_ERROR_PROTOCOL, "attach: a '%s' frame after the final one", type);
  if (strcmp (type, "attached") == 0 || strcmp (type, "ready") == 0)
    {
      report_gap (st, frame);
      return TRUE;
    }
  if (strcmp (type, "stdout_delta") == 0 || strcmp (type, "stderr_delta") == 0
      || strcmp (type, "data") == 0)
    {
      const char *data = nz_json_get_string (frame, "data");
      const char *stream = nz_json_get_string (frame, "stream");
      int which
          = (type[3] == 'e' || g_strcmp0 (stream, "stderr") == 0) ? NZ_EXEC_STDERR : NZ_EXEC_STDOUT;

      if (data != NULL && st->cb->output != NULL)
        st->cb->output (which, data, strlen (data), st->user_data);
      if (nz_agent_reply_count (frame, "nextOffset", &next))
        st->next_offset = next;
      return TRUE;
    }
  if (strcmp (type, "attach_result") == 0 || strcmp (type, "exit") == 0)
    {
      st->end = json_object_ref (frame);
      return TRUE;
    }
  if (strcmp (type, "detached") == 0)
    {
      const char *reason = nz_json_get_string (frame, "reason");

      st->superseded = g_strcmp0 (reason, "superseded") == 0;
      st->slow = !st->superseded;
      return TRUE;
    }
  if (strcmp (type, "error") == 0)
    {
      st->refusal = g_strdup (nz_json_get_string (frame, "error"));
      return TRUE;
    }
  /* heartbeat and anything newer: ignored. */
  return TRUE;
}

/* attach-session over a duplex connection: the stream lasts as long as the session, so the
 * heartbeat tells a quiet session from a peer that went silent (spec D.2.11). TRUE at the
 * terminator; a connection lost before it is an error (the loop resumes it). */
static gboolean
session_stream (NzAgentClient *c, JsonObject *body, AttachState *st, GError **error)
{
  g_autoptr (NzAgentDuplex) d = NULL;
  NzLiveness live;

  nz_liveness_start (&live, body, st->heartbeat_ms);
  d = nz_agent_duplex_open (c, "attach-session", body, error);
  if (d == NULL)
    return FALSE;
  for (;;)
    {
      struct pollfd pfd = { .fd = nz_agent_duplex_get_fd (d), .events = POLLIN };
      int n = poll (&pfd, 1, nz_liveness_poll_ms (&live));
      gboolean may_read = n > 0;

      if (n < 0 && errno != EINTR)
        return nz_throw_errno_prefix (error, "attach-session: poll");
      if (may_read)
        nz_liveness_seen (&live);
      for (;;)
        {
          JsonObject *frame = NULL;
          NzDuplexResult r = nz_agent_duplex_next (d, may_read, &frame, error);
          gboolean ok;

          may_read = FALSE;
          if (r == NZ_DUPLEX_TERMINATOR)
            return TRUE;
          if (r == NZ_DUPLEX_EOF)
            return nz_throw (error, NZ_ERROR_PROTOCOL,
                             "attach-session: the connection closed before the end");
          if (r == NZ_DUPLEX_ERROR)
            return FALSE;
          if (r == NZ_DUPLEX_AGAIN)
            break;
          if (g_strcmp0 (nz_json_get_string (frame, "type"), "ready") == 0)
            nz_liveness_ready (&live, frame);
          ok = attach_frame (frame, st, error);
          json_object_unref (frame);
          if (!ok)
            return FALSE;
        }
      if (!nz_liveness_tick (&live, d, "attach-session", error))
        return FALSE;
    }
}

static JsonObject *
attach_loop (NzAgentClient *c, const char *op, const char *id_member, const char *id,
             guint64 from_offset, guint64 observation_ms, gint64 heartbeat_ms,
             const NzAttachCallbacks *callbacks, gpointer user_data, GCancellable *cancellable,
             GError **error)
{
  AttachState st = { callbacks, user_data, from_offset, NULL, FALSE, FALSE, NULL, heartbeat_ms };

  for (int attempt = 0;; attempt++)
    {
      g_autoptr (JsonObject) body = json_object_new ();
      g_autoptr (GError) local = NULL;
      guint64 started_at = st.next_offset;
      gboolean ok;

      json_object_set_string_member (body, id_member, id);
      json_object_set_int_member (body, "fromOffset", (gint64)st.next_offset);
      if (strcmp (op, "attach-session") == 0)
        ok = session_stream (c, body, &st, &local);
      else
        ok = nz_agent_client_stream_probed (c, op, body, observation_ms, heartbeat_ms, attach_frame,
                                            &st, cancellable, &local);
      if (st.refusal != NULL)
        {
          g_autofree char *code = g_steal_pointer (&st.refusal);

          nz_throw (error,
                    g_str_has_prefix (code, "unknown_") ? NZ_ERROR_NOT_FOUND : NZ_ERROR_FAILED,
                    "%s %s: %s", op, id, code);
          return NULL;
        }
      if (st.end != NULL)
        return st.end;
      if (st.superseded)
        {
          nz_throw (error, NZ_ERROR_BUSY, "%s %s: superseded by another attachment", op, id);
          return NULL;
        }
      if (st.slow)
        {
          nz_throw (error, NZ_ERROR_FAILED,
                    "%s %s: detached as a slow reader; resume with --from %" G_GUINT64_FORMAT, op,
                    id, st.next_offset);
          return NULL;
        }
      /* Lost before the end (e.g. dropped as a slow reader): resume where we were. Only an
       * attempt that delivered output earns a resume: a peer that fails the same way each
       * time (a malformed or oversized frame) is not asked again. */
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED)
          || g_error_matches (local, NZ_ERROR, NZ_ERROR_TIMED_OUT)
          || g_error_matches (local, NZ_AGENT_ERROR, NZ_AGENT_ERROR_PEER_GONE)
          || attempt >= ATTACH_RESUMES || (ok && local == NULL) || st.next_offset == started_at)
        {
          if (local == NULL)
            nz_throw (error, NZ_ERROR_PROTOCOL, "%s %s ended without a final frame", op, id);
          else if (g_error_matches (local, NZ_ERROR, NZ_ERROR_TIMED_OUT) && observation_ms > 0)
            nz_throw (error, NZ_ERROR_TIMED_OUT,
                      "%s %s: no end after %" G_GUINT64_FORMAT " ms, though the agent ends an "
                      "execution at its timeout; giving up on the peer",
                      op, id, observation_ms);
          else
            g_propagate_error (error, g_steal_pointer (&local));
          return NULL;
        }
    }
}

JsonObject *
nz_agent_attach_execution (NzAgentClient *c, const char *execution_id, guint64 from_offset,
                           guint64 observation_ms, gint64 heartbeat_ms,
                           const NzAttachCallbacks *callbacks, gpointer user_data,
                           GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (c != NULL && execution_id != NULL && callbacks != NULL, NULL);
  /* The wire has no heartbeat here (spec A.6): silence is answered by a healthz probe. */
  return attach_loop (c, "attach-execution", "executionId", execution_id, from_offset,
                      observation_ms, heartbeat_ms, callbacks, user_data, cancellable, error);
}

JsonObject *
nz_agent_attach_session (NzAgentClient *c, const char *session_id, guint64 from_offset,
                         gint64 heartbeat_ms, const NzAttachCallbacks *callbacks,
                         gpointer user_data, GCancellable *cancellable, GError **error)
{
  g_return_val_if_fail (c != NULL && session_id != NULL && callbacks != NULL, NULL);
  return attach_loop (c, "attach-session", "sessionId", session_id, from_offset, 0, heartbeat_ms,
                      callbacks, user_data, cancellable, error);
}

/* ---- duplex ---- */

struct _NzAgentDuplex
{
  GSocketConnection *conn;
  GSocket *sock;
  NzFrameReader *reader;
  gboolean eof;
};

NzAgentDuplex *
nz_agent_duplex_open (NzAgentClient *c, const char *op, JsonObject *body, GError **error)
{
  GSocketConnection *conn = nz_agent_client_open (c, op, body, NULL, error);
  NzAgentDuplex *d;

  if (conn == NULL)
    return NULL;
  d = g_new0 (NzAgentDuplex, 1);
  d->conn = conn;
  d->sock = g_socket_connection_get_socket (conn);
  d->reader = nz_frame_reader_new (NZ_AGENT_REPLY_FRAME_LIMIT);
  return d;
}

void
nz_agent_duplex_free (NzAgentDuplex *d)
{
  if (d == NULL)
    return;
  g_io_stream_close (G_IO_STREAM (d->conn), NULL, NULL);
  g_object_unref (d->conn);
  nz_frame_reader_free (d->reader);
  g_free (d);
}

gsize
nz_agent_duplex_buffered (NzAgentDuplex *d)
{
  return nz_frame_reader_buffered (d->reader);
}

int
nz_agent_duplex_get_fd (NzAgentDuplex *d)
{
  return g_socket_get_fd (d->sock);
}

gboolean
nz_agent_duplex_send (NzAgentDuplex *d, JsonObject *frame, GError **error)
{
  g_autoptr (GBytes) bytes = nz_frame_encode_object (frame);
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);
  gboolean was_blocking = g_socket_get_blocking (d->sock);
  gboolean ok = TRUE;

  g_socket_set_blocking (d->sock, TRUE);
  while (len > 0)
    {
      gssize n = g_socket_send (d->sock, data, len, NULL, error);

      if (n <= 0)
        {
          ok = FALSE;
          break;
        }
      data += n;
      len -= (gsize)n;
    }
  g_socket_set_blocking (d->sock, was_blocking);
  return ok;
}

NzDuplexResult
nz_agent_duplex_next (NzAgentDuplex *d, gboolean may_read, JsonObject **out_frame, GError **error)
{
  g_autoptr (GBytes) payload = NULL;
  gsize len = 0;
  const char *data;

  for (;;)
    {
      GError *local = NULL;

      switch (nz_frame_reader_next (d->reader, &payload, &local))
        {
        case NZ_FRAME_OK:
          data = g_bytes_get_data (payload, &len);
          if (len == 0)
            return NZ_DUPLEX_TERMINATOR;
          *out_frame = nz_agent_reply_parse (data, len, error);
          return *out_frame != NULL ? NZ_DUPLEX_FRAME : NZ_DUPLEX_ERROR;
        case NZ_FRAME_MALFORMED:
          g_propagate_error (error, local);
          return NZ_DUPLEX_ERROR;
        case NZ_FRAME_OVERFLOW:
          nz_throw (error, NZ_ERROR_PROTOCOL, "the agent sent an oversized frame");
          return NZ_DUPLEX_ERROR;
        case NZ_FRAME_NONE:
        default:
          break;
        }
      if (d->eof)
        return NZ_DUPLEX_EOF;
      if (!may_read)
        return NZ_DUPLEX_AGAIN;
      {
        char buf[65536];
        gssize n;

        g_socket_set_blocking (d->sock, FALSE);
        n = g_socket_receive (d->sock, buf, sizeof buf, NULL, &local);
        may_read = FALSE;
        if (n < 0)
          {
            if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
              {
                g_error_free (local);
                return NZ_DUPLEX_AGAIN;
              }
            g_propagate_error (error, local);
            return NZ_DUPLEX_ERROR;
          }
        if (n == 0)
          d->eof = TRUE;
        else
          nz_frame_reader_push (d->reader, buf, (gsize)n);
      }
    }
}

/* ---- stream liveness (spec D.2.11) ---- */

gboolean
nz_liveness_parse (const char *text, gint64 *out_ms, GError **error)
{
  long long ms;

  if (text == NULL)
    return (*out_ms = nz_liveness_asked_ms ()), TRUE;
  if (g_str_equal (text, "0") || g_str_equal (text, "off"))
    return (*out_ms = 0), TRUE;
  ms = nz_lite_exec_parse_timeout_ms (text);
  if (ms < 1 || ms > G_MAXINT32)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--heartbeat wants milliseconds, a duration like 15s, or off; got \"%s\"", text);
      return FALSE;
    }
  *out_ms = ms;
  return TRUE;
}

gint64
nz_liveness_asked_ms (void)
{
  const char *raw = g_getenv ("NAMZU_STREAM_HEARTBEAT_MS");
  guint64 v = 0;

  if (raw != NULL && g_ascii_string_to_unsigned (raw, 10, 0, G_MAXINT32, &v, NULL))
    return (gint64)v;
  return NZ_HOST_STREAM_HEARTBEAT_MS;
}

void
nz_liveness_start (NzLiveness *l, JsonObject *body, gint64 asked_ms)
{
  memset (l, 0, sizeof *l);
  l->asked_ms = asked_ms;
  l->opened_at = l->last_seen = g_get_monotonic_time ();
  if (asked_ms > 0)
    json_object_set_int_member (body, "heartbeatMs", asked_ms);
}

void
nz_liveness_ready (NzLiveness *l, JsonObject *ready)
{
  guint64 echoed = 0;

  l->ready = TRUE;
  l->last_seen = g_get_monotonic_time ();
  /* min(max(asked, 100) x 4, max(100, echoed)); no echo: an old agent, no heartbeat. */
  if (l->asked_ms > 0 && nz_agent_reply_count (ready, "heartbeatMs", &echoed) && echoed > 0)
    {
      l->interval_ms
          = MIN (MAX (l->asked_ms, 100) * 4, MAX (100, (gint64)MIN (echoed, G_MAXINT32)));
      l->next_send = l->last_seen + l->interval_ms * 1000;
    }
}

void
nz_liveness_seen (NzLiveness *l)
{
  l->last_seen = g_get_monotonic_time ();
}

int
nz_liveness_poll_ms (const NzLiveness *l)
{
  gint64 now = g_get_monotonic_time (), until;

  if (!l->ready)
    until = l->opened_at + (gint64)NZ_HOST_READ_IDLE_TIMEOUT_MS * 1000;
  else if (l->interval_ms > 0)
    until = MIN (l->next_send, l->last_seen + l->interval_ms * 3000);
  else
    return -1;
  return until <= now ? 0 : (int)MIN ((until - now + 999) / 1000, G_MAXINT);
}

gboolean
nz_liveness_tick (NzLiveness *l, NzAgentDuplex *d, const char *what, GError **error)
{
  gint64 now = g_get_monotonic_time ();

  if (!l->ready)
    {
      if (now - l->opened_at >= (gint64)NZ_HOST_READ_IDLE_TIMEOUT_MS * 1000)
        return nz_throw (error, NZ_ERROR_TIMED_OUT, "%s: no ready frame within %d ms", what,
                         NZ_HOST_READ_IDLE_TIMEOUT_MS);
      return TRUE;
    }
  if (l->interval_ms == 0)
    return TRUE;
  if (now - l->last_seen >= l->interval_ms * 3000)
    {
      g_set_error (error, NZ_AGENT_ERROR, NZ_AGENT_ERROR_PEER_GONE,
                   "%s: the peer sent nothing for %" G_GINT64_FORMAT "ms and is treated as gone",
                   what, l->interval_ms * 3);
      return FALSE;
    }
  if (now >= l->next_send)
    {
      g_autoptr (JsonObject) beat = json_object_new ();

      json_object_set_string_member (beat, "type", "heartbeat");
      l->next_send = now + l->interval_ms * 1000;
      if (!nz_agent_duplex_send (d, beat, error))
        return FALSE;
    }
  return TRUE;
}
