/* nz-bwrap-egress.h: the egress allowlist on container:bwrap. The sandbox keeps its own empty
 * network namespace (only lo), so a workload that ignores proxy settings has nowhere to send
 * anything. A host-side `namzu-egress proxy` listens on a unix socket in the sandbox's socket
 * directory (bound at /run/namzu inside); `namzu-egress relay`, started in front of the agent,
 * listens on 127.0.0.1:2025 inside and forwards to that socket. The proxy env points there. */
#pragma once

#include <glib.h>

#include "nz-backend.h"
#include "nz-state.h"

G_BEGIN_DECLS

/* Inside the sandbox. */
#define NZ_BWRAP_EGRESS_RELAY_ADDR "127.0.0.1:2025"
#define NZ_BWRAP_EGRESS_PROXY_URL "http://127.0.0.1:2025"
#define NZ_BWRAP_EGRESS_SOCK_INSIDE "/run/namzu/egress.sock"
#define NZ_BWRAP_EGRESS_BOUND_BIN "/opt/namzu/bin/namzu-egress"

/* What needs no I/O: every host matches the allowlist grammar; a profile (JSON text in
 * opts->egress_profile) is valid; every brokered credential (opts->egress_credentials) is
 * well formed and names a host the profile (or, without one, the allowlist) covers. */
gboolean nz_bwrap_egress_check (const NzCreateOptions *opts, GError **error);

/* $NAMZU_EGRESS_BIN, else next to the running executable, else installed. */
char *nz_bwrap_egress_find_binary (GError **error);

/* Starts the host-side proxy for @hosts on <sock_dir>/egress.sock and records it in h->priv
 * ("egress": {hosts, profile?, socket, proxyPid, proxyStartTime}). Does not save the handle. */
gboolean nz_bwrap_egress_start (NzHandle *h, const char *egress_bin, const char *const *hosts,
                                const char *profile_json, const char *credentials_json,
                                const char *sock_dir, GError **error);

/* Stops the proxy recorded in h->priv (if it is still the same process) and forgets it. */
gboolean nz_bwrap_egress_stop (NzHandle *h, GError **error);

/* Wraps the agent at the end of @argv (no NULL terminator yet) in the relay, binding
 * @egress_bin into the sandbox when it is not under /usr. */
void nz_bwrap_egress_wrap_argv (GPtrArray *argv, const char *egress_bin);

/* Adds HTTP_PROXY, http_proxy, HTTPS_PROXY, https_proxy, NO_PROXY, no_proxy. Takes @envp. */
char **nz_bwrap_egress_envp (char **envp);

/* Live policy change (spec B.7 setNetworkPolicy): one at a time per sandbox (a lock file), an
 * identical list is a no-op, under a profile only narrowing, the old proxy is stopped before
 * the new one starts (fails closed); a failure leaves no proxy and the next call swaps.
 * *changed tells whether anything was done. Re-reads @h under the lock and saves it. */
gboolean nz_bwrap_egress_set (NzHandle *h, const char *const *hosts, gboolean *changed,
                              GError **error);

G_END_DECLS
