#include "nz-token.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "nz-errors.h"

/* Token digests and randomness come from GLib (SHA-256) and the kernel (getrandom), not
 * GnuTLS: loading GnuTLS and its seven libraries into every agent cost ~2.3 MiB of resident
 * memory, a third of the agent's idle budget, for two primitives the platform already has. */

static gboolean
random_bytes (void *buf, gsize len, GError **error)
{
  guint8 *p = buf;

  while (len > 0)
    {
      ssize_t n = getrandom (p, len, 0);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return nz_throw_errno_prefix (error, "getrandom");
      p += n;
      len -= (gsize)n;
    }
  return TRUE;
}

char *
nz_token_mint (GError **error)
{
  guint8 raw[NZ_TOKEN_RANDOM_BYTES];
  GString *hex;

  if (!random_bytes (raw, sizeof raw, error))
    return NULL;
  hex = g_string_sized_new (2 * sizeof raw);
  for (gsize i = 0; i < sizeof raw; i++)
    g_string_append_printf (hex, "%02x", raw[i]);
  explicit_bzero (raw, sizeof raw);
  return g_string_free (hex, FALSE);
}

static void
sha256 (const char *s, gsize len, guint8 out[32])
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  gsize digest_len = 32;

  /* By length, never up to a NUL: "tok\0x" must not hash like "tok". */
  if (s != NULL && len > 0)
    g_checksum_update (sum, (const guchar *)s, (gssize)len);
  g_checksum_get_digest (sum, out, &digest_len);
}

gboolean
nz_token_equal (const char *expected, const char *presented)
{
  return nz_token_equal_len (expected, expected != NULL ? strlen (expected) : 0, presented,
                             presented != NULL ? strlen (presented) : 0);
}

gboolean
nz_token_equal_len (const char *expected, gsize expected_len, const char *presented,
                    gsize presented_len)
{
  guint8 a[32], b[32];
  guint8 diff = 0;

  /* Fixed-width digests of the whole byte strings: the loop below always runs 32 steps
   * whatever the inputs' lengths, and a byte past an embedded NUL still counts. */
  sha256 (expected, expected_len, a);
  sha256 (presented, presented_len, b);
  for (int i = 0; i < 32; i++)
    diff |= a[i] ^ b[i];
  explicit_bzero (a, sizeof a);
  explicit_bzero (b, sizeof b);
  return diff == 0;
}

char *
nz_uuid_v4 (void)
{
  guint8 r[16];

  if (!random_bytes (r, sizeof r, NULL))
    for (gsize i = 0; i < sizeof r; i++)
      r[i] = (guint8)g_random_int ();
  r[6] = (r[6] & 0x0f) | 0x40;
  r[8] = (r[8] & 0x3f) | 0x80;
  return g_strdup_printf ("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                          r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
                          r[12], r[13], r[14], r[15]);
}
