/* nz-kube-persandbox.h: per-sandbox egress on the cluster (reference-agent D.10.8): the
 * admission fence read before every write, and the write of one sandbox's CiliumNetworkPolicy
 * namzu-sbx-<owner uid> (nz_kube_egress_per_sandbox_policy builds it) with its read-back.
 *
 * The host may only write these objects because a ValidatingAdmissionPolicy and its binding
 * (deploy/k8s/validatingadmissionpolicy-cilium.yaml, spec D.10.9) bound what it may write:
 * one sandbox's pods, DNS plus named hosts, owned by that sandbox. Without them a host
 * credential that can write CNPs could open any pod's egress, so nothing is written unless
 * both are there. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"
#include "nz-kube-egress.h"

G_BEGIN_DECLS

/* spec D.5: the per-sandbox fence's API group and resources (cluster-scoped). */
#define NZ_KUBE_ADMISSION_API_PREFIX "/apis/admissionregistration.k8s.io/v1"
#define NZ_KUBE_ADMISSION_POLICIES "validatingadmissionpolicies"
#define NZ_KUBE_ADMISSION_BINDINGS "validatingadmissionpolicybindings"

/* The admission fence (spec D.10.8): GET the ValidatingAdmissionPolicy @policy_name and the
 * ValidatingAdmissionPolicyBinding @binding_name. 401/403 is
 * NZ_KUBE_EGRESS_ERROR_FENCE_UNREADABLE (KubernetesAdmissionFenceUnreadableError(kind, name,
 * path, cause)); 404/410 NZ_KUBE_EGRESS_ERROR_FENCE_MISSING
 * (KubernetesAdmissionFenceMissingError(kind, name, path)); other API errors pass through as
 * NZ_KUBE_ERROR. A success is remembered for the rest of the process (per API server and
 * names); a failure never is, so the next write reads again. */
gboolean nz_kube_admission_fence_check (NzKubeClient *client, const char *policy_name,
                                        const char *binding_name, GError **error);
/* Forgets every fence this process proved (tests). */
void nz_kube_admission_fence_forget (void);

/* What a per-sandbox write needs: where, the label key, the fence's names, and the owner (the
 * claim or Sandbox the backend created: its name is the selector's value, its uid the policy's
 * name). All borrowed. */
typedef struct
{
  const char *namespace_;
  const char *label_key;
  const char *admission_policy_name;
  const char *admission_binding_name;
  gboolean owner_is_claim; /* SandboxClaim (extensions.agents.x-k8s.io), else Sandbox */
  const char *owner_name;
  const char *owner_uid;
  const NzEgressK8sNarrowing *narrowing; /* perSandbox.narrowing, or NULL */
} NzKubePerSandbox;

/* setNetworkPolicy's cluster half (spec D.10.8), for hosts already lower-cased and checked
 * (NULL-terminated): the policy is built first (a missing owner uid is
 * NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING; one that cannot name an object is
 * NZ_KUBE_ERROR_PROTOCOL), then the fence is read; then no hosts DELETEs namzu-sbx-<uid> (404/410
 * is done), and hosts POST it, a 409 PATCHes it (merge patch) over the existing one, and the object
 * is read back and must be what was written: selector, egress and the whole spec, and exactly the
 * one ownerReference (else NZ_KUBE_EGRESS_ERROR_MISMATCH). *@changed: the cluster's object was
 * created, deleted or differed before the write. */
gboolean nz_kube_per_sandbox_set (NzKubeClient *client, const NzKubePerSandbox *ps,
                                  const char *const *hosts, gboolean *changed, GError **error);

/* The read-back judgement of nz_kube_per_sandbox_set on an object already read (@path names it
 * in the message): nz_kube_egress_check_applied, then the whole spec deep-equal (no `ingress`,
 * `egressDeny` or other member the write did not send) and ownerReferences exactly @expected's
 * (one more owner would keep the object alive past its sandbox). */
gboolean nz_kube_per_sandbox_check (JsonObject *expected, JsonObject *actual, const char *path,
                                    GError **error);

G_END_DECLS
