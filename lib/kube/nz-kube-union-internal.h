/* nz-kube-union-internal.h: what the two halves of the egress union check share — the core
 * engine's judgement (nz-kube-union.c) and the cilium engine's (nz-kube-union-cilium.c). Not
 * installed; only lib/kube includes it. */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* @n's object, or NULL when @n is absent or not an object. */
JsonObject *nz_kube_union_obj (JsonNode *n);

/* The CIDR @r_cidr less @r_except inside @t_cidr less @t_except: @r within @t's CIDR, and each
 * exception of @t either clear of @r or inside one of @r's own exceptions. A CIDR or exception
 * that does not parse is not inside. The excepts may be NULL. */
gboolean nz_kube_union_block_within (const char *r_cidr, JsonArray *r_except, const char *t_cidr,
                                     JsonArray *t_except);

/* Egress among a NetworkPolicy spec's policyTypes; absent, Kubernetes adds Egress when there
 * are egress rules. */
gboolean nz_kube_union_has_egress_type (JsonObject *spec);

/* Sets the KubernetesEgressPolicyUnionError policy-widens-egress refusal and returns FALSE:
 * @kind @name (and `specs[@specs_index]` when @specs_index >= 0) selects the pods and its
 * egress rule @rule (1-based; 0: its egress as a whole) allows more than @named; @why (may be
 * NULL) says what. */
gboolean nz_kube_union_widens (GError **error, const char *kind, const char *name, int specs_index,
                               guint rule, const char *named, const char *why);

G_END_DECLS
