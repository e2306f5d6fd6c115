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

/* D.10.5 narrowing of a static CiliumNetworkPolicy (`ciliumNarrowing`, `perSandbox.narrowing`):
 * any field set turns the one toFQDNs rule into one rule per host, with ports and TLS server
 * names, and dnsNames narrows the DNS visibility rule to the hosts' names. */
typedef struct
{
  char *field;               /* "ciliumNarrowing" or "perSandbox.narrowing": what refusals name */
  GArray *ports;             /* guint16; NULL: unset */
  GHashTable *host_ports;    /* lower-cased host entry -> GArray of guint16; NULL: unset */
  gboolean dns_names;        /* dnsNames true or an object */
  char *dns_namespace;       /* dnsNames.namespace; NULL: the policy's namespace */
  char *cluster_domain;      /* dnsNames.clusterDomain, "cluster.local" by default */
  char **search_suffixes;    /* dnsNames.searchSuffixes; NULL: none */
  gboolean tls_server_names; /* tlsServerNames */
  GArray *tls_ports;         /* guint16; NULL: [443] */
} NzEgressK8sNarrowing;

void nz_egress_k8s_narrowing_free (NzEgressK8sNarrowing *narrowing);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEgressK8sNarrowing, nz_egress_k8s_narrowing_free)

/* Parses the narrowing object @node found at backend.egress.<@field> ("ciliumNarrowing" or
 * "perSandbox.narrowing"). Refused with KubernetesEgressPolicyConfigError naming the full field
 * (backend.egress.ciliumNarrowing.ports[2]): unknown fields, a port that is not an integer in
 * 1..65535, an empty list or hostPorts, a hostPorts key that is not a usable host entry (or
 * repeats one in another case), an empty or malformed clusterDomain, search suffix or namespace.
 * Whether the keys are the policy's hosts is for the caller, who knows them. Returns a new
 * narrowing. */
NzEgressK8sNarrowing *nz_egress_k8s_narrowing_parse (JsonNode *node, const char *field,
                                                     GError **error);

/* setNetworkPolicy (D.10.8) and the translation: lower-cases and checks each of @hosts
 * (nz_egress_k8s_host_check), then refuses what @narrowing (may be NULL) cannot express: a
 * '.domain' entry under tlsServerNames, since a TLS server name is one exact host
 * (KubernetesEgressPolicyConfigError naming <field>.tlsServerNames). hostPorts keys that are
 * not in @hosts are ignored: one narrowing serves every sandbox, and a sandbox allowing fewer
 * hosts is narrower, not wrong. Returns the lower-cased hosts (new, possibly empty), or NULL
 * with @error. */
char **nz_egress_k8s_narrowing_check_hosts (const NzEgressK8sNarrowing *narrowing,
                                            const char *const *hosts, GError **error);

/* translateEgressPolicy (D.10.2/D.10.3): the manifest for @kind. @except_cidrs (NULL-terminated,
 * may be NULL) are extra public-internet exceptions, each an IPv4 or IPv6 CIDR; @hosts
 * (NULL-terminated) the static allowedHosts (each checked by nz_egress_k8s_host_check; case
 * kept in matchName). deny-all and allow-all are core under either engine; static under core
 * is KubernetesUnenforceableEgressPolicyError. Returns a new node, or NULL with @error. */
JsonNode *nz_egress_k8s_translate (NzEgressK8sKind kind, NzEgressK8sEngine engine,
                                   const char *const *except_cidrs, const char *const *hosts,
                                   const char *name, const char *namespace_, JsonObject *selector,
                                   GError **error);

/* nz_egress_k8s_translate with @narrowing (may be NULL: the same output byte for byte). With a
 * field set, the static policy's egress is the DNS visibility rule (its `dns` narrowed to the
 * hosts' names under dnsNames, with <ns>.svc.<clusterDomain>, svc.<clusterDomain>,
 * <clusterDomain> and the search suffixes; <ns> is dnsNames.namespace, else @namespace_), then
 * one toFQDNs rule per host with toPorts from hostPorts[host] ?? ports ?? (with tlsServerNames)
 * tlsPorts ?? [443]; under tlsServerNames the ports in tlsPorts ?? [443] carry serverNames
 * [host] and the rest go in a second entry without. A narrowing on a kind other than static or
 * under engine core is KubernetesEgressNarrowingUnsupportedError (NZ_EGRESS_ERROR_UNSUPPORTED);
 * a narrowing with no host to narrow, or one nz_egress_k8s_narrowing_check_hosts refuses, is
 * KubernetesEgressPolicyConfigError. Returns a new node, or NULL with @error. */
JsonNode *nz_egress_k8s_translate_narrowed (NzEgressK8sKind kind, NzEgressK8sEngine engine,
                                            const char *const *except_cidrs,
                                            const char *const *hosts,
                                            const NzEgressK8sNarrowing *narrowing, const char *name,
                                            const char *namespace_, JsonObject *selector,
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
  char *admission_policy_binding_name;         /* "<admissionPolicyName>-binding" by default */
  char *per_sandbox_label_key;                 /* NZ_EGRESS_K8S_PER_SANDBOX_LABEL_KEY by default */
  NzEgressK8sNarrowing *narrowing;             /* ciliumNarrowing; NULL: none */
  NzEgressK8sNarrowing *per_sandbox_narrowing; /* perSandbox.narrowing; NULL: none */
} NzEgressK8sConfig;

void nz_egress_k8s_config_free (NzEgressK8sConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEgressK8sConfig, nz_egress_k8s_config_free)

/* Parses @node (the egress object). Every refusal names the field: unknown fields, a policy
 * kind that is not deny-all|no-network|public-internet|allow-all|static, engine not
 * core|cilium, verify not union|named-object-only, a profile that is not a DNS-1123 label
 * value (KubernetesEgressProfileConfigError), perSandbox without engine 'cilium' or
 * admissionPolicyName (KubernetesPerSandboxEgressConfigError), a narrowing that
 * nz_egress_k8s_narrowing_parse refuses. ciliumNarrowing with a policy kind other than static or
 * engine other than cilium is KubernetesEgressNarrowingUnsupportedError
 * (NZ_EGRESS_ERROR_UNSUPPORTED); its hostPorts keys must be policy.allowedHosts entries, and
 * its tlsServerNames refuses a '.domain' entry there. Returns a new config. */
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
