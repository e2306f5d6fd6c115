#include "nz-worker-body.h"

#include "nz-agent-ops.h"
#include "nz-json.h"

void
nz_worker_body_refusal_clear (NzWorkerBodyRefusal *refusal)
{
  g_clear_pointer (&refusal->message, g_free);
}

static JsonObject *
refuse (NzWorkerBodyRefusal *refusal, guint status, const char *code, char *message)
{
  refusal->status = status;
  refusal->code = code;
  refusal->message = message;
  return NULL;
}

JsonObject *
nz_worker_body_parse (const char *data, gsize len, gint64 max_bytes, NzWorkerBodyRefusal *refusal)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  JsonNode *root;

  g_return_val_if_fail (refusal != NULL && (data != NULL || len == 0), NULL);
  if ((gint64)len > max_bytes)
    return refuse (refusal, 400, "invalid_body",
                   g_strdup_printf ("request body exceeds %" G_GINT64_FORMAT " bytes", max_bytes));
  if (len == 0)
    return json_object_new ();
  if (!nz_json_parser_load (parser, data, (gssize)len, &error))
    return refuse (refusal, 400, "invalid_body", g_strdup (error->message));
  /* json-glib strings stop at a NUL: refuse rather than act on a truncated command, path,
   * id or content, with the agent's words (it refuses the same requests). */
  if (nz_agent_ops_has_nul_escape (data, len))
    return refuse (refusal, 400, NZ_JSON_NUL_UNSUPPORTED_CODE, g_strdup (NZ_JSON_NUL_UNSUPPORTED));
  root = json_parser_get_root (parser);
  if (root == NULL || JSON_NODE_HOLDS_NULL (root))
    return refuse (refusal, 500, "internal", g_strdup ("request body is null"));
  if (!JSON_NODE_HOLDS_OBJECT (root))
    return json_object_new ();
  return json_object_ref (json_node_get_object (root));
}
