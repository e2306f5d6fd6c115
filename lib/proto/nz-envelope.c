#include "nz-envelope.h"

#include "nz-errors.h"
#include "nz-json.h"

#include <string.h>

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
  env->op = nz_json_js_string (json_object_get_member (root, "op"));
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
