/* nz-lite-upgrade: see nz-lite-upgrade.h. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nz-jsonlite.h"
#include "nz-lite-upgrade.h"

#define UNAUTHORIZED_HINT                                                                          \
  "the worker refused the credential: the token given (NAMZU_TOKEN or the sandbox handle's) "      \
  "is not the NAMZU_SANDBOX_TOKEN this worker was started with"

/* C's isspace in the C locale, which is what g_strstrip strips. */
static bool
is_space (char ch)
{
  return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

/* Narrows [*@p, *@end) to its text without surrounding white space. */
static void
strip (const char **p, const char **end)
{
  while (*p < *end && is_space (**p))
    (*p)++;
  while (*end > *p && is_space ((*end)[-1]))
    (*end)--;
}

bool
nz_lite_upgrade_header (const char *head, size_t len, const char *name, const char **value,
                        const char **value_end)
{
  const char *end = head + len, *line = head, *eol;
  size_t name_len = strlen (name);

  for (; line < end; line = eol + 2)
    {
      eol = memmem (line, (size_t)(end - line), "\r\n", 2);
      if (eol == NULL)
        eol = end;
      if (line != head && (size_t)(eol - line) > name_len && line[name_len] == ':'
          && strncasecmp (line, name, name_len) == 0)
        {
          *value = line + name_len + 1;
          *value_end = eol;
          strip (value, value_end);
          return true;
        }
      if (eol == end)
        break;
    }
  return false;
}

/* Whether the comma-separated header @name lists @token (case aside). */
static bool
header_has_token (const char *head, size_t len, const char *name, const char *token)
{
  const char *value, *end, *item, *comma;

  if (!nz_lite_upgrade_header (head, len, name, &value, &end))
    return false;
  for (item = value; item <= end; item = comma + 1)
    {
      const char *item_end;

      comma = memchr (item, ',', (size_t)(end - item));
      if (comma == NULL)
        comma = end;
      item_end = comma;
      strip (&item, &item_end);
      if ((size_t)(item_end - item) == strlen (token)
          && strncasecmp (item, token, strlen (token)) == 0)
        return true;
    }
  return false;
}

/* A Content-Length: decimal digits only, no sign, no overflow. */
static bool
content_length (const char *head, size_t len, size_t *out)
{
  const char *value, *end;
  unsigned long long n = 0;

  if (!nz_lite_upgrade_header (head, len, "Content-Length", &value, &end) || value == end)
    return false;
  for (const char *p = value; p < end; p++)
    {
      if (*p < '0' || *p > '9' || n > (~0ull - (unsigned)(*p - '0')) / 10)
        return false;
      n = n * 10 + (unsigned)(*p - '0');
    }
  *out = n > NZ_LITE_UPGRADE_BODY_LIMIT ? NZ_LITE_UPGRADE_BODY_LIMIT : (size_t)n;
  return true;
}

/* The status of "HTTP/1.x NNN[ reason]" at the start of @head, or 0. */
static unsigned
status_code (const char *head, size_t len)
{
  unsigned code = 0;

  if (len < 12 || strncmp (head, "HTTP/1.", 7) != 0 || head[8] != ' '
      || (len > 12 && head[12] != ' ' && head[12] != '\r'))
    return 0;
  for (int i = 9; i < 12; i++)
    {
      if (head[i] < '0' || head[i] > '9')
        return 0;
      code = code * 10 + (unsigned)(head[i] - '0');
    }
  return code >= 100 && code <= 599 ? code : 0;
}

void
nz_lite_upgrade_authority (NzLiteBuf *b, const char *host, unsigned port)
{
  /* An IPv6 literal's colons would read as the port's (RFC 9110 section 7.2). */
  if (strchr (host, ':') != NULL)
    nz_lite_buf_printf (b, "[%s]:%u", host, port);
  else
    nz_lite_buf_printf (b, "%s:%u", host, port);
}

void
nz_lite_upgrade_request (NzLiteBuf *b, const char *host, unsigned port, const char *token)
{
  nz_lite_buf_str (b, "GET " NZ_LITE_UPGRADE_PATH " HTTP/1.1\r\nHost: ");
  nz_lite_upgrade_authority (b, host, port);
  nz_lite_buf_str (b, "\r\nUser-Agent: namzu\r\nConnection: Upgrade\r\n"
                      "Upgrade: " NZ_LITE_UPGRADE_PROTOCOL "\r\n");
  /* Like the reference client: no header at all without a token (spec D.1). */
  if (token != NULL && *token != '\0')
    nz_lite_buf_printf (b, "Authorization: Bearer %s\r\n", token);
  nz_lite_buf_str (b, "\r\n");
}

NzLiteUpgradeStep
nz_lite_upgrade_parse (const char *data, size_t len, bool eof, NzLiteUpgradeHead *h)
{
  const char *end;
  size_t head;

  *h = (NzLiteUpgradeHead){ .step = NZ_LITE_UPGRADE_MORE };
  /* Nothing yet (a caller's empty buffer may have no storage at all). */
  if (data == NULL || len == 0)
    return h->step = eof ? NZ_LITE_UPGRADE_CLOSED : NZ_LITE_UPGRADE_MORE;
  end = len >= 4 ? memmem (data, len, "\r\n\r\n", 4) : NULL;
  head = end != NULL ? (size_t)(end - data) : len;
  /* Only the bytes within the limit are looked at, so how the head was cut into reads does
   * not change the answer. */
  if (memchr (data, '\0', head < NZ_LITE_UPGRADE_HEAD_LIMIT ? head : NZ_LITE_UPGRADE_HEAD_LIMIT)
      != NULL)
    return h->step = NZ_LITE_UPGRADE_NOT_HTTP;
  /* Without the blank line yet, the head is over the limit once no blank line could still
   * end it within the limit. */
  if (end != NULL ? head > NZ_LITE_UPGRADE_HEAD_LIMIT : len > NZ_LITE_UPGRADE_HEAD_LIMIT + 3)
    return h->step = NZ_LITE_UPGRADE_HEAD_TOO_LARGE;
  if (end == NULL)
    return h->step = eof ? NZ_LITE_UPGRADE_CLOSED : NZ_LITE_UPGRADE_MORE;
  if ((h->status = status_code (data, head)) == 0)
    return h->step = NZ_LITE_UPGRADE_NOT_HTTP;
  h->head_len = head + 4;
  if (h->status == 101)
    {
      h->body_sized = true;
      return h->step = header_has_token (data, head, "Upgrade", NZ_LITE_UPGRADE_PROTOCOL)
                           ? NZ_LITE_UPGRADE_UPGRADED
                           : NZ_LITE_UPGRADE_REFUSED;
    }
  h->body_sized = content_length (data, head, &h->body_len);
  if (!h->body_sized)
    h->body_len = NZ_LITE_UPGRADE_BODY_LIMIT;
  return h->step = NZ_LITE_UPGRADE_REFUSED;
}

void
nz_lite_upgrade_shown (NzLiteBuf *out, const char *data, size_t len)
{
  const char *end;

  if (len > NZ_LITE_UPGRADE_SHOWN_BODY)
    len = NZ_LITE_UPGRADE_SHOWN_BODY;
  end = memchr (data, '\0', len);
  if (end != NULL)
    len = (size_t)(end - data);
  nz_lite_buf_add (out, "", 0);
  for (size_t i = 0, n; i < len; i += n)
    {
      char ch = data[i];

      if ((n = nz_jl_utf8_len (data + i, len - i)) == 0)
        {
          /* One byte at a time, as g_utf8_make_valid steps over what is ill-formed. */
          nz_lite_buf_str (out, "\xef\xbf\xbd");
          n = 1;
        }
      else if (ch == '\r' || ch == '\n' || ch == '\t')
        nz_lite_buf_str (out, " ");
      else
        nz_lite_buf_add (out, data + i, n);
    }
}

/* Whether @body is a JSON object whose "error" is @code. */
static bool
error_is (const char *body, size_t len, const char *code)
{
  NzJlValue obj;
  char *got;
  bool is;

  if (!nz_jl_parse (body, len, &obj) || obj.type != NZ_JL_OBJECT)
    return false;
  got = nz_jl_member_string (&obj, "error");
  is = got != NULL && strcmp (got, code) == 0;
  free (got);
  return is;
}

NzLiteUpgradeErrKind
nz_lite_upgrade_words (const NzLiteUpgradeHead *h, const char *data, size_t len, const char *what,
                       NzLiteBuf *out)
{
  const char *body = data + (h->head_len < len ? h->head_len : len);
  size_t body_len = len > h->head_len ? len - h->head_len : 0;
  NzLiteBuf shown = { 0 };
  NzLiteUpgradeErrKind kind = NZ_LITE_UPGRADE_ERR_FAILED;

  switch (h->step)
    {
    case NZ_LITE_UPGRADE_CLOSED:
      /* Not a protocol error: a port published before the worker listens (docker-proxy)
       * accepts and closes, and a readiness loop must wait that out. */
      nz_lite_buf_str (out, "the peer closed the connection before a complete HTTP response");
      return NZ_LITE_UPGRADE_ERR_FAILED;
    case NZ_LITE_UPGRADE_HEAD_TOO_LARGE:
      nz_lite_buf_printf (out, "the peer's response head exceeds %u bytes: not a namzu-worker",
                          NZ_LITE_UPGRADE_HEAD_LIMIT);
      return NZ_LITE_UPGRADE_ERR_PROTOCOL;
    case NZ_LITE_UPGRADE_NOT_HTTP:
      {
        const char *end = len >= 4 ? memmem (data, len, "\r\n\r\n", 4) : NULL;
        size_t head = end != NULL ? (size_t)(end - data) : len, line = 0;

        while (line < head && data[line] != '\r' && data[line] != '\n')
          line++;

        /* The bytes parse looked at: NUL is no text, so no line shows it. */
        if (memchr (data, '\0',
                    head < NZ_LITE_UPGRADE_HEAD_LIMIT ? head : NZ_LITE_UPGRADE_HEAD_LIMIT)
            != NULL)
          nz_lite_buf_str (out, "not an HTTP response: a NUL byte in its head");
        else
          nz_lite_buf_printf (
              out, "not an HTTP response: \"%.*s\"",
              (int)(line < NZ_LITE_UPGRADE_SHOWN_BODY ? line : NZ_LITE_UPGRADE_SHOWN_BODY), data);
        return NZ_LITE_UPGRADE_ERR_PROTOCOL;
      }
    case NZ_LITE_UPGRADE_MORE:
    case NZ_LITE_UPGRADE_UPGRADED:
    case NZ_LITE_UPGRADE_REFUSED:
    default:
      break;
    }
  if (h->status == 101)
    {
      nz_lite_buf_printf (
          out, "%s: the worker switched to a protocol other than " NZ_LITE_UPGRADE_PROTOCOL, what);
      return NZ_LITE_UPGRADE_ERR_PROTOCOL;
    }
  if (body_len > h->body_len)
    body_len = h->body_len;
  nz_lite_upgrade_shown (&shown, body, body_len);
  if (h->status == 401)
    {
      nz_lite_buf_printf (out, "%s failed: HTTP 401 %s (" UNAUTHORIZED_HINT ")", what, shown.data);
      kind = NZ_LITE_UPGRADE_ERR_PERMISSION_DENIED;
    }
  else if (h->status == 503 && error_is (body, body_len, "worker_retiring"))
    nz_lite_buf_printf (out,
                        "%s failed: HTTP 503 worker_retiring: the worker fenced itself after "
                        "a process-group shutdown could not be confirmed, so the sandbox "
                        "must be recreated",
                        what);
  else if (h->status == 404)
    {
      nz_lite_buf_printf (out,
                          "%s is not available: the worker has no GET " NZ_LITE_UPGRADE_PATH
                          " upgrade route (HTTP 404 %s); run a namzu-worker from the same "
                          "namzu release",
                          what, shown.data);
      kind = NZ_LITE_UPGRADE_ERR_UNSUPPORTED;
    }
  else
    nz_lite_buf_printf (out, "%s failed: HTTP %u %s", what, h->status, shown.data);
  free (shown.data);
  return kind;
}
