/* nz-kube-proxy.c: HTTPS_PROXY / NO_PROXY as kubectl reads them (nz-kube-proxy.h). */
#include "nz-kube-proxy.h"

#include <gio/gio.h>
#include <string.h>

/* Go's net.SplitHostPort for a NO_PROXY entry: "h:p" or "[v6]:p"; FALSE when there is no port
 * (a bare IPv6 address has colons but no brackets). */
static gboolean
split_host_port (const char *entry, char **host, char **port)
{
  const char *colon = strrchr (entry, ':');

  if (colon == NULL)
    return FALSE;
  if (entry[0] == '[')
    {
      const char *close = strchr (entry, ']');

      if (close == NULL || close + 1 != colon)
        return FALSE;
      *host = g_strndup (entry + 1, close - entry - 1);
    }
  else if (strchr (entry, ':') != colon)
    return FALSE;
  else
    *host = g_strndup (entry, colon - entry);
  *port = g_strdup (colon + 1);
  return TRUE;
}

static gboolean
port_matches (const char *want, guint port)
{
  g_autofree char *have = g_strdup_printf ("%u", port);

  return want == NULL || g_str_equal (want, have);
}

/* One NO_PROXY entry (trimmed, lower-cased) against the request. */
static gboolean
entry_matches (const char *entry, const char *host, GInetAddress *ip, guint port)
{
  g_autoptr (GInetAddressMask) mask = NULL;
  g_autoptr (GInetAddress) eip = NULL;
  g_autofree char *ehost = NULL;
  g_autofree char *eport = NULL;
  g_autofree char *domain = NULL;
  gboolean match_host;
  gsize hl, dl;

  if (strchr (entry, '/') != NULL)
    {
      mask = g_inet_address_mask_new_from_string (entry, NULL);
      return mask != NULL && ip != NULL && g_inet_address_mask_matches (mask, ip);
    }
  if (!split_host_port (entry, &ehost, &eport))
    ehost = g_strdup (entry);
  if (*ehost == '\0')
    return FALSE; /* ":80": no host, malformed; Go ignores it */
  if ((eip = g_inet_address_new_from_string (ehost)) != NULL)
    return ip != NULL && g_inet_address_equal (eip, ip) && port_matches (eport, port);
  /* "*.d" is ".d"; "d" matches d and its subdomains, ".d" only the subdomains. */
  match_host = ehost[0] != '.' && !g_str_has_prefix (ehost, "*.");
  domain = g_str_has_prefix (ehost, "*.") ? g_strdup (ehost + 1)
           : ehost[0] == '.'              ? g_strdup (ehost)
                                          : g_strconcat (".", ehost, NULL);
  hl = strlen (host);
  dl = strlen (domain);
  if ((hl >= dl && g_str_equal (host + hl - dl, domain))
      || (match_host && g_str_equal (host, domain + 1)))
    return port_matches (eport, port);
  return FALSE;
}

static gboolean
use_proxy (const char *host_in, guint port, const char *no_proxy)
{
  g_autofree char *host = g_ascii_strdown (host_in, -1);
  g_autoptr (GInetAddress) ip = g_inet_address_new_from_string (host);
  g_auto (GStrv) entries = NULL;

  if (g_str_equal (host, "localhost") || (ip != NULL && g_inet_address_get_is_loopback (ip)))
    return FALSE;
  if (no_proxy == NULL)
    return TRUE;
  entries = g_strsplit (no_proxy, ",", -1);
  for (guint i = 0; entries[i] != NULL; i++)
    {
      g_autofree char *e = g_ascii_strdown (g_strstrip (entries[i]), -1);

      if (g_str_equal (e, "*"))
        return FALSE;
      if (*e != '\0' && entry_matches (e, host, ip, port))
        return FALSE;
    }
  return TRUE;
}

char *
nz_kube_proxy_for (const char *host, guint port, const char *https_proxy, const char *no_proxy,
                   GError **error)
{
  g_autofree char *uri_text = NULL;
  g_autoptr (GUri) uri = NULL;
  const char *scheme;

  g_return_val_if_fail (host != NULL, NULL);
  if (https_proxy == NULL || *https_proxy == '\0' || !use_proxy (host, port, no_proxy))
    return NULL;
  /* Go: a value without a scheme (or that does not parse with one) is tried as http://. */
  uri = g_uri_parse (https_proxy, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    {
      g_clear_pointer (&uri, g_uri_unref);
      uri_text = g_strconcat ("http://", https_proxy, NULL);
      uri = g_uri_parse (uri_text, G_URI_FLAGS_NONE, NULL);
    }
  if (uri == NULL || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    return (g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                         "HTTPS_PROXY is not a proxy URL (write http://HOST:PORT)"),
            NULL);
  scheme = g_uri_get_scheme (uri);
  /* The message names the scheme only: the URL may carry a password. */
  if (g_ascii_strcasecmp (scheme, "http") != 0 && g_ascii_strcasecmp (scheme, "https") != 0
      && g_ascii_strcasecmp (scheme, "socks5") != 0)
    return (g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                         "HTTPS_PROXY: scheme '%s' is not a proxy namzu can use (http, https or "
                         "socks5)",
                         scheme),
            NULL);
  return g_uri_to_string (uri);
}

char *
nz_kube_proxy_from_env (const char *host, guint port, GError **error)
{
  const char *https_proxy = g_getenv ("HTTPS_PROXY");
  const char *no_proxy = g_getenv ("NO_PROXY");

  if (https_proxy == NULL)
    https_proxy = g_getenv ("https_proxy");
  if (no_proxy == NULL)
    no_proxy = g_getenv ("no_proxy");
  return nz_kube_proxy_for (host, port, https_proxy, no_proxy, error);
}
