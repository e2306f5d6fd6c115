/* nz-kube-internal.h: what the microvm:kubernetes backend's files share (task sandboxes in
 * nz-kube-backend.c, workspaces in nz-kube-ws.c); not an interface of the backend. */
#pragma once

#include "nz-backend.h"
#include "nz-kube-client.h"
#include "nz-kube-options.h"

G_BEGIN_DECLS

/* spec D.6.1: the privilege probe's own bound, under the readiness deadline. */
#define NZ_KUBE_PROBE_TIMEOUT_MS_MAX 15000

/* A host name or IP literal: what may go into an endpoint. */
gboolean nz_kube_address_is_sane (const char *address);
/* "tcp:HOST:PORT" (IPv6 in brackets). */
char *nz_kube_agent_endpoint (const char *host, guint port);
/* The API client of an access spec (nz_kube_access_spec); @expect_server (may be NULL) refuses
 * an access that now names another API server. */
NzKubeClient *nz_kube_client_for (JsonObject *access_spec, const char *expect_server,
                                  guint timeout_ms, GError **error);
/* The API client of the access the handle recorded, refusing another API server. */
NzKubeClient *nz_kube_handle_client (NzHandle *h, guint timeout_ms, GError **error);
/* A number member of the private handle (0 when absent). */
gint64 nz_kube_priv_int (JsonObject *priv, const char *member);
/* apiRequestTimeoutMs as the create recorded it (0: the client's default). */
guint nz_kube_handle_api_timeout (NzHandle *h);
/* The start of every create: the API client of @access_spec, the namespace (*@ns, borrowed
 * from @opts or the access), and the handle's id and the private members every sandbox and
 * workspace records (access, server, namespace, objectKind @kind, object @object, template,
 * agentAddress/Port, apiRequestTimeoutMs, streamHeartbeatMs). */
NzKubeClient *nz_kube_create_begin (const NzCreateOptions *opts, NzHandle *h,
                                    JsonObject *access_spec, const char *kind, const char *object,
                                    const char **ns, GError **error);
/* spec D.6.2 on a task sandbox: renews the lease once half of it has passed (saving the
 * handle); a lease that ran out, or an object the cluster no longer has, is NOT_FOUND. A failed
 * renewal is only warned about: the next call retries. */
gboolean nz_kube_lease_renew (NzHandle *h, GError **error);
/* The agent at h->endpoint with h->token answers healthz within @ready_ms, passes the
 * privilege probe (bounded by @probe_ms); its features and guestBootId go into h->priv.
 * @label names the object in errors. */
gboolean nz_kube_agent_up (NzHandle *h, guint ready_ms, guint probe_ms, const char *label,
                           GError **error);

G_END_DECLS
