#include "nz-knobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nz-errors.h"

gboolean
nz_is_safe_integer (double v)
{
  return isfinite (v) && floor (v) == v && fabs (v) <= (double)NZ_MAX_SAFE_INTEGER;
}

gboolean
nz_parse_js_number (const char *text, double *out)
{
  g_autofree char *t = g_strstrip (g_strdup (text));
  char *end = NULL;
  double v;

  if (*t == '\0')
    {
      *out = 0;
      return TRUE;
    }
  /* Number() accepts 0x/0o/0b prefixes but not a sign with them, nor "inf"/"nan" spellings. */
  if (g_ascii_strncasecmp (t, "0x", 2) == 0 || g_ascii_strncasecmp (t, "0o", 2) == 0
      || g_ascii_strncasecmp (t, "0b", 2) == 0)
    {
      guint base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : 2;
      guint64 u;

      if (t[2] == '\0')
        return FALSE;
      if (!g_ascii_string_to_unsigned (t + 2, base, 0, G_MAXUINT64, &u, NULL))
        return FALSE;
      *out = (double)u;
      return TRUE;
    }
  for (const char *p = t; *p; p++)
    if (!(g_ascii_isdigit (*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-'))
      return FALSE;
  v = g_ascii_strtod (t, &end);
  if (end == NULL || *end != '\0' || !isfinite (v))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean
nz_knob_int (const char *name, gint64 fallback, gboolean allow_zero, gint64 *out, GError **error)
{
  const char *raw = g_getenv (name);
  double v;

  if (raw == NULL)
    {
      *out = fallback;
      return TRUE;
    }
  if (!nz_parse_js_number (raw, &v) || !nz_is_safe_integer (v) || v < 0 || (!allow_zero && v == 0))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s must be a %s safe integer", name,
                     allow_zero ? "non-negative" : "positive");
  *out = (gint64)v;
  return TRUE;
}
