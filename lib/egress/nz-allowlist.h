/* nz-allowlist.h: the egress allowlist grammar (spec E.1). Case-insensitive, one trailing dot
 * ignored, surrounding whitespace ignored; ".example.com" is the domain and its subdomains,
 * anything else is exact. No "*", no substrings. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* trim, lowercase, then drop ONE trailing dot. Returns a new string. */
char *nz_allowlist_normalize_host (const char *host);

/* TRUE when @entry (one allowlist entry) admits @host. Entries are not validated here: "*"
 * simply never matches, and "." normalises to "" and matches nothing. */
gboolean nz_allowlist_entry_matches (const char *entry, const char *host);

/* The first entry of @allowed (NULL-terminated) that admits @host, or NULL. */
const char *nz_allowlist_match (const char *const *allowed, const char *host);

/* splitAuthority: "[v6]:port" -> host without brackets; otherwise split at the LAST ':'; a
 * port that is not a decimal integer leaves the whole string as the host. *port is -1 when
 * there is none ("host:" gives 0, as the reference's Number('') does). */
void nz_allowlist_split_authority (const char *authority, char **host, int *port);

G_END_DECLS
