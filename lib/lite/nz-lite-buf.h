/* nz-lite-buf: a growing NUL-terminated byte buffer in plain C (no GLib), for namzu-exec's
 * front. Allocation failure aborts: the front is a short-lived command, and every caller
 * would have to abort anyway. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct
{
  char *data; /* NULL until the first add; NUL-terminated after it */
  size_t len, cap;
} NzLiteBuf;

/* Appends @len bytes of @data. */
void nz_lite_buf_add (NzLiteBuf *b, const void *data, size_t len);

/* Appends the string @s. */
void nz_lite_buf_str (NzLiteBuf *b, const char *s);

/* Appends printf-formatted text. */
void nz_lite_buf_printf (NzLiteBuf *b, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

/* Appends @s as a JSON string. False for text that is not UTF-8 (the text is appended anyway):
 * the caller then leaves the decision to code that can report it. */
bool nz_lite_buf_json_string (NzLiteBuf *b, const char *s);
