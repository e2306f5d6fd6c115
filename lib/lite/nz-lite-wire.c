/* nz-lite-wire: see nz-lite-wire.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nz-host-timing.h"
#include "nz-lite-upgrade.h"
#include "nz-lite-wire.h"

bool
nz_lite_wire_fail (NzLiteErr *e, NzLiteErrKind kind, const char *fmt, ...)
{
  va_list ap;

  e->kind = kind;
  va_start (ap, fmt);
  vsnprintf (e->msg, sizeof e->msg, fmt, ap);
  va_end (ap);
  return false;
}

int64_t
nz_lite_wire_now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- endpoints ------------------------------------------------------------------------------ */

bool
nz_lite_wire_parse_endpoint (const char *text, NzLiteEndpoint *ep)
{
  struct in_addr addr;
  char why[64]; /* the words are the full implementation's to give */

  if (!nz_lite_endpoint_parse (text, ep, why, sizeof why))
    return false;
  return ep->kind == NZ_LITE_EP_UNIX
         || (ep->kind != NZ_LITE_EP_VSOCK && inet_pton (AF_INET, ep->host, &addr) == 1);
}

/* ---- frames --------------------------------------------------------------------------------- */

void
nz_lite_wire_frame_header_write (char out[NZ_LITE_WIRE_FRAME_HEADER_LEN], size_t len)
{
  nz_lite_frame_header_write (out, len);
}

NzLiteFrameHeader
nz_lite_wire_frame_header_parse (const char *p, size_t avail, size_t limit, const char *desc,
                                 size_t *len, NzLiteErr *e)
{
  char why[160];
  uint64_t n = 0;

  switch (nz_lite_frame_header_check (p, avail, limit, &n, why, sizeof why))
    {
    case NZ_LITE_FRAME_HEADER_OK:
      *len = (size_t)n;
      return NZ_LITE_FRAME_HEADER_OK;
    case NZ_LITE_FRAME_HEADER_PARTIAL:
      return NZ_LITE_FRAME_HEADER_PARTIAL;
    case NZ_LITE_FRAME_HEADER_BAD:
    case NZ_LITE_FRAME_HEADER_OVER:
    default:
      nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: %s", desc, why);
      return NZ_LITE_FRAME_HEADER_BAD;
    }
}

/* ---- connections ---------------------------------------------------------------------------- */

bool
nz_lite_wire_signal_pending (NzLiteWire *w)
{
  struct signalfd_siginfo si;

  if (w->sigfd < 0 || read (w->sigfd, &si, sizeof si) != sizeof si)
    return false;
  w->signo = (int)si.ssi_signo;
  return true;
}

void
nz_lite_wire_close (NzLiteConn *k)
{
  if (k->fd >= 0)
    close (k->fd);
  free (k->in.data);
  *k = (NzLiteConn){ .fd = -1 };
}

/* Waits for @events on @k until @deadline; with @watch_signals a signal ends the wait. */
static bool
conn_wait (NzLiteWire *w, NzLiteConn *k, short events, int64_t deadline, bool watch_signals,
           NzLiteErr *e)
{
  for (;;)
    {
      struct pollfd p[2] = { { k->fd, events, 0 }, { w->sigfd, POLLIN, 0 } };
      int64_t left = deadline - nz_lite_wire_now_ms ();
      int r;

      if (left <= 0)
        return nz_lite_wire_fail (e, NZ_LITE_ERR_TIMED_OUT, "timed out");
      r = poll (p, watch_signals && w->sigfd >= 0 ? 2 : 1, (int)(left > INT_MAX ? INT_MAX : left));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "agent %s: poll: %s", w->ep.desc,
                                  strerror (errno));
      if (watch_signals && (p[1].revents & POLLIN) && nz_lite_wire_signal_pending (w))
        return nz_lite_wire_fail (e, NZ_LITE_ERR_CANCELLED, "Operation was cancelled");
      if (p[0].revents != 0)
        return true;
    }
}

/* An IPv4 literal only: a name would need NSS, which a static program cannot load reliably,
 * so names (and IPv6) are the full implementation's (nz_lite_wire_parse_endpoint checks). */
static int
dial_inet (const NzLiteEndpoint *ep, NzLiteErr *e)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t)ep->port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = 0, idle = NZ_HOST_TCP_KEEPALIVE_INITIAL_DELAY_S, on = 1, rc;
  socklen_t elen = sizeof err;
  struct pollfd p = { fd, POLLOUT, 0 };

  inet_pton (AF_INET, ep->host, &sa.sin_addr);
  if (fd < 0)
    err = errno;
  else if (connect (fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
    err = errno;
  else
    {
      while ((rc = poll (&p, 1, NZ_HOST_CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR)
        ;
      if (rc == 0)
        err = ETIMEDOUT;
      else if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    }
  if (err != 0)
    {
      nz_lite_wire_fail (e, NZ_LITE_ERR_DIAL, "Could not connect to %s: %s", ep->host,
                         strerror (err));
      if (fd >= 0)
        close (fd);
      return -1;
    }
  /* The agent's keepalive (spec D.2.1), so a dead peer is noticed. */
  setsockopt (fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt (fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  return fd;
}

static bool
send_all (NzLiteWire *w, NzLiteConn *k, const char *data, size_t len, bool watch_signals,
          NzLiteErr *e)
{
  while (len > 0)
    {
      ssize_t n;

      /* Write-idle bound: an agent that stops reading for this long is gone. */
      if (!conn_wait (w, k, POLLOUT, nz_lite_wire_now_ms () + NZ_HOST_READ_IDLE_TIMEOUT_MS,
                      watch_signals, e))
        return false;
      n = send (k->fd, data, len, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (n < 0)
        return nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "agent %s: Error sending data: %s",
                                  w->ep.desc, strerror (errno));
      data += n;
      len -= (size_t)n;
    }
  return true;
}

/* Reads more into @k->in. False on error; sets @k->eof at the end. */
static bool
conn_fill (NzLiteWire *w, NzLiteConn *k, int64_t deadline, bool watch_signals, NzLiteErr *e)
{
  char chunk[65536];
  ssize_t n;

  if (!conn_wait (w, k, POLLIN, deadline, watch_signals, e))
    return false;
  n = recv (k->fd, chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return true;
  /* A reset after the peer's last frame reads like a close. */
  if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE)))
    k->eof = true;
  else if (n < 0)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "agent %s: Error receiving data: %s",
                              w->ep.desc, strerror (errno));
  else
    nz_lite_buf_add (&k->in, chunk, (size_t)n);
  return true;
}

/* A worker: GET /v1/agent upgraded to namzu-agent/2 with the bearer token; what follows the
 * 101 head is agent framing. nz-lite-upgrade reads the head and words the refusals, as for
 * lib/client/nz-worker-http.c. */
static bool
http_upgrade (NzLiteWire *w, NzLiteConn *k, const char *what, NzLiteErr *e)
{
  static const NzLiteErrKind kinds[] = {
    [NZ_LITE_UPGRADE_ERR_FAILED] = NZ_LITE_ERR_FAILED,
    [NZ_LITE_UPGRADE_ERR_PROTOCOL] = NZ_LITE_ERR_PROTOCOL,
    /* As namzu-exec's report.c maps the client's codes: the outcome table has no row for
     * these, they are failures. */
    [NZ_LITE_UPGRADE_ERR_PERMISSION_DENIED] = NZ_LITE_ERR_FAILED,
    [NZ_LITE_UPGRADE_ERR_UNSUPPORTED] = NZ_LITE_ERR_FAILED,
  };
  int64_t deadline = nz_lite_wire_now_ms () + NZ_HOST_CONNECT_TIMEOUT_MS;
  NzLiteBuf req = { 0 }, words = { 0 };
  NzLiteUpgradeHead h;
  NzLiteUpgradeErrKind kind;
  bool sent;

  nz_lite_upgrade_request (&req, w->ep.host, w->ep.port, w->token);
  sent = send_all (w, k, req.data, req.len, true, e);
  explicit_bzero (req.data, req.len);
  free (req.data);
  if (!sent)
    return false;
  while (nz_lite_upgrade_parse (k->in.data ?: "", k->in.len, k->eof, &h) == NZ_LITE_UPGRADE_MORE)
    if (!conn_fill (w, k, deadline, true, e))
      return false;
  if (h.step == NZ_LITE_UPGRADE_UPGRADED)
    {
      k->pos = h.head_len;
      return true;
    }
  /* A refusal's body says why: what of it arrives before the deadline, and no more than the
   * head announced (bounded). A signal still cancels, so that it is not lost. */
  while (h.step == NZ_LITE_UPGRADE_REFUSED && k->in.len < h.head_len + h.body_len && !k->eof)
    {
      NzLiteErr late = { 0 };

      if (conn_fill (w, k, deadline, true, &late))
        continue;
      if (late.kind == NZ_LITE_ERR_CANCELLED)
        {
          *e = late;
          return false;
        }
      break;
    }
  kind = nz_lite_upgrade_words (&h, k->in.data ?: "", k->in.len, what, &words);
  nz_lite_wire_fail (e, kinds[kind], "agent %s: %s", w->ep.desc, words.data);
  free (words.data);
  return false;
}

bool
nz_lite_wire_request (NzLiteWire *w, NzLiteConn *k, const char *op, const char *body,
                      bool watch_signals, NzLiteErr *e)
{
  NzLiteBuf env = { 0 };
  bool ok;

  *k = (NzLiteConn){ .fd = -1 };
  if (w->ep.kind == NZ_LITE_EP_UNIX)
    {
      struct sockaddr_un sa = { .sun_family = AF_UNIX };

      k->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      snprintf (sa.sun_path, sizeof sa.sun_path, "%s", w->ep.path);
      if (k->fd < 0 || strlen (w->ep.path) >= sizeof sa.sun_path
          || connect (k->fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return nz_lite_wire_fail (e, NZ_LITE_ERR_DIAL, "Could not connect: %s", strerror (errno));
      fcntl (k->fd, F_SETFL, O_NONBLOCK);
    }
  else if ((k->fd = dial_inet (&w->ep, e)) < 0)
    return false;
  if (w->ep.kind == NZ_LITE_EP_HTTP && !http_upgrade (w, k, op, e))
    return false;
  /* A worker takes the token in its bearer header instead. */
  if (!nz_lite_frame_envelope (&env, op, body, body != NULL ? strlen (body) : 0,
                               w->ep.kind != NZ_LITE_EP_HTTP ? w->token : NULL))
    {
      explicit_bzero (env.data, env.len);
      free (env.data);
      return nz_lite_wire_fail (e, NZ_LITE_ERR_UNSUPPORTED, "the token is not UTF-8");
    }
  ok = send_all (w, k, env.data, env.len, watch_signals, e);
  explicit_bzero (env.data, env.len);
  free (env.data);
  return ok;
}

NzLiteReadStatus
nz_lite_wire_read_frame (NzLiteWire *w, NzLiteConn *k, int64_t deadline, bool watch_signals,
                         NzJlValue *frame, NzLiteErr *e)
{
  for (;;)
    {
      size_t avail = k->in.len - k->pos, len = 0;
      /* Nothing read yet: no buffer to offset into (UBSan: zero offset to NULL). */
      const char *p = avail > 0 ? k->in.data + k->pos : "";

      switch (nz_lite_wire_frame_header_parse (p, avail, NZ_LITE_WIRE_REPLY_FRAME_LIMIT,
                                               w->ep.desc, &len, e))
        {
        case NZ_LITE_FRAME_HEADER_BAD:
          return NZ_LITE_READ_ERROR;
        case NZ_LITE_FRAME_HEADER_OK:
          if (avail >= NZ_LITE_WIRE_FRAME_HEADER_LEN + len)
            {
              frame->start = p + NZ_LITE_WIRE_FRAME_HEADER_LEN;
              frame->len = len;
              k->pos += NZ_LITE_WIRE_FRAME_HEADER_LEN + len;
              return NZ_LITE_READ_FRAME;
            }
          break;
        case NZ_LITE_FRAME_HEADER_PARTIAL:
        default:
          break;
        }
      if (k->eof)
        return NZ_LITE_READ_EOF;
      /* Keep the buffer from growing with consumed frames. */
      if (k->pos > 0)
        {
          memmove (k->in.data, k->in.data + k->pos, avail);
          k->in.len = avail;
          k->pos = 0;
        }
      if (!conn_fill (w, k, deadline, watch_signals, e))
        return e->kind == NZ_LITE_ERR_TIMED_OUT ? NZ_LITE_READ_TIMEOUT : NZ_LITE_READ_ERROR;
    }
}

bool
nz_lite_wire_read_failed (NzLiteWire *w, NzLiteConn *k, NzLiteAwait await, NzLiteReadStatus st,
             const char *what, unsigned long long window_ms, NzLiteErr *e)
{
  char words[512];
  bool timed_out;

  if (!nz_lite_frame_read_failed (await, st, k->in.len > k->pos, what, window_ms, &timed_out,
                                  words, sizeof words))
    return st == NZ_LITE_READ_ERROR;
  nz_lite_wire_fail (e, timed_out ? NZ_LITE_ERR_TIMED_OUT : NZ_LITE_ERR_PROTOCOL, "agent %s: %s",
                     w->ep.desc, words);
  return true;
}

bool
nz_lite_wire_expect_close (NzLiteWire *w, NzLiteConn *k, const char *what, bool control,
                           bool watch_signals, NzLiteErr *e)
{
  NzJlValue extra;
  NzLiteReadStatus st = nz_lite_wire_read_frame (
      w, k, nz_lite_wire_now_ms () + NZ_HOST_POST_RESPONSE_CLOSE_TIMEOUT_MS, watch_signals,
      &extra, e);

  return !nz_lite_wire_read_failed (w, k, control ? NZ_LITE_AWAIT_CLOSE_CONTROL : NZ_LITE_AWAIT_CLOSE, st,
                       what, NZ_HOST_POST_RESPONSE_CLOSE_TIMEOUT_MS, e);
}

/* Reads the one reply of a reply op on @k, copied to *@out (free it). */
static bool
read_reply (NzLiteWire *w, NzLiteConn *k, unsigned idle_ms, bool watch_signals, char **out,
            NzJlValue *reply, NzLiteErr *e)
{
  size_t len;

  if (nz_lite_wire_read_failed (w, k, NZ_LITE_AWAIT_REPLY,
                   nz_lite_wire_read_frame (w, k, nz_lite_wire_now_ms () + idle_ms, watch_signals,
                                            reply, e),
                   "control reply", idle_ms, e))
    return false;
  len = reply->len;
  *out = strndup (reply->start, len);
  if (len == 0 || !nz_jl_parse (*out, len, reply) || reply->type != NZ_JL_OBJECT)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: %s", w->ep.desc,
                              len == 0 ? "control reply was an empty frame"
                                       : "reply is not a JSON object");
  return nz_lite_wire_expect_close (w, k, "control reply", true, watch_signals, e);
}

bool
nz_lite_wire_call (NzLiteWire *w, const char *op, const char *body, unsigned idle_ms,
                   bool watch_signals, char **out, NzJlValue *reply, NzLiteErr *e)
{
  NzLiteConn k;
  bool ok = nz_lite_wire_request (w, &k, op, body, watch_signals, e)
            && read_reply (w, &k, idle_ms, watch_signals, out, reply, e);

  nz_lite_wire_close (&k);
  return ok;
}
