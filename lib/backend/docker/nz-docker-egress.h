/* nz-docker-egress.h: the egress allowlist on container:docker / container:runsc (spec B.3):
 * the sandbox sits alone on an --internal network (read back from the daemon), and the only
 * thing there that has a route out is `namzu-egress proxy` in a sibling container, started on
 * the upstream network first and then attached to the internal one under the alias
 * namzu-egress. Its configuration (credentials included) travels in the docker CLI's
 * environment, never an argv. */
#pragma once

#include <glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* Before anything starts: a profile with port rules needs a V2 proxy image, so the image's
 * ai.namzu.egress-proxy.config label is read (`docker image inspect`, which does not pull).
 * That the network carries nothing else is nz_docker_net_check_alone()'s. */
gboolean nz_docker_egress_preflight (const char *docker, const NzCreateOptions *opts,
                                     GError **error);

/* Records the policy in h->priv ("egress": hosts come with the start) for @internal_network;
 * no I/O. */
void nz_docker_egress_record (NzHandle *h, const NzCreateOptions *opts,
                              const char *internal_network);

/* Starts the proxy container namzu-egress-<id> for @hosts (run, connect, running check) from
 * the record and notes it there ("hosts", "proxyContainer"). On failure it is removed. */
gboolean nz_docker_egress_start (NzHandle *h, const char *const *hosts, GError **error);

/* Removes the proxy container (checked) and forgets it. TRUE when there is none. */
gboolean nz_docker_egress_stop (NzHandle *h, GError **error);

/* The NzBackend set_network_policy hook. */
gboolean nz_docker_egress_set (NzHandle *h, const char *const *hosts, gboolean *changed,
                               GError **error);

G_END_DECLS
