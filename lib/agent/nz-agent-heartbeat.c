#include "nz-agent-heartbeat.h"

#include <math.h>

struct _NzStreamHeartbeat
{
  NzAgentConn *conn; /* borrowed: the stream owning us frees us on close */
  gint64 interval_ms;
  gint64 last_seen_us;
  gboolean suspended;
  guint send_id;
  guint watchdog_id;
};

gint64
nz_stream_heartbeat_normalize (JsonNode *node)
{
  double v;

  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node))
    return 0;
  switch (json_node_get_value_type (node))
    {
    case G_TYPE_INT64:
      v = (double)json_node_get_int (node);
      break;
    case G_TYPE_DOUBLE:
      v = json_node_get_double (node);
      break;
    default:
      return 0;
    }
  if (!isfinite (v) || v <= 0)
    return 0;
  /* A timer cannot be shorter than the floor, nor longer than a guint of milliseconds. */
  v = floor (v);
  return (gint64)CLAMP (v, NZ_STREAM_HEARTBEAT_MIN_MS, (double)(G_MAXUINT / 4));
}

static gboolean
heartbeat_send (gpointer user_data)
{
  NzStreamHeartbeat *hb = user_data;
  static const char frame[] = "{\"type\":\"heartbeat\"}";

  if (!nz_agent_conn_is_ending (hb->conn))
    nz_agent_conn_write_frame (hb->conn, frame, sizeof frame - 1);
  return G_SOURCE_CONTINUE;
}

static gboolean
heartbeat_watchdog (gpointer user_data)
{
  NzStreamHeartbeat *hb = user_data;
  gint64 silent_us = g_get_monotonic_time () - hb->last_seen_us;

  if (hb->suspended
      || silent_us < hb->interval_ms * NZ_STREAM_HEARTBEAT_MISS_LIMIT * G_TIME_SPAN_MILLISECOND)
    return G_SOURCE_CONTINUE;
  /* Three silent intervals: the peer is gone. Destroying runs the stream's close cleanup,
   * which frees us, so the timers stop first. */
  hb->watchdog_id = 0;
  g_clear_handle_id (&hb->send_id, g_source_remove);
  g_debug ("stream heartbeat: peer silent for %" G_GINT64_FORMAT " ms", silent_us / 1000);
  nz_agent_conn_destroy (hb->conn);
  return G_SOURCE_REMOVE;
}

NzStreamHeartbeat *
nz_stream_heartbeat_new (NzAgentConn *conn, gint64 interval_ms)
{
  NzStreamHeartbeat *hb;

  g_return_val_if_fail (conn != NULL && interval_ms > 0, NULL);
  hb = g_new0 (NzStreamHeartbeat, 1);
  hb->conn = conn;
  hb->interval_ms = interval_ms;
  hb->last_seen_us = g_get_monotonic_time ();
  hb->send_id = g_timeout_add ((guint)interval_ms, heartbeat_send, hb);
  hb->watchdog_id = g_timeout_add ((guint)MAX (10, interval_ms / 4), heartbeat_watchdog, hb);
  return hb;
}

void
nz_stream_heartbeat_free (NzStreamHeartbeat *hb)
{
  if (hb == NULL)
    return;
  g_clear_handle_id (&hb->send_id, g_source_remove);
  g_clear_handle_id (&hb->watchdog_id, g_source_remove);
  g_free (hb);
}

void
nz_stream_heartbeat_touch (NzStreamHeartbeat *hb)
{
  if (hb != NULL)
    hb->last_seen_us = g_get_monotonic_time ();
}

void
nz_stream_heartbeat_set_suspended (NzStreamHeartbeat *hb, gboolean suspended)
{
  if (hb == NULL || hb->suspended == suspended)
    return;
  hb->suspended = suspended;
  if (!suspended)
    hb->last_seen_us = g_get_monotonic_time ();
}
