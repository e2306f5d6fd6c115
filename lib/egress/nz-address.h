/* nz-address.h: the address screen (spec E.2). An allowed NAME may still resolve inward; every
 * resolved address is screened, and so is an IP literal, which bypasses resolution. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

G_BEGIN_DECLS

/* The reason (a static string such as "private" or "loopback") @address is not reachable from a
 * sandbox, or NULL when it may be dialled. v4-mapped and v4-compatible IPv6 are screened as
 * the embedded IPv4. @local (GInetAddress, may be NULL) are the host's own interface
 * addresses, refused as "host-interface": no range list knows them. */
const char *nz_address_blocked_reason (GInetAddress *address, GPtrArray *local);

/* Parses a literal as the proxy receives it: brackets and a zone id ("%eth0") are dropped.
 * Returns a new reference, or NULL when @host is not an IP literal (a name, or malformed). */
GInetAddress *nz_address_parse_literal (const char *host);

/* blockedLiteralReason: NULL for names (they are screened once resolved). */
const char *nz_address_literal_reason (const char *host, GPtrArray *local);

G_END_DECLS
