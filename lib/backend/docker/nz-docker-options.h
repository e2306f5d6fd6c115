/* nz-docker-options.h: container:docker's and container:runsc's own options, a private type
 * behind NzCreateOptions's backend_opts: what the reference config's backend section and
 * namzu-create's docker flags say, parsed by nz_docker_parse_config. */
#pragma once

#include "nz-backend.h"

G_BEGIN_DECLS

typedef struct
{
  char *network;           /* backend.network: the sandbox's only docker network ("none") */
  char *host_reachability; /* "host-port" (default) or "container-network" */
  GPtrArray *labels;       /* char *, alternating key and value, in order */
  guint ready_poll_ms;     /* readyPollIntervalMs (0: the spec's 100) */
  char *proxy_image;       /* egressProxyImage: the proxy sibling container's image */
  char *upstream_network;  /* egressProxyUpstreamNetwork ("bridge") */
  GPtrArray *allow_inward_for; /* char *, allowInwardFor: hosts exempt from the address screen */
} NzDockerOptions;

/* The family tag in NzCreateOptions.backend_opts_for: docker and runsc share the type. */
#define NZ_DOCKER_OPTIONS_FOR "container:docker|container:runsc"

/* @opts's docker options, or the defaults (nothing set) when it carries none. Never NULL. */
const NzDockerOptions *nz_docker_options (const NzCreateOptions *opts);
/* The docker options @opts carries, created (owned by @opts) when it has none. */
NzDockerOptions *nz_docker_options_ensure (NzCreateOptions *opts);

G_END_DECLS
