/* terminal, attach-session, start-detached, list-sessions, kill-session (spec A.6.10-A.6.14,
 * C.9, C.10): the wire side of nz-pty and nz-sessions. */
#include "nz-agent-streams.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "nz-agent-heartbeat.h"
#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-fileio.h"
#include "nz-guest.h"
#include "nz-jail.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-sessions.h"

/* Pause a connection-bound terminal's output above this much unsent data (Node pauses the
 * child's stdout when socket.write returns false, then resumes on 'drain'). */
#define TERMINAL_HIGH_WATER_BYTES 65536

static NzGuest *
conn_guest (NzAgentConn *conn)
{
  return nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
}

/* Start-up failure of a terminal: an error frame and end(), no terminator (spec A.6.10). */
static void
terminal_refuse (NzAgentConn *conn, const char *message)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "error");
  json_object_set_string_member (frame, "error", message);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_end (conn);
}

/* Stream-shaped error with terminator (attach-session). */
static void
stream_error_extra (NzAgentConn *conn, const char *message, const char *int_member, gint64 value)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "error");
  json_object_set_string_member (frame, "error", message);
  if (int_member != NULL)
    json_object_set_int_member (frame, int_member, value);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

static gboolean
dimension_valid (JsonNode *n, guint *out)
{
  gint64 v;

  if (!nz_agent_node_safe_int (n, &v) || v < 1 || v > NZ_PTY_MAX_COLS)
    return FALSE;
  *out = (guint)v;
  return TRUE;
}

static void
set_exit_members (JsonObject *obj, NzSession *s)
{
  json_object_set_int_member (obj, "exitCode", s->exit_code);
  if (s->signal != 0)
    json_object_set_int_member (obj, "signal", s->signal);
}

/* sessionSummary (spec C.10). */
static JsonObject *
session_summary (NzSession *s, JsonObject *into)
{
  JsonObject *obj = into != NULL ? into : json_object_new ();
  JsonArray *args = json_array_new ();

  json_object_set_string_member (obj, "sessionId", s->id);
  json_object_set_string_member (obj, "kind", nz_session_kind_to_string (s->kind));
  json_object_set_string_member (obj, "command", s->command);
  for (guint i = 0; s->args[i] != NULL; i++)
    json_array_add_string_element (args, s->args[i]);
  json_object_set_array_member (obj, "args", args);
  json_object_set_int_member (obj, "startedAt", s->started_at);
  json_object_set_int_member (obj, "lastInputAt", s->last_input_at);
  json_object_set_int_member (obj, "lastOutputAt", s->last_output_at);
  json_object_set_int_member (obj, "nextOffset", (gint64)nz_output_log_end_offset (s->log));
  json_object_set_int_member (obj, "droppedBytes", (gint64)nz_output_log_dropped_bytes (s->log));
  json_object_set_string_member (obj, "state", s->exited ? "exited" : "running");
  json_object_set_boolean_member (obj, "attached", nz_session_is_attached (s));
  if (s->exited)
    set_exit_members (obj, s);
  return obj;
}

/* ---- the terminal event grammar (input, resize, kill, heartbeat) ---- */

typedef struct
{
  NzAgentConn *conn; /* ref */
  NzStreamHeartbeat *hb;
  NzPty *pty;         /* connection-bound terminal */
  NzSession *session; /* persistent terminal or attach-session (ref) */
  gboolean attached;
  gboolean closed;
  gint64 slow_limit;
} TermStream;

static void
term_stream_free (TermStream *t)
{
  nz_stream_heartbeat_free (t->hb);
  nz_pty_free (t->pty);
  if (t->session != NULL)
    {
      /* Unconditionally: it also forgets a pending input-drained callback to @t. */
      nz_session_detach (t->session, t);
      nz_session_unref (t->session);
    }
  nz_agent_conn_unref (t->conn);
  g_free (t);
}

static void
term_set_backpressure (TermStream *t, gboolean paused)
{
  nz_agent_conn_set_reading_paused (t->conn, paused);
  nz_stream_heartbeat_set_suspended (t->hb, paused);
}

static void
pty_input_drained (NzPty *pty, gpointer user_data)
{
  term_set_backpressure (user_data, FALSE);
}

static gboolean
session_input_drained (gpointer user_data)
{
  TermStream *t = user_data;

  if (!t->closed)
    term_set_backpressure (t, FALSE);
  return G_SOURCE_REMOVE;
}

static GPid
term_pid (TermStream *t)
{
  return t->pty != NULL ? nz_pty_get_pid (t->pty) : t->session != NULL ? t->session->pid : 0;
}

static void
term_client_frame (NzAgentConn *conn, GBytes *payload, gpointer user_data)
{
  TermStream *t = user_data;
  g_autoptr (JsonObject) ev = nz_agent_parse_client_frame (payload);
  const char *type = ev != NULL ? nz_json_get_string (ev, "type") : NULL;

  if (type == NULL)
    return; /* unparseable frames are ignored */
  if (strcmp (type, "input") == 0)
    {
      const char *data = nz_json_get_string (ev, "data");
      gboolean written;

      if (data == NULL)
        return;
      if (t->pty != NULL)
        written = nz_pty_write (t->pty, data, strlen (data));
      else if (t->session != NULL)
        written
            = nz_session_write_input (t->session, data, strlen (data), session_input_drained, t);
      else
        return;
      if (!written)
        term_set_backpressure (t, TRUE);
    }
  else if (strcmp (type, "resize") == 0)
    {
      guint cols, rows;

      /* Out-of-range sizes are silently ignored. */
      if (!dimension_valid (json_object_get_member (ev, "cols"), &cols)
          || !dimension_valid (json_object_get_member (ev, "rows"), &rows))
        return;
      if (t->pty != NULL)
        nz_pty_resize (t->pty, cols, rows, NULL);
      else if (t->session != NULL)
        nz_session_resize (t->session, cols, rows);
    }
  else if (strcmp (type, "kill") == 0)
    {
      /* The allow-list; anything else is coerced to SIGTERM, on the opening connection and on
       * attachments alike. */
      int signo = nz_pty_allowed_signal (nz_json_get_string (ev, "signal"), SIGTERM);

      if (t->pty != NULL)
        {
          GPid sid = nz_pty_get_pid (t->pty);

          nz_pty_signal_sessions (&sid, 1, sid, signo);
        }
      else if (t->session != NULL && !t->session->exited)
        nz_session_signal (t->session, signo);
    }
  /* heartbeat: proof of life only (the bytes already counted). */
}

static void
term_client_bytes (NzAgentConn *conn, gpointer user_data)
{
  nz_stream_heartbeat_touch (((TermStream *)user_data)->hb);
}

static void
term_drain (NzAgentConn *conn, gpointer user_data)
{
  TermStream *t = user_data;

  if (t->pty != NULL)
    nz_pty_set_output_paused (t->pty, FALSE);
}

static void
term_closed (NzAgentConn *conn, gpointer user_data)
{
  TermStream *t = user_data;

  t->closed = TRUE;
  g_clear_pointer (&t->hb, nz_stream_heartbeat_free);
  /* A connection-bound terminal dies with its connection, background jobs included; a
   * session only loses its attachment. */
  if (t->pty != NULL)
    {
      GPid sid = term_pid (t);

      nz_pty_signal_sessions (&sid, 1, sid, SIGKILL);
    }
  if (t->session != NULL && t->attached)
    {
      nz_session_detach (t->session, t);
      t->attached = FALSE;
    }
}

static const NzAgentStreamFuncs term_stream_funcs = {
  .frame = term_client_frame,
  .bytes = term_client_bytes,
  .drain = term_drain,
  .close = term_closed,
};

/* ---- session attachment (persistent terminal, attach-session) ---- */

static void
write_session_data (NzAgentConn *conn, int stream, guint64 offset, const guint8 *data, gsize len)
{
  g_autofree char *prefix = g_strdup_printf ("{\"type\":\"data\",\"stream\":\"%s\",",
                                             stream == 0 ? "stdout" : "stderr");
  g_autofree char *suffix = g_strdup_printf (
      ",\"offset\":%" G_GUINT64_FORMAT ",\"nextOffset\":%" G_GUINT64_FORMAT, offset, offset + len);

  nz_agent_write_text_frame (conn, prefix, data, len, suffix);
}

static void
write_session_exit (NzAgentConn *conn, NzSession *s)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "exit");
  set_exit_members (frame, s);
  json_object_set_int_member (frame, "nextOffset", (gint64)nz_output_log_end_offset (s->log));
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

static void
end_attachment (TermStream *t, const char *reason)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  t->attached = FALSE;
  json_object_set_string_member (frame, "type", "detached");
  json_object_set_string_member (frame, "reason", reason);
  nz_agent_conn_write_object (t->conn, frame);
  nz_agent_conn_write_terminator (t->conn);
  nz_agent_conn_end (t->conn);
}

static void
attach_output (NzSession *s, int stream, guint64 offset, const guint8 *data, gsize len,
               gpointer user_data)
{
  TermStream *t = user_data;
  /* A failed write destroys the connection, which frees @t with its stream: hold the
   * connection so we can tell, and touch @t no more if it went. */
  g_autoptr (NzAgentConn) conn = nz_agent_conn_ref (t->conn);

  write_session_data (conn, stream, offset, data, len);
  if (nz_agent_conn_is_closed (conn))
    return;
  /* Never pause the program for a reader: drop the reader instead. */
  if ((gint64)nz_agent_conn_get_queued_bytes (t->conn) > t->slow_limit)
    {
      nz_session_detach (s, t);
      end_attachment (t, "slow_reader");
      nz_agent_conn_destroy (t->conn);
    }
}

static void
attach_exited (NzSession *s, gpointer user_data)
{
  TermStream *t = user_data;

  t->attached = FALSE;
  write_session_exit (t->conn, s);
}

static void
attach_detached (NzSession *s, const char *reason, gpointer user_data)
{
  end_attachment (user_data, reason);
}

static const NzSessionAttachFuncs attach_funcs = {
  .output = attach_output,
  .exited = attach_exited,
  .detached = attach_detached,
};

static TermStream *
term_stream_new (NzAgentConn *conn, gint64 heartbeat_ms)
{
  TermStream *t = g_new0 (TermStream, 1);

  t->conn = nz_agent_conn_ref (conn);
  t->slow_limit = conn_guest (conn)->limits.session_log_bytes;
  if (heartbeat_ms > 0)
    t->hb = nz_stream_heartbeat_new (conn, heartbeat_ms);
  return t;
}

static void
ready_session_members (JsonObject *ready, NzSession *s, guint64 from, guint64 dropped)
{
  json_object_set_string_member (ready, "sessionId", s->id);
  json_object_set_string_member (ready, "kind", nz_session_kind_to_string (s->kind));
  json_object_set_string_member (ready, "state", s->exited ? "exited" : "running");
  if (s->exited)
    set_exit_members (ready, s);
  json_object_set_int_member (ready, "fromOffset", (gint64)from);
  json_object_set_int_member (ready, "droppedBytes", (gint64)dropped);
  json_object_set_int_member (ready, "nextOffset", (gint64)nz_output_log_end_offset (s->log));
}

/* ---- terminal ---- */

static void
bound_output (NzPty *pty, const guint8 *data, gsize len, gpointer user_data)
{
  TermStream *t = user_data;

  nz_agent_write_text_frame (t->conn, "{\"type\":\"data\",", data, len, "");
  if (nz_agent_conn_get_queued_bytes (t->conn) > TERMINAL_HIGH_WATER_BYTES)
    nz_pty_set_output_paused (pty, TRUE);
}

static void
bound_exited (NzPty *pty, int wait_status, gpointer user_data)
{
  TermStream *t = user_data;
  g_autoptr (JsonObject) frame = json_object_new ();

  /* Numeric signal here (the execute result names it); no terminator on this stream. */
  json_object_set_string_member (frame, "type", "exit");
  json_object_set_int_member (frame, "exitCode",
                              WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : -1);
  if (WIFSIGNALED (wait_status))
    json_object_set_int_member (frame, "signal", WTERMSIG (wait_status));
  nz_agent_conn_write_object (t->conn, frame);
  nz_agent_conn_end (t->conn);
}

static const NzPtyCallbacks bound_pty_callbacks = {
  .output = bound_output,
  .input_drained = pty_input_drained,
  .exited = bound_exited,
};

/* The terminal environment: scrubbed, then TERM, then the caller's env (which may override
 * TERM). */
static char **
terminal_environ (JsonObject *body_env)
{
  g_autoptr (JsonObject) overlay = json_object_new ();

  json_object_set_string_member (overlay, "TERM", "xterm-256color");
  if (body_env != NULL)
    {
      g_autoptr (GList) members = json_object_get_members (body_env);

      for (GList *l = members; l != NULL; l = l->next)
        json_object_set_member (overlay, l->data,
                                json_node_copy (json_object_get_member (body_env, l->data)));
    }
  return nz_guest_child_environ (overlay);
}

/* cwd (default the workspace) jailed to the workspace, then mkdir -p. */
static char *
resolve_cwd (NzGuest *guest, JsonNode *cwd_node, GError **error)
{
  const char *cwd = nz_json_node_string (cwd_node);
  g_autofree char *resolved = NULL;

  if (cwd == NULL || *cwd == '\0')
    resolved = g_strdup (nz_jail_get_workspace (guest->jail));
  else if ((resolved = nz_jail_resolve_cwd (guest->jail, cwd, error)) == NULL)
    return NULL;
  return g_steal_pointer (&resolved);
}

static GStrv
string_args (JsonArray *array)
{
  GPtrArray *out = g_ptr_array_new ();

  for (guint i = 0; array != NULL && i < json_array_get_length (array); i++)
    g_ptr_array_add (out, nz_json_js_string (json_array_get_element (array, i)));
  g_ptr_array_add (out, NULL);
  return (GStrv)g_ptr_array_free (out, FALSE);
}

void
nz_agent_op_terminal (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  JsonObject *body = env->body;
  const char *command;
  const char *session_id;
  gboolean persistent;
  guint cols = 0, rows = 0;
  gint64 heartbeat_ms;
  g_autofree char *cwd = NULL;
  g_autofree char *cwd_path = NULL;
  nz_autofd int cwd_fd = -1;
  g_auto (GStrv) args = NULL;
  g_auto (GStrv) envp = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) ready = NULL;
  TermStream *t;

  if (body == NULL)
    {
      terminal_refuse (conn, "missing_terminal_options");
      return;
    }
  if (!dimension_valid (json_object_get_member (body, "cols"), &cols))
    {
      terminal_refuse (conn, "cols must be an integer in [1, 1000]");
      return;
    }
  if (!dimension_valid (json_object_get_member (body, "rows"), &rows))
    {
      terminal_refuse (conn, "rows must be an integer in [1, 1000]");
      return;
    }
  if ((cwd = resolve_cwd (guest, nz_json_member (env->body, "cwd"), &error)) == NULL)
    {
      terminal_refuse (conn, error->message);
      return;
    }
  command = nz_json_get_string (body, "command");
  if (command == NULL || *command == '\0')
    command = "/bin/sh";
  args = string_args (nz_json_get_array (body, "args"));
  heartbeat_ms = nz_stream_heartbeat_normalize (nz_json_member (env->body, "heartbeatMs"));
  persistent = nz_json_get_bool (body, "persistent", FALSE);
  envp = terminal_environ (nz_json_get_object (body, "env"));

  ready = json_object_new ();
  json_object_set_string_member (ready, "type", "ready");
  json_object_set_string_member (ready, "guestBootId", guest->boot_id);

  if (persistent)
    {
      NzSessionRegistry *reg = nz_session_registry_get (guest);
      NzSession *s;

      /* Refusals carry the bare code, which hosts map to typed refusals. */
      nz_session_registry_prune (reg, nz_guest_now_ms ());
      session_id = nz_json_get_string (body, "sessionId");
      if (!nz_session_id_is_valid (session_id))
        {
          terminal_refuse (conn, "invalid_session_id");
          return;
        }
      if (nz_session_registry_lookup (reg, session_id) != NULL)
        {
          terminal_refuse (conn, "session_exists");
          return;
        }
      if (!nz_session_registry_make_room (reg))
        {
          terminal_refuse (conn, "session_capacity");
          return;
        }
      s = nz_session_start (reg, NZ_SESSION_TERMINAL, session_id, command,
                            (const char *const *)args, cwd, envp, cols, rows, &error);
      if (s == NULL)
        {
          terminal_refuse (conn, error->message);
          return;
        }
      ready_session_members (ready, s, 0, 0);
      if (heartbeat_ms > 0)
        json_object_set_int_member (ready, "heartbeatMs", heartbeat_ms);
      nz_agent_conn_write_object (conn, ready);
      t = term_stream_new (conn, heartbeat_ms);
      t->session = nz_session_ref (s);
      /* Output that arrived between the spawn and now is in the ring from offset 0. */
      {
        g_autoptr (GArray) chunks = NULL;

        nz_output_log_read (s->log, 0, &chunks, NULL, NULL);
        for (guint i = 0; i < chunks->len; i++)
          {
            NzOutputChunk *c = &g_array_index (chunks, NzOutputChunk, i);
            gsize len = 0;
            const guint8 *data = g_bytes_get_data (c->data, &len);

            write_session_data (conn, c->stream, c->offset, data, len);
          }
      }
      nz_session_attach (s, &attach_funcs, t);
      t->attached = TRUE;
      nz_agent_conn_set_stream (conn, &term_stream_funcs, t, (GDestroyNotify)term_stream_free);
      return;
    }

  /* The child starts in the directory fd the jail opened, whatever is swapped in after. */
  if ((cwd_path = nz_jail_enter_cwd (guest->jail, cwd, &cwd_fd, &error)) == NULL)
    {
      terminal_refuse (conn, error->message);
      return;
    }
  t = term_stream_new (conn, 0);
  t->pty = nz_pty_spawn (command, (const char *const *)args, cwd_path, envp, cols, rows,
                         &bound_pty_callbacks, t, &error);
  if (t->pty == NULL)
    {
      term_stream_free (t);
      terminal_refuse (conn, error->message);
      return;
    }
  if (heartbeat_ms > 0)
    {
      json_object_set_int_member (ready, "heartbeatMs", heartbeat_ms);
      t->hb = nz_stream_heartbeat_new (conn, heartbeat_ms);
    }
  nz_agent_conn_write_object (conn, ready);
  nz_agent_conn_set_stream (conn, &term_stream_funcs, t, (GDestroyNotify)term_stream_free);
}

/* ---- attach-session ---- */

void
nz_agent_op_attach_session (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  NzSessionRegistry *reg = nz_session_registry_get (guest);
  const char *id = nz_json_node_string (nz_json_member (env->body, "sessionId"));
  JsonNode *from_node = nz_json_member (env->body, "fromOffset");
  JsonNode *follow_node = nz_json_member (env->body, "follow");
  gboolean follow = !(follow_node != NULL && JSON_NODE_HOLDS_VALUE (follow_node)
                      && json_node_get_value_type (follow_node) == G_TYPE_BOOLEAN
                      && !json_node_get_boolean (follow_node));
  gint64 heartbeat_ms = nz_stream_heartbeat_normalize (nz_json_member (env->body, "heartbeatMs"));
  g_autoptr (GArray) chunks = NULL;
  g_autoptr (JsonObject) ready = NULL;
  guint64 dropped = 0, from = 0;
  gint64 requested = 0;
  guint cols, rows;
  NzSession *s;
  TermStream *t;

  if (!nz_session_id_is_valid (id))
    {
      stream_error_extra (conn, "invalid_session_id", NULL, 0);
      return;
    }
  nz_session_registry_prune (reg, nz_guest_now_ms ());
  s = nz_session_registry_lookup (reg, id);
  if (s == NULL)
    {
      stream_error_extra (conn, "unknown_session", NULL, 0);
      return;
    }
  if ((from_node != NULL && !JSON_NODE_HOLDS_NULL (from_node)
       && (!nz_agent_node_safe_int (from_node, &requested) || requested < 0))
      || !nz_output_log_read (s->log, (guint64)requested, &chunks, &dropped, &from))
    {
      stream_error_extra (conn, "invalid_offset", "nextOffset",
                          (gint64)nz_output_log_end_offset (s->log));
      return;
    }
  ready = json_object_new ();
  json_object_set_string_member (ready, "type", "ready");
  json_object_set_string_member (ready, "guestBootId", guest->boot_id);
  ready_session_members (ready, s, from, dropped);
  if (heartbeat_ms > 0)
    json_object_set_int_member (ready, "heartbeatMs", heartbeat_ms);
  nz_agent_conn_write_object (conn, ready);
  for (guint i = 0; i < chunks->len; i++)
    {
      NzOutputChunk *c = &g_array_index (chunks, NzOutputChunk, i);
      gsize len = 0;
      const guint8 *data = g_bytes_get_data (c->data, &len);

      write_session_data (conn, c->stream, c->offset, data, len);
    }
  if (!follow)
    {
      /* A one-shot read: never displaces the current attachment. */
      nz_agent_conn_write_terminator (conn);
      nz_agent_conn_end (conn);
      return;
    }
  if (s->exited)
    {
      write_session_exit (conn, s);
      return;
    }
  t = term_stream_new (conn, heartbeat_ms);
  t->session = nz_session_ref (s);
  nz_session_attach (s, &attach_funcs, t);
  t->attached = TRUE;
  if (s->kind == NZ_SESSION_TERMINAL && env->body != NULL
      && dimension_valid (json_object_get_member (env->body, "cols"), &cols)
      && dimension_valid (json_object_get_member (env->body, "rows"), &rows))
    nz_session_resize (s, cols, rows);
  nz_agent_conn_set_stream (conn, &term_stream_funcs, t, (GDestroyNotify)term_stream_free);
}

/* ---- start-detached, list-sessions, kill-session ---- */

void
nz_agent_op_start_detached (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  NzSessionRegistry *reg = nz_session_registry_get (guest);
  const char *id = nz_json_node_string (nz_json_member (env->body, "sessionId"));
  const char *command = nz_json_node_string (nz_json_member (env->body, "command"));
  g_autofree char *cwd = NULL;
  g_auto (GStrv) args = NULL;
  g_auto (GStrv) envp = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = NULL;
  NzSession *s;

  nz_session_registry_prune (reg, nz_guest_now_ms ());
  if (!nz_session_id_is_valid (id))
    {
      nz_agent_conn_reply_error (conn, "invalid_session_id");
      return;
    }
  if (nz_session_registry_lookup (reg, id) != NULL)
    {
      nz_agent_conn_reply_error (conn, "session_exists");
      return;
    }
  if (command == NULL || *command == '\0')
    {
      nz_agent_conn_reply_error (conn, "missing_command");
      return;
    }
  if (!nz_session_registry_make_room (reg))
    {
      nz_agent_conn_reply_error (conn, "session_capacity");
      return;
    }
  if ((cwd = resolve_cwd (guest, nz_json_member (env->body, "cwd"), &error)) == NULL
      || !nz_jail_mkdir_p_within (cwd, nz_jail_get_workspace (guest->jail), &error))
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  args = string_args (env->body != NULL ? nz_json_get_array (env->body, "args") : NULL);
  envp = nz_guest_child_environ (env->body != NULL ? nz_json_get_object (env->body, "env") : NULL);
  s = nz_session_start (reg, NZ_SESSION_DETACHED, id, command, (const char *const *)args, cwd, envp,
                        0, 0, &error);
  if (s == NULL)
    {
      reply = json_object_new ();
      json_object_set_boolean_member (reply, "ok", FALSE);
      json_object_set_string_member (reply, "error", "spawn_failed");
      json_object_set_string_member (reply, "message", error->message);
      nz_agent_conn_reply (conn, reply);
      return;
    }
  reply = json_object_new ();
  json_object_set_boolean_member (reply, "ok", TRUE);
  session_summary (s, reply);
  json_object_set_int_member (reply, "pid", s->pid);
  nz_agent_conn_reply (conn, reply);
}

void
nz_agent_op_list_sessions (NzAgentConn *conn, NzEnvelope *env)
{
  NzSessionRegistry *reg = nz_session_registry_get (conn_guest (conn));
  g_autoptr (JsonObject) reply = json_object_new ();
  g_autoptr (GPtrArray) list = NULL;
  JsonArray *sessions = json_array_new ();

  nz_session_registry_prune (reg, nz_guest_now_ms ());
  list = nz_session_registry_list (reg);
  for (guint i = 0; i < list->len; i++)
    json_array_add_object_element (sessions, session_summary (list->pdata[i], NULL));
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_array_member (reply, "sessions", sessions);
  nz_agent_conn_reply (conn, reply);
}

typedef struct
{
  NzAgentConn *conn;
  NzSession *session;
  guint signalled;
} KillWait;

static gboolean
kill_answer (gpointer user_data)
{
  KillWait *k = user_data;
  g_autoptr (JsonObject) reply = json_object_new ();

  /* `state` stays running when the program outlived the wait. */
  json_object_set_boolean_member (reply, "ok", TRUE);
  session_summary (k->session, reply);
  json_object_set_int_member (reply, "signalled", k->signalled);
  nz_agent_conn_reply (k->conn, reply);
  nz_session_unref (k->session);
  nz_agent_conn_unref (k->conn);
  g_free (k);
  return G_SOURCE_REMOVE;
}

void
nz_agent_op_kill_session (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  NzSessionRegistry *reg = nz_session_registry_get (guest);
  const char *id = nz_json_node_string (nz_json_member (env->body, "sessionId"));
  KillWait *k;
  NzSession *s;

  if (!nz_session_id_is_valid (id))
    {
      nz_agent_conn_reply_error (conn, "invalid_session_id");
      return;
    }
  nz_session_registry_prune (reg, nz_guest_now_ms ());
  s = nz_session_registry_lookup (reg, id);
  if (s == NULL)
    {
      nz_agent_conn_reply_error (conn, "unknown_session");
      return;
    }
  if (s->exited)
    {
      g_autoptr (JsonObject) reply = json_object_new ();

      json_object_set_boolean_member (reply, "ok", TRUE);
      session_summary (s, reply);
      nz_agent_conn_reply (conn, reply);
      return;
    }
  k = g_new0 (KillWait, 1);
  k->conn = nz_agent_conn_ref (conn);
  k->session = nz_session_ref (s);
  /* SIGKILL by default here (a terminal `kill` event defaults to SIGTERM). */
  k->signalled = nz_session_signal (
      s,
      nz_pty_allowed_signal (nz_json_node_string (nz_json_member (env->body, "signal")), SIGKILL));
  nz_session_wait_exit (s, guest->limits.session_kill_confirm_timeout_ms, kill_answer, k);
}
