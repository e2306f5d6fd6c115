/* nz-worker-preauth.h: namzu-worker's pre-authentication bounds, the agent's (spec A.4.2)
 * mirrored on HTTP: a connection that has not yet sent the headers of an authorised request
 * is a member of a pool whose oldest is evicted past NAMZU_SANDBOX_MAX_PREAUTH_CONNECTIONS,
 * and must send them within NAMZU_SANDBOX_PREAUTH_DEADLINE_MS of accept (however slowly it
 * trickles: nothing resets it), and must not stay silent for NAMZU_SANDBOX_PREAUTH_IDLE_TIMEOUT_MS
 * (every byte that arrives resets it). Dropping is a shutdown: libsoup sees the end and lets
 * the connection go. The idle clock is the kernel's (TCP_INFO's tcpi_last_data_recv), so
 * nothing has to sit between libsoup and the socket; where a stack does not report it the
 * deadline alone bounds a silent connection. */
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
