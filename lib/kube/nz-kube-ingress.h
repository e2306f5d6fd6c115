/* nz-kube-ingress.h: the ingress verification of spec D.9 — before a create, the NetworkPolicies
 * (and CiliumNetworkPolicies, under the cilium engine) of the namespace must prove that the
 * agent port of the sandbox's pods is reachable only from the host's pods (label
 * namzu.ai/component=host), as deploy/k8s/networkpolicy.yaml's baseline does. The token and the
 * agent's bounds are defence in depth behind that rule, not instead of it. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_HOST_COMPONENT_LABEL_KEY "namzu.ai/component"
#define NZ_KUBE_HOST_COMPONENT_LABEL_VALUE "host"

#define NZ_KUBE_INGRESS_ERROR (nz_kube_ingress_error_quark ())
GQuark nz_kube_ingress_error_quark (void);

typedef enum
{
  NZ_KUBE_INGRESS_ERROR_NOT_ISOLATED, /* no policy with Ingress selects the pods */
  NZ_KUBE_INGRESS_ERROR_TOO_WIDE,     /* a rule lets another peer reach the agent port */
} NzKubeIngressErrorCode;

/* The judgement on @policies (the items of a NetworkPolicyList) and @cilium_policies (of a
 * CiliumNetworkPolicyList, or NULL under the core engine) for pods with @pod_labels in namespace
 * @ns and the agent on TCP @port. TRUE when at least one policy isolates the pods and every rule
 * that could admit others to @port is narrow enough:
 * - a NetworkPolicy whose podSelector selects the pods isolates them when Ingress is among its
 *   policyTypes (absent policyTypes count as Ingress, as Kubernetes defaults them); each of its
 *   ingress rules that reaches @port (no ports, or a TCP entry naming @port, a range over it, a
 *   named port or no port) must admit only podSelector peers that require
 *   namzu.ai/component=host, with no namespaceSelector and no ipBlock;
 * - a CiliumNetworkPolicy rule (`spec`, each `specs` entry) whose endpointSelector selects the
 *   pods (as nz_kube_egress_endpoint_selector_matches reads it) isolates them when it has
 *   `ingress` (and enableDefaultDeny.ingress is not false); each of its ingress rules that
 *   reaches @port (no toPorts, or a TCP/ANY port naming @port, a range over it, a name or "0")
 *   must admit only fromEndpoints that require namzu.ai/component=host (key with or without
 *   k8s:/any:) and name no namespace but @ns. Any other member (fromCIDR, fromCIDRSet,
 *   fromEntities, fromRequires, fromGroups, fromNodes, icmps, one this check does not know) is
 *   too wide; `{}` admits nothing; ingressDeny never widens.
 * Else NOT_ISOLATED or TOO_WIDE, naming the policy. */
gboolean nz_kube_ingress_check (JsonArray *policies, JsonArray *cilium_policies, const char *ns,
                                JsonObject *pod_labels, guint port, GError **error);

/* LIST the namespace's NetworkPolicies (and, when @engine is cilium, CiliumNetworkPolicies),
 * then nz_kube_ingress_check. */
gboolean nz_kube_ingress_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels,
                                 guint port, NzEgressK8sEngine engine, GError **error);

G_END_DECLS
