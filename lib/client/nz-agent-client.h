/* nz-agent-client.h: the host side of the guest-agent protocol (spec A, D.2): one request per
 * fresh connection, framed JSON, protocol admission, reserve -> execute -> cancel.
 *
 * Every call blocks the calling thread; each takes a GCancellable so another thread (e.g. one
 * running a g_unix_signal source) can interrupt it. Errors are NZ_ERROR, except:
 *   - G_IO_ERROR_CANCELLED when @cancellable fired (for exec: after the agent confirmed the
 *     remote cancellation);
 *   - G_SPAWN_ERROR_NOENT / G_SPAWN_ERROR_ACCES when the agent could not start the command,
 *     so a tool can answer 127 / 126 like a shell;
 *   - NZ_AGENT_ERROR_DIAL_FAILED when the agent could not be reached at all, so nothing of
 *     that request was sent (the reference's AgentDialFailedError, spec D.2.3);
 *   - NZ_AGENT_ERROR_PEER_GONE when a stream's peer missed its heartbeats (nz_liveness_tick).
 *
 * A client made from a transport with a rebind hook (nz-transport.h) retries a call once,
 * after asking the hook where the agent is now, when the call failed at the dial (nothing was
 * sent) or the agent refused the token (`unauthorized`: the pod was replaced) — the
 * reference's withRebind (spec D.7). Never after anything was sent and answered otherwise,
 * and never for cancel-execution, healthz or wait_ready. A raw connection
 * (nz_agent_client_open) rebinds on a dial failure only: its caller reads the answer.
 *
 * A client is not thread-safe: use it from one thread at a time. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-lite-endpoint.h"
#include "nz-transport.h"

G_BEGIN_DECLS

/* The client tier's own error domain: only what NZ_ERROR cannot say. */
#define NZ_AGENT_ERROR (nz_agent_error_quark ())
GQuark nz_agent_error_quark (void);

typedef enum
{
  NZ_AGENT_ERROR_DIAL_FAILED, /* connect (or the vsock handshake) failed; nothing was sent */
  /* A cancellation the agent could not confirm (the reference's
   * RemoteCancellationUnknownError, spec D.2): whatever ran may still run, so the sandbox
   * must be retired (nz_backend_retire). */
  NZ_AGENT_ERROR_CANCEL_UNCONFIRMED,
  /* A long-lived stream's peer sent nothing, not even a heartbeat, for three agreed beats
   * (spec D.2.11): it is treated as gone, and asking it again would only hang again. */
  NZ_AGENT_ERROR_PEER_GONE,
  /* The agent answered exactly `unauthorized` to the first frame: the token is not its own
   * (the reference's KubernetesAgentUnauthorizedError, spec D.7). Only raised by a client
   * that can rebind (a transport with a rebind hook); nothing of the request ran. */
  NZ_AGENT_ERROR_UNAUTHORIZED,
} NzAgentErrorCode;

/* The only protocol version the agent speaks and we admit (spec A.9). */
#define NZ_AGENT_PROTOCOL_VERSION 2
/* Largest frame we accept from an agent (spec D.2.2 GUEST_FRAME_LIMIT_BYTES). */
#define NZ_AGENT_REPLY_FRAME_LIMIT (256u * 1024 * 1024)
/* Largest first frame on a TCP endpoint: the agent's pre-auth cap (spec D.2.2). */
#define NZ_AGENT_TCP_PREAUTH_FRAME_LIMIT (8u * 1024 * 1024)

/* Parses one reply frame's payload (a reply, a stream frame, a worker's JSON body) as an
 * untrusted object: nested deeper than nz-json's bound (json_too_deep), not one object, or not JSON
 * is NZ_ERROR_PROTOCOL. Returns a new reference. Every client read goes through here (and the
 * client-reply fuzzer drives it). */
JsonObject *nz_agent_reply_parse (const char *data, gsize len, GError **error);
/* A reply's byte count or offset: TRUE and *@out set only for a JSON number that is a safe
 * integer in [0, 2^53] (a hostile 1e300 or -1 must not reach a cast). */
gboolean nz_agent_reply_count (JsonObject *obj, const char *member, guint64 *out);
/* The NzError code for an agent's error string, so every tool reports one refusal alike:
 * ENOENT not_found; the jail's escapes, *_refused, EACCES, EPERM permission_denied;
 * invalid_* and missing_* invalid_args; anything else (or NULL) failed. */
int nz_agent_error_class (const char *agent_error);

/* An endpoint, as lib/lite parses it for both namzu-exec programs (nz-lite-endpoint.h):
 * "unix:/abs/path", "tcp:HOST:PORT" ("tcp:[::1]:PORT" for IPv6), "vsock:/abs/uds#PORT" (spec
 * D.2.1) or "http://HOST:PORT" (a namzu-worker: healthz is its unauthenticated GET /healthz,
 * every other op goes over GET /v1/agent upgraded to namzu-agent/2 with the token as a bearer
 * header, nz-worker-http.h). */
typedef NzLiteEndpoint NzAgentEndpoint;

NzAgentEndpoint *nz_agent_endpoint_parse (const char *endpoint, GError **error);
void nz_agent_endpoint_free (NzAgentEndpoint *ep);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentEndpoint, nz_agent_endpoint_free)
/* "unix:<path>" / "tcp:<host>:<port>" / "vsock:<uds>#<port>" / "http://<host>:<port>", for
 * messages; never carries the token. */
char *nz_agent_endpoint_describe (const NzAgentEndpoint *ep);

typedef struct _NzAgentClient NzAgentClient;

/* @endpoint as for nz_agent_endpoint_parse(); @token may be NULL (then no `token` member is
 * sent). Never returns NULL: an unparsable endpoint is reported by the first call. */
NzAgentClient *nz_agent_client_new (const char *endpoint, const char *token);
/* A client for @t, what a backend's open_transport returned: the way tools reach a sandbox. A
 * TLS client credential is refused (UNSUPPORTED) until the tier that needs it brings its
 * GnuTLS session: never dialled without the credential it names. */
NzAgentClient *nz_agent_client_new_for (const NzTransport *t, GError **error);
void nz_agent_client_free (NzAgentClient *c);
/* For tests and fuzzers: a client for @endpoint (its kind picks the wire: an http:// one reads
 * a worker's HTTP answer first) whose connections dial nothing; the i-th one reads
 * @answers[i] (the last one repeats) as the peer's bytes, then end of stream. Each answer
 * must fit a socket buffer (4 MiB). */
NzAgentClient *nz_agent_client_new_replay (const char *endpoint, GBytes *const *answers,
                                           guint n_answers);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentClient, nz_agent_client_free)

/* Redial a refused/missing socket (or an unanswered vsock CONNECT) every 100 ms for up to
 * @budget_ms before each request fails (spec D.2.3: the window while an agent re-listens
 * after a snapshot resume). Default 0: fail at once, so a CLI reports a dead sandbox
 * immediately. */
void nz_agent_client_set_dial_retry (NzAgentClient *c, guint budget_ms);

/* "unix:<path>" or "tcp:<host>:<port>" (the raw string if it did not parse). */
const char *nz_agent_client_describe (NzAgentClient *c);

/* One reply op on a fresh connection: sends {op, token?, body?}, expects exactly one frame and
 * then the peer's close (within 1 s). Returns the reply object (new reference) whatever its
 * `ok`; transport and framing failures are errors. @body may be NULL. */
JsonObject *nz_agent_client_call (NzAgentClient *c, const char *op, JsonObject *body,
                                  GCancellable *cancellable, GError **error);

/* healthz with protocol admission (spec A.9): `ok` must be true and `protocolVersion` exactly
 * 2. Returns the reply (new reference). A mismatch is NZ_ERROR_PROTOCOL; a fenced agent is
 * NZ_ERROR_FAILED "agent is retiring". */
JsonObject *nz_agent_client_healthz (NzAgentClient *c, GCancellable *cancellable, GError **error);

/* Features advertised by the last successful healthz (NULL-terminated, owned by @c), or NULL
 * when none was seen yet. */
const char *const *nz_agent_client_get_features (NzAgentClient *c);
gboolean nz_agent_client_has_feature (NzAgentClient *c, const char *feature);
/* The guestBootId of the last reserve-execution ok reply (spec A.10: a reserve reply carries
 * it, healthz does not), or NULL; owned by @c. Untrusted: at most 64 characters are kept. */
const char *nz_agent_client_get_guest_boot_id (NzAgentClient *c);

/* Polls healthz until admitted or @timeout_ms passes. A refused/missing socket is retried every
 * 15 ms; a protocol mismatch or a retiring agent fails at once (neither heals by waiting). The
 * timeout error carries the last reason. */
gboolean nz_agent_client_wait_ready (NzAgentClient *c, guint timeout_ms, GError **error);

/* Called for every frame of a stream before its terminator. Return FALSE (and set @error) to
 * abort the stream. @frame is borrowed. */
typedef gboolean (*NzAgentFrameFunc) (JsonObject *frame, gpointer user_data, GError **error);

/* A stream op (attach-execution, read-file-stream, ...): frames to @on_frame until the
 * terminator, then the peer must close within 1 s. @observation_ms bounds the whole stream
 * (0 = no bound). */
gboolean nz_agent_client_stream (NzAgentClient *c, const char *op, JsonObject *body,
                                 guint64 observation_ms, NzAgentFrameFunc on_frame,
                                 gpointer user_data, GCancellable *cancellable, GError **error);
/* The same, for a stream whose wire has no heartbeat (attach-execution): after @probe_ms of
 * silence (0: never) a healthz on a new connection must answer within @probe_ms, else the
 * stream ends with NZ_AGENT_ERROR_PEER_GONE. */
gboolean nz_agent_client_stream_probed (NzAgentClient *c, const char *op, JsonObject *body,
                                        guint64 observation_ms, gint64 probe_ms,
                                        NzAgentFrameFunc on_frame, gpointer user_data,
                                        GCancellable *cancellable, GError **error);

/* A duplex stream op (terminal, attach-session, tcp-connect): dials, sends {op, token?, body?}
 * and hands the open connection over (new reference); the caller reads and writes frames
 * itself (nz-agent-sessions.h). */
GSocketConnection *nz_agent_client_open (NzAgentClient *c, const char *op, JsonObject *body,
                                         GCancellable *cancellable, GError **error);

/* The raw execute stream (spec A.6.3, D.2.4): @body is sent as is. Every frame before the
 * terminal one (the deltas) goes to @on_frame (may be NULL); the terminal `result` frame is
 * returned (new reference). An `error` frame becomes an error
 * (G_SPAWN_ERROR for spawn ENOENT/EACCES, else NZ_ERROR with the agent's string). The stream
 * is observed for timeoutMs + 10 s. A socket closed before the terminator is "socket closed
 * before exec stream terminator". */
JsonObject *nz_agent_client_execute (NzAgentClient *c, JsonObject *body, NzAgentFrameFunc on_frame,
                                     gpointer user_data, GCancellable *cancellable, GError **error);

typedef enum
{
  NZ_EXEC_STDOUT = 1,
  NZ_EXEC_STDERR = 2,
} NzExecStream;

/* Output of a running command, as the agent decoded it (UTF-8 text). Called on the thread that
 * runs nz_agent_client_exec(). */
typedef void (*NzExecOutputFunc) (NzExecStream stream, const char *data, gsize len,
                                  gpointer user_data);

/* reserve-execution (no body: the agent mints the id), then execute @body with that
 * executionId (@body must not carry one), deltas to @on_output. Returns the `result` frame (new
 * reference; `exitCode`, `timedOut`, `signal`?, `durationMs`, ...). @out_execution_id (may be NULL)
 * receives the id as soon as it is known, even on failure.
 *
 * When @cancellable fires, the remote execution is cancelled by id (cancel-execution, retried
 * for up to ~8 s, each attempt bounded at 2 s) and the call returns G_IO_ERROR_CANCELLED once
 * the agent confirmed it; NZ_AGENT_ERROR_CANCEL_UNCONFIRMED if the agent could not confirm
 * (the sandbox must then be retired). */
JsonObject *nz_agent_client_exec (NzAgentClient *c, JsonObject *body, NzExecOutputFunc on_output,
                                  gpointer user_data, char **out_execution_id,
                                  GCancellable *cancellable, GError **error);

/* cancel-execution {executionId}. Returns the terminal payload ({ok:true, state, started,
 * result?}, new reference) once the agent confirmed; a refusal (unknown_execution,
 * cancellation_unconfirmed, ...) is an error carrying the agent's string and message. */
JsonObject *nz_agent_client_cancel (NzAgentClient *c, const char *execution_id,
                                    GCancellable *cancellable, GError **error);

G_END_DECLS
