/* nz-netlink.h: small libnl helpers. The egress proxy screens the host's own interface
 * addresses, which no fixed range list can know. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

G_BEGIN_DECLS

/* Every address configured on any interface of the calling process's network namespace
 * (RTM_GETADDR dump). Returns a new array of GInetAddress (new references), or NULL with
 * NZ_ERROR set. */
GPtrArray *nz_netlink_local_addresses (GError **error);

G_END_DECLS
