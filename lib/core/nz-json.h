/* nz-json.h: small json-glib helpers shared by every tier. */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Compact serialisation of @node (no trailing newline). Returns a new string. Long plain
 * strings of a mutable tree are swapped for placeholders during the call (see nz-json.c): the
 * tree is as it was when it returns, but must not be read from another thread meanwhile. */
char *nz_json_to_string (JsonNode *node, gsize *out_len);
char *nz_json_object_to_string (JsonObject *obj, gsize *out_len);

/* How many parses and serialisations took the long-string path (nz-json.c): a string of at
 * least 4 KiB of printable ASCII without a quote or a backslash (a base64 file part) moved by
 * memcpy instead of json-glib's character loop. For tests and benchmarks. */
guint nz_json_elided_count (void);

/* json-glib's parser recurses once per nesting level, so a few hundred KiB of '[' overflow the
 * stack. No text reaches it deeper than this: real documents (wire requests, handles, configs,
 * profiles) are a handful of levels deep. Deeper text is refused with NZ_ERROR_PROTOCOL and a
 * message starting NZ_JSON_TOO_DEEP_CODE. */
#define NZ_JSON_MAX_DEPTH 64
#define NZ_JSON_TOO_DEEP_CODE "json_too_deep"

/* A non-recursive scan of @data (@len bytes, or NUL-terminated when negative): FALSE with
 * NZ_ERROR_PROTOCOL when an object or array opens deeper than NZ_JSON_MAX_DEPTH. */
gboolean nz_json_check_depth (const char *data, gssize len, GError **error);
/* json_parser_load_from_data() behind nz_json_check_depth(): the one way text reaches a
 * JsonParser. */
gboolean nz_json_parser_load (JsonParser *parser, const char *data, gssize len, GError **error);

/* Parses @data as one JSON object (nesting bounded, see above). Returns a new reference, or NULL
 * with NZ_ERROR_PROTOCOL. */
JsonObject *nz_json_parse_object (const char *data, gssize len, GError **error);

/* TRUE when JSON text @data (@len bytes) holds a \u0000 escape: json-glib cuts a string at
 * it without a word ("a\u0000b" reads as "a"), so a reader that must see every byte refuses
 * such text instead. Escaped backslashes ("\\u0000") are not one. */
gboolean nz_json_text_has_nul (const char *data, gsize len);

/* Member accessors that never warn on a wrong type: they return the fallback instead. */
const char *nz_json_get_string (JsonObject *obj, const char *member);
gboolean nz_json_get_bool (JsonObject *obj, const char *member, gboolean fallback);
/* TRUE and *out set when the member is a JSON number; FALSE when absent or not a number. */
gboolean nz_json_get_number (JsonObject *obj, const char *member, double *out);
JsonObject *nz_json_get_object (JsonObject *obj, const char *member);
JsonArray *nz_json_get_array (JsonObject *obj, const char *member);

/* JS String(value) of a JSON node, as the reference renders request fields (NULL node ->
 * "undefined", objects "[object Object]", arrays joined by ","). Returns a new string. */
char *nz_json_js_string (JsonNode *node);
/* The bytes a request's `content` stands for: base64-decoded when @encoding is "base64"
 * (nz_base64_decode_lenient), else its text (JS String() of a non-string). A string node is
 * read where it lies (a file part is 350 KiB of base64), so the result points into @node or
 * into *@owned, which the caller frees. Never NULL. */
const guint8 *nz_json_content_bytes (JsonNode *node, const char *encoding, gpointer *owned,
                                     gsize *len);

/* JS truthiness of a JSON value, as the reference tests request fields: NULL (absent, i.e.
 * undefined) and null, false, 0, NaN and "" are falsy; objects and arrays are truthy. */
gboolean nz_json_js_truthy (JsonNode *node);

/* JS Number(value) of a JSON node, for the members the reference coerces that way: NULL
 * (undefined) -> NaN, null -> 0, booleans 0/1, strings parsed, objects and arrays NaN. */
double nz_json_js_number (JsonNode *node);

/* The string a node holds, or NULL when it is absent or not a JSON string (never warns). */
const char *nz_json_node_string (JsonNode *node);

/* @obj's member @name (borrowed), or NULL when @obj is NULL or has no such member. */
JsonNode *nz_json_member (JsonObject *obj, const char *name);

/* The name of @obj's first member not among @known (NULL-terminated; borrowed), or NULL when
 * every member is known or @obj is NULL. */
const char *nz_json_unknown_member (JsonObject *obj, const char *const *known);

/* Appends byte @c as JSON.stringify writes it inside a string: the short escapes (\" \\ \b \f
 * \n \r \t), \u00XX for the other control bytes, any other byte as is. Callers that must
 * match the reference byte for byte (digests, lossy text) build their strings from it. */
void nz_json_append_escaped_byte (GString *out, guchar c);

/* @ms since the epoch as RFC 3339 UTC with milliseconds ("2026-12-03T07:11:11.000Z"), how a
 * handle shows a wall-clock instant to people. Returns a new string. */
char *nz_json_format_time_ms (gint64 ms);

/* A member a host relays from an untrusted reply, and the one JSON shape it may have. */
typedef enum
{
  NZ_JSON_PICK_STRING,
  NZ_JSON_PICK_INT, /* a whole number within +-2^53 */
  NZ_JSON_PICK_BOOL,
  NZ_JSON_PICK_STRINGS, /* an array of strings */
  NZ_JSON_PICK_OBJECTS, /* an array of objects, each picked by .members */
} NzJsonPickType;

typedef struct NzJsonPick
{
  const char *name; /* NULL ends a schema */
  NzJsonPickType type;
  const struct NzJsonPick *members;
} NzJsonPick;

/* A new object holding only @schema's members of @from, each of its type; anything else (an
 * unknown member, a mistyped one, a mistyped array element) is dropped. What a tool prints
 * from an agent's reply goes through this, so a workload that owns its agent cannot add
 * members to a tool's output or change their shape. */
JsonObject *nz_json_pick (JsonObject *from, const NzJsonPick *schema);

G_END_DECLS
