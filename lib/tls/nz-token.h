/* nz-token.h: per-instance credentials: minting and constant-time comparison. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define NZ_TOKEN_RANDOM_BYTES 32

/* 32 random bytes from getrandom(2), hex encoded (64 chars). */
char *nz_token_mint (GError **error);

/* Compares SHA-256(@expected) with SHA-256(@presented) in constant time, so neither the value
 * nor its length leaks through timing (spec A.4.1). NULL counts as "". */
gboolean nz_token_equal (const char *expected, const char *presented);
/* The same over whole byte strings (@*_len bytes, NULs included): what a wire decoded from
 * JSON or a header must use, so that a token with bytes after an embedded NUL never matches
 * the token before it. */
gboolean nz_token_equal_len (const char *expected, gsize expected_len, const char *presented,
                             gsize presented_len);

/* A random RFC 4122 v4 UUID, lowercase (used for guestBootId and exec ids). */
char *nz_uuid_v4 (void);

G_END_DECLS
