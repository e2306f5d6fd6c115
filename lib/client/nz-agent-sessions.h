/* nz-agent-sessions.h: the host side of retained executions, sessions and terminals (spec
 * A.6.5, A.6.10-A.6.14): start a retained execution and leave it running, follow it from a byte
 * offset later (from another process), follow a session, and drive an interactive terminal
 * over a duplex connection. Blocking calls, like nz-agent-client.h. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "nz-agent-client.h"

G_BEGIN_DECLS

/* reserve-execution {executionId} (minted exec_<uuid> when @execution_id is NULL), then
 * execute @body with that id and retainOutput:true, and return as soon as the agent has
 * started it (or it already finished): the execution goes on without us. Returns
 * {executionId, state} (new reference). Refusals (an id already used, retained_output_capacity,
 * spawn errors) are errors. Two connections to @t: the control one and the one that streams. */
JsonObject *nz_agent_exec_detach (const NzTransport *t, JsonObject *body, const char *execution_id,
                                  GError **error);

typedef struct
{
  /* Output bytes as decoded by the agent; stream 1 stdout, 2 stderr (NzExecStream). */
  void (*output) (int stream, const char *data, gsize len, gpointer user_data);
  /* @dropped bytes before @offset are gone from the ring: never skipped silently. */
  void (*gap) (guint64 dropped, guint64 offset, gpointer user_data);
} NzAttachCallbacks;

/* attach-execution from @from_offset: replay, live follow, until attach_result, which is
 * returned (new reference; `outcome`, `result`?, `error`?, `nextOffset`). A connection lost
 * before the end is resumed from the last nextOffset (a few times). The agent ends every
 * execution by its timeout, so a connection that has not ended @observation_ms after it
 * opened (0: no bound) is a peer that lies or hangs: NZ_ERROR_TIMED_OUT. The wire has no
 * heartbeat: after @heartbeat_ms of silence (0: never) a healthz probe on a new connection must
 * answer within as long, else NZ_AGENT_ERROR_PEER_GONE (not resumed). */
JsonObject *nz_agent_attach_execution (NzAgentClient *c, const char *execution_id,
                                       guint64 from_offset, guint64 observation_ms,
                                       gint64 heartbeat_ms, const NzAttachCallbacks *callbacks,
                                       gpointer user_data, GCancellable *cancellable,
                                       GError **error);

/* attach-session (read-only follow) from @from_offset until the session's exit frame, which
 * is returned (new reference; `exitCode`, `signal`? numeric). Another attachment taking over
 * is NZ_ERROR_BUSY "superseded"; a slow reader NZ_ERROR_FAILED. @heartbeat_ms: the heartbeat
 * to ask for (nz_liveness_parse; 0: none); a peer that misses it is NZ_AGENT_ERROR_PEER_GONE. */
JsonObject *nz_agent_attach_session (NzAgentClient *c, const char *session_id, guint64 from_offset,
                                     gint64 heartbeat_ms, const NzAttachCallbacks *callbacks,
                                     gpointer user_data, GCancellable *cancellable, GError **error);

/* A duplex stream connection: frames both ways, for terminals. */
typedef struct _NzAgentDuplex NzAgentDuplex;

/* Dials and sends the request (nz_agent_client_open). */
NzAgentDuplex *nz_agent_duplex_open (NzAgentClient *c, const char *op, JsonObject *body,
                                     GError **error);
void nz_agent_duplex_free (NzAgentDuplex *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentDuplex, nz_agent_duplex_free)
/* The socket's fd, to poll() for readability. */
int nz_agent_duplex_get_fd (NzAgentDuplex *d);
/* Bytes of a partial frame held back (a peer that closed mid-frame). */
gsize nz_agent_duplex_buffered (NzAgentDuplex *d);
/* Sends one frame (blocking). */
gboolean nz_agent_duplex_send (NzAgentDuplex *d, JsonObject *frame, GError **error);

typedef enum
{
  NZ_DUPLEX_FRAME,      /* *out_frame set */
  NZ_DUPLEX_TERMINATOR, /* the zero-length frame */
  NZ_DUPLEX_AGAIN,      /* nothing complete yet: poll and call again */
  NZ_DUPLEX_EOF,        /* the agent closed the connection */
  NZ_DUPLEX_ERROR,
} NzDuplexResult;

/* Returns the next buffered frame; with @may_read, reads once from the socket first when none
 * is buffered (call after poll() said readable). */
NzDuplexResult nz_agent_duplex_next (NzAgentDuplex *d, gboolean may_read, JsonObject **out_frame,
                                     GError **error);

/* Stream liveness (spec D.2.11), for streams the host keeps open for as long as the agent's
 * side runs (terminals, attach-session): the host asks for a heartbeat in the open body; once
 * the agent's ready frame echoes one, the host sends {type:"heartbeat"} every interval and
 * the stream is dead when no bytes have arrived for three intervals. Before ready, the
 * host's 60 s read-idle bound applies instead. */
#define NZ_HOST_STREAM_HEARTBEAT_MS 15000

/* The heartbeat a host tool asks for: $NAMZU_STREAM_HEARTBEAT_MS (a whole number of ms; 0 for
 * none), else NZ_HOST_STREAM_HEARTBEAT_MS. */
gint64 nz_liveness_asked_ms (void);
/* A tool's --heartbeat: MS, a DURATION like 15s (nz_lite_exec_parse_timeout_ms), or "0"/"off"
 * for none; NULL: nz_liveness_asked_ms(). Anything else is a G_OPTION_ERROR (a usage error). */
gboolean nz_liveness_parse (const char *text, gint64 *out_ms, GError **error);

typedef struct
{
  gint64 asked_ms;    /* what the open body asked for */
  gint64 interval_ms; /* negotiated: 0 none (an old agent, or before ready) */
  gboolean ready;
  gint64 opened_at, last_seen, next_send; /* monotonic µs */
} NzLiveness;

/* Puts heartbeatMs in @body (unless @asked_ms is 0) and starts the pre-ready clock. */
void nz_liveness_start (NzLiveness *l, JsonObject *body, gint64 asked_ms);
/* The ready frame arrived: negotiate from its heartbeatMs echo. */
void nz_liveness_ready (NzLiveness *l, JsonObject *ready);
/* Bytes arrived. */
void nz_liveness_seen (NzLiveness *l);
/* How long poll() may wait before nz_liveness_tick must run, in ms (-1: for ever). */
int nz_liveness_poll_ms (const NzLiveness *l);
/* Sends a heartbeat when one is due; FALSE (and @error) when the stream is dead or the send
 * failed: NZ_AGENT_ERROR_PEER_GONE after three silent beats, NZ_ERROR_TIMED_OUT with no ready
 * frame within NZ_HOST_READ_IDLE_TIMEOUT_MS. @what names the stream in the error. */
gboolean nz_liveness_tick (NzLiveness *l, NzAgentDuplex *d, const char *what, GError **error);

G_END_DECLS
