/* nz-kube-task-egress.h: per-sandbox egress of a microvm:kubernetes task sandbox (spec
 * D.10.8). With backend.egress.perSandbox the create labels the pod <labelKey>=<the claim's or
 * Sandbox's name> and records what later writes need in the private handle (never the public
 * one); namzu-egress set then writes the sandbox's own CiliumNetworkPolicy
 * (lib/kube/nz-kube-persandbox.h) behind the admission fence. Without perSandbox, and on a
 * workspace, there is no setNetworkPolicy. */
#pragma once

#include "nz-backend.h"
#include "nz-egress-k8s.h"

G_BEGIN_DECLS

/* The pod labels @egress asks for on the task sandbox whose object (claim or Sandbox) is
 * @object_name: with perSandbox <labelKey>=@object_name, and the profile label, composed
 * (composeAdditionalPodLabels: a key both would set differently is refused,
 * KubernetesEgressProfileConfigError). Returns a new object, empty when neither applies, or
 * NULL with @error. */
JsonObject *nz_kube_task_egress_pod_labels (const NzEgressK8sConfig *egress,
                                            const char *object_name, GError **error);

/* With perSandbox: records in h->priv "perSandbox" {labelKey, admissionPolicyName,
 * admissionPolicyBindingName, narrowing?} (the narrowing as @raw_egress, backend.egress,
 * wrote it; parsed again by each set), which nz_kube_backend_set_network_policy reads with
 * the owner's objectKind, objectApiVersion, object and objectUid. Without it, nothing. */
void nz_kube_task_egress_record (const NzEgressK8sConfig *egress, JsonObject *raw_egress,
                                 NzHandle *h);

/* Whether @h has setNetworkPolicy: a task sandbox created with perSandbox. */
gboolean nz_kube_task_egress_settable (NzHandle *h);

/* The set_network_policy hook (spec D.10.8 setNetworkPolicy({allowedHosts})): every host
 * lower-cased and checked (KubernetesNetworkPolicyHostError) before any request; then, one
 * change at a time per sandbox (the egress lock, the handle re-read under it) and with the
 * lease renewed, the sandbox's policy is written, or deleted for an empty list. A sandbox
 * created without perSandbox, and a workspace, are refused (UNSUPPORTED). */
gboolean nz_kube_backend_set_network_policy (NzHandle *h, const char *const *hosts,
                                             gboolean *changed, GError **error);

G_END_DECLS
