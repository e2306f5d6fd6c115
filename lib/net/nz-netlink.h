/* nz-netlink.h: small libnl helpers. The egress proxy screens the host's own interface
 * addresses, which no fixed range list can know; a docker sandbox behind an egress boundary
 * loses its default route. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

G_BEGIN_DECLS

/* Every address configured on any interface of the calling process's network namespace
 * (RTM_GETADDR dump). Returns a new array of GInetAddress (new references), or NULL with
 * NZ_ERROR set. */
GPtrArray *nz_netlink_local_addresses (GError **error);

/* Deletes every default route (IPv4 and IPv6, any table) of the calling process's network
 * namespace; needs CAP_NET_ADMIN there. Afterwards a connect() to anything not on a directly
 * attached subnet fails at once with ENETUNREACH. *@n_dropped (may be NULL) counts them. */
gboolean nz_netlink_drop_default_routes (guint *n_dropped, GError **error);

G_END_DECLS
