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

/* D.10.1: the policy kinds the Kubernetes tier translates. */
typedef enum
{
  NZ_EGRESS_K8S_DENY_ALL,        /* core; cluster DNS only */
  NZ_EGRESS_K8S_NO_NETWORK,      /* core; nothing, not even DNS */
  NZ_EGRESS_K8S_PUBLIC_INTERNET, /* core; kube-dns + 0.0.0.0/0 and ::/0 less private ranges */
  NZ_EGRESS_K8S_ALLOW_ALL,       /* core; egress [{}] */
  NZ_EGRESS_K8S_STATIC,          /* cilium; allowedHosts as toFQDNs */
} NzEgressK8sKind;

/* assertUsableHost (D.10.4): returns the lower-cased host (new) when usable, else NULL with the
 * spec's KubernetesNetworkPolicyHostError message (NZ_EGRESS_ERROR_INVALID_HOST). Whitespace or a
 * trailing dot, which a manifest would carry verbatim, are refused. */
char *nz_egress_k8s_host_check (const char *host, GError **error);

/* translateEgressPolicy (D.10.2/D.10.3): the manifest for @kind. @except_cidrs (NULL-terminated,
 * may be NULL) are extra public-internet exceptions, each an IPv4 or IPv6 CIDR; @hosts
 * (NULL-terminated) the static allowedHosts (each checked by nz_egress_k8s_host_check; case
 * kept in matchName). deny-all and allow-all are core under either engine; static under core
 * is KubernetesUnenforceableEgressPolicyError. Returns a new node, or NULL with @error. */
JsonNode *nz_egress_k8s_translate (NzEgressK8sKind kind, NzEgressK8sEngine engine,
                                   const char *const *except_cidrs, const char *const *hosts,
                                   const char *name, const char *namespace_, JsonObject *selector,
                                   GError **error);

/* defaultEgressPolicyName: "<tpl>-egress" or "<tpl>-<profile>-egress"; NULL with @error when
 * longer than 253 characters. */
char *nz_egress_k8s_default_policy_name (const char *tpl, const char *profile, GError **error);

#define NZ_EGRESS_K8S_PROFILE_LABEL_KEY "sandbox.namzu.ai/egress-profile"
#define NZ_EGRESS_K8S_TEMPLATE_LABEL_KEY "sandbox.namzu.ai/template"
#define NZ_EGRESS_K8S_PER_SANDBOX_LABEL_KEY "sandbox.namzu.ai/per-sandbox-egress"

/* KubernetesEgressConfig (D.10.6), the reference config's backend.egress object. */
typedef struct
{
  NzEgressK8sKind kind;
  char **allowed_hosts;       /* static: lower-cased and checked */
  char **except_cidrs;        /* public-internet: extra exceptions, may be NULL */
  char *network_policy_name;  /* NULL: nz_egress_k8s_default_policy_name */
  NzEgressK8sEngine engine;   /* "core" by default */
  gboolean named_object_only; /* verify: 'named-object-only'; FALSE = 'union' (default) */
  char *profile;              /* NULL: none */
  char *profile_label_key;    /* NZ_EGRESS_K8S_PROFILE_LABEL_KEY by default */
  gboolean per_sandbox;       /* perSandbox set (engine cilium) */
  char *admission_policy_name;
  char *admission_policy_binding_name; /* "<admissionPolicyName>-binding" by default */
  char *per_sandbox_label_key;         /* NZ_EGRESS_K8S_PER_SANDBOX_LABEL_KEY by default */
} NzEgressK8sConfig;

void nz_egress_k8s_config_free (NzEgressK8sConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEgressK8sConfig, nz_egress_k8s_config_free)

/* Parses @node (the egress object). Every refusal names the field: unknown fields, a policy
 * kind that is not deny-all|no-network|public-internet|allow-all|static, engine not
 * core|cilium, verify not union|named-object-only, a profile that is not a DNS-1123 label
 * value (KubernetesEgressProfileConfigError), perSandbox without engine 'cilium' or
 * admissionPolicyName (KubernetesPerSandboxEgressConfigError). ciliumNarrowing and
 * perSandbox.narrowing are refused as not supported by this build. Returns a new config. */
NzEgressK8sConfig *nz_egress_k8s_config_parse (JsonNode *node, GError **error);

/* The policy's selector: {"sandbox.namzu.ai/template": tpl[, <profileLabelKey>: profile]}.
 * Returns a new object. */
JsonObject *nz_egress_k8s_selector (const NzEgressK8sConfig *config, const char *tpl);

/* composeAdditionalPodLabels: @base (may be NULL) plus the profile label; a key of @base that
 * the profile label would overwrite with another value is refused
 * (KubernetesEgressProfileConfigError). Returns a new object. */
JsonObject *nz_egress_k8s_compose_pod_labels (const NzEgressK8sConfig *config, JsonObject *base,
                                              GError **error);

G_END_DECLS
