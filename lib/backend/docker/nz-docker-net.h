/* nz-docker-net.h: the network a deny-all or allowlist sandbox sits on, on container:docker and
 * container:runsc. The spec's topology (B.3) puts it on an --internal network, which docker
 * keeps from forwarding anywhere, but the host itself is on that network: the bridge's gateway
 * address is the host's, so every host service listening on all addresses answers the sandbox,
 * and so does every other container on that network. Here the sandbox is alone on its network
 * (a private one the backend creates per sandbox, or a named one that carries nothing else),
 * and a host rule on the network's bridge refuses every connection the bridge starts towards
 * the host; only replies to the host's own connections (to the worker) come back in. */
#pragma once

#include <glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* The private network of sandbox <id>: namzu-net-<id>. */
#define NZ_DOCKER_NET_PREFIX "namzu-net-"

/* TRUE when the sandbox is a boundary (deny-all or an allowlist) and names no network: the
 * backend creates one for it alone. */
gboolean nz_docker_net_wants_private (const NzCreateOptions *opts);

/* Before anything starts: the named @network carries no container at all. A container there
 * (another sandbox, its proxy, anything) would be reachable from the sandbox, and the sandbox
 * from it. */
gboolean nz_docker_net_check_alone (const char *docker, const char *network, GError **error);

/* Creates the private @network when @private, then installs the host guard on its bridge
 * (iptables and, where the kernel has IPv6, ip6tables; $NAMZU_IPTABLES / $NAMZU_IP6TABLES
 * override the binaries), noting each step in h->priv ("netGuard") and saving the handle
 * before it, so a destroy can undo a create killed half-way. On failure it undoes what it
 * made: a sandbox is never started without the guard. */
gboolean nz_docker_net_prepare (const char *docker, NzHandle *h, const NzCreateOptions *opts,
                                const char *network, gboolean private, GError **error);

/* After the containers started: the network carries only this sandbox and its proxy (two
 * creates racing onto one named network both fail rather than share it). */
gboolean nz_docker_net_check_members (const char *docker, NzHandle *h, const char *network,
                                      GError **error);

/* Once the containers are gone: removes the private network and the guard rules, checked.
 * TRUE when the handle has no guard (allow-all, or a handle from before it existed). */
gboolean nz_docker_net_release (const char *docker, NzHandle *h, GError **error);

G_END_DECLS
