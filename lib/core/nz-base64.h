/* nz-base64.h: standard base64 (RFC 4648, padded, no line breaks) for the file paths that
 * move every byte through it (read-file-stream data frames, write-file parts): AVX2 where the
 * CPU has it, tables otherwise. GLib's g_base64_* step functions are several times slower
 * and dominated those transfers. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Characters nz_base64_encode() writes for @len bytes (padding included). */
#define NZ_BASE64_ENCODED_LEN(len) (((gsize)(len) + 2) / 3 * 4)
/* Upper bound of the bytes nz_base64_decode() writes for @len characters. */
#define NZ_BASE64_DECODED_MAX(len) ((gsize)(len) / 4 * 3 + 3)

/* Writes exactly NZ_BASE64_ENCODED_LEN(@len) characters to @out (not NUL-terminated) and
 * returns that count. */
gsize nz_base64_encode (const guint8 *in, gsize len, char *out);

/* Strict decode of @len characters: only the 64 alphabet characters, then at most two '='
 * that complete the last quantum (an unpadded tail of 2 or 3 characters is accepted too).
 * Writes at most NZ_BASE64_DECODED_MAX(@len) bytes to @out and returns how many, or -1 when
 * the text is anything else (the caller then falls back to a lenient decoder). */
gssize nz_base64_decode (const char *in, gsize len, guint8 *out);

/* Decodes the NUL-terminated @text into a new buffer (never NULL) of *@out_len bytes: the
 * strict path above when the text is plain padded base64, else g_base64_decode()'s lenient
 * reading, which these callers always had. */
guint8 *nz_base64_decode_lenient (const char *text, gsize *out_len);

G_END_DECLS
