/* nz-lite-frame: the agent wire's framing and request envelope (spec A.2, A.3), once, in plain
 * C (no GLib), for both sides: lib/proto's frame reader, lib/client and namzu-exec's front.
 * Pure code: no I/O, no allocation but the caller's buffer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nz-lite-buf.h"

/* "%08x\n": eight hex digits of payload length and a newline. */
#define NZ_LITE_FRAME_HEADER_LEN 9

typedef enum
{
  NZ_LITE_FRAME_HEADER_PARTIAL, /* more bytes needed */
  NZ_LITE_FRAME_HEADER_OK,
  NZ_LITE_FRAME_HEADER_BAD,
  NZ_LITE_FRAME_HEADER_OVER, /* well-formed, but announces more than the limit */
} NzLiteFrameHeader;

/* Checks the frame header at @p (@avail bytes there). OK and OVER set *@len to the announced
 * length. BAD and OVER word the reason into @why (may be NULL), naming no peer: a newline
 * elsewhere than at byte 8 (refused as soon as it is seen), no newline in 9 bytes, a digit
 * that is not hex, or a length over @limit. */
NzLiteFrameHeader nz_lite_frame_header_check (const char *p, size_t avail, uint64_t limit,
                                              uint64_t *len, char *why, size_t why_size);

/* The words for a frame over the limit ("frame announces N bytes, over the L-byte limit"). */
void nz_lite_frame_header_overflow_words (uint64_t announced, uint64_t limit, char *why,
                                          size_t why_size);

/* Writes the header of a frame of @len payload bytes into @out (no NUL); @len < 2^32. */
void nz_lite_frame_header_write (char out[NZ_LITE_FRAME_HEADER_LEN], size_t len);

/* Appends to @b one framed request envelope {op, body?, token?} in the reference's key order
 * (spec D.2.4). @body is JSON text of @body_len bytes, or NULL; @token may be NULL. False when
 * @op or @token is not UTF-8 (the frame is appended anyway; the caller refuses it). The token
 * is in @b: wipe it with explicit_bzero before freeing. */
bool nz_lite_frame_envelope (NzLiteBuf *b, const char *op, const char *body, size_t body_len,
                             const char *token);

/* How a read of the next frame ended: lib/client and nz-lite-wire read this way. */
typedef enum
{
  NZ_LITE_READ_FRAME,
  NZ_LITE_READ_EOF,
  NZ_LITE_READ_TIMEOUT,
  NZ_LITE_READ_ERROR, /* the reader has worded it */
} NzLiteReadStatus;

/* What a reader waited for. */
typedef enum
{
  NZ_LITE_AWAIT_REPLY,         /* a reply op's one frame */
  NZ_LITE_AWAIT_FRAME,         /* a stream's next frame, until its terminator */
  NZ_LITE_AWAIT_CLOSE,         /* the agent's close after a stream's terminator */
  NZ_LITE_AWAIT_CLOSE_CONTROL, /* the agent's close after a reply */
} NzLiteAwait;

/* Whether a read that waited for @await and ended as @st is a protocol failure, and its words
 * in the reference's strings (spec D.2.4), naming no peer: false when it brought what was
 * awaited (a frame; for a close, EOF with nothing left over) or when it is READ_ERROR, else
 * true with @words and *@timed_out (a reply's idle timeout, a stream's observation window:
 * TIMED_OUT rather than PROTOCOL). @what names the stream or reply ("exec stream", "control
 * reply"); @partial: bytes of an unfinished frame are left; @window_ms: the wait that passed. */
bool nz_lite_frame_read_failed (NzLiteAwait await, NzLiteReadStatus st, bool partial,
                                const char *what, unsigned long long window_ms, bool *timed_out,
                                char *words, size_t words_size);
