/* nz-lite-wire: the client side of the guest agent's wire (spec A, D.2) in plain C (no GLib),
 * for namzu-exec's front: endpoints (unix:, tcp: with an IPv4 literal, http:// with the
 * worker's upgrade), the 9-byte frame header, the request envelope with its token, and reply
 * ops on their own connection, as lib/client/nz-agent-client.c does them. Library code: it
 * never logs and never exits; errors come back in an NzLiteErr worded as lib/client words
 * them. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nz-jsonlite.h"
#include "nz-lite-buf.h"
#include "nz-lite-endpoint.h"
#include "nz-lite-frame.h"
#include "nz-lite-upgrade.h"

/* lib/client's NZ_AGENT_REPLY_FRAME_LIMIT and NZ_AGENT_TCP_PREAUTH_FRAME_LIMIT. */
#define NZ_LITE_WIRE_REPLY_FRAME_LIMIT (256u * 1024 * 1024)
#define NZ_LITE_WIRE_TCP_PREAUTH_FRAME_LIMIT (8u * 1024 * 1024)
/* The bound on a worker's response head, under its older name. */
#define NZ_LITE_WIRE_HTTP_HEAD_LIMIT NZ_LITE_UPGRADE_HEAD_LIMIT
#define NZ_LITE_WIRE_FRAME_HEADER_LEN NZ_LITE_FRAME_HEADER_LEN

typedef enum
{
  NZ_LITE_ERR_NONE,
  NZ_LITE_ERR_DIAL,      /* nothing was sent */
  NZ_LITE_ERR_CANCELLED, /* a signal arrived */
  NZ_LITE_ERR_PROTOCOL,
  NZ_LITE_ERR_INVALID,
  NZ_LITE_ERR_TIMED_OUT,
  NZ_LITE_ERR_FAILED,
  NZ_LITE_ERR_NOENT,
  NZ_LITE_ERR_NOEXEC,
  NZ_LITE_ERR_UNSUPPORTED, /* not the plain case (a token that is not UTF-8); nothing was sent */
} NzLiteErrKind;

typedef struct
{
  NzLiteErrKind kind;
  char msg[1024];
} NzLiteErr;

/* One agent to talk to. @sigfd (or -1) is a signalfd whose signals end waits that watch
 * signals; the signal read is left in @signo. */
typedef struct
{
  NzLiteEndpoint ep;
  const char *token; /* not owned; NULL for none */
  int sigfd;
  int signo;
} NzLiteWire;

typedef struct
{
  int fd;
  NzLiteBuf in;
  size_t pos; /* start of the unread bytes in @in */
  bool eof;
} NzLiteConn;

/* Sets *@e and returns false, for "return nz_lite_wire_fail (...);". */
bool nz_lite_wire_fail (NzLiteErr *e, NzLiteErrKind kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* CLOCK_MONOTONIC in milliseconds: every deadline here is one. */
int64_t nz_lite_wire_now_ms (void);

/* Parses @text into *@ep (nz_lite_endpoint_parse; clear it with nz_lite_endpoint_clear). False
 * for anything but the plain case this wire dials: vsock:, host names and IPv6 (a static
 * program cannot load NSS reliably), and mistakes, which the full implementation words. */
bool nz_lite_wire_parse_endpoint (const char *text, NzLiteEndpoint *ep);

/* nz_lite_frame_header_write, under its older name. */
void nz_lite_wire_frame_header_write (char out[NZ_LITE_WIRE_FRAME_HEADER_LEN], size_t len);

/* nz_lite_frame_header_check into *@len. BAD (an over-limit length too) sets *@e (PROTOCOL,
 * "agent @desc: " and the check's words). */
NzLiteFrameHeader nz_lite_wire_frame_header_parse (const char *p, size_t avail, size_t limit,
                                                   const char *desc, size_t *len, NzLiteErr *e);

/* Reads a pending signal from @w->sigfd into @w->signo; false if none is pending. */
bool nz_lite_wire_signal_pending (NzLiteWire *w);

/* Dials @w's agent, upgrades a worker connection, and sends the envelope {op, body?, token?}.
 * @body: JSON text, or NULL. With @watch_signals a signal on @w->sigfd cancels the wait. @k is
 * set even on failure: close it with nz_lite_wire_close. */
bool nz_lite_wire_request (NzLiteWire *w, NzLiteConn *k, const char *op, const char *body,
                           bool watch_signals, NzLiteErr *e);

/* The next frame's payload (empty: the terminator) in *@frame, spanning @k's buffer (valid
 * until the next read), or EOF, or @deadline passing. */
NzLiteReadStatus nz_lite_wire_read_frame (NzLiteWire *w, NzLiteConn *k, int64_t deadline,
                                          bool watch_signals, NzJlValue *frame, NzLiteErr *e);

/* Whether @st, how a read of @k that waited for @await ended, is a failure: true with *@e set
 * (READ_ERROR's as the read set it; else nz_lite_frame_read_failed's words, naming the agent). */
bool nz_lite_wire_read_failed (NzLiteWire *w, NzLiteConn *k, NzLiteAwait await,
                               NzLiteReadStatus st, const char *what,
                               unsigned long long window_ms, NzLiteErr *e);

/* After the last frame the agent closes its side (spec D.2.4's strings). @what names the
 * stream; @control: a reply op rather than the exec stream. */
bool nz_lite_wire_expect_close (NzLiteWire *w, NzLiteConn *k, const char *what, bool control,
                                bool watch_signals, NzLiteErr *e);

/* One reply op on its own connection: the reply, parsed into *@reply, spans *@out (free it,
 * also on failure). */
bool nz_lite_wire_call (NzLiteWire *w, const char *op, const char *body, unsigned idle_ms,
                        bool watch_signals, char **out, NzJlValue *reply, NzLiteErr *e);

void nz_lite_wire_close (NzLiteConn *k);
