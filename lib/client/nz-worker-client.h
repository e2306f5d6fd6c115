/* nz-worker-client.h: the host side of the namzu-worker HTTP API (spec D.1), shaped so that
 * nz-agent-client can route its op-level calls over it: an endpoint "http://HOST:PORT" makes
 * nz_agent_client_new() drive a worker with the same API, so tools need no change.
 *
 * Blocking, libsoup 3 client session (created on first use, in the calling thread); every
 * request carries `Authorization: Bearer <token>` (except the /healthz probe, which the worker
 * never gates). Errors never carry the token. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* TRUE for "http://..." (the worker transport). */
gboolean nz_worker_endpoint_is_http (const char *endpoint);

typedef struct _NzWorkerClient NzWorkerClient;

/* @base_url: "http://HOST:PORT" (a trailing '/' is ignored); @token may be NULL. */
NzWorkerClient *nz_worker_client_new (const char *base_url, const char *token);
void nz_worker_client_free (NzWorkerClient *wc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzWorkerClient, nz_worker_client_free)

/* One agent reply op over its worker route: healthz -> GET /healthz, reserve-execution ->
 * POST /executions/reserve, cancel-execution -> POST /cancel, read-file -> POST /read-file,
 * write-file -> POST /write-file. Returns the reply object in the agent's shape: a worker
 * refusal ({"error":...} with a 4xx/5xx) comes back with "ok":false added, like an agent
 * refusal. Every other reply op, and the agent-only variants of the file ops (ranged reads,
 * parts writes), go over the additive route POST /v1/agent/<op> and return the agent's reply
 * frame. Errors: a 401 is NZ_ERROR_PERMISSION_DENIED; a non-2xx /healthz is NZ_ERROR_FAILED
 * (not ready yet); a worker without the additive route gives NZ_ERROR_UNSUPPORTED. */
JsonObject *nz_worker_client_call (NzWorkerClient *wc, const char *op, JsonObject *body,
                                   GCancellable *cancellable, GError **error);

/* One NDJSON event of POST /execute, or, when the worker refused before the stream (4xx),
 * one {"ok":false,"error":...,"message"?} object. Return FALSE (with @error) to stop. */
typedef gboolean (*NzWorkerEventFunc) (JsonObject *event, gpointer user_data, GError **error);

/* POST /execute with @body as is (POST /v1/agent/execute when it asks for retainOutput); each
 * line to @func until the worker ends the response. A malformed line is NZ_ERROR_PROTOCOL
 * ("worker emitted malformed NDJSON: ..."). */
gboolean nz_worker_client_execute (NzWorkerClient *wc, JsonObject *body, NzWorkerEventFunc func,
                                   gpointer user_data, GCancellable *cancellable,
                                   GError **error);

/* A one-way agent stream op (attach-execution, read-file-stream, ...) over the additive route
 * POST /v1/agent/<op>: each agent frame to @func; the end of the response is the terminator. */
gboolean nz_worker_client_agent_stream (NzWorkerClient *wc, const char *op, JsonObject *body,
                                        NzWorkerEventFunc func, gpointer user_data,
                                        GCancellable *cancellable, GError **error);

G_END_DECLS
