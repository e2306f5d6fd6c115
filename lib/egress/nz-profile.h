/* nz-profile.h: egress profiles (spec E.5/E.6): one named, validated allowlist with optional
 * per-host port rules, and what it turns into on each backend. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define NZ_EGRESS_ERROR (nz_egress_error_quark ())
GQuark nz_egress_error_quark (void);

/* SandboxEgressProfileErrorCode, in the spec's order. NZ_EGRESS_ERROR_CONFIG is ours: a proxy
 * configuration (E.4) that cannot be enforced. */
typedef enum
{
  NZ_EGRESS_ERROR_INVALID_NAME,
  NZ_EGRESS_ERROR_INVALID_HOST,
  NZ_EGRESS_ERROR_INVALID_PORT,
  NZ_EGRESS_ERROR_DUPLICATE_HOST,
  NZ_EGRESS_ERROR_CONFLICTING_POLICY,
  NZ_EGRESS_ERROR_UNSUPPORTED,
  NZ_EGRESS_ERROR_CONFIG,
} NzEgressErrorCode;

/* "invalid-name", "invalid-host", ... (the spec's code strings). */
const char *nz_egress_error_code_name (const GError *error);

/* Sets the spec's message: "egress profile: <path> <reason>[ (backend: <b>)]. Refusing rather
 * than applying part of the profile." Returns FALSE. */
gboolean nz_egress_profile_throw (GError **error, NzEgressErrorCode code, const char *path,
                                  const char *backend, const char *reason_fmt, ...)
    G_GNUC_PRINTF (5, 6);

typedef struct
{
  char *host;    /* normalised */
  GArray *ports; /* guint16, sorted, unique; NULL = every port */
} NzEgressRule;

typedef struct
{
  char *name;
  GPtrArray *rules; /* NzEgressRule * */
} NzEgressProfile;

void nz_egress_rule_free (NzEgressRule *rule);
void nz_egress_profile_free (NzEgressProfile *profile);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEgressRule, nz_egress_rule_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEgressProfile, nz_egress_profile_free)

/* Checks one host entry against the profile grammar (DNS name, no "*", >= 2 labels for a
 * .domain, no numeric last label, <= 253 chars). Returns the normalised host, or NULL with
 * NZ_EGRESS_ERROR_INVALID_HOST naming @path. */
/* The same grammar without an error domain: returns NULL when @host is usable (and then sets
 * @normalized, may be NULL, to the normalised host), else a new reason ("names no domain after
 * its leading dot", ...). */
char *nz_egress_host_reason (const char *host, char **normalized);

char *nz_egress_host_validate (const char *host, const char *path, const char *backend,
                               GError **error);

/* defineEgressProfile: validates @node ({name, hosts:[{host, ports?}]}) in full. @backend (may
 * be NULL) is only named in messages. Returns a new normalised profile. */
NzEgressProfile *nz_egress_profile_from_json (JsonNode *node, const char *backend, GError **error);
NzEgressProfile *nz_egress_profile_parse (const char *data, gssize len, const char *backend,
                                          GError **error);
/* The normalised profile as JSON. Returns a new node. */
JsonNode *nz_egress_profile_to_json (const NzEgressProfile *profile);

gboolean nz_egress_profile_has_ports (const NzEgressProfile *profile);
/* The hosts as a NULL-terminated list (new). */
char **nz_egress_profile_hosts (const NzEgressProfile *profile);

/* The port union (egressProfilePortsFor) over every rule of @rules matching @host: TRUE and
 * *any when some matching rule has no ports; otherwise the union into @out (may be NULL).
 * Returns FALSE when no rule matches. @matched (may be NULL) is set to the first match. */
gboolean nz_egress_rules_ports_for (GPtrArray *rules, const char *host, gboolean *any, GArray *out,
                                    const NzEgressRule **matched);
gboolean nz_egress_rules_allow_port (GPtrArray *rules, const char *host, int port);

/* egressProfileCoversEntry: a plain entry is covered by any rule that matches it; a .domain
 * entry only by a .domain rule for the same domain or a parent domain. */
gboolean nz_egress_profile_covers_entry (const NzEgressProfile *profile, const char *entry);

/* Refusals a backend applies at create, before any I/O (E.6): every brokered credential's host
 * (@credential_hosts, NULL-terminated) must be covered by the profile. */
gboolean nz_egress_profile_check_credentials (const NzEgressProfile *profile,
                                              const char *const *credential_hosts,
                                              const char *backend, GError **error);

/* Live narrowing (setNetworkPolicy under a profile): every entry must be covered. */
gboolean nz_egress_profile_check_narrowing (const NzEgressProfile *profile,
                                            const char *const *entries, const char *backend,
                                            GError **error);

G_END_DECLS
