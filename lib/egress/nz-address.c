#include "nz-address.h"

#include <string.h>

static const char *
v4_reason (const guint8 *b)
{
  if (b[0] == 127)
    return "loopback";
  if (b[0] == 0)
    return "this-host";
  if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
    return "private";
  if (b[0] == 169 && b[1] == 254)
    return "link-local";
  if (b[0] == 100 && (b[1] & 0xc0) == 64)
    return "shared-address-space";
  if (b[0] == 198 && (b[1] & 0xfe) == 18)
    return "benchmarking";
  if (b[0] >= 224 && b[0] <= 239)
    return "multicast";
  if (b[0] >= 240)
    return "reserved";
  return NULL;
}

static const char *
v6_reason (const guint8 *b)
{
  static const guint8 zero[12] = { 0 };

  if (memcmp (b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
    return v4_reason (b + 12); /* ::ffff:a.b.c.d */
  if (memcmp (b, zero, 12) == 0)
    {
      guint32 tail
          = ((guint32)b[12] << 24) | ((guint32)b[13] << 16) | ((guint32)b[14] << 8) | b[15];

      if (tail == 0)
        return "unspecified";
      if (tail == 1)
        return "loopback";
      return v4_reason (b + 12); /* ::a.b.c.d, v4-compatible */
    }
  if ((b[0] & 0xfe) == 0xfc)
    return "unique-local";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return "link-local";
  if (b[0] == 0xff)
    return "multicast";
  return NULL;
}

const char *
nz_address_blocked_reason (GInetAddress *address, GPtrArray *local)
{
  const guint8 *b;
  const char *r;

  g_return_val_if_fail (G_IS_INET_ADDRESS (address), "invalid");
  b = g_inet_address_to_bytes (address);
  r = g_inet_address_get_family (address) == G_SOCKET_FAMILY_IPV4 ? v4_reason (b) : v6_reason (b);
  if (r != NULL)
    return r;
  for (guint i = 0; local != NULL && i < local->len; i++)
    if (g_inet_address_equal (address, local->pdata[i]))
      return "host-interface";
  return NULL;
}

GInetAddress *
nz_address_parse_literal (const char *host)
{
  g_autofree char *h = g_strdup (host != NULL ? host : "");
  gsize len = strlen (h);
  char *start = h;
  char *pct;

  if (len >= 2 && h[0] == '[' && h[len - 1] == ']')
    {
      h[len - 1] = '\0';
      start = h + 1;
    }
  /* A zone id changes which link, not which address: screen the address. */
  pct = strchr (start, '%');
  if (pct != NULL && strchr (start, ':') != NULL)
    *pct = '\0';
  if (strchr (start, ':') == NULL)
    {
      /* Strict dotted quad: 4 parts of 1-3 digits, each <= 255 (inet_pton's rule too). */
      g_auto (GStrv) parts = NULL;

      for (char *p = start; *p != '\0'; p++)
        if (!g_ascii_isdigit (*p) && *p != '.')
          return NULL;
      parts = g_strsplit (start, ".", -1);
      if (g_strv_length (parts) != 4)
        return NULL;
      for (char **it = parts; *it != NULL; it++)
        if (**it == '\0' || strlen (*it) > 3 || g_ascii_strtoull (*it, NULL, 10) > 255)
          return NULL;
    }
  return g_inet_address_new_from_string (start);
}

const char *
nz_address_literal_reason (const char *host, GPtrArray *local)
{
  g_autoptr (GInetAddress) a = nz_address_parse_literal (host);

  return a != NULL ? nz_address_blocked_reason (a, local) : NULL;
}
