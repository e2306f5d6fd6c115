/* nz-kube-ws.h: microvm:kubernetes workspaces through the tools (spec D.8): a Sandbox
 * namzu-ws-<id> whose disk (its volumeClaimTemplates' PVCs) outlives its pods. namzu-create
 * --workspace ID creates one or adopts it (409), namzu-suspend stops its pod and keeps the
 * disk, namzu-resume wakes it on a new pod (new uid, so a new token), namzu-destroy deletes it
 * and its disk with the fenced DELETE. No lease: a workspace has no shutdownTime. A handle that
 * holds an epoch (--epoch) fences every write with it. */
#pragma once

#include "nz-backend.h"

G_BEGIN_DECLS

/* Whether the handle is a workspace's (and not a task sandbox's). */
gboolean nz_kube_ws_is (NzHandle *h);
/* Refuses, before any I/O, what a workspace cannot take (a warm pool, --ttl). */
gboolean nz_kube_ws_check (const NzCreateOptions *opts, GError **error);
NzHandle *nz_kube_ws_create (const NzCreateOptions *opts, GError **error);
/* The fenced DELETE of the Sandbox (its pod, service and PVCs go with it), then the handle. */
gboolean nz_kube_ws_destroy (NzHandle *h, GError **error);
NzSandboxStatus nz_kube_ws_status (NzHandle *h);
/* Every tool call: refused while suspended (without dialling), else TRUE. */
gboolean nz_kube_ws_check_open (NzHandle *h, GError **error);
/* The rebind's identity rule (spec D.8.10): another Sandbox uid, or none, is terminal. */
gboolean nz_kube_ws_check_identity (NzHandle *h, GError **error);
/* Before a rebind (spec D.8.10, D.8.12): the identity check, the handle not suspended, and the
 * Sandbox not suspended by another holder either (then the handle records it and the call is
 * refused, naming namzu-resume). */
gboolean nz_kube_ws_check_rebind (NzHandle *h, GError **error);
gboolean nz_kube_ws_suspend (NzHandle *h, const NzSuspendOptions *o, JsonObject *report,
                             GError **error);
gboolean nz_kube_ws_resume (NzHandle *h, gint64 epoch, JsonObject *report, GError **error);

G_END_DECLS
