/* nz-lite-buf: see nz-lite-buf.h. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nz-jsonlite.h"
#include "nz-lite-buf.h"

void
nz_lite_buf_add (NzLiteBuf *b, const void *data, size_t len)
{
  if (b->len + len + 1 > b->cap)
    {
      size_t cap = b->cap ? b->cap : 256;

      while (cap < b->len + len + 1)
        cap *= 2;
      if ((b->data = realloc (b->data, cap)) == NULL)
        abort ();
      b->cap = cap;
    }
  memcpy (b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
}

void
nz_lite_buf_str (NzLiteBuf *b, const char *s)
{
  nz_lite_buf_add (b, s, strlen (s));
}

void
nz_lite_buf_printf (NzLiteBuf *b, const char *fmt, ...)
{
  char *text;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vasprintf (&text, fmt, ap);
  va_end (ap);
  if (n < 0)
    abort ();
  nz_lite_buf_add (b, text, (size_t)n);
  free (text);
}

bool
nz_lite_buf_json_string (NzLiteBuf *b, const char *s)
{
  NzJlValue check;
  size_t mark = b->len;

  nz_lite_buf_str (b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
    {
      if (*p == '"' || *p == '\\')
        nz_lite_buf_printf (b, "\\%c", *p);
      else if (*p < 0x20)
        nz_lite_buf_printf (b, "\\u%04x", *p);
      else
        nz_lite_buf_add (b, p, 1);
    }
  nz_lite_buf_str (b, "\"");
  /* The reader checks UTF-8 the way the agent's parser will. */
  return nz_jl_parse (b->data + mark, b->len - mark, &check);
}
