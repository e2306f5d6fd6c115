#include "nz-base64.h"

#include <string.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters per 12 input bits, and each character's 6-bit value (0xff: not in the
 * alphabet). Built once; both are small enough to stay in the cache across a transfer. */
static char pair_table[4096][2];
static guint8 value_table[256];

static void
tables_init (void)
{
  static gsize done = 0;

  if (!g_once_init_enter (&done))
    return;
  for (guint i = 0; i < 4096; i++)
    {
      pair_table[i][0] = alphabet[i >> 6];
      pair_table[i][1] = alphabet[i & 63];
    }
  memset (value_table, 0xff, sizeof value_table);
  for (guint i = 0; i < 64; i++)
    value_table[(guint8)alphabet[i]] = (guint8)i;
  g_once_init_leave (&done, 1);
}

gsize
nz_base64_encode (const guint8 *in, gsize len, char *out)
{
  char *o = out;
  gsize i = 0;

  tables_init ();
  for (; i + 3 <= len; i += 3)
    {
      guint32 v = ((guint32)in[i] << 16) | ((guint32)in[i + 1] << 8) | in[i + 2];

      memcpy (o, pair_table[v >> 12], 2);
      memcpy (o + 2, pair_table[v & 0xfff], 2);
      o += 4;
    }
  if (len - i == 1)
    {
      o[0] = alphabet[in[i] >> 2];
      o[1] = alphabet[(in[i] & 3) << 4];
      o[2] = o[3] = '=';
      o += 4;
    }
  else if (len - i == 2)
    {
      o[0] = alphabet[in[i] >> 2];
      o[1] = alphabet[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
      o[2] = alphabet[(in[i + 1] & 15) << 2];
      o[3] = '=';
      o += 4;
    }
  return (gsize)(o - out);
}

gssize
nz_base64_decode (const char *in, gsize len, guint8 *out)
{
  const guint8 *p = (const guint8 *)in;
  guint8 *o = out;
  gsize full, tail, i;

  tables_init ();
  /* Padding only completes the last quantum. */
  if (len % 4 == 0 && len > 0 && p[len - 1] == '=')
    len -= p[len - 2] == '=' ? 2 : 1;
  tail = len % 4;
  if (tail == 1)
    return -1;
  full = len - tail;
  for (i = 0; i < full; i += 4)
    {
      guint32 a = value_table[p[i]], b = value_table[p[i + 1]];
      guint32 c = value_table[p[i + 2]], d = value_table[p[i + 3]];
      guint32 v;

      /* 0xff marks a character outside the alphabet ('=' included). */
      if ((a | b | c | d) & 0x80)
        return -1;
      v = (a << 18) | (b << 12) | (c << 6) | d;
      o[0] = (guint8)(v >> 16);
      o[1] = (guint8)(v >> 8);
      o[2] = (guint8)v;
      o += 3;
    }
  if (tail > 0)
    {
      guint32 a = value_table[p[i]], b = value_table[p[i + 1]];
      guint32 c = tail == 3 ? value_table[p[i + 2]] : 0;

      if ((a | b | c) & 0x80)
        return -1;
      *o++ = (guint8)((a << 2) | (b >> 4));
      if (tail == 3)
        *o++ = (guint8)((b << 4) | (c >> 2));
    }
  return (gssize)(o - out);
}
