/* attach-execution (spec A.6.5, C.6): a read-only observer of a retained execution. Replays the
 * ring from an offset, follows live output and ends with exactly one attach_result. Never
 * signals the process. */
#include "nz-agent-streams.h"

#include <math.h>
#include <string.h>

#include "nz-exec.h"
#include "nz-guest.h"
#include "nz-jstext.h"
#include "nz-json.h"
#include "nz-knobs.h"

/* ---- helpers shared by the stream ops ---- */

gboolean
nz_agent_node_safe_int (JsonNode *n, gint64 *out)
{
  double d;

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n))
    return FALSE;
  switch (json_node_get_value_type (n))
    {
    case G_TYPE_INT64:
      *out = json_node_get_int (n);
      return *out <= NZ_MAX_SAFE_INTEGER && *out >= -NZ_MAX_SAFE_INTEGER;
    case G_TYPE_DOUBLE:
      d = json_node_get_double (n);
      if (!nz_is_safe_integer (d))
        return FALSE;
      *out = (gint64)d;
      return TRUE;
    default:
      return FALSE;
    }
}

JsonObject *
nz_agent_parse_client_frame (GBytes *payload)
{
  gsize len = 0;
  const char *data = g_bytes_get_data (payload, &len);

  if (len == 0)
    return NULL;
  return nz_json_parse_object (data, (gssize)len, NULL);
}

void
nz_agent_write_text_frame (NzAgentConn *conn, const char *prefix_members, const guint8 *data,
                           gsize len, const char *suffix_members)
{
  g_autoptr (GString) frame = g_string_sized_new (len + 96);

  g_string_append (frame, prefix_members);
  g_string_append (frame, "\"data\":");
  nz_jstext_append_json_lossy (frame, data, len);
  g_string_append (frame, suffix_members);
  g_string_append_c (frame, '}');
  nz_agent_conn_write_frame (conn, frame->str, frame->len);
}

/* ---- attach-execution ---- */

typedef struct
{
  NzAgentConn *conn; /* ref */
  NzExecRecord *rec; /* ref */
  gint64 slow_limit; /* ATTACH_WRITE_BUFFER_BYTES = EXECUTION_LOG_BYTES */
  gboolean observing;
} Attachment;

static void
attachment_free (Attachment *a)
{
  if (a->observing)
    nz_exec_record_remove_observer (a->rec, a);
  nz_exec_record_unref (a->rec);
  nz_agent_conn_unref (a->conn);
  g_free (a);
}

static void
write_delta (NzAgentConn *conn, int stream, guint64 offset, const guint8 *data, gsize len)
{
  g_autofree char *prefix
      = g_strdup_printf ("{\"type\":\"%s\",", stream == 0 ? "stdout_delta" : "stderr_delta");
  g_autofree char *suffix = g_strdup_printf (
      ",\"offset\":%" G_GUINT64_FORMAT ",\"nextOffset\":%" G_GUINT64_FORMAT, offset, offset + len);

  nz_agent_write_text_frame (conn, prefix, data, len, suffix);
}

static void
write_attach_result (NzAgentConn *conn, NzExecRecord *rec)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "attach_result");
  json_object_set_string_member (frame, "executionId", rec->id);
  json_object_set_string_member (frame, "outcome", nz_exec_outcome_to_string (rec->outcome));
  json_object_set_boolean_member (frame, "started", rec->started);
  if (rec->has_result)
    {
      JsonObject *result = json_object_new ();

      json_object_set_int_member (result, "exitCode", rec->result.exit_code);
      json_object_set_boolean_member (result, "timedOut", rec->result.timed_out);
      json_object_set_int_member (result, "durationMs", rec->result.duration_ms);
      if (rec->result.signal != 0)
        json_object_set_string_member (result, "signal", nz_exec_signal_name (rec->result.signal));
      json_object_set_boolean_member (result, "stdoutTruncated", rec->result.stdout_truncated);
      json_object_set_boolean_member (result, "stderrTruncated", rec->result.stderr_truncated);
      json_object_set_object_member (frame, "result", result);
    }
  if (rec->error != NULL)
    json_object_set_string_member (frame, "error", rec->error);
  json_object_set_int_member (frame, "nextOffset",
                              rec->log != NULL ? (gint64)nz_output_log_end_offset (rec->log) : 0);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

static void
attach_output (NzExecRecord *rec, int stream, guint64 offset, const guint8 *data, gsize len,
               gpointer user_data)
{
  Attachment *a = user_data;

  write_delta (a->conn, stream, offset, data, len);
  /* A reader that cannot keep up is dropped; the execution never waits for it. */
  if ((gint64)nz_agent_conn_get_queued_bytes (a->conn) > a->slow_limit)
    {
      nz_exec_record_remove_observer (rec, a);
      a->observing = FALSE;
      nz_agent_conn_destroy (a->conn);
    }
}

static void
attach_finished (NzExecRecord *rec, gpointer user_data)
{
  Attachment *a = user_data;

  /* The registry drops its observers after this call. */
  a->observing = FALSE;
  write_attach_result (a->conn, rec);
}

static const NzExecObserverFuncs attach_observer = {
  .output = attach_output,
  .finished = attach_finished,
};

static void
attach_client_frame (NzAgentConn *conn, GBytes *payload, gpointer user_data)
{
  /* Read-only: any frame from the client ends the attachment (spec C.6). */
  nz_agent_conn_destroy (conn);
}

static void
attach_closed (NzAgentConn *conn, gpointer user_data)
{
  Attachment *a = user_data;

  if (a->observing)
    nz_exec_record_remove_observer (a->rec, a);
  a->observing = FALSE;
}

static const NzAgentStreamFuncs attach_stream = {
  .frame = attach_client_frame,
  .close = attach_closed,
};

static void
attach_error (NzAgentConn *conn, const char *code, const char *state)
{
  g_autoptr (JsonObject) frame = json_object_new ();

  json_object_set_string_member (frame, "type", "error");
  json_object_set_string_member (frame, "error", code);
  if (state != NULL)
    json_object_set_string_member (frame, "state", state);
  nz_agent_conn_write_object (conn, frame);
  nz_agent_conn_write_terminator (conn);
  nz_agent_conn_end (conn);
}

void
nz_agent_op_attach_execution (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
  const char *id = nz_json_node_string (nz_json_member (env->body, "executionId"));
  JsonNode *from_node = nz_json_member (env->body, "fromOffset");
  g_autoptr (GArray) chunks = NULL;
  g_autoptr (JsonObject) attached = NULL;
  guint64 dropped = 0, from = 0;
  gint64 requested = 0;
  NzExecRecord *rec;
  Attachment *a;

  if (id == NULL || !nz_exec_id_is_valid (id))
    {
      attach_error (conn, "invalid_execution_id", NULL);
      return;
    }
  nz_exec_registry_prune (guest->registry, nz_guest_now_ms ());
  rec = nz_exec_registry_lookup (guest->registry, id);
  if (rec == NULL)
    {
      attach_error (conn, "unknown_execution", NULL);
      return;
    }
  /* Only a record that never had a log says so; a discarded one attaches and reports every
   * byte as dropped. */
  if (rec->log == NULL)
    {
      attach_error (conn, "output_not_retained", nz_exec_state_to_string (rec->state));
      return;
    }
  if (from_node != NULL && !JSON_NODE_HOLDS_NULL (from_node)
      && (!nz_agent_node_safe_int (from_node, &requested) || requested < 0))
    {
      attach_error (conn, "invalid_offset", NULL);
      return;
    }
  if (!nz_output_log_read (rec->log, (guint64)requested, &chunks, &dropped, &from))
    {
      attach_error (conn, "invalid_offset", NULL);
      return;
    }

  attached = json_object_new ();
  json_object_set_string_member (attached, "type", "attached");
  json_object_set_string_member (attached, "executionId", rec->id);
  json_object_set_string_member (attached, "state", nz_exec_state_to_string (rec->state));
  json_object_set_int_member (attached, "fromOffset", (gint64)from);
  json_object_set_int_member (attached, "droppedBytes", (gint64)dropped);
  nz_agent_conn_write_object (conn, attached);
  for (guint i = 0; i < chunks->len; i++)
    {
      NzOutputChunk *c = &g_array_index (chunks, NzOutputChunk, i);
      gsize len = 0;
      const guint8 *data = g_bytes_get_data (c->data, &len);

      write_delta (conn, c->stream, c->offset, data, len);
    }
  if (rec->state == NZ_EXEC_STATE_TERMINAL)
    {
      write_attach_result (conn, rec);
      return;
    }
  a = g_new0 (Attachment, 1);
  a->conn = nz_agent_conn_ref (conn);
  a->rec = nz_exec_record_ref (rec);
  a->slow_limit = guest->limits.execution_log_bytes;
  a->observing = TRUE;
  nz_exec_record_add_observer (rec, &attach_observer, a);
  nz_agent_conn_set_stream (conn, &attach_stream, a, (GDestroyNotify)attachment_free);
}
