#include "nz-envelope.h"

#include "nz-errors.h"
#include "nz-json.h"

#include <string.h>

/* Renders a JSON value the way JS String(v) would, for the unknown_op echo. */
static char *
js_string (JsonNode *n)
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
          g_autofree char *part = NULL;

          if (i > 0)
            g_string_append_c (s, ',');
          if (JSON_NODE_HOLDS_NULL (e))
            continue;
          part = js_string (e);
          g_string_append (s, part);
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
        char buf[G_ASCII_DTOSTR_BUF_SIZE];

        return g_strdup (g_ascii_dtostr (buf, sizeof buf, json_node_get_double (n)));
      }
    }
}

NzEnvelope *
nz_envelope_parse (GBytes *payload, GError **error)
{
  gsize len = 0;
  const char *data = g_bytes_get_data (payload, &len);
  g_autoptr (JsonObject) root = NULL;
  NzEnvelope *env;
  JsonNode *tok;

  if (len == 0)
    {
      nz_throw (error, NZ_ERROR_PROTOCOL, "empty request frame");
      return NULL;
    }
  root = nz_json_parse_object (data, len, error);
  if (root == NULL)
    return NULL;
  env = g_new0 (NzEnvelope, 1);
  env->op = js_string (json_object_get_member (root, "op"));
  tok = json_object_get_member (root, "token");
  env->token = g_strdup (tok != NULL && JSON_NODE_HOLDS_VALUE (tok)
                                 && json_node_get_value_type (tok) == G_TYPE_STRING
                             ? json_node_get_string (tok)
                             : "");
  env->body = nz_json_get_object (root, "body");
  if (env->body != NULL)
    json_object_ref (env->body);
  env->root = g_steal_pointer (&root);
  return env;
}

void
nz_envelope_free (NzEnvelope *env)
{
  if (env == NULL)
    return;
  g_free (env->op);
  if (env->token != NULL)
    explicit_bzero (env->token, strlen (env->token));
  g_free (env->token);
  g_clear_pointer (&env->body, json_object_unref);
  g_clear_pointer (&env->root, json_object_unref);
  g_free (env);
}

JsonObject *
nz_envelope_build (const char *op, const char *token, JsonObject *body)
{
  JsonObject *o = json_object_new ();

  json_object_set_string_member (o, "op", op);
  if (token != NULL)
    json_object_set_string_member (o, "token", token);
  if (body != NULL)
    json_object_set_object_member (o, "body", json_object_ref (body));
  return o;
}
