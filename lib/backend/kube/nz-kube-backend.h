/* nz-kube-backend.h: microvm:kubernetes (spec D.4-D.7): a task sandbox is a pod of the
 * kubernetes-sigs/agent-sandbox controller, claimed from a warm pool (SandboxClaim) or created
 * directly (Sandbox), reached over TCP at its agent with the pod's uid as the bearer token.
 *
 * Leases (spec D.6.2) without a long-lived host process: the claim's shutdownTime is set to
 * now + claimTtlSeconds at create, and every tool call that opens the sandbox's transport
 * renews it once half the lease has passed (jittered 10%). A sandbox nobody touches for
 * claimTtlSeconds is deleted by the cluster; a tool call after that is told so (NOT_FOUND,
 * "lease ran out") and never revives it. */
#pragma once

#include "nz-backend.h"
#include "nz-kube-options.h"

G_BEGIN_DECLS

gboolean nz_kube_backend_check (const NzCreateOptions *opts, GError **error);
NzHandle *nz_kube_backend_create (const NzCreateOptions *opts, GError **error);
gboolean nz_kube_backend_destroy (NzHandle *h, GError **error);
NzSandboxStatus nz_kube_backend_status (NzHandle *h, guint timeout_ms);
void nz_kube_backend_describe (NzHandle *h, JsonObject *pub);
/* The bearer transport, after renewing the lease when it is due. */
NzTransport *nz_kube_backend_open_transport (NzHandle *h, GError **error);
/* Re-reads the bound pod (spec D.7 rebind): its uid is the new token; under agentAddress
 * 'pod-ip' its IP the new address. Saves the handle. */
NzTransport *nz_kube_backend_rebind (NzHandle *h, GError **error);

G_END_DECLS
