/* nz-worker-preauth.h: namzu-worker's pre-authentication bounds, the agent's (spec A.4.2)
 * mirrored on HTTP: a connection that has not yet sent the headers of an authorised request
 * is a member of a pool whose oldest is evicted past NAMZU_SANDBOX_MAX_PREAUTH_CONNECTIONS,
 * and must send them within NAMZU_SANDBOX_PREAUTH_DEADLINE_MS of accept (however slowly it
 * trickles: nothing resets it). Dropping is a shutdown: libsoup sees the end and lets the
 * connection go. No separate idle timeout: GSocket's timeout sticks to the read sources
 * libsoup already holds, so it could not be lifted from an authenticated keep-alive
 * connection; the deadline bounds a silent connection as well. */
#pragma once

#include <gio/gio.h>

#include "nz-preauth.h"
#include "nz-worker-config.h"

G_BEGIN_DECLS

typedef struct _NzWorkerPreauth NzWorkerPreauth;

NzWorkerPreauth *nz_worker_preauth_new (const NzWorkerConfig *config);
/* Frees it; members still open are detached. */
void nz_worker_preauth_free (NzWorkerPreauth *preauth);

/* A connection just accepted from @peer (before libsoup gets it). */
void nz_worker_preauth_start (NzWorkerPreauth *preauth, const NzWorkerConfig *config,
                              GSocketConnection *connection, GSocketAddress *peer);
/* The connection from @peer sent an authorised request's headers: no bound applies any more. */
void nz_worker_preauth_lift (NzWorkerPreauth *preauth, GSocketAddress *peer);

G_END_DECLS
