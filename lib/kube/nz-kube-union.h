/* nz-kube-union.h: the egress union check of spec D.10.7: policies add up (NetworkPolicies, and
 * under Cilium CiliumNetworkPolicies too), so every other policy that selects the sandbox's pods
 * must allow no more egress than the configured translation does. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_UNION_ERROR (nz_kube_union_error_quark ())
GQuark nz_kube_union_error_quark (void);

typedef enum
{
  NZ_KUBE_UNION_ERROR_WIDENS, /* KubernetesEgressPolicyUnionError policy-widens-egress */
} NzKubeUnionErrorCode;

/* The core engine's judgement on @policies (a NetworkPolicyList's items) for pods with
 * @pod_labels against @expected (the core translation, a NetworkPolicy manifest). The policy
 * named like @expected is exempt (the named check judged it). Every other policy that selects
 * the pods and has Egress among its policyTypes (absent: when it has egress rules) must have each
 * egress rule covered by one rule of @expected: its ports within that rule's (no ports: every
 * port), its peers within that rule's (no `to`: everywhere) — an ipBlock inside the rule's CIDR
 * and clear of its exceptions; a selector peer with the rule's namespaceSelector and either its
 * podSelector or, where the rule has only a namespaceSelector, any. Else WIDENS, naming the
 * policy. */
gboolean nz_kube_union_check (JsonArray *policies, JsonObject *pod_labels, JsonObject *expected,
                              GError **error);

/* The cilium engine's judgement, for pods with @pod_labels in namespace @ns, against @expected
 * (the translation: a CiliumNetworkPolicy, or a core NetworkPolicy for deny-all, allow-all,
 * no-network and public-internet). @policies are the namespace's NetworkPolicies and
 * @cilium_policies its CiliumNetworkPolicies (either may be NULL). The object of @expected's
 * kind and name is exempt. Judged: every NetworkPolicy whose podSelector selects the pods (with
 * Egress, as above), and every rule of a CiliumNetworkPolicy (`spec`, and each entry of `specs`
 * on its own) whose endpointSelector selects them. Cilium label keys may carry a source prefix:
 * `k8s:app` and `any:app` are the pod label `app`, `k8s:io.kubernetes.pod.namespace` is @ns; a
 * requirement on another source or on a label Cilium derives (`io.cilium.*`) is taken as met,
 * so such a policy is judged rather than skipped.
 *
 * Each egress rule of a judged policy must allow no more than @expected's rules allow together:
 * each of its destinations on each of its ports within one destination and one port of one
 * expected rule. Destinations: `toFQDNs` (a matchName within an equal matchName or a
 * matchPattern that matches it; a matchPattern within an equal one, one whose labels are `*`
 * where its own are, or `*`, which alone allows every name — Cilium's `*` stays within one
 * label, so `*.a.b` is not within `*.b`); `toEndpoints` and NetworkPolicy selector peers (as
 * Cilium reads them: naming no namespace, namespace label or other source, the policy's own
 * namespace; an empty namespaceSelector every namespace) within an expected selector whose
 * every requirement they carry too; `toCIDR`, `toCIDRSet` and ipBlocks by CIDR containment
 * clear of the expected exceptions; `toEntities`, `toServices`, `toGroups`, `toNodes` and
 * `toRequires` only within an equal entry of the same member; no destination (`toPorts`
 * alone, or a NetworkPolicy rule without `to`) only within an expected rule without one. An
 * empty CiliumNetworkPolicy rule `{}` allows nothing (Cilium's default-deny idiom); a
 * NetworkPolicy rule `{}` allows everything. Ports: protocol (ANY covers TCP and UDP; absent is
 * ANY in a CiliumNetworkPolicy, TCP in a NetworkPolicy), number, `endPort` range or name within
 * the expected port (none or "0": every port). L7: an expected port with `serverNames` needs
 * the same or fewer; with `rules.dns` needs DNS rules whose names it covers (a port without
 * `rules` allows every name: covered only by a DNS rule that allows `*`). `egressDeny` never
 * widens; ingress is not egress. Anything else — a member this check does not know, a port,
 * selector or CIDR it cannot read — widens. Else WIDENS, naming the kind, name, `specs[i]`,
 * rule and what it allows. */
gboolean nz_kube_union_check_cilium (JsonArray *policies, JsonArray *cilium_policies,
                                     const char *ns, JsonObject *pod_labels, JsonObject *expected,
                                     GError **error);

/* LIST the namespace's NetworkPolicies (and, when @engine is cilium, CiliumNetworkPolicies),
 * then nz_kube_union_check or nz_kube_union_check_cilium. */
gboolean nz_kube_union_verify (NzKubeClient *client, const char *ns, JsonObject *pod_labels,
                               JsonObject *expected, NzEgressK8sEngine engine, GError **error);

G_END_DECLS
