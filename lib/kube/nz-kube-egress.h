/* nz-kube-egress.h: proof that the cluster enforces the egress policy the backend translated
 * (reference-agent D.10.7). The manifests come from lib/egress/nz-egress-k8s.h; this file
 * reads the API (nz-kube-client.h) and judges what it finds. The backend never creates the
 * named policy: an operator applies it, the backend refuses to start sandboxes until it is
 * there and exactly what the translation says. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_EGRESS_ERROR (nz_kube_egress_error_quark ())
GQuark nz_kube_egress_error_quark (void);

typedef enum
{
  NZ_KUBE_EGRESS_ERROR_NOT_APPLIED,       /* KubernetesEgressPolicyNotAppliedError: 404/410 */
  NZ_KUBE_EGRESS_ERROR_MISMATCH,          /* KubernetesEgressPolicyMismatchError */
  NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING, /* KubernetesOwnerUidMissingError */
  NZ_KUBE_EGRESS_ERROR_FENCE_MISSING,     /* KubernetesAdmissionFenceMissingError: 404/410 */
  NZ_KUBE_EGRESS_ERROR_FENCE_UNREADABLE,  /* KubernetesAdmissionFenceUnreadableError: 401/403 */
} NzKubeEgressErrorCode;

/* The API path of @manifest (a NetworkPolicy or CiliumNetworkPolicy from nz-egress-k8s.h):
 * /apis/networking.k8s.io/v1/namespaces/<ns>/networkpolicies/<name> or
 * /apis/cilium.io/v2/namespaces/<ns>/ciliumnetworkpolicies/<name>. NULL for another kind. */
char *nz_kube_egress_policy_path (JsonObject *manifest);

/* The judgement of verifyEgressPolicyApplied on an object already read: FALSE with
 * NZ_KUBE_EGRESS_ERROR_MISMATCH when @actual has `specs`, a selector that is not deep-equal,
 * (core) policyTypes without Egress, an egress that is not deep-equal, or lacks an expected
 * ownerReference (deep-equal). Key order does not matter (isDeepStrictEqual). */
gboolean nz_kube_egress_check_applied (JsonObject *expected, JsonObject *actual, const char *path,
                                       GError **error);

/* verifyEgressPolicyApplied: GET the object @expected names and judge it as above. 404/410 is
 * NZ_KUBE_EGRESS_ERROR_NOT_APPLIED; other API errors pass through as NZ_KUBE_ERROR. The
 * backend calls it once, on the first create, and caches no failure. */
gboolean nz_kube_egress_verify_applied (NzKubeClient *client, JsonObject *expected, GError **error);

/* Whether a Kubernetes LabelSelector (@selector: {matchLabels?, matchExpressions?}, as in a
 * NetworkPolicy's podSelector or a CNP's endpointSelector) selects a pod with @labels.
 * matchExpressions operators In, NotIn, Exists, DoesNotExist; an empty selector selects every
 * pod. A selector this cannot read (unknown operator, a non-string value, a malformed entry)
 * is taken to select the pod, so a policy the union check cannot parse is judged rather than
 * skipped. */
gboolean nz_kube_egress_selector_matches (JsonObject *selector, JsonObject *labels);

/* Whether a CiliumNetworkPolicy's endpointSelector (or a `specs` entry's) selects a pod with
 * @labels in namespace @ns, as Cilium reads label keys: a key may carry a source prefix, and
 * `k8s:app`, `any:app` and `app` all name the pod label `app`; `io.kubernetes.pod.namespace`
 * (with or without a prefix) is @ns. A requirement on another source (`reserved:`,
 * `container:`, ...) or on a label Cilium derives rather than copies from the pod
 * (`io.cilium.*`, `io.kubernetes.*` such as the service account) is taken as met, as is a
 * selector this cannot read (NULL, an unknown member): a policy that might select the pod is
 * judged rather than skipped. */
gboolean nz_kube_egress_endpoint_selector_matches (JsonObject *selector, JsonObject *labels,
                                                   const char *ns);

/* D.10.8 PER_SANDBOX_POLICY_NAME_PREFIX. */
#define NZ_KUBE_EGRESS_PER_SANDBOX_PREFIX "namzu-sbx-"

/* The per-sandbox CiliumNetworkPolicy "namzu-sbx-<owner_uid>" in @namespace_: endpointSelector
 * {<label_key>: owner_name}, ownerReferences [{apiVersion, kind, name, uid}] of the claim
 * (@owner_is_claim: extensions.agents.x-k8s.io/v1beta1 SandboxClaim) or the Sandbox
 * (agents.x-k8s.io/v1beta1 Sandbox), with no blockOwnerDeletion, and the egress of a static
 * policy for @hosts (each checked by nz_egress_k8s_host_check) narrowed by @narrowing
 * (perSandbox.narrowing; NULL: unnarrowed; see nz_egress_k8s_translate_narrowed, its dnsNames
 * namespace defaulting to @namespace_). An empty @owner_uid is
 * NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING. Returns a new object, or NULL with @error. */
JsonObject *nz_kube_egress_per_sandbox_policy (const char *namespace_, const char *label_key,
                                               gboolean owner_is_claim, const char *owner_name,
                                               const char *owner_uid, const char *const *hosts,
                                               const NzEgressK8sNarrowing *narrowing,
                                               GError **error);

G_END_DECLS
