/* nz-agent-heartbeat.h: stream heartbeats (spec C.11), negotiated per stream (terminal,
 * attach-session, tcp-connect): the agent sends {"type":"heartbeat"} every interval, counts any
 * received byte as life, and ends the stream after three silent intervals. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-agent-conn.h"

G_BEGIN_DECLS

#define NZ_STREAM_HEARTBEAT_MIN_MS 100
#define NZ_STREAM_HEARTBEAT_MISS_LIMIT 3

/* The body's heartbeatMs, normalised: 0 (none) for a non-number, non-finite or <= 0 value,
 * otherwise max(100, floor(value)). */
gint64 nz_stream_heartbeat_normalize (JsonNode *node);

typedef struct _NzStreamHeartbeat NzStreamHeartbeat;

/* Arms the heartbeat on @conn (not referenced: free it from the stream's close handler). When
 * the peer is silent for 3 intervals the connection is destroyed, which runs the stream's
 * normal close cleanup. */
NzStreamHeartbeat *nz_stream_heartbeat_new (NzAgentConn *conn, gint64 interval_ms);
void nz_stream_heartbeat_free (NzStreamHeartbeat *hb);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzStreamHeartbeat, nz_stream_heartbeat_free)

/* Received bytes: proof of life. NULL-safe. */
void nz_stream_heartbeat_touch (NzStreamHeartbeat *hb);
/* While the agent itself paused reading, silence is not counted; resuming resets the clock.
 * NULL-safe. */
void nz_stream_heartbeat_set_suspended (NzStreamHeartbeat *hb, gboolean suspended);

G_END_DECLS
