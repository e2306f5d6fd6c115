/* nz-egress-k8s.h: a profile as Kubernetes objects (reference-agent D.10.2/D.10.3): core
 * NetworkPolicy for deny-all and allow-all, CiliumNetworkPolicy for a host list. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-profile.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_EGRESS_K8S_CORE,   /* networking.k8s.io/v1 NetworkPolicy */
  NZ_EGRESS_K8S_CILIUM, /* cilium.io/v2 CiliumNetworkPolicy */
} NzEgressK8sEngine;

/* ciliumFqdnEntries: "api.example.com" -> [{matchName}], ".example.com" -> [{matchName:
 * "example.com"}, {matchPattern: "*.example.com"}]. Returns a new array. */
JsonArray *nz_egress_cilium_fqdn_entries (const char *entry);

/* The core NetworkPolicy for allow-all (egress [{}]) or deny-all (egress [cluster DNS]).
 * @selector: matchLabels (borrowed, copied). Returns a new node. */
JsonNode *nz_egress_k8s_core_policy (gboolean allow_all, const char *name, const char *namespace_,
                                     JsonObject *selector);

/* The profile translated: no hosts -> core deny-all (even under cilium); hosts -> a
 * CiliumNetworkPolicy with the DNS-visibility rule first, then one toFQDNs rule (or one per
 * host with toPorts when the profile has ports). Hosts under the core engine are refused
 * (unsupported): core NetworkPolicy cannot name a host. Returns a new node. */
JsonNode *nz_egress_k8s_from_profile (const NzEgressProfile *profile, NzEgressK8sEngine engine,
                                      const char *name, const char *namespace_,
                                      JsonObject *selector, GError **error);

G_END_DECLS
