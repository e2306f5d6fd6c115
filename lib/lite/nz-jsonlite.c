#include "nz-jsonlite.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  const unsigned char *p, *end;
} Cur;

static void
skip_ws (Cur *c)
{
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static bool
literal (Cur *c, const char *word)
{
  size_t n = strlen (word);

  if ((size_t)(c->end - c->p) < n || memcmp (c->p, word, n) != 0)
    return false;
  c->p += n;
  return true;
}

int
nz_jl_hex_value (unsigned char ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* Reads "\uXXXX" at @p (the backslash). */
static bool
read_u_escape (const unsigned char *p, const unsigned char *end, uint32_t *out)
{
  uint32_t u = 0;

  if (end - p < 6 || p[0] != '\\' || p[1] != 'u')
    return false;
  for (int i = 2; i < 6; i++)
    {
      int h = nz_jl_hex_value (p[i]);

      if (h < 0)
        return false;
      u = u << 4 | (uint32_t)h;
    }
  *out = u;
  return true;
}

/* One escape at @p (the backslash): its code point and its length in the text. A high
 * surrogate must be followed by a low one; a lone surrogate is no character. */
static bool
read_escape (const unsigned char *p, const unsigned char *end, uint32_t *cp, size_t *used)
{
  static const char simple[] = "\"\\/bfnrt";
  static const char decoded[] = "\"\\/\b\f\n\r\t";
  const char *s;
  uint32_t hi, lo;

  if (end - p < 2)
    return false;
  if (p[1] != 'u')
    {
      if (p[1] == '\0' || (s = strchr (simple, p[1])) == NULL)
        return false;
      *cp = (unsigned char)decoded[s - simple];
      *used = 2;
      return true;
    }
  if (!read_u_escape (p, end, &hi))
    return false;
  if (hi >= 0xDC00 && hi <= 0xDFFF)
    return false;
  if (hi < 0xD800 || hi > 0xDBFF)
    {
      *cp = hi;
      *used = 6;
      return true;
    }
  if (!read_u_escape (p + 6, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
    return false;
  *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
  *used = 12;
  return true;
}

/* Length of the well-formed UTF-8 sequence at @p (no overlongs, no surrogates, at most
 * U+10FFFF), or 0. */
static size_t
utf8_len (const unsigned char *p, const unsigned char *end)
{
  size_t n;
  uint32_t cp, min;

  if (p[0] < 0x80)
    return 1;
  if (p[0] >= 0xC2 && p[0] <= 0xDF)
    n = 2, cp = p[0] & 0x1F, min = 0x80;
  else if (p[0] >= 0xE0 && p[0] <= 0xEF)
    n = 3, cp = p[0] & 0x0F, min = 0x800;
  else if (p[0] >= 0xF0 && p[0] <= 0xF4)
    n = 4, cp = p[0] & 0x07, min = 0x10000;
  else
    return 0;
  if ((size_t)(end - p) < n)
    return 0;
  for (size_t i = 1; i < n; i++)
    {
      if ((p[i] & 0xC0) != 0x80)
        return 0;
      cp = cp << 6 | (p[i] & 0x3F);
    }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

size_t
nz_jl_utf8_len (const char *p, size_t avail)
{
  return utf8_len ((const unsigned char *)p, (const unsigned char *)p + avail);
}

static bool
scan_string (Cur *c)
{
  c->p++; /* the opening quote */
  while (c->p < c->end)
    {
      uint32_t cp;
      size_t n;

      if (*c->p == '"')
        {
          c->p++;
          return true;
        }
      if (*c->p < 0x20)
        return false;
      if (*c->p == '\\')
        {
          if (!read_escape (c->p, c->end, &cp, &n))
            return false;
        }
      else if ((n = utf8_len (c->p, c->end)) == 0)
        return false;
      c->p += n;
    }
  return false;
}

static bool
scan_digits (Cur *c)
{
  const unsigned char *start = c->p;

  while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
    c->p++;
  return c->p > start;
}

static bool
scan_number (Cur *c)
{
  if (*c->p == '-')
    c->p++;
  if (c->p < c->end && *c->p == '0')
    c->p++;
  else if (c->p >= c->end || *c->p < '1' || *c->p > '9' || !scan_digits (c))
    return false;
  if (c->p < c->end && *c->p == '.')
    {
      c->p++;
      if (!scan_digits (c))
        return false;
    }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E'))
    {
      c->p++;
      if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
        c->p++;
      if (!scan_digits (c))
        return false;
    }
  return true;
}

static bool scan_value (Cur *c, int depth, NzJlValue *out);

/* An object's or array's body after the opening bracket, up to and including @close. */
static bool
scan_container (Cur *c, int depth, bool object)
{
  char close = object ? '}' : ']';

  c->p++;
  skip_ws (c);
  if (c->p < c->end && *c->p == close)
    {
      c->p++;
      return true;
    }
  for (;;)
    {
      if (object)
        {
          skip_ws (c);
          if (c->p >= c->end || *c->p != '"' || !scan_string (c))
            return false;
          skip_ws (c);
          if (c->p >= c->end || *c->p != ':')
            return false;
          c->p++;
        }
      if (!scan_value (c, depth + 1, NULL))
        return false;
      skip_ws (c);
      if (c->p >= c->end)
        return false;
      if (*c->p == close)
        {
          c->p++;
          return true;
        }
      if (*c->p != ',')
        return false;
      c->p++;
    }
}

static bool
scan_value (Cur *c, int depth, NzJlValue *out)
{
  const unsigned char *start;
  NzJlType type;
  bool ok;

  skip_ws (c);
  if (c->p >= c->end || depth > NZ_JL_MAX_DEPTH)
    return false;
  start = c->p;
  switch (*c->p)
    {
    case '{':
      type = NZ_JL_OBJECT, ok = scan_container (c, depth, true);
      break;
    case '[':
      type = NZ_JL_ARRAY, ok = scan_container (c, depth, false);
      break;
    case '"':
      type = NZ_JL_STRING, ok = scan_string (c);
      break;
    case 't':
      type = NZ_JL_TRUE, ok = literal (c, "true");
      break;
    case 'f':
      type = NZ_JL_FALSE, ok = literal (c, "false");
      break;
    case 'n':
      type = NZ_JL_NULL, ok = literal (c, "null");
      break;
    default:
      type = NZ_JL_NUMBER, ok = scan_number (c);
      break;
    }
  if (ok && out != NULL)
    *out = (NzJlValue){ type, (const char *)start, (size_t)(c->p - start) };
  return ok;
}

bool
nz_jl_parse (const char *text, size_t len, NzJlValue *root)
{
  Cur c = { (const unsigned char *)text, (const unsigned char *)text + len };

  if (text == NULL || !scan_value (&c, 0, root))
    return false;
  skip_ws (&c);
  return c.p == c.end;
}

static size_t
put_utf8 (unsigned char *o, uint32_t cp)
{
  if (cp < 0x80)
    return o[0] = (unsigned char)cp, 1;
  if (cp < 0x800)
    return o[0] = (unsigned char)(0xC0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000)
    return o[0] = (unsigned char)(0xE0 | cp >> 12), o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F)),
           o[2] = (unsigned char)(0x80 | (cp & 0x3F)), 3;
  o[0] = (unsigned char)(0xF0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

char *
nz_jl_string (const NzJlValue *v, size_t *len)
{
  const unsigned char *p, *end;
  unsigned char *buf, *o;

  if (v == NULL || v->type != NZ_JL_STRING || v->len < 2)
    return NULL;
  p = (const unsigned char *)v->start + 1;
  end = (const unsigned char *)v->start + v->len - 1;
  /* Decoding never grows the text: an escape is at least as long as what it stands for. */
  buf = o = malloc (v->len);
  if (buf == NULL)
    return NULL;
  while (p < end)
    {
      uint32_t cp;
      size_t used;

      if (*p != '\\')
        {
          *o++ = *p++;
          continue;
        }
      if (!read_escape (p, end, &cp, &used))
        {
          free (buf);
          return NULL;
        }
      o += put_utf8 (o, cp);
      p += used;
    }
  *o = '\0';
  if (len != NULL)
    *len = (size_t)(o - buf);
  return (char *)buf;
}

static bool
key_equals (const NzJlValue *key, const char *name)
{
  size_t n = strlen (name), got = 0;
  char *decoded;
  bool eq;

  if (memchr (key->start, '\\', key->len) == NULL)
    return key->len - 2 == n && memcmp (key->start + 1, name, n) == 0;
  /* No escape spells one byte in more than six characters: a longer key cannot be @name, and
   * is not decoded (an unauthenticated peer's 8 MiB key would cost 8 MiB more). */
  if (key->len - 2 > 6 * n)
    return false;
  decoded = nz_jl_string (key, &got);
  eq = decoded != NULL && got == n && memcmp (decoded, name, n) == 0;
  free (decoded);
  return eq;
}

bool
nz_jl_member (const NzJlValue *obj, const char *name, NzJlValue *out)
{
  Cur c;
  bool found = false;

  if (obj == NULL || obj->type != NZ_JL_OBJECT)
    return false;
  c = (Cur){ (const unsigned char *)obj->start + 1, (const unsigned char *)obj->start + obj->len };
  for (;;)
    {
      NzJlValue key, value;

      skip_ws (&c);
      if (c.p >= c.end || *c.p == '}')
        return found;
      if (*c.p == ',')
        {
          c.p++;
          skip_ws (&c);
        }
      if (!scan_value (&c, 1, &key) || key.type != NZ_JL_STRING)
        return false;
      skip_ws (&c);
      if (c.p >= c.end || *c.p != ':')
        return false;
      c.p++;
      if (!scan_value (&c, 1, &value))
        return false;
      if (key_equals (&key, name))
        {
          *out = value;
          found = true;
        }
    }
}

char *
nz_jl_member_string (const NzJlValue *obj, const char *name)
{
  NzJlValue v;

  if (!nz_jl_member (obj, name, &v) || v.type != NZ_JL_STRING)
    return NULL;
  return nz_jl_string (&v, NULL);
}

bool
nz_jl_number (const NzJlValue *v, double *out)
{
  char small[64];
  char *text = small, *end = NULL;
  bool ok;

  if (v == NULL || v->type != NZ_JL_NUMBER)
    return false;
  if (v->len >= sizeof small && (text = malloc (v->len + 1)) == NULL)
    return false;
  memcpy (text, v->start, v->len);
  text[v->len] = '\0';
  /* The C locale's strtod (nothing here calls setlocale) reads exactly JSON's grammar. */
  *out = strtod (text, &end);
  ok = end == text + v->len;
  if (text != small)
    free (text);
  return ok;
}

bool
nz_jl_member_bool (const NzJlValue *obj, const char *name, bool fallback)
{
  NzJlValue v;

  if (!nz_jl_member (obj, name, &v) || (v.type != NZ_JL_TRUE && v.type != NZ_JL_FALSE))
    return fallback;
  return v.type == NZ_JL_TRUE;
}
