/* nz-lite-endpoint: see nz-lite-endpoint.h. */
#define _GNU_SOURCE
#include "nz-lite-endpoint.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool refuse (char *why, size_t why_size, const char *text, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static bool
refuse (char *why, size_t why_size, const char *text, const char *fmt, ...)
{
  char words[256];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (words, sizeof words, fmt, ap);
  va_end (ap);
  snprintf (why, why_size, "agent endpoint \"%.*s\": %s", PATH_MAX, text, words);
  return false;
}

/* Digits only, in [@min, @max]. */
static bool
parse_number (const char *s, unsigned long long min, unsigned long long max,
              unsigned long long *out)
{
  unsigned long long n = 0;

  if (*s == '\0')
    return false;
  for (; *s != '\0'; s++)
    if (*s < '0' || *s > '9' || (n = n * 10 + (unsigned)(*s - '0')) > max)
      return false;
  *out = n;
  return n >= min;
}

/* "HOST:PORT" (IPv6 hosts in brackets: the port separator stays unambiguous), @len bytes at
 * @hostport of @text, into @ep; @form names the expected shape. */
static bool
parse_host_port (const char *text, const char *hostport, size_t len, const char *form,
                 NzLiteEndpoint *ep, char *why, size_t why_size)
{
  char *host = strndup (hostport, len);
  char *colon = strrchr (host, ':');
  unsigned long long port = 0;
  size_t n;

  if (colon == NULL || colon == host || !parse_number (colon + 1, 1, 65535, &port))
    {
      free (host);
      return refuse (why, why_size, text, "expected %s with a port in [1, 65535]", form);
    }
  *colon = '\0';
  n = strlen (host);
  if (host[0] == '[' && (n < 3 || host[n - 1] != ']'))
    {
      free (host);
      return refuse (why, why_size, text, "unterminated [IPv6] host");
    }
  if (host[0] != '[' && strchr (host, ':') != NULL)
    {
      free (host);
      return refuse (why, why_size, text, "write an IPv6 host in brackets, [::1]:PORT");
    }
  if (host[0] == '[')
    {
      memmove (host, host + 1, n - 2);
      host[n - 2] = '\0';
    }
  ep->host = host;
  ep->port = (unsigned)port;
  return true;
}

static void
describe (NzLiteEndpoint *ep)
{
  const char *scheme = ep->kind == NZ_LITE_EP_HTTP ? "http://" : "tcp:";
  bool v6 = ep->host != NULL && strchr (ep->host, ':') != NULL;

  if (ep->kind == NZ_LITE_EP_UNIX)
    snprintf (ep->desc, sizeof ep->desc, "unix:%s", ep->path);
  else if (ep->kind == NZ_LITE_EP_VSOCK)
    snprintf (ep->desc, sizeof ep->desc, "vsock:%s#%u", ep->path, ep->vsock_port);
  else
    snprintf (ep->desc, sizeof ep->desc, v6 ? "%s[%.255s]:%u" : "%s%.255s:%u", scheme, ep->host,
              ep->port);
}

bool
nz_lite_endpoint_parse (const char *text, NzLiteEndpoint *ep, char *why, size_t why_size)
{
  *ep = (NzLiteEndpoint){ 0 };
  if (strncmp (text, "unix:", 5) == 0)
    {
      if (text[5] != '/')
        return refuse (why, why_size, text, "a unix socket path must be absolute");
      if (strlen (text + 5) >= PATH_MAX)
        return refuse (why, why_size, text, "a unix socket path is shorter than %d bytes",
                       PATH_MAX);
      ep->kind = NZ_LITE_EP_UNIX;
      ep->path = strdup (text + 5);
    }
  else if (strncmp (text, "tcp:", 4) == 0)
    {
      ep->kind = NZ_LITE_EP_TCP;
      if (!parse_host_port (text, text + 4, strlen (text + 4), "tcp:HOST:PORT", ep, why, why_size))
        return false;
    }
  else if (strncasecmp (text, "http://", 7) == 0)
    {
      /* A namzu-worker: its base URL, as the docker backend records it (spec B.6). */
      const char *hp = text + 7;
      size_t n = strlen (hp);

      while (n > 0 && hp[n - 1] == '/')
        n--;
      if (memchr (hp, '/', n) != NULL || memchr (hp, '@', n) != NULL)
        return refuse (why, why_size, text,
                       "a worker endpoint is http://HOST:PORT, with no path or credentials");
      ep->kind = NZ_LITE_EP_HTTP;
      if (!parse_host_port (text, hp, n, "http://HOST:PORT", ep, why, why_size))
        return false;
    }
  else if (strncmp (text, "vsock:", 6) == 0)
    {
      const char *uds = text + 6;
      const char *hash = strrchr (uds, '#');
      unsigned long long port = 0;
      bool ok = hash != NULL && uds[0] == '/' && (size_t)(hash - uds) < PATH_MAX
                && parse_number (hash + 1, 0, 4294967295ull, &port);
      if (!ok)
        return refuse (why, why_size, text, "expected vsock:/ABSOLUTE/UDS#PORT");
      ep->kind = NZ_LITE_EP_VSOCK;
      ep->path = strndup (uds, (size_t)(hash - uds));
      ep->vsock_port = (unsigned)port;
    }
  else
    return refuse (why, why_size, text,
                   "expected unix:/ABSOLUTE/PATH, tcp:HOST:PORT, vsock:/ABSOLUTE/UDS#PORT or "
                   "http://HOST:PORT");
  describe (ep);
  return true;
}

void
nz_lite_endpoint_clear (NzLiteEndpoint *ep)
{
  free (ep->path);
  free (ep->host);
  *ep = (NzLiteEndpoint){ 0 };
}
