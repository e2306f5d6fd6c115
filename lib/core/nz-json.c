#define _GNU_SOURCE /* memmem */

#include "nz-json.h"
#include "nz-jsonlite.h"

#include <math.h>
#include <string.h>

#include "nz-base64.h"
#include "nz-errors.h"
#include "nz-knobs.h"

/* Long plain strings, both ways. json-glib 1.6 reads a string one character at a time
 * (appending to a GString) and writes it one character at a time (escaping); a base64 file
 * part is one 350 KiB string of printable ASCII that neither step changes. Such strings
 * ("plain": 0x20..0x7e, no '"' or '\\', at least ELIDE_MIN_BYTES) are swapped for a
 * placeholder holding a random nonce around the json-glib call and put back with memcpy.
 * Every placeholder must be found exactly once, else the ordinary path runs: the result is
 * always what json-glib alone gives. */
#define ELIDE_MIN_BYTES 4096
#define ELIDE_MAX 4
#define ELIDE_PLACEHOLDER_LEN 40 /* "nz-elided-" + 28 hex digits + index + '\0' */

typedef struct
{
  char placeholder[ELIDE_MAX][ELIDE_PLACEHOLDER_LEN];
  guint n;
} Elision;

static gint elided_count;

guint
nz_json_elided_count (void)
{
  return (guint)g_atomic_int_get (&elided_count);
}

static void
elision_init (Elision *e)
{
  guint32 r[4] = { g_random_int (), g_random_int (), g_random_int (), g_random_int () };

  e->n = 0;
  for (guint i = 0; i < ELIDE_MAX; i++)
    g_snprintf (e->placeholder[i], ELIDE_PLACEHOLDER_LEN, "nz-elided-%08x%08x%08x%04x%u", r[0],
                r[1], r[2], r[3] & 0xffff, i);
}

static gboolean
plain_bytes (const char *s, gsize len)
{
  for (gsize i = 0; i < len; i++)
    {
      unsigned char b = (unsigned char)s[i];

      if (b < 0x20 || b > 0x7e || b == '"' || b == '\\')
        return FALSE;
    }
  return TRUE;
}

/* Calls @visit on every string node of @node's tree, in document order. */
static void
walk_strings (JsonNode *node, void (*visit) (JsonNode *str, gpointer data), gpointer data)
{
  switch (json_node_get_node_type (node))
    {
    case JSON_NODE_OBJECT:
      {
        JsonObjectIter iter;
        JsonNode *member;

        json_object_iter_init (&iter, json_node_get_object (node));
        while (json_object_iter_next (&iter, NULL, &member))
          walk_strings (member, visit, data);
        break;
      }
    case JSON_NODE_ARRAY:
      {
        JsonArray *array = json_node_get_array (node);

        for (guint i = 0; i < json_array_get_length (array); i++)
          walk_strings (json_array_get_element (array, i), visit, data);
        break;
      }
    case JSON_NODE_VALUE:
      if (json_node_get_value_type (node) == G_TYPE_STRING)
        visit (node, data);
      break;
    case JSON_NODE_NULL:
      break;
    }
}

/* Collects into @data (a GPtrArray) the long plain string nodes, at most ELIDE_MAX. */
static void
collect_long_string (JsonNode *node, gpointer data)
{
  GPtrArray *found = data;
  const char *str = json_node_get_string (node);
  gsize len = str != NULL ? strlen (str) : 0;

  /* A node referenced twice in the tree is swapped once. */
  if (found->len < ELIDE_MAX && len >= ELIDE_MIN_BYTES && !json_node_is_immutable (node)
      && !g_ptr_array_find (found, node, NULL) && plain_bytes (str, len))
    g_ptr_array_add (found, node);
}

/* @text (@len bytes) with each quoted placeholder of @e replaced by @values[i]; NULL unless
 * every placeholder occurs exactly once. */
static char *
splice_placeholders (const char *text, gsize len, const Elision *e, char **values, gsize *out_len)
{
  const char *at[ELIDE_MAX];
  gsize plen = strlen (e->placeholder[0]), total = len;
  GString *out;
  const char *p = text;

  for (guint i = 0; i < e->n; i++)
    {
      const char *hit = memmem (text, len, e->placeholder[i], plen);

      if (hit == NULL || memmem (hit + 1, len - (gsize)(hit + 1 - text), e->placeholder[i], plen))
        return NULL;
      at[i] = hit;
      total = total - plen + strlen (values[i]);
    }
  out = g_string_sized_new (total + 1);
  /* In text order: placeholders need not come out in the order they were collected. */
  for (;;)
    {
      int next = -1;

      for (guint i = 0; i < e->n; i++)
        if (at[i] >= p && (next < 0 || at[i] < at[next]))
          next = (int)i;
      if (next < 0)
        break;
      g_string_append_len (out, p, at[next] - p);
      g_string_append (out, values[next]);
      p = at[next] + plen;
    }
  g_string_append_len (out, p, text + len - p);
  if (out_len != NULL)
    *out_len = out->len;
  return g_string_free (out, FALSE);
}

/* json-glib 1.6 writes U+001F raw inside strings (its escape test stops at 0x1e), which is
 * not JSON (RFC 8259 7: every control character is escaped): a peer that parses strictly
 * refuses the whole message. Outside strings the generator writes no control byte, so each
 * 0x1f it wrote is in a string and becomes \u001f. */
static char *
escape_unit_separators (char *text, gsize *len)
{
  GString *out;

  if (memchr (text, 0x1f, *len) == NULL)
    return text;
  out = g_string_sized_new (*len + 16);
  for (gsize i = 0; i < *len; i++)
    if (text[i] == 0x1f)
      g_string_append (out, "\\u001f");
    else
      g_string_append_c (out, text[i]);
  g_free (text);
  *len = out->len;
  return g_string_free (out, FALSE);
}

static char *
generate (JsonNode *node, gsize *out_len)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  gsize len = 0;
  char *text;

  json_generator_set_root (gen, node);
  text = escape_unit_separators (json_generator_to_data (gen, &len), &len);
  if (out_len != NULL)
    *out_len = len;
  return text;
}

char *
nz_json_to_string (JsonNode *node, gsize *out_len)
{
  g_autoptr (GPtrArray) found = g_ptr_array_new ();
  char *values[ELIDE_MAX] = { NULL };
  g_autofree char *text = NULL;
  char *spliced;
  gsize len = 0;
  Elision e;

  /* A sealed tree cannot take a placeholder; it is serialised as it is. */
  if (node == NULL || json_node_is_immutable (node))
    return generate (node, out_len);
  walk_strings (node, collect_long_string, found);
  if (found->len == 0)
    return generate (node, out_len);
  elision_init (&e);
  e.n = found->len;
  for (guint i = 0; i < e.n; i++)
    {
      values[i] = json_node_dup_string (found->pdata[i]);
      json_node_set_string (found->pdata[i], e.placeholder[i]);
    }
  text = generate (node, &len);
  for (guint i = 0; i < e.n; i++)
    json_node_set_string (found->pdata[i], values[i]);
  spliced = splice_placeholders (text, len, &e, values, out_len);
  for (guint i = 0; i < e.n; i++)
    g_free (values[i]);
  if (spliced != NULL)
    g_atomic_int_inc (&elided_count);
  return spliced != NULL ? spliced : generate (node, out_len);
}

char *
nz_json_object_to_string (JsonObject *obj, gsize *out_len)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, obj);
  return nz_json_to_string (node, out_len);
}

static gboolean
json_ws (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* TRUE when @data is one object and nothing but JSON whitespace around it. JSON.parse refuses
 * trailing values; json-glib 1.6 accepts "0\n{...}" (keeping the last value) and leaks the
 * object it parsed on that path, so such input never reaches it. */
typedef struct
{
  gsize start; /* the first byte after the opening quote */
  gsize len;
} Span;

/* Also records in @spans (up to ELIDE_MAX) the long plain strings, for the parser below. */
static gboolean
single_object (const char *data, gsize len, Span *spans, guint *n_spans, gboolean *too_deep)
{
  gsize i = 0;
  int depth = 0;

  *n_spans = 0;
  *too_deep = FALSE;
  while (i < len && json_ws (data[i]))
    i++;
  if (i == len || data[i] != '{')
    return FALSE;
  for (; i < len; i++)
    {
      char c = data[i];

      if (c == '"')
        {
          gsize start = ++i;
          gboolean plain = TRUE;

          for (; i < len && data[i] != '"'; i++)
            {
              unsigned char b = (unsigned char)data[i];

              if (b == '\\')
                {
                  plain = FALSE;
                  i++; /* the escaped character */
                }
              else if (b < 0x20 || b > 0x7e)
                plain = FALSE;
            }
          if (i >= len)
            {
              i = len;
              break; /* unterminated: json-glib says so */
            }
          if (plain && i - start >= ELIDE_MIN_BYTES && *n_spans < ELIDE_MAX)
            spans[(*n_spans)++] = (Span){ start, i - start };
          continue;
        }
      if ((c == '{' || c == '[') && ++depth > NZ_JSON_MAX_DEPTH)
        {
          *too_deep = TRUE;
          return FALSE;
        }
      else if ((c == '}' || c == ']') && --depth == 0)
        {
          i++;
          break;
        }
    }
  while (i < len && json_ws (data[i]))
    i++;
  return i == len;
}

static gpointer
throw_too_deep (GError **error)
{
  nz_throw (error, NZ_ERROR_PROTOCOL, NZ_JSON_TOO_DEEP_CODE ": nesting deeper than %d levels",
            NZ_JSON_MAX_DEPTH);
  return NULL;
}

gboolean
nz_json_check_depth (const char *data, gssize len, GError **error)
{
  gsize dlen, i;
  int depth = 0;

  g_return_val_if_fail (data != NULL || len == 0, FALSE);
  dlen = len < 0 ? strlen (data) : (gsize)len;
  /* Brackets inside strings do not count; an unterminated string ends the scan (the parser
   * then refuses the text). Over-counting on malformed input only refuses what json-glib
   * would refuse anyway. */
  for (i = 0; i < dlen; i++)
    {
      char c = data[i];

      if (c == '"')
        {
          for (i++; i < dlen && data[i] != '"'; i++)
            if (data[i] == '\\')
              i++;
        }
      else if ((c == '{' || c == '[') && ++depth > NZ_JSON_MAX_DEPTH)
        return throw_too_deep (error) != NULL;
      else if (c == '}' || c == ']')
        depth--;
    }
  return TRUE;
}

/* json-glib 1.6 leaks on several of its error paths: every value after the root ("2{...}",
 * "{}{}"), an object whose key holds a broken \u escape, ... (fuzz-json-depth found them): a
 * peer repeating such text would grow a server. So json-glib only ever sees text lib/lite's
 * strict reader (RFC 8259, valid UTF-8, no lone surrogates) has accepted whole. */
gboolean
nz_json_parser_load (JsonParser *parser, const char *data, gssize len, GError **error)
{
  g_return_val_if_fail (JSON_IS_PARSER (parser), FALSE);
  if (!nz_json_check_depth (data, len, error))
    return FALSE;
  if (!nz_jl_parse (data, len < 0 ? strlen (data) : (gsize)len, NULL))
    return nz_throw (error, NZ_ERROR_PROTOCOL, "invalid JSON: not RFC 8259 JSON");
  return json_parser_load_from_data (parser, data, len, error);
}

typedef struct
{
  const Elision *e;
  const char *data;
  const Span *spans;
  guint hits[ELIDE_MAX];
} Restore;

/* Puts back the string whose placeholder @node holds, if any, and counts the hit. */
static void
restore_span (JsonNode *node, gpointer user_data)
{
  Restore *r = user_data;

  for (guint i = 0; i < r->e->n; i++)
    if (g_strcmp0 (json_node_get_string (node), r->e->placeholder[i]) == 0)
      {
        g_autofree char *value = g_malloc (r->spans[i].len + 1);

        memcpy (value, r->data + r->spans[i].start, r->spans[i].len);
        value[r->spans[i].len] = '\0';
        json_node_set_string (node, value);
        r->hits[i]++;
        return;
      }
}

/* The object @data holds, parsed with its long plain strings elided; NULL when anything is
 * off (the caller then parses @data whole, which also gives the error json-glib words). */
static JsonObject *
parse_elided (const char *data, gsize len, const Span *spans, guint n_spans)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GString) reduced = g_string_sized_new (len - spans[0].len + 256);
  Restore r = { 0 };
  gsize from = 0;
  JsonNode *root;
  Elision e;

  elision_init (&e);
  e.n = n_spans;
  for (guint i = 0; i < n_spans; i++)
    {
      g_string_append_len (reduced, data + from, spans[i].start - from);
      g_string_append (reduced, e.placeholder[i]);
      from = spans[i].start + spans[i].len;
    }
  g_string_append_len (reduced, data + from, len - from);
  if (!json_parser_load_from_data (parser, reduced->str, reduced->len, NULL)
      || (root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    return NULL;
  r = (Restore){ .e = &e, .data = data, .spans = spans };
  walk_strings (root, restore_span, &r);
  for (guint i = 0; i < n_spans; i++)
    if (r.hits[i] != 1)
      return NULL;
  /* Not sealed, unlike the ordinary path's immutable parse: sealing hashes every string, a
   * byte at a time, and nothing here needs the tree immutable or hashed. */
  g_atomic_int_inc (&elided_count);
  return json_object_ref (json_node_get_object (root));
}

gboolean
nz_json_text_has_nul (const char *data, gsize len)
{
  /* Outside strings a backslash is not JSON at all; inside, each escape is skipped whole, so
   * the 'u' after an escaped backslash is never taken for one. */
  for (gsize i = 0; i + 1 < len; i++)
    if (data[i] == '\\')
      {
        if (data[i + 1] == 'u' && i + 5 < len && memcmp (data + i + 2, "0000", 4) == 0)
          return TRUE;
        i++;
      }
  return FALSE;
}

JsonObject *
nz_json_parse_object (const char *data, gssize len, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new_immutable ();
  g_autoptr (GError) local_error = NULL;
  gsize dlen = len < 0 ? strlen (data) : (gsize)len;
  Span spans[ELIDE_MAX];
  guint n_spans = 0;
  gboolean too_deep = FALSE;
  JsonNode *root;

  if (!single_object (data, dlen, spans, &n_spans, &too_deep))
    {
      if (too_deep)
        return throw_too_deep (error);
      nz_throw (error, NZ_ERROR_PROTOCOL, "expected exactly one JSON object");
      return NULL;
    }
  /* json-glib's leaking error paths (above nz_json_parser_load): only strict JSON reaches it. */
  if (!nz_jl_parse (data, dlen, NULL))
    return (nz_throw (error, NZ_ERROR_PROTOCOL, "invalid JSON: not RFC 8259 JSON"), NULL);
  if (n_spans > 0)
    {
      JsonObject *obj = parse_elided (data, dlen, spans, n_spans);

      if (obj != NULL)
        return obj;
    }
  if (!json_parser_load_from_data (parser, data, len, &local_error))
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "invalid JSON: %s", local_error->message);
      return NULL;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "expected a JSON object");
      return NULL;
    }
  return json_object_ref (json_node_get_object (root));
}

JsonNode *
nz_json_member (JsonObject *obj, const char *name)
{
  /* json_object_get_member answers NULL for a missing member without a warning. */
  return obj != NULL ? json_object_get_member (obj, name) : NULL;
}

const char *
nz_json_unknown_member (JsonObject *obj, const char *const *known)
{
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  g_return_val_if_fail (known != NULL, NULL);
  if (obj == NULL)
    return NULL;
  json_object_iter_init (&it, obj);
  while (json_object_iter_next (&it, &k, &v))
    if (!g_strv_contains (known, k))
      return k;
  return NULL;
}

const char *
nz_json_get_string (JsonObject *obj, const char *name)
{
  JsonNode *n = nz_json_member (obj, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

gboolean
nz_json_get_bool (JsonObject *obj, const char *name, gboolean fallback)
{
  JsonNode *n = nz_json_member (obj, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    return fallback;
  return json_node_get_boolean (n);
}

gboolean
nz_json_get_number (JsonObject *obj, const char *name, double *out)
{
  JsonNode *n = nz_json_member (obj, name);
  GType t;

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n))
    return FALSE;
  t = json_node_get_value_type (n);
  if (t == G_TYPE_INT64)
    *out = (double)json_node_get_int (n);
  else if (t == G_TYPE_DOUBLE)
    *out = json_node_get_double (n);
  else
    return FALSE;
  return TRUE;
}

JsonObject *
nz_json_get_object (JsonObject *obj, const char *name)
{
  JsonNode *n = nz_json_member (obj, name);

  return (n != NULL && JSON_NODE_HOLDS_OBJECT (n)) ? json_node_get_object (n) : NULL;
}

JsonArray *
nz_json_get_array (JsonObject *obj, const char *name)
{
  JsonNode *n = nz_json_member (obj, name);

  return (n != NULL && JSON_NODE_HOLDS_ARRAY (n)) ? json_node_get_array (n) : NULL;
}

const guint8 *
nz_json_content_bytes (JsonNode *node, const char *encoding, gpointer *owned, gsize *len)
{
  g_autofree char *text = NULL;
  const char *str;

  if (node != NULL && JSON_NODE_HOLDS_VALUE (node)
      && json_node_get_value_type (node) == G_TYPE_STRING && json_node_get_string (node) != NULL)
    str = json_node_get_string (node);
  else
    str = text = nz_json_js_string (node);
  if (g_strcmp0 (encoding, "base64") == 0)
    return *owned = nz_base64_decode_lenient (str, len);
  *len = strlen (str);
  *owned = g_steal_pointer (&text);
  return (const guint8 *)str;
}

char *
nz_json_js_string (JsonNode *n)
{
  if (n == NULL)
    return g_strdup ("undefined");
  if (JSON_NODE_HOLDS_NULL (n))
    return g_strdup ("null");
  if (JSON_NODE_HOLDS_OBJECT (n))
    return g_strdup ("[object Object]");
  if (JSON_NODE_HOLDS_ARRAY (n))
    {
      JsonArray *a = json_node_get_array (n);
      GString *s = g_string_new (NULL);

      for (guint i = 0; i < json_array_get_length (a); i++)
        {
          JsonNode *e = json_array_get_element (a, i);

          if (i > 0)
            g_string_append_c (s, ',');
          if (!JSON_NODE_HOLDS_NULL (e))
            {
              g_autofree char *part = nz_json_js_string (e);

              g_string_append (s, part);
            }
        }
      return g_string_free (s, FALSE);
    }
  switch (json_node_get_value_type (n))
    {
    case G_TYPE_STRING:
      return g_strdup (json_node_get_string (n));
    case G_TYPE_BOOLEAN:
      return g_strdup (json_node_get_boolean (n) ? "true" : "false");
    case G_TYPE_INT64:
      return g_strdup_printf ("%" G_GINT64_FORMAT, json_node_get_int (n));
    default:
      {
        double d = json_node_get_double (n);
        char buf[G_ASCII_DTOSTR_BUF_SIZE];

        if (d > -1e15 && d < 1e15 && d == (double)(gint64)d)
          return g_strdup_printf ("%" G_GINT64_FORMAT, (gint64)d);
        return g_strdup (g_ascii_dtostr (buf, sizeof buf, d));
      }
    }
}

gboolean
nz_json_js_truthy (JsonNode *n)
{
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return FALSE;
  if (!JSON_NODE_HOLDS_VALUE (n))
    return TRUE;
  switch (json_node_get_value_type (n))
    {
    case G_TYPE_STRING:
      return json_node_get_string (n)[0] != '\0';
    case G_TYPE_BOOLEAN:
      return json_node_get_boolean (n);
    case G_TYPE_INT64:
      return json_node_get_int (n) != 0;
    default:
      {
        double d = json_node_get_double (n);

        return d != 0 && !isnan (d);
      }
    }
}

double
nz_json_js_number (JsonNode *n)
{
  double d;

  if (n == NULL)
    return NAN;
  if (JSON_NODE_HOLDS_NULL (n))
    return 0;
  if (!JSON_NODE_HOLDS_VALUE (n))
    return NAN;
  switch (json_node_get_value_type (n))
    {
    case G_TYPE_INT64:
      return (double)json_node_get_int (n);
    case G_TYPE_DOUBLE:
      return json_node_get_double (n);
    case G_TYPE_BOOLEAN:
      return json_node_get_boolean (n) ? 1 : 0;
    case G_TYPE_STRING:
      return nz_parse_js_number (json_node_get_string (n), &d) ? d : NAN;
    default:
      return NAN;
    }
}

const char *
nz_json_node_string (JsonNode *n)
{
  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

void
nz_json_append_escaped_byte (GString *out, guchar c)
{
  g_return_if_fail (out != NULL);

  switch (c)
    {
    case '"':
      g_string_append (out, "\\\"");
      break;
    case '\\':
      g_string_append (out, "\\\\");
      break;
    case '\b':
      g_string_append (out, "\\b");
      break;
    case '\f':
      g_string_append (out, "\\f");
      break;
    case '\n':
      g_string_append (out, "\\n");
      break;
    case '\r':
      g_string_append (out, "\\r");
      break;
    case '\t':
      g_string_append (out, "\\t");
      break;
    default:
      if (c < 0x20)
        g_string_append_printf (out, "\\u%04x", c);
      else
        g_string_append_c (out, (char)c);
    }
}

char *
nz_json_format_time_ms (gint64 ms)
{
  g_autoptr (GDateTime) t = g_date_time_new_from_unix_utc (ms / 1000);

  if (t == NULL)
    return g_strdup ("(out of range)");
  return g_strdup_printf ("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", g_date_time_get_year (t),
                          g_date_time_get_month (t), g_date_time_get_day_of_month (t),
                          g_date_time_get_hour (t), g_date_time_get_minute (t),
                          g_date_time_get_second (t), (int)(ms % 1000));
}

static gboolean
pick_int (JsonNode *n, gint64 *out)
{
  double v;

  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) == G_TYPE_STRING
      || json_node_get_value_type (n) == G_TYPE_BOOLEAN)
    return FALSE;
  v = json_node_get_double (n);
  if (!(v >= -9007199254740992.0 && v <= 9007199254740992.0) || v != (double)(gint64)v)
    return FALSE;
  *out = (gint64)v;
  return TRUE;
}

JsonObject *
nz_json_pick (JsonObject *from, const NzJsonPick *schema)
{
  JsonObject *out = json_object_new ();

  g_return_val_if_fail (schema != NULL, out);
  for (const NzJsonPick *f = schema; from != NULL && f->name != NULL; f++)
    {
      JsonNode *n = nz_json_member (from, f->name);
      gint64 v;

      if (n == NULL)
        continue;
      switch (f->type)
        {
        case NZ_JSON_PICK_STRING:
          if (nz_json_node_string (n) != NULL)
            json_object_set_string_member (out, f->name, nz_json_node_string (n));
          break;
        case NZ_JSON_PICK_INT:
          if (pick_int (n, &v))
            json_object_set_int_member (out, f->name, v);
          break;
        case NZ_JSON_PICK_BOOL:
          if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_BOOLEAN)
            json_object_set_boolean_member (out, f->name, json_node_get_boolean (n));
          break;
        case NZ_JSON_PICK_STRINGS:
        case NZ_JSON_PICK_OBJECTS:
          if (JSON_NODE_HOLDS_ARRAY (n))
            {
              JsonArray *in = json_node_get_array (n);
              JsonArray *arr = json_array_new ();

              for (guint i = 0; i < json_array_get_length (in); i++)
                {
                  JsonNode *e = json_array_get_element (in, i);

                  if (f->type == NZ_JSON_PICK_STRINGS && nz_json_node_string (e) != NULL)
                    json_array_add_string_element (arr, nz_json_node_string (e));
                  else if (f->type == NZ_JSON_PICK_OBJECTS && JSON_NODE_HOLDS_OBJECT (e))
                    json_array_add_object_element (
                        arr, nz_json_pick (json_node_get_object (e), f->members));
                }
              json_object_set_array_member (out, f->name, arr);
            }
          break;
        }
    }
  return out;
}
