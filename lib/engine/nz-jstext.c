#define _GNU_SOURCE
#include "nz-jstext.h"

#include <errno.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-json.h"

void
nz_jstext_append_json_lossy (GString *out, const void *data, gsize len)
{
  const guchar *s = data;
  gsize i = 0;

  g_string_append_c (out, '"');
  while (i < len)
    {
      guchar b = s[i];
      guint need;
      guchar lo = 0x80, hi = 0xBF;
      gsize j;
      gboolean ok = TRUE;

      if (b < 0x80)
        {
          nz_json_append_escaped_byte (out, b);
          i++;
          continue;
        }
      if (b >= 0xC2 && b <= 0xDF)
        need = 1;
      else if (b == 0xE0)
        need = 2, lo = 0xA0;
      else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
        need = 2;
      else if (b == 0xED)
        need = 2, hi = 0x9F;
      else if (b == 0xF0)
        need = 3, lo = 0x90;
      else if (b >= 0xF1 && b <= 0xF3)
        need = 3;
      else if (b == 0xF4)
        need = 3, hi = 0x8F;
      else
        {
          g_string_append (out, "\xEF\xBF\xBD");
          i++;
          continue;
        }
      /* One U+FFFD per maximal subpart: stop at the first byte that cannot continue. */
      j = i + 1;
      for (guint k = 0; k < need; k++, j++)
        {
          guchar c;

          if (j >= len)
            {
              ok = FALSE;
              break;
            }
          c = s[j];
          if (c < (k == 0 ? lo : 0x80) || c > (k == 0 ? hi : 0xBF))
            {
              ok = FALSE;
              break;
            }
        }
      if (ok)
        g_string_append_len (out, (const char *)s + i, (gssize)(j - i));
      else
        g_string_append (out, "\xEF\xBF\xBD");
      i = j;
    }
  g_string_append_c (out, '"');
}

void
nz_jstext_append_json_string (GString *out, const char *s)
{
  nz_jstext_append_json_lossy (out, s, strlen (s));
}

const char *
nz_jstext_errno_name (int errsv)
{
  const char *name = strerrorname_np (errsv);

  return name != NULL ? name : "EUNKNOWN";
}

gboolean
nz_jstext_throw_errno (GError **error, int errsv, const char *syscall, const char *path)
{
  g_autofree char *msg = g_strdup (g_strerror (errsv));

  /* libuv spells these in lower case ("no such file or directory"). */
  if (msg[0] != '\0')
    msg[0] = g_ascii_tolower (msg[0]);
  if (path != NULL)
    g_set_error (error, NZ_ERROR, nz_error_code_from_errno (errsv), "%s: %s, %s '%s'",
                 nz_jstext_errno_name (errsv), msg, syscall, path);
  else
    g_set_error (error, NZ_ERROR, nz_error_code_from_errno (errsv), "%s: %s, %s",
                 nz_jstext_errno_name (errsv), msg, syscall);
  return FALSE;
}
