/* nz-worker-http.h: the little HTTP/1.1 the client needs to reach a namzu-worker, on plain GIO
 * (no HTTP library: a tool that runs one command should not map one): the worker's
 * unauthenticated GET /healthz probe (spec D.3), and GET /v1/agent upgraded to namzu-agent/2,
 * after which the connection speaks the agent's own framing (docs/worker.md).
 *
 * Both work on a connected, non-blocking GSocket and bound every wait by @deadline (monotonic
 * µs, G_MAXINT64 for none). Errors never carry the token. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "nz-lite-upgrade.h"

G_BEGIN_DECLS

/* The protocol named in the Upgrade header, and the upgrade route (nz-lite-upgrade.h). */
#define NZ_WORKER_UPGRADE_PROTOCOL NZ_LITE_UPGRADE_PROTOCOL
#define NZ_WORKER_UPGRADE_PATH NZ_LITE_UPGRADE_PATH

/* Waits for @cond on @sock until @deadline (monotonic µs, G_MAXINT64 for none); FALSE with
 * G_IO_ERROR_TIMED_OUT once it passed. Shared with nz-agent-client.c. */
gboolean nz_socket_wait_until (GSocket *sock, GIOCondition cond, gint64 deadline,
                               GCancellable *cancellable, GError **error);

/* TRUE for "http://..." (a namzu-worker endpoint). */
gboolean nz_worker_endpoint_is_http (const char *endpoint);

/* GET /v1/agent with Connection: Upgrade, Upgrade: namzu-agent/2 and, when @token is set,
 * `Authorization: Bearer <token>` (nz_lite_upgrade_request; @host and @port make the Host
 * header). TRUE on 101; bytes that arrived after the response head are appended to @rest (they
 * already belong to the agent). @what names the op in errors, which nz_lite_upgrade_words
 * words, the same as namzu-exec's front does:
 *   401 -> NZ_ERROR_PERMISSION_DENIED "<what> failed: HTTP 401 <body> (<hint>)";
 *   503 worker_retiring -> NZ_ERROR_FAILED (the worker fenced itself: recreate the sandbox);
 *   404 -> NZ_ERROR_UNSUPPORTED (a worker without the upgrade route);
 *   a 101 to another protocol, a head that is not HTTP or too large -> NZ_ERROR_PROTOCOL;
 *   anything else -> NZ_ERROR_FAILED "<what> failed: HTTP <status> <body>". */
gboolean nz_worker_http_upgrade (GSocket *sock, const char *host, guint port, const char *token,
                                 const char *what, gint64 deadline, GByteArray *rest,
                                 GCancellable *cancellable, GError **error);

/* GET /healthz, no token (readiness carries no secret, spec D.3). Returns the JSON object of
 * a 2xx reply (new reference). A non-2xx is NZ_ERROR_FAILED "healthz HTTP <status> <body>"
 * (503 worker_retiring, a proxy's 502: "not ready" to a readiness loop); a body that is not
 * a JSON object is NZ_ERROR_PROTOCOL. */
JsonObject *nz_worker_http_healthz (GSocket *sock, const char *authority, gint64 deadline,
                                    GCancellable *cancellable, GError **error);

G_END_DECLS
