/* nz-jsonlite: a small strict JSON reader in plain C (no GLib), for programs that must start
 * without loading GLib (namzu-exec's front). It validates a whole document, looks up members
 * of an object, and decodes strings (every escape, \uXXXX surrogate pairs to UTF-8), numbers
 * and booleans. Values are spans into the caller's text, which must outlive them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef enum
{
  NZ_JL_NULL,
  NZ_JL_FALSE,
  NZ_JL_TRUE,
  NZ_JL_NUMBER,
  NZ_JL_STRING,
  NZ_JL_ARRAY,
  NZ_JL_OBJECT,
} NzJlType;

typedef struct
{
  NzJlType type;
  const char *start; /* first byte of the value ('"' for a string) */
  size_t len;        /* bytes of the value's text */
} NzJlValue;

/* Nesting deeper than this is refused: the wire's documents are a few levels deep, and the
 * reader recurses. */
#define NZ_JL_MAX_DEPTH 64

/* Whether @text[0..@len) is exactly one JSON value with optional whitespace around it: RFC 8259
 * grammar, strings valid UTF-8 with no raw control characters and no lone surrogates. On
 * success *@root (may be NULL) spans the value. */
bool nz_jl_parse (const char *text, size_t len, NzJlValue *root);

/* The member @name of the object @obj (a value from nz_jl_parse or a lookup); the last one
 * when the name repeats, like json-glib. False when @obj is no object or has no such member. */
bool nz_jl_member (const NzJlValue *obj, const char *name, NzJlValue *out);

/* A string value decoded to UTF-8, NUL-terminated, in a new malloc()ed buffer; *@len (may be
 * NULL) gets its byte length, which counts any \u0000 inside. NULL if @v is no string or
 * memory ran out. */
char *nz_jl_string (const NzJlValue *v, size_t *len);

/* The member @name as a new decoded string, or NULL when it is missing or not a string. */
char *nz_jl_member_string (const NzJlValue *obj, const char *name);

/* A number value as a double. False if @v is no number. */
bool nz_jl_number (const NzJlValue *v, double *out);

/* The boolean member @name, or @fallback when it is missing or not a boolean. */
bool nz_jl_member_bool (const NzJlValue *obj, const char *name, bool fallback);

/* The length of the well-formed UTF-8 sequence at @p (@avail bytes there, at least 1): 1 for
 * ASCII, 0 for a byte that starts none (no overlongs, no surrogates, at most U+10FFFF). */
size_t nz_jl_utf8_len (const char *p, size_t avail);

/* The value of the hex digit @ch (either case), or -1: \uXXXX here, frame headers elsewhere. */
int nz_jl_hex_value (unsigned char ch);
