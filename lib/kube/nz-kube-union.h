/* nz-kube-union.h: the egress union check of spec D.10.7 for the core engine: NetworkPolicies
 * add up, so every other policy that selects the sandbox's pods must allow no more egress than
 * the configured translation does. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_UNION_ERROR (nz_kube_union_error_quark ())
GQuark nz_kube_union_error_quark (void);

typedef enum
{
  NZ_KUBE_UNION_ERROR_WIDENS, /* KubernetesEgressPolicyUnionError policy-widens-egress */
} NzKubeUnionErrorCode;

/* The judgement on @policies (a NetworkPolicyList's items) for pods with @pod_labels against
 * @expected (the core translation, a NetworkPolicy manifest). The policy named like @expected is
 * exempt (the named check judged it). Every other policy that selects the pods and has Egress
 * among its policyTypes (absent: when it has egress rules) must have each egress rule covered by
 * one rule of @expected: its ports within that rule's (no ports: every port), its peers within
 * that rule's (no `to`: everywhere) — an ipBlock inside the rule's CIDR and clear of its
 * exceptions; a selector peer with the rule's namespaceSelector and either its podSelector or,
 * where the rule has only a namespaceSelector, any. Else WIDENS, naming the policy. */
gboolean nz_kube_union_check (JsonArray *policies, JsonObject *pod_labels, JsonObject *expected,
                              GError **error);

/* LIST the namespace's NetworkPolicies, then nz_kube_union_check. */
gboolean nz_kube_union_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels,
                               JsonObject *expected, GError **error);

G_END_DECLS
