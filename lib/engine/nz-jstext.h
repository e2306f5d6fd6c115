/* nz-jstext.h: text the way the reference's runtime renders it: lossy per-chunk UTF-8 decoding
 * (invalid or split sequences -> U+FFFD), JSON string escaping that keeps NUL bytes,
 * and Node-style system error messages. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Decodes @len bytes as UTF-8, replacing each maximal ill-formed subsequence with U+FFFD
 * (WHATWG / Buffer.toString semantics), and appends it to @out as a quoted JSON string. */
void nz_jstext_append_json_lossy (GString *out, const void *data, gsize len);

/* Appends a quoted JSON string for valid UTF-8 @s. */
void nz_jstext_append_json_string (GString *out, const char *s);

/* Node's message for a failed system call: "ENOENT: no such file or directory, open '/x'".
 * @path may be NULL. Always returns FALSE. */
gboolean nz_jstext_throw_errno (GError **error, int errsv, const char *syscall, const char *path);

/* "ENOENT" for ENOENT; "Unknown system error" codes fall back to "E<number>". */
const char *nz_jstext_errno_name (int errsv);

G_END_DECLS
