/* nz-lite-frame: see nz-lite-frame.h. */
#include "nz-lite-frame.h"

#include <stdio.h>
#include <string.h>

#include "nz-jsonlite.h"

NzLiteFrameHeader
nz_lite_frame_header_check (const char *p, size_t avail, uint64_t limit, uint64_t *len, char *why,
                            size_t why_size)
{
  const char *nl = avail > 0 ? memchr (p, '\n', avail < 9 ? avail : 9) : NULL;
  uint64_t n = 0;

  if (why == NULL)
    why_size = 0;
  /* A newline before index 8 is malformed as soon as it is seen; otherwise wait for 9 bytes. */
  if (nl != NULL && nl - p != 8)
    {
      if (why_size > 0)
        snprintf (why, why_size, "malformed frame header (newline at %d)", (int)(nl - p));
      return NZ_LITE_FRAME_HEADER_BAD;
    }
  if (avail < NZ_LITE_FRAME_HEADER_LEN)
    return NZ_LITE_FRAME_HEADER_PARTIAL;
  if (nl == NULL)
    {
      if (why_size > 0)
        snprintf (why, why_size, "malformed frame header (no newline in the first 9 bytes)");
      return NZ_LITE_FRAME_HEADER_BAD;
    }
  for (int i = 0; i < 8; i++)
    {
      int d = nz_jl_hex_value ((unsigned char)p[i]);

      if (d < 0)
        {
          if (why_size > 0)
            snprintf (why, why_size, "invalid frame length header \"%.8s\"", p);
          return NZ_LITE_FRAME_HEADER_BAD;
        }
      n = n * 16 + (uint64_t)d;
    }
  *len = n;
  if (n > limit)
    {
      if (why_size > 0)
        nz_lite_frame_header_overflow_words (n, limit, why, why_size);
      return NZ_LITE_FRAME_HEADER_OVER;
    }
  return NZ_LITE_FRAME_HEADER_OK;
}

void
nz_lite_frame_header_overflow_words (uint64_t announced, uint64_t limit, char *why, size_t why_size)
{
  snprintf (why, why_size, "frame announces %llu bytes, over the %llu-byte limit",
            (unsigned long long)announced, (unsigned long long)limit);
}

void
nz_lite_frame_header_write (char out[NZ_LITE_FRAME_HEADER_LEN], size_t len)
{
  static const char hex[] = "0123456789abcdef";

  for (int i = 7; i >= 0; i--, len >>= 4)
    out[i] = hex[len & 0xf];
  out[8] = '\n';
}

bool
nz_lite_frame_envelope (NzLiteBuf *b, const char *op, const char *body, size_t body_len,
                        const char *token)
{
  size_t start = b->len;
  bool ok;

  /* The header is patched in once the length is known. */
  nz_lite_buf_add (b, "00000000\n{\"op\":", NZ_LITE_FRAME_HEADER_LEN + 6);
  ok = nz_lite_buf_json_string (b, op);
  if (body != NULL)
    {
      nz_lite_buf_str (b, ",\"body\":");
      nz_lite_buf_add (b, body, body_len);
    }
  if (token != NULL)
    {
      nz_lite_buf_str (b, ",\"token\":");
      ok &= nz_lite_buf_json_string (b, token);
    }
  nz_lite_buf_str (b, "}");
  nz_lite_frame_header_write (b->data + start, b->len - start - NZ_LITE_FRAME_HEADER_LEN);
  return ok;
}

bool
nz_lite_frame_read_failed (NzLiteAwait await, NzLiteReadStatus st, bool partial,
                           const char *what, unsigned long long window_ms, bool *timed_out,
                           char *words, size_t words_size)
{
  bool closing = await == NZ_LITE_AWAIT_CLOSE || await == NZ_LITE_AWAIT_CLOSE_CONTROL;
  bool control = await == NZ_LITE_AWAIT_CLOSE_CONTROL;

  *timed_out = false;
  if (st == NZ_LITE_READ_ERROR || (st == NZ_LITE_READ_FRAME && !closing)
      || (st == NZ_LITE_READ_EOF && closing && !partial))
    return false;
  if (st == NZ_LITE_READ_FRAME)
    snprintf (words, words_size, "%s emitted %s", what,
              control ? "multiple frames" : "data after its terminator");
  else if (partial && (closing || st == NZ_LITE_READ_EOF))
    snprintf (words, words_size, "%s has trailing partial data",
              await == NZ_LITE_AWAIT_REPLY ? "control reply" : what);
  else if (closing)
    snprintf (words, words_size, "%s peer did not close after %s", control ? "control" : what,
              control ? "reply" : "terminator");
  else if (st == NZ_LITE_READ_EOF && await == NZ_LITE_AWAIT_REPLY)
    snprintf (words, words_size, "socket closed before reply");
  else if (st == NZ_LITE_READ_EOF)
    snprintf (words, words_size, "socket closed before %s terminator", what);
  else
    {
      *timed_out = true;
      if (await == NZ_LITE_AWAIT_REPLY)
        snprintf (words, words_size, "read idle timeout after %llums", window_ms);
      else
        snprintf (words, words_size, "%s observation exceeded %llums", what, window_ms);
    }
  return true;
}
