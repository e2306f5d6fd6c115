/* nz-kube-egress.h: proof that the cluster enforces the egress policy the backend translated
 * (reference-agent D.10.7). The manifests come from lib/egress/nz-egress-k8s.h; this file
 * reads the API (nz-kube-client.h) and judges what it finds. The backend never creates the
 * named policy: an operator applies it, the backend refuses to start sandboxes until it is
 * there and exactly what the translation says. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_EGRESS_ERROR (nz_kube_egress_error_quark ())
GQuark nz_kube_egress_error_quark (void);

typedef enum
{
  NZ_KUBE_EGRESS_ERROR_NOT_APPLIED, /* KubernetesEgressPolicyNotAppliedError: 404/410 */
  NZ_KUBE_EGRESS_ERROR_MISMATCH,    /* KubernetesEgressPolicyMismatchError */
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

G_END_DECLS
