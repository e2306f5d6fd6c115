#include "nz-envelope.h"

#include "nz-errors.h"
#include "nz-json.h"
#include "nz-jsonlite.h"

#include <stdlib.h>
#include <string.h>

gboolean
nz_envelope_peek (GBytes *payload, NzEnvelopePeek *out, GError **error)
{
  gsize len = 0;
  const char *data = g_bytes_get_data (payload, &len);
  NzJlValue root, op, token;
  gsize skip = 0;

  g_return_val_if_fail (payload != NULL && out != NULL, FALSE);
  *out = (NzEnvelopePeek){ 0 };
  /* Not an object at all is told apart first, as nz_json_parse_object does; then the depth
   * scan, whose refusal is named, before the reader below, which recurses. */
  while (skip < len && g_ascii_isspace (data[skip]))
    skip++;
  if (skip == len || data[skip] != '{')
    return nz_throw (error, NZ_ERROR_PROTOCOL, "expected exactly one JSON object");
  if (!nz_json_check_depth (data, (gssize)len, error))
    return FALSE;
  if (!nz_jl_parse (data, len, &root) || root.type != NZ_JL_OBJECT)
    return nz_throw (error, NZ_ERROR_PROTOCOL, "expected exactly one JSON object");
  /* "healthz" is 9 bytes of JSON text, or up to 44 with every character escaped. */
  if (nz_jl_member (&root, "op", &op) && op.type == NZ_JL_STRING && op.len <= 64)
    {
      size_t n = 0;
      char *s = nz_jl_string (&op, &n);

      out->healthz = s != NULL && n == 7 && memcmp (s, "healthz", 7) == 0;
      free (s);
    }
  if (nz_jl_member (&root, "token", &token) && token.type == NZ_JL_STRING
      && token.len <= NZ_ENVELOPE_MAX_TOKEN_TEXT)
    {
      size_t n = 0;
      char *s = nz_jl_string (&token, &n);

      if (s != NULL)
        {
          out->token = g_memdup2 (s, n + 1);
          out->token_len = n;
          explicit_bzero (s, n);
          free (s);
        }
    }
  if (out->token == NULL)
    out->token = g_strdup ("");
  return TRUE;
}

void
nz_envelope_peek_clear (NzEnvelopePeek *peek)
{
  if (peek->token != NULL)
    explicit_bzero (peek->token, peek->token_len);
  g_clear_pointer (&peek->token, g_free);
  peek->token_len = 0;
}

NzEnvelope *
nz_envelope_new (const char *op, JsonObject *body)
{
  NzEnvelope *env = g_new0 (NzEnvelope, 1);

  env->op = g_strdup (op);
  env->token = g_strdup ("");
  env->root = json_object_new ();
  if (body != NULL)
    {
      json_object_set_object_member (env->root, "body", json_object_ref (body));
      env->body = json_object_ref (body);
    }
  return env;
}

NzEnvelope *
nz_envelope_new_healthz (void)
{
  return nz_envelope_new ("healthz", NULL);
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
