/* nz-kube-proxy.h: which HTTPS proxy, if any, the kube client goes through — the environment,
 * read the way kubectl (Go's net/http ProxyFromEnvironment) reads it, so a host that reaches
 * its cluster with kubectl reaches it with namzu. Decided once per client, for its one server:
 * GIO's default resolver (libproxy, GSettings, a resolver thread) costs a tool ~4 ms of CPU at
 * every start and reads desktop settings kubectl never reads. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The proxy URI for an https request to @host:@port, or NULL for a direct connection.
 * @https_proxy is $HTTPS_PROXY (else $https_proxy): empty or NULL means none; without a
 * scheme it is http://; schemes http, https and socks5 are taken, anything else is refused
 * with G_IO_ERROR_INVALID_ARGUMENT. @no_proxy is $NO_PROXY (else $no_proxy): comma-separated
 * entries, "*" (every host), an IP or CIDR (an IP host inside it), "name" (that name and its
 * subdomains), ".name" or "*.name" (its subdomains), each optionally with ":port" (then only
 * that port). localhost and loopback addresses are never proxied. Names compare without case.
 * Returns a new string. */
char *nz_kube_proxy_for (const char *host, guint port, const char *https_proxy,
                         const char *no_proxy, GError **error);

/* nz_kube_proxy_for with the process environment. */
char *nz_kube_proxy_from_env (const char *host, guint port, GError **error);

G_END_DECLS
