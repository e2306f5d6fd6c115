#include "nz-base64.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NZ_BASE64_AVX2 1
#endif

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters per 12 input bits, and each character's 6-bit value (0xff: not in the
 * alphabet). Built once; both are small enough to stay in the cache across a transfer. */
static char pair_table[4096][2];
static guint8 value_table[256];
/* Which high nibbles (bit h for 0xh_) are base64 characters, by low nibble (the vector
 * decoder's validation); built from value_table so the two cannot disagree. */
static guint8 valid_by_low_nibble[16];

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
#ifdef NZ_BASE64_AVX2
  for (guint c = 0; c < 128; c++)
    if (value_table[c] != 0xff)
      valid_by_low_nibble[c & 15] |= (guint8)(1u << (c >> 4));
#endif
  g_once_init_leave (&done, 1);
}

#ifdef NZ_BASE64_AVX2
/* 24 bytes of input per step, as two 12-byte groups (one per 128-bit lane, since pshufb works
 * within a lane): 32 characters out. Wojciech Mula's pshufb method. Returns the input bytes
 * consumed; the scalar loop does the rest. */
__attribute__ ((target ("avx2"))) static gsize
encode_avx2 (const guint8 *in, gsize len, char *out)
{
  const __m256i shuf = _mm256_broadcastsi128_si256 (
      _mm_set_epi8 (10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1));
  const __m256i offsets = _mm256_broadcastsi128_si256 (_mm_setr_epi8 (
      'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
      '0' - 52, '0' - 52, '+' - 62, '/' - 63, 'A', 0, 0));
  gsize i = 0;

  for (; i + 28 <= len; i += 24, out += 32)
    {
      __m256i v = _mm256_set_m128i (_mm_loadu_si128 ((const __m128i *)(in + i + 12)),
                                    _mm_loadu_si128 ((const __m128i *)(in + i)));
      __m256i hi, lo, idx, cls, upper;

      v = _mm256_shuffle_epi8 (v, shuf);
      hi = _mm256_mulhi_epu16 (_mm256_and_si256 (v, _mm256_set1_epi32 (0x0fc0fc00)),
                               _mm256_set1_epi32 (0x04000040));
      lo = _mm256_mullo_epi16 (_mm256_and_si256 (v, _mm256_set1_epi32 (0x003f03f0)),
                               _mm256_set1_epi32 (0x01000010));
      idx = _mm256_or_si256 (hi, lo);
      /* 0: a-z, 1..10: 0-9, 11: '+', 12: '/', 13: A-Z; then the offset from the table. */
      cls = _mm256_subs_epu8 (idx, _mm256_set1_epi8 (51));
      upper = _mm256_cmpgt_epi8 (_mm256_set1_epi8 (26), idx);
      cls = _mm256_or_si256 (cls, _mm256_and_si256 (upper, _mm256_set1_epi8 (13)));
      _mm256_storeu_si256 ((__m256i *)out,
                           _mm256_add_epi8 (_mm256_shuffle_epi8 (offsets, cls), idx));
    }
  return i;
}

/* 32 characters per step into 24 bytes (a 32-byte store: the caller leaves 8 bytes of room).
 * Returns the characters consumed, or -1 on a character outside the alphabet. Validation and
 * translation are nibble lookups (Wojciech Mula's pshufb bitmask method). */
__attribute__ ((target ("avx2"))) static gssize
decode_avx2 (const guint8 *in, gsize len, guint8 *out)
{
  const __m256i pack = _mm256_broadcastsi128_si256 (
      _mm_setr_epi8 (2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1));
  const __m256i lanes = _mm256_setr_epi32 (0, 1, 2, 4, 5, 6, 3, 7);
  /* Added to a character by its high nibble: '+' 0x2b -> 62 (and '/' 0x2f, 3 less, below),
   * '0'.. -> 52.., 'A'.. -> 0.., 'a'.. -> 26... */
  const __m256i shift_lut = _mm256_broadcastsi128_si256 (
      _mm_setr_epi8 (0, 0, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m256i mask_lut
      = _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *)valid_by_low_nibble));
  const __m256i bit_lut = _mm256_broadcastsi128_si256 (_mm_setr_epi8 (
      1, 2, 4, 8, 16, 32, 64, (char)128, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m256i nibble = _mm256_set1_epi8 (0x0f);
  gsize i = 0;

  for (; i + 32 <= len; i += 32, out += 24)
    {
      __m256i c = _mm256_loadu_si256 ((const __m256i *)(in + i));
      __m256i hi = _mm256_and_si256 (_mm256_srli_epi32 (c, 4), nibble);
      __m256i lo = _mm256_and_si256 (c, nibble);
      __m256i ok = _mm256_and_si256 (_mm256_shuffle_epi8 (mask_lut, lo),
                                     _mm256_shuffle_epi8 (bit_lut, hi));
      __m256i slash = _mm256_cmpeq_epi8 (c, _mm256_set1_epi8 ('/'));
      __m256i shift, v;

      /* A zero byte: a character outside the alphabet (bytes >= 0x80 have no bit at all). */
      if (_mm256_movemask_epi8 (_mm256_cmpeq_epi8 (ok, _mm256_setzero_si256 ())) != 0)
        return -1;
      shift = _mm256_add_epi8 (_mm256_shuffle_epi8 (shift_lut, hi),
                               _mm256_and_si256 (slash, _mm256_set1_epi8 (-3)));
      v = _mm256_add_epi8 (c, shift);
      /* Four 6-bit values -> one 24-bit group per 32-bit lane, then the bytes in order. */
      v = _mm256_maddubs_epi16 (v, _mm256_set1_epi32 (0x01400140));
      v = _mm256_madd_epi16 (v, _mm256_set1_epi32 (0x00011000));
      v = _mm256_permutevar8x32_epi32 (_mm256_shuffle_epi8 (v, pack), lanes);
      _mm256_storeu_si256 ((__m256i *)out, v);
    }
  return (gssize)i;
}

static gboolean
have_avx2 (void)
{
  static int cached = -1;

  if (cached < 0)
    cached = __builtin_cpu_supports ("avx2") ? 1 : 0;
  return cached == 1;
}

#endif

gsize
nz_base64_encode (const guint8 *in, gsize len, char *out)
{
  char *o = out;
  gsize i = 0;

  tables_init ();
#ifdef NZ_BASE64_AVX2
  if (have_avx2 ())
    {
      i = encode_avx2 (in, len, o);
      o += i / 3 * 4;
    }
#endif
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
  i = 0;
#ifdef NZ_BASE64_AVX2
  /* The vector loop stores 32 bytes per 24 it decodes: stop it 32 characters early, so the
   * 8 extra bytes land where the rest of the output goes. */
  if (have_avx2 () && full >= 64)
    {
      gssize done = decode_avx2 (p, full - 32, o);

      if (done < 0)
        return -1;
      i = (gsize)done;
      o += i / 4 * 3;
    }
#endif
  for (; i < full; i += 4)
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

guint8 *
nz_base64_decode_lenient (const char *text, gsize *out_len)
{
  gsize len = strlen (text);
  guint8 *out = g_malloc (NZ_BASE64_DECODED_MAX (len) + 1);
  gssize n = nz_base64_decode (text, len, out);

  if (n < 0)
    {
      g_free (out);
      return g_base64_decode (text, out_len);
    }
  *out_len = (gsize)n;
  return out;
}
