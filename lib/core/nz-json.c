#include "nz-json.h"

#include <math.h>
#include <string.h>

#include "nz-errors.h"
#include "nz-knobs.h"

char *
nz_json_to_string (JsonNode *node, gsize *out_len)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();

  json_generator_set_root (gen, node);
  return json_generator_to_data (gen, out_len);
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
static gboolean
single_object (const char *data, gsize len)
{
  gsize i = 0;
  int depth = 0;
  gboolean in_str = FALSE, esc = FALSE;

  while (i < len && json_ws (data[i]))
    i++;
  if (i == len || data[i] != '{')
    return FALSE;
  for (; i < len; i++)
    {
      char c = data[i];

      if (in_str)
        {
          if (esc)
            esc = FALSE;
          else if (c == '\\')
            esc = TRUE;
          else if (c == '"')
            in_str = FALSE;
          continue;
        }
      if (c == '"')
        in_str = TRUE;
      else if (c == '{' || c == '[')
        depth++;
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

JsonObject *
nz_json_parse_object (const char *data, gssize len, GError **error)
{
  g_autoptr (JsonParser) parser = json_parser_new_immutable ();
  g_autoptr (GError) local_error = NULL;
  JsonNode *root;

  if (!single_object (data, len < 0 ? strlen (data) : (gsize)len))
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "expected exactly one JSON object");
      return NULL;
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

static JsonNode *
member (JsonObject *obj, const char *name)
{
  return obj != NULL ? json_object_get_member (obj, name) : NULL;
}

const char *
nz_json_get_string (JsonObject *obj, const char *name)
{
  JsonNode *n = member (obj, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING)
    return NULL;
  return json_node_get_string (n);
}

gboolean
nz_json_get_bool (JsonObject *obj, const char *name, gboolean fallback)
{
  JsonNode *n = member (obj, name);

  if (n == NULL || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    return fallback;
  return json_node_get_boolean (n);
}

gboolean
nz_json_get_number (JsonObject *obj, const char *name, double *out)
{
  JsonNode *n = member (obj, name);
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
  JsonNode *n = member (obj, name);

  return (n != NULL && JSON_NODE_HOLDS_OBJECT (n)) ? json_node_get_object (n) : NULL;
}

JsonArray *
nz_json_get_array (JsonObject *obj, const char *name)
{
  JsonNode *n = member (obj, name);

  return (n != NULL && JSON_NODE_HOLDS_ARRAY (n)) ? json_node_get_array (n) : NULL;
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

        if (d == (double)(gint64)d && d > -1e15 && d < 1e15)
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
