#include "nz-token.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <string.h>

#include "nz-errors.h"

char *
nz_token_mint (GError **error)
{
  guint8 raw[NZ_TOKEN_RANDOM_BYTES];
  GString *hex = g_string_sized_new (2 * sizeof raw);
  int rc = gnutls_rnd (GNUTLS_RND_KEY, raw, sizeof raw);

  if (rc < 0)
    {
      g_string_free (hex, TRUE);
      nz_throw (error, NZ_ERROR_FAILED, "cannot mint a token: %s", gnutls_strerror (rc));
      return NULL;
    }
  for (gsize i = 0; i < sizeof raw; i++)
    g_string_append_printf (hex, "%02x", raw[i]);
  explicit_bzero (raw, sizeof raw);
  return g_string_free (hex, FALSE);
}

static void
sha256 (const char *s, guint8 out[32])
{
  const char *v = s != NULL ? s : "";

  /* gnutls_hash_fast cannot fail for SHA-256 with valid arguments; zero the digest if it did. */
  if (gnutls_hash_fast (GNUTLS_DIG_SHA256, v, strlen (v), out) < 0)
    memset (out, 0, 32);
}

gboolean
nz_token_equal (const char *expected, const char *presented)
{
  guint8 a[32], b[32];
  guint8 diff = 0;

  sha256 (expected, a);
  sha256 (presented, b);
  for (int i = 0; i < 32; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

char *
nz_uuid_v4 (void)
{
  guint8 r[16];

  if (gnutls_rnd (GNUTLS_RND_NONCE, r, sizeof r) < 0)
    for (gsize i = 0; i < sizeof r; i++)
      r[i] = (guint8)g_random_int ();
  r[6] = (r[6] & 0x0f) | 0x40;
  r[8] = (r[8] & 0x3f) | 0x80;
  return g_strdup_printf ("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                          r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                          r[12], r[13], r[14], r[15]);
}
