/* nz-lite-upgrade: a namzu-worker's GET /v1/agent upgraded to namzu-agent/2 (docs/worker.md),
 * once, in plain C (no GLib) and sans-IO, for both namzu-exec programs: nz-lite-wire (the static
 * front) and lib/client/nz-worker-http.c. It writes the request, reads the response head from
 * the bytes received so far, and words what went wrong, so both programs print the same error.
 * The callers do the reading, the waiting and its deadline. Library code: it never logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nz-lite-buf.h"

/* The upgrade route, and the protocol named in the Upgrade header: the agent's framing at
 * protocol version 2. */
#define NZ_LITE_UPGRADE_PATH "/v1/agent"
#define NZ_LITE_UPGRADE_PROTOCOL "namzu-agent/2"
/* A worker's response head is a status line and a handful of headers; more is not a worker. */
#define NZ_LITE_UPGRADE_HEAD_LIMIT 16384
/* Refusal bodies are small JSON objects: a caller reads no more of one than this. */
#define NZ_LITE_UPGRADE_BODY_LIMIT 65536
/* How much of a body an error message shows. */
#define NZ_LITE_UPGRADE_SHOWN_BODY 256

typedef enum
{
  NZ_LITE_UPGRADE_MORE,     /* the head is not complete yet: read more, then ask again */
  NZ_LITE_UPGRADE_UPGRADED, /* 101 to namzu-agent/2: agent framing starts at @head_len */
  NZ_LITE_UPGRADE_REFUSED,  /* any other complete head (a 101 to another protocol too) */
  NZ_LITE_UPGRADE_CLOSED,   /* the peer closed before the head was complete */
  NZ_LITE_UPGRADE_HEAD_TOO_LARGE,
  NZ_LITE_UPGRADE_NOT_HTTP, /* no HTTP/1.x status line, or a NUL byte in the head */
} NzLiteUpgradeStep;

/* What a caller maps to its own error codes (lib/client: NZ_ERROR_*). */
typedef enum
{
  NZ_LITE_UPGRADE_ERR_FAILED,
  NZ_LITE_UPGRADE_ERR_PROTOCOL,
  NZ_LITE_UPGRADE_ERR_PERMISSION_DENIED, /* 401: the worker refused the token */
  NZ_LITE_UPGRADE_ERR_UNSUPPORTED,       /* 404: a worker without the upgrade route */
} NzLiteUpgradeErrKind;

typedef struct
{
  NzLiteUpgradeStep step;
  unsigned status; /* UPGRADED, REFUSED: the HTTP status, in [100, 599] */
  size_t head_len; /* UPGRADED, REFUSED: the head's bytes with its blank line */
  /* REFUSED: the body bytes after the head worth reading: its Content-Length when it has a
   * valid one (@body_sized), else up to the end of the connection; at most
   * NZ_LITE_UPGRADE_BODY_LIMIT either way. 0 for a 101. */
  size_t body_len;
  bool body_sized;
} NzLiteUpgradeHead;

/* Appends the Host header's value for @host and @port: "HOST:PORT", "[HOST]:PORT" for IPv6. */
void nz_lite_upgrade_authority (NzLiteBuf *b, const char *host, unsigned port);

/* Appends the upgrade request: GET /v1/agent, Connection: Upgrade, Upgrade: namzu-agent/2 and,
 * when @token is set and not empty, `Authorization: Bearer TOKEN` (none at all without one,
 * like the reference client, spec D.1). The token is in @b: wipe it with explicit_bzero. */
void nz_lite_upgrade_request (NzLiteBuf *b, const char *host, unsigned port, const char *token);

/* Reads the response head from @data[0..@len), all the bytes received so far; @eof: the peer
 * has closed. Sets and returns @h->step. Feeding the same bytes in any number of reads gives
 * the same answer. */
NzLiteUpgradeStep nz_lite_upgrade_parse (const char *data, size_t len, bool eof,
                                         NzLiteUpgradeHead *h);

/* Appends to @out the words for a step other than MORE and UPGRADED: the head's faults, or a
 * refusal with its status and up to NZ_LITE_UPGRADE_SHOWN_BODY bytes of its body on one line
 * (the bytes after the head in @data[0..@len), up to @h->body_len). @what names the op.
 * Returns the kind of error. */
NzLiteUpgradeErrKind nz_lite_upgrade_words (const NzLiteUpgradeHead *h, const char *data,
                                            size_t len, const char *what, NzLiteBuf *out);

/* The value of the first header @name in @head[0..@len) (lines after the status line, split at
 * CRLF), stripped of spaces and tabs, in [*@value, *@value_end); false without one. */
bool nz_lite_upgrade_header (const char *head, size_t len, const char *name, const char **value,
                             const char **value_end);

/* The header in which a namzu-worker lists, beside GET /healthz's exact reference body, what
 * it serves beyond the reference (its agent's features and "agent-upgrade"), comma-separated
 * (docs/worker.md). */
#define NZ_LITE_UPGRADE_FEATURES_HEADER "Namzu-Features"

/* Appends the first NZ_LITE_UPGRADE_SHOWN_BODY bytes of @data[0..@len) as one line for a
 * message: up to a NUL, each byte that starts no well-formed UTF-8 as U+FFFD, CR, LF and tab as
 * spaces (what g_strndup, g_utf8_make_valid and g_strdelimit made of it). */
void nz_lite_upgrade_shown (NzLiteBuf *out, const char *data, size_t len);
