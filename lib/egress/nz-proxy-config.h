/* nz-proxy-config.h: the egress proxy's configuration (spec E.4): V1 in
 * NAMZU_EGRESS_PROXY_CONFIG, V2 (port rules) in NAMZU_EGRESS_PROXY_CONFIG_V2. Never both, never
 * merged: V2 wins when set, so an old proxy that reads only V1 fails closed. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-profile.h"

G_BEGIN_DECLS

#define NZ_EGRESS_PROXY_CONFIG_ENV "NAMZU_EGRESS_PROXY_CONFIG"
#define NZ_EGRESS_PROXY_CONFIG_V2_ENV "NAMZU_EGRESS_PROXY_CONFIG_V2"
#define NZ_EGRESS_PROXY_IMAGE_CONFIG_LABEL "ai.namzu.egress-proxy.config"
#define NZ_EGRESS_PROXY_PORT 2025
#define NZ_EGRESS_PROXY_HOST_ALIAS "namzu-egress"

typedef struct
{
  char *host;
  char *header;
  char *value; /* the secret: never logged, never on argv */
} NzBrokeredCredential;

typedef struct
{
  int port;
  char **allowed_hosts;   /* empty = deny all */
  GPtrArray *credentials; /* NzBrokeredCredential * */
  gboolean upgrade_to_https;
  char **allow_inward_for; /* may be NULL */
  char **self_names;       /* may be NULL */
  GPtrArray *host_ports;   /* NzEgressRule *, V2 only; NULL = no port rules */
} NzProxyConfig;

void nz_proxy_config_free (NzProxyConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzProxyConfig, nz_proxy_config_free)

/* readProxyConfig: @v1 / @v2 are the two variables' values (NULL = unset). Errors are
 * NZ_EGRESS_ERROR_CONFIG with the spec's messages (never echoing the value: it holds
 * credentials). */
NzProxyConfig *nz_proxy_config_read (const char *v1, const char *v2, GError **error);

/* egressProxyContainerConfig: {port, allowedHosts, credentials, allowInwardFor?, selfNames,
 * hostPorts?}. hostPorts (every rule, port-less ones too) only when @profile has ports; then
 * *env_name is the V2 variable. @credentials / @allow_inward_for may be NULL. Returns a new
 * node. */
JsonNode *nz_proxy_config_build (const char *const *allowed_hosts, const NzEgressProfile *profile,
                                 GPtrArray *credentials, const char *const *allow_inward_for,
                                 int port, const char **env_name);

G_END_DECLS
