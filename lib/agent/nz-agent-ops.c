#include "nz-agent-ops.h"
#include "nz-privsep.h"

#include <math.h>
#include <string.h>

#include "nz-agent-drain.h"
#include "nz-agent-fileops.h"
#include "nz-agent-filestream.h"
#include "nz-agent-fsops.h"
#include "nz-agent-streams.h"
#include "nz-errors.h"
#include "nz-exec.h"
#include "nz-flush.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"
#include "nz-request.h"
#include "nz-op-execute.h"
#include "nz-op-files.h"

/* The one ordered feature table (spec A.6.1 order; both issue-3 lanes edit only the
 * `available` column here). A host tests membership and must never be promised a feature
 * that is missing (spec A.9), so each entry says when it is advertised. */
typedef enum
{
  FEATURE_OFF,   /* not implemented yet: never advertised */
  FEATURE_ON,    /* always advertised */
  FEATURE_FLUSH, /* only when the flush program resolves on PATH (spec C.14) */
} FeatureAvailability;

static const struct
{
  const char *name;
  FeatureAvailability available;
} agent_features[] = {
  { "write-file-parts", FEATURE_ON },
  { "execution-attach", FEATURE_ON },
  { "stream-heartbeat", FEATURE_ON },
  { "read-file-stream", FEATURE_ON },
  { "sessions", FEATURE_ON },
  { "quiesce", FEATURE_ON },
  { "flush", FEATURE_FLUSH },
  { "guest-boot-id", FEATURE_ON },
  /* Additive (docs/agent.md): list-files, walk-files, stat-file, remove-file, move-file. */
  { "file-ops", FEATURE_ON },
  /* Additive, for directory copies: make-directory, make-symlink, set-file-mode. */
  { "file-tree-ops", FEATURE_ON },
};

/* Test-only (docs/agent.md): NAMZU_AGENT_TEST_HIDE_FEATURES=a,b makes this agent behave like
 * one without those features (not advertised, their ops unknown), so a host's fallback for an
 * older agent can be tested against the real one. Only `file-ops` and `file-tree-ops` can be
 * hidden. */
static gboolean
feature_hidden (const char *name)
{
  const char *hide = g_getenv ("NAMZU_AGENT_TEST_HIDE_FEATURES");
  g_auto (GStrv) names = NULL;

  if (hide == NULL || (strcmp (name, "file-ops") != 0 && strcmp (name, "file-tree-ops") != 0))
    return FALSE;
  names = g_strsplit (hide, ",", -1);
  return g_strv_contains ((const char *const *)names, name);
}

static NzGuest *
conn_guest (NzAgentConn *conn)
{
  return nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
}

static JsonObject *
ok_reply_with_boot_id (NzGuest *guest)
{
  JsonObject *reply = json_object_new ();

  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_string_member (reply, "guestBootId", guest->boot_id);
  return reply;
}

/* ---- healthz ---- */

JsonArray *
nz_agent_ops_features (NzGuest *guest)
{
  JsonArray *features = json_array_new ();

  g_return_val_if_fail (guest != NULL, features);
  for (guint i = 0; i < G_N_ELEMENTS (agent_features); i++)
    if ((agent_features[i].available == FEATURE_ON
         || (agent_features[i].available == FEATURE_FLUSH && nz_flush_available (guest)))
        && !feature_hidden (agent_features[i].name))
      json_array_add_string_element (features, agent_features[i].name);
  return features;
}

static void
op_healthz (NzAgentConn *conn)
{
  NzGuest *guest = conn_guest (conn);
  g_autoptr (JsonObject) reply = json_object_new ();
  JsonArray *features = nz_agent_ops_features (guest);

  json_object_set_boolean_member (reply, "ok", !guest->retiring);
  json_object_set_int_member (reply, "protocolVersion", NZ_GUEST_PROTOCOL_VERSION);
  json_object_set_array_member (reply, "features", features);
  if (guest->retiring)
    json_object_set_boolean_member (reply, "retiring", TRUE);
  nz_agent_conn_reply (conn, reply);
}

/* ---- reserve-execution ---- */

static void
op_reserve (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  /* The caller named the id (the op found or made the record under it). */
  gboolean named = nz_json_js_truthy (nz_json_member (env->body, "executionId"));
  gint64 now = nz_guest_now_ms ();
  gboolean existing = FALSE;
  g_auto (NzRefusal) refusal = { 0 };
  g_autoptr (JsonObject) reply = NULL;
  NzExecRecord *rec = nz_op_reserve (guest, env->body, NZ_WIRE_AGENT, now, &existing, &refusal);

  if (rec == NULL)
    {
      g_autofree char *msg = nz_refusal_agent_message (&refusal);

      nz_agent_conn_reply_error (conn, msg);
      return;
    }
  reply = ok_reply_with_boot_id (guest);
  json_object_set_int_member (reply, "protocolVersion", NZ_GUEST_PROTOCOL_VERSION);
  json_object_set_string_member (reply, "executionId", rec->id);
  json_object_set_int_member (reply, "leaseExpiresAt",
                              rec->expires_at != 0 ? rec->expires_at : now);
  /* `state` only when the caller named the id (a test pins the minted reply's keys). */
  if (named)
    json_object_set_string_member (reply, "state", nz_exec_state_to_string (rec->state));
  if (existing && rec->log != NULL)
    {
      json_object_set_boolean_member (reply, "retainedOutput", TRUE);
      json_object_set_int_member (reply, "outputOffset",
                                  (gint64)nz_output_log_end_offset (rec->log));
    }
  nz_agent_conn_reply (conn, reply);
}

/* ---- execute ---- */

static void
exec_output (NzExecRecord *rec, NzExecStream stream, const guint8 *data, gsize len,
             gpointer user_data)
{
  NzAgentConn *conn = user_data;
  g_autoptr (GString) frame = g_string_sized_new (len + 48);

  nz_request_append_delta (frame, rec, stream, data, len, TRUE);
  nz_agent_conn_write_frame (conn, frame->str, frame->len);
}

static void
exec_finished (NzExecRecord *rec, const NzExecResult *result, const char *error_message,
               gboolean fenced, gpointer user_data)
{
  NzAgentConn *conn = user_data;
  g_autoptr (JsonObject) frame = NULL;

  if (fenced)
    {
      /* No terminal frame: the host sees "socket closed before exec stream terminator". */
      nz_agent_conn_destroy (conn);
      return;
    }
  if (result == NULL)
    {
      nz_agent_conn_stream_error (conn, error_message);
      return;
    }
  frame = json_object_new ();
  json_object_set_string_member (frame, "type", "result");
  nz_request_set_result_members (frame, result);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

static const NzExecCallbacks exec_callbacks = {
  .output = exec_output,
  .finished = exec_finished,
};

static void
op_execute (NzAgentConn *conn, NzEnvelope *env)
{
  g_auto (NzRefusal) refusal = { 0 };
  g_autoptr (NzExecRequest) req
      = nz_op_execute_parse (conn_guest (conn), env->body, NZ_WIRE_AGENT, &refusal);
  g_autoptr (GError) error = NULL;

  if (req == NULL)
    {
      g_autofree char *msg = nz_refusal_agent_message (&refusal);

      nz_agent_conn_stream_error (conn, msg);
      return;
    }
  if (!nz_exec_start (conn_guest (conn), req->rec, &req->spec, &exec_callbacks,
                      nz_agent_conn_ref (conn), (GDestroyNotify)nz_agent_conn_unref, &error))
    {
      /* nz_exec_start did not take the callback data on failure. */
      nz_agent_conn_unref (conn);
      nz_agent_conn_stream_error (conn, error->message);
      return;
    }
}

/* ---- cancel-execution ---- */

static void
cancel_confirmed (NzExecRecord *rec, const char *error_message, gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = user_data;
  NzGuest *guest = conn_guest (conn);

  if (error_message != NULL)
    {
      g_autoptr (JsonObject) reply = json_object_new ();

      /* An unconfirmed kill leaves a workload nobody owns: fence the agent. */
      nz_guest_retire (guest, error_message);
      json_object_set_boolean_member (reply, "ok", FALSE);
      json_object_set_string_member (reply, "guestBootId", guest->boot_id);
      json_object_set_string_member (reply, "error", "cancellation_unconfirmed");
      json_object_set_string_member (reply, "message", error_message);
      nz_agent_conn_reply (conn, reply);
      return;
    }
  {
    g_autoptr (JsonObject) reply = nz_request_terminal_payload (rec, guest->boot_id);

    nz_agent_conn_reply (conn, reply);
  }
}

static void
op_cancel (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  g_auto (NzRefusal) refusal = { 0 };
  NzExecRecord *rec = nz_op_cancel_target (guest, env->body, NZ_WIRE_AGENT, &refusal);

  if (rec == NULL && refusal.http_status != 404)
    {
      g_autofree char *msg = nz_refusal_agent_message (&refusal);

      nz_agent_conn_reply_error (conn, msg);
      return;
    }
  if (rec == NULL)
    {
      g_autoptr (JsonObject) reply = json_object_new ();

      /* Carries the boot id on purpose: a restarted agent answering about a previous
       * process's id is detectable. */
      json_object_set_boolean_member (reply, "ok", FALSE);
      json_object_set_string_member (reply, "guestBootId", guest->boot_id);
      json_object_set_string_member (reply, "error", "unknown_execution");
      nz_agent_conn_reply (conn, reply);
      return;
    }
  nz_request_cancel_unadmitted (guest, rec);
  nz_exec_terminate (guest, rec, NZ_EXEC_CAUSE_CANCELLED, cancel_confirmed,
                     nz_agent_conn_ref (conn));
}

/* ---- read-file / write-file (whole file) ---- */

/* The parsed file op, or NULL when it was refused (the refusal is the reply). */
static gboolean
file_request (NzAgentConn *conn, NzEnvelope *env, NzFileOp op, NzFileRequest *req)
{
  g_auto (NzRefusal) refusal = { 0 };
  g_autofree char *msg = NULL;

  if (nz_op_file_parse (env->body, op, NZ_WIRE_AGENT, req, &refusal))
    return TRUE;
  msg = nz_refusal_agent_message (&refusal);
  nz_agent_conn_reply_error (conn, msg);
  return FALSE;
}

static void
op_read_file (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  NzFileRequest req;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) content = NULL;
  g_autoptr (GString) reply = NULL;

  if (!file_request (conn, env, NZ_FILE_OP_READ, &req))
    return;
  if (req.ranged)
    {
      nz_agent_fileops_read_range (conn, env, &req);
      return;
    }
  if ((content = nz_request_read_file (guest, req.path, &error)) == NULL)
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  reply = g_string_sized_new (g_bytes_get_size (content) + 128);
  g_string_append (reply, "{\"ok\":true,\"guestBootId\":");
  nz_jstext_append_json_string (reply, guest->boot_id);
  g_string_append_c (reply, ',');
  nz_request_append_content (reply, content, req.base64);
  nz_agent_conn_write_frame (conn, reply->str, reply->len);
  nz_agent_conn_end (conn);
}

static void
op_write_file (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  NzFileRequest req;
  g_autoptr (GError) error = NULL;
  gsize len = 0;
  g_autoptr (JsonObject) reply = NULL;

  if (!file_request (conn, env, NZ_FILE_OP_WRITE, &req))
    return;
  if (req.part != NULL)
    {
      nz_agent_fileops_write_part (conn, &req);
      return;
    }
  if (!nz_request_write_file (guest, req.path, req.content, req.encoding, &len, &error))
    {
      nz_agent_conn_reply_error (conn, error->message);
      return;
    }
  reply = ok_reply_with_boot_id (guest);
  json_object_set_int_member (reply, "bytesWritten", (gint64)len);
  nz_agent_conn_reply (conn, reply);
}

/* ---- dispatch (spec A.5) ---- */

gboolean
nz_agent_ops_has_nul_escape (const char *json, gsize len)
{
  for (gsize i = 0; i + 6 <= len; i++)
    {
      gsize backslashes = 0;

      if (json[i] != '\\' || memcmp (json + i, "\\u0000", 6) != 0)
        continue;
      /* An odd run of backslashes ending here means this one starts an escape. */
      for (gsize j = i; j > 0 && json[j - 1] == '\\'; j--)
        backslashes++;
      if (backslashes % 2 == 0)
        return TRUE;
    }
  return FALSE;
}

void
nz_agent_ops_dispatch (NzAgentConn *conn, NzEnvelope *env, GBytes *payload)
{
  NzGuest *guest = conn_guest (conn);
  const char *op = env->op;
  gsize payload_len = 0;
  const char *payload_data = payload != NULL ? g_bytes_get_data (payload, &payload_len) : NULL;

  if (strcmp (op, "healthz") == 0)
    {
      op_healthz (conn);
      return;
    }
  if (strcmp (op, "cancel-execution") == 0)
    {
      op_cancel (conn, env);
      return;
    }
  if (guest->retiring)
    {
      /* The attach ops are refused in their stream shape; everything else, including
       * execute, in the reply shape. */
      if (strcmp (op, "attach-execution") == 0 || strcmp (op, "attach-session") == 0)
        nz_agent_conn_stream_error (conn, "agent_retiring");
      else
        nz_agent_conn_reply_error (conn, "agent_retiring");
      return;
    }
  /* The quiesce window (an explicit quiesce, or the SIGTERM drain): nothing may start a
   * process; reads, writes, tcp-connect and list-sessions go on (spec A.5 step 4). */
  if (nz_guest_is_quiescing (guest))
    {
      static const char *const stream_ops[]
          = { "execute", "terminal", "attach-execution", "attach-session", NULL };
      static const char *const reply_ops[]
          = { "reserve-execution", "start-detached", "kill-session", "quiesce", "flush", NULL };

      if (g_strv_contains (stream_ops, op))
        {
          nz_agent_conn_stream_error (conn, "quiesce_in_progress");
          return;
        }
      if (g_strv_contains (reply_ops, op))
        {
          nz_agent_conn_reply_error (conn, "quiesce_in_progress");
          return;
        }
    }
  /* Refuse rather than act on a truncated string (stdin, content, a path or an argument). */
  if ((strcmp (op, "execute") == 0 || strcmp (op, "write-file") == 0
       || strcmp (op, "read-file") == 0 || strcmp (op, "read-file-stream") == 0
       || nz_agent_fsops_feature (op) != NULL)
      && payload_data != NULL && nz_agent_ops_has_nul_escape (payload_data, payload_len))
    {
      if (strcmp (op, "execute") == 0 || strcmp (op, "read-file-stream") == 0)
        nz_agent_conn_stream_error (conn, NZ_JSON_NUL_UNSUPPORTED);
      else
        nz_agent_conn_reply_error (conn, NZ_JSON_NUL_UNSUPPORTED);
      return;
    }
  if (strcmp (op, "reserve-execution") == 0)
    op_reserve (conn, env);
  else if (strcmp (op, "execute") == 0)
    op_execute (conn, env);
  else if (strcmp (op, "read-file") == 0)
    {
      NZ_PRIVSEP_FS_SCOPE;
      op_read_file (conn, env);
    }
  else if (strcmp (op, "write-file") == 0)
    {
      NZ_PRIVSEP_FS_SCOPE;
      op_write_file (conn, env);
    }
  else if (strcmp (op, "attach-execution") == 0)
    nz_agent_op_attach_execution (conn, env);
  else if (strcmp (op, "terminal") == 0)
    nz_agent_op_terminal (conn, env);
  else if (strcmp (op, "attach-session") == 0)
    nz_agent_op_attach_session (conn, env);
  else if (strcmp (op, "start-detached") == 0)
    nz_agent_op_start_detached (conn, env);
  else if (strcmp (op, "list-sessions") == 0)
    nz_agent_op_list_sessions (conn, env);
  else if (strcmp (op, "kill-session") == 0)
    nz_agent_op_kill_session (conn, env);
  else if (strcmp (op, "tcp-connect") == 0)
    nz_agent_op_tcp_connect (conn, env);
  else if (strcmp (op, "read-file-stream") == 0)
    {
      NZ_PRIVSEP_FS_SCOPE;
      nz_agent_filestream_op (conn, env);
    }
  else if (nz_agent_fsops_feature (op) != NULL && !feature_hidden (nz_agent_fsops_feature (op)))
    {
      NZ_PRIVSEP_FS_SCOPE;
      nz_agent_fsops_op (conn, env);
    }
  else if (strcmp (op, "quiesce") == 0)
    nz_agent_drain_op_quiesce (conn, env);
  else if (strcmp (op, "flush") == 0)
    nz_agent_drain_op_flush (conn, env);
  else
    {
      g_autofree char *msg = g_strdup_printf ("unknown_op: %s", op);

      nz_agent_conn_reply_error (conn, msg);
    }
}
