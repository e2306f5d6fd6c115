#include "nz-agent-drain.h"

#include "nz-flush.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"
#include "nz-quiesce.h"

static NzGuest *
conn_guest (NzAgentConn *conn)
{
  return nz_agent_server_get_guest (nz_agent_conn_get_server (conn));
}

static void
reply_error_message (NzAgentConn *conn, const char *error, const char *message)
{
  g_autoptr (JsonObject) reply = json_object_new ();

  json_object_set_boolean_member (reply, "ok", FALSE);
  json_object_set_string_member (reply, "error", error);
  json_object_set_string_member (reply, "message", message);
  nz_agent_conn_reply (conn, reply);
}

/* A positive safe integer, else the JS String() of what was sent. */
static gboolean
positive_int_member (JsonObject *body, const char *name, gint64 *out, char **shown)
{
  JsonNode *n = body != NULL ? json_object_get_member (body, name) : NULL;
  double v;

  *shown = NULL;
  if (n == NULL)
    return TRUE;
  if (nz_json_get_number (body, name, &v) && nz_is_safe_integer (v) && v > 0)
    {
      *out = (gint64)v;
      return TRUE;
    }
  *shown = nz_json_js_string (n);
  return FALSE;
}

/* ---- quiesce ---- */

static JsonObject *
quiesce_reply (const NzQuiesceResult *result)
{
  JsonObject *reply = json_object_new ();
  JsonArray *stopped = json_array_new ();

  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_string_member (reply, "scope", result->scope);
  json_object_set_int_member (reply, "graceMs", result->grace_ms);
  json_object_set_int_member (reply, "rounds", result->rounds);
  for (guint i = 0; i < result->stopped->len; i++)
    {
      NzQuiesceStopped *s = result->stopped->pdata[i];
      JsonObject *o = json_object_new ();

      json_object_set_int_member (o, "pid", s->pid);
      json_object_set_string_member (o, "command", s->command);
      json_object_set_string_member (o, "signal", s->signal);
      json_array_add_object_element (stopped, o);
    }
  json_object_set_array_member (reply, "stopped", stopped);
  return reply;
}

static void
quiesce_done (const NzQuiesceResult *result, const char *error_message, gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = user_data;
  NzGuest *guest = conn_guest (conn);

  /* Lowered again, unless the SIGTERM drain has started (nz_guest_is_quiescing). */
  guest->quiesce_in_flight--;
  if (result == NULL)
    {
      reply_error_message (conn, "quiesce_unconfirmed", error_message);
      return;
    }
  {
    g_autoptr (JsonObject) reply = quiesce_reply (result);

    nz_agent_conn_reply (conn, reply);
  }
}

void
nz_agent_drain_op_quiesce (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  gint64 max_grace = MAX (1, guest->limits.cancel_confirm_timeout_ms - 1);
  gint64 grace = guest->limits.quiesce_grace_ms;
  g_autofree char *shown = NULL;

  /* The grace must fit inside the cancel confirmation window, which closes the execute
   * streams of the processes it stops. */
  if (!positive_int_member (env->body, "graceMs", &grace, &shown) || grace > max_grace)
    {
      g_autofree char *msg = NULL;

      if (shown == NULL)
        shown = g_strdup_printf ("%" G_GINT64_FORMAT, grace);
      msg = g_strdup_printf ("graceMs must be a positive integer of at most %" G_GINT64_FORMAT
                             "ms (NAMZU_AGENT_CANCEL_CONFIRM_TIMEOUT_MS minus one), got %s",
                             max_grace, shown);
      reply_error_message (conn, "quiesce_invalid_grace", msg);
      return;
    }
  guest->quiesce_in_flight++;
  nz_quiesce_run (guest, grace, guest->limits.quiesce_deadline_ms,
                  "NAMZU_AGENT_QUIESCE_DEADLINE_MS", quiesce_done, nz_agent_conn_ref (conn));
}

/* ---- flush ---- */

static void
flush_done (gint64 duration_ms, const char *error_message, gpointer user_data)
{
  g_autoptr (NzAgentConn) conn = user_data;
  NzGuest *guest = conn_guest (conn);
  g_autoptr (JsonObject) reply = NULL;

  if (error_message != NULL)
    {
      reply_error_message (conn, "flush_unconfirmed", error_message);
      return;
    }
  reply = json_object_new ();
  json_object_set_boolean_member (reply, "ok", TRUE);
  json_object_set_int_member (reply, "durationMs", duration_ms);
  json_object_set_string_member (reply, "workspace", nz_jail_get_workspace (guest->jail));
  nz_agent_conn_reply (conn, reply);
}

void
nz_agent_drain_op_flush (NzAgentConn *conn, NzEnvelope *env)
{
  NzGuest *guest = conn_guest (conn);
  gint64 timeout = guest->limits.flush_timeout_ms;
  g_autofree char *shown = NULL;
  const char *source = "NAMZU_AGENT_FLUSH_TIMEOUT_MS";

  /* Unsupported (nothing can run syncfs here) is not the same as unconfirmed (it ran and
   * failed): a host may skip the first and must not ignore the second. */
  if (!nz_flush_available (guest))
    {
      g_autofree char *msg = nz_flush_unsupported_message (guest);

      reply_error_message (conn, "flush_unsupported", msg);
      return;
    }
  if (!positive_int_member (env->body, "timeoutMs", &timeout, &shown))
    {
      g_autofree char *msg = g_strdup_printf ("timeoutMs must be a positive integer, got %s", shown);

      reply_error_message (conn, "flush_invalid_timeout", msg);
      return;
    }
  if (env->body != NULL && json_object_has_member (env->body, "timeoutMs"))
    source = "the flush request's own timeoutMs";
  nz_flush_run (guest, timeout, source, flush_done, nz_agent_conn_ref (conn));
}

/* ---- SIGTERM drain ---- */

typedef struct
{
  NzAgentServer *server;
  NzGuest *guest;
  NzAgentLogFunc log;
  GSourceFunc done;
  gpointer user_data;
  gint64 deadline_at_us;
} Shutdown;

static void
shutdown_log (Shutdown *sd, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

static void
shutdown_log (Shutdown *sd, const char *fmt, ...)
{
  g_autofree char *line = NULL;
  va_list ap;

  va_start (ap, fmt);
  line = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (sd->log != NULL)
    sd->log (line, sd->user_data);
}

static void
shutdown_flushed (gint64 duration_ms, const char *error_message, gpointer user_data)
{
  Shutdown *sd = user_data;

  if (error_message != NULL)
    shutdown_log (sd, "SIGTERM: flush failed: %s", error_message);
  sd->done (sd->user_data);
  g_free (sd);
}

static void
shutdown_quiesced (const NzQuiesceResult *result, const char *error_message, gpointer user_data)
{
  Shutdown *sd = user_data;
  NzGuest *guest = sd->guest;
  gint64 flush_timeout = guest->limits.flush_timeout_ms;
  gint64 left_ms = (sd->deadline_at_us - g_get_monotonic_time ()) / 1000;
  gint64 budget = MAX (1, MIN (flush_timeout, left_ms));

  if (error_message != NULL)
    shutdown_log (sd, "SIGTERM: quiesce failed: %s", error_message);
  if (!nz_flush_available (guest))
    {
      g_autofree char *msg = nz_flush_unsupported_message (guest);

      shutdown_log (sd, "SIGTERM: flush skipped: %s", msg);
      shutdown_flushed (0, NULL, sd);
      return;
    }
  nz_flush_run (guest, budget,
                budget < flush_timeout ? "NAMZU_AGENT_SHUTDOWN_DEADLINE_MS"
                                       : "NAMZU_AGENT_FLUSH_TIMEOUT_MS",
                shutdown_flushed, sd);
}

void
nz_agent_drain_shutdown (NzAgentServer *server, NzAgentLogFunc log, GSourceFunc done,
                         gpointer user_data)
{
  Shutdown *sd = g_new0 (Shutdown, 1);
  NzGuest *guest = nz_agent_server_get_guest (server);
  gint64 shutdown_ms = guest->limits.shutdown_deadline_ms;
  gint64 flush_reserve = MIN (guest->limits.flush_timeout_ms, MAX (1, shutdown_ms / 3));
  gint64 quiesce_ms;

  sd->server = server;
  sd->guest = guest;
  sd->log = log;
  sd->done = done;
  sd->user_data = user_data;
  sd->deadline_at_us = g_get_monotonic_time () + shutdown_ms * 1000;
  /* Stop accepting first; then the gate goes up and never comes down again. */
  nz_agent_server_stop (server);
  guest->terminating = TRUE;
  /* Leave the flush its share of the deadline. */
  quiesce_ms = MAX (1, shutdown_ms - flush_reserve);
  nz_quiesce_run (guest, guest->limits.quiesce_grace_ms, quiesce_ms,
                  "NAMZU_AGENT_SHUTDOWN_DEADLINE_MS", shutdown_quiesced, sd);
}
