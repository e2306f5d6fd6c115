#include "nz-allowlist.h"

#include <string.h>

char *
nz_allowlist_normalize_host (const char *host)
{
  g_autofree char *t = g_strstrip (g_strdup (host != NULL ? host : ""));
  char *lower = g_ascii_strdown (t, -1);
  gsize len = strlen (lower);

  if (len > 0 && lower[len - 1] == '.')
    lower[len - 1] = '\0';
  return lower;
}

gboolean
nz_allowlist_entry_matches (const char *entry, const char *host)
{
  g_autofree char *e = nz_allowlist_normalize_host (entry);
  g_autofree char *h = nz_allowlist_normalize_host (host);

  if (*h == '\0' || *e == '\0')
    return FALSE;
  if (e[0] == '.')
    return g_str_equal (h, e + 1) || (g_str_has_suffix (h, e) && strlen (h) > strlen (e));
  return g_str_equal (h, e);
}

const char *
nz_allowlist_match (const char *const *allowed, const char *host)
{
  for (gsize i = 0; allowed != NULL && allowed[i] != NULL; i++)
    if (nz_allowlist_entry_matches (allowed[i], host))
      return allowed[i];
  return NULL;
}

/* JS Number(s) is an integer: digits only here ("" counts as 0, like Number('')). Ports
 * outside 0..65535 are left to the port check, so keep them but clamp the parse. */
static gboolean
parse_port (const char *s, int *out)
{
  gint64 v = 0;

  for (const char *p = s; *p != '\0'; p++)
    {
      if (!g_ascii_isdigit (*p))
        return FALSE;
      v = v * 10 + (*p - '0');
      if (v > G_MAXINT / 2)
        return FALSE;
    }
  *out = (int)v;
  return TRUE;
}

void
nz_allowlist_split_authority (const char *authority, char **host, int *port)
{
  g_autofree char *a = g_strstrip (g_strdup (authority != NULL ? authority : ""));
  const char *colon;
  int p;

  *port = -1;
  if (a[0] == '[')
    {
      const char *close = strchr (a, ']');

      if (close == NULL)
        {
          *host = g_steal_pointer (&a);
          return;
        }
      *host = g_strndup (a + 1, close - a - 1);
      if (close[1] == ':' && parse_port (close + 2, &p))
        *port = p;
      return;
    }
  colon = strrchr (a, ':');
  if (colon != NULL && parse_port (colon + 1, &p))
    {
      *host = g_strndup (a, colon - a);
      *port = p;
      return;
    }
  *host = g_steal_pointer (&a);
}
