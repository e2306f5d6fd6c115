/* nz-worker-server.h: the namzu-worker HTTP server (spec C.3-C.6): a libsoup 3 server fed by
 * our own GSocketService (soup_server_listen leaks per connection on Debian 12), the auth gate,
 * the reference routes and NDJSON execute stream, all over the shared guest engine. */
#pragma once

#include <glib.h>

#include "nz-guest.h"
#include "nz-worker-config.h"

G_BEGIN_DECLS

typedef struct _NzWorkerServer NzWorkerServer;

/* The worker wants its process to end: idle (@exit_code 0, with the log line) or poisoned
 * (@exit_code 1, after the poison delay). @exit_code -1: only log @message (the poisoning
 * itself, logged when it happens). */
typedef void (*NzWorkerExitFunc) (NzWorkerServer *server, int exit_code, const char *message,
                                  gpointer user_data);

/* @config and @guest are borrowed and must outlive the server. The server installs itself as
 * @guest's retire func: an engine that fences itself poisons the worker. */
NzWorkerServer *nz_worker_server_new (const NzWorkerConfig *config, NzGuest *guest,
                                      NzWorkerExitFunc exit_func, gpointer user_data);
void nz_worker_server_free (NzWorkerServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzWorkerServer, nz_worker_server_free)

/* Binds NAMZU_SANDBOX_BIND:NAMZU_SANDBOX_PORT and starts serving on the thread-default main
 * context; arms the idle timer. The error is "could not listen on <bind>:<port>: <why>". */
gboolean nz_worker_server_listen (NzWorkerServer *server, GError **error);

/* The bound port (after listen). */
guint16 nz_worker_server_get_port (NzWorkerServer *server);

/* Stops accepting connections. Idempotent. */
void nz_worker_server_stop (NzWorkerServer *server);

G_END_DECLS
