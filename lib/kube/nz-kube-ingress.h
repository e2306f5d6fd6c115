/* nz-kube-ingress.h: the ingress verification of spec D.9 — before a create, the NetworkPolicies
 * of the namespace must prove that the agent port of the sandbox's pods is reachable only from
 * the host's pods (label namzu.ai/component=host), as deploy/k8s/networkpolicy.yaml's baseline
 * does. The token and the agent's bounds are defence in depth behind that rule, not instead of
 * it. */
#pragma once

#include <json-glib/json-glib.h>

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

/* The judgement on @policies (the items of a NetworkPolicyList) for pods with @pod_labels and
 * the agent on TCP @port: TRUE when at least one policy that selects the pods has Ingress among
 * its policyTypes (absent policyTypes count as Ingress, as Kubernetes defaults them) and every
 * ingress rule of those policies that reaches @port (no ports, or a TCP entry naming @port, a
 * range over it, a named port or no port) admits only podSelector peers that require
 * namzu.ai/component=host, with no namespaceSelector and no ipBlock. Else NOT_ISOLATED or
 * TOO_WIDE, naming the policy. */
gboolean nz_kube_ingress_check (JsonArray *policies, JsonObject *pod_labels, guint port,
                                GError **error);

/* LIST the namespace's NetworkPolicies, then nz_kube_ingress_check. */
gboolean nz_kube_ingress_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels,
                                 guint port, GError **error);

G_END_DECLS
