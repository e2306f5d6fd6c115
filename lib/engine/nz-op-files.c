/* nz-op-files: see nz-op-files.h. */
#include "nz-op-files.h"

#include "nz-json.h"

static gboolean
refuse (NzRefusal *refusal, const char *code, const char *detail)
{
  refusal->code = code;
  refusal->detail = g_strdup (detail);
  refusal->http_status = 400;
  return FALSE;
}

static gboolean
given (JsonNode *node)
{
  return node != NULL && !JSON_NODE_HOLDS_NULL (node);
}

gboolean
nz_op_file_parse (JsonObject *body, NzFileOp op, NzWire wire, NzFileRequest *req,
                  NzRefusal *refusal)
{
  JsonNode *path_node = nz_json_member (body, "path");
  JsonNode *part = wire == NZ_WIRE_AGENT ? nz_json_member (body, "part") : NULL;
  const char *missing = op == NZ_FILE_OP_READ ? "missing_path" : "missing_path_or_content";

  *refusal = (NzRefusal){ 0 };
  *req = (NzFileRequest){
    .path = nz_json_node_string (path_node),
    .encoding = nz_json_node_string (nz_json_member (body, "encoding")),
    .content = op == NZ_FILE_OP_WRITE ? nz_json_member (body, "content") : NULL,
  };
  req->base64 = g_strcmp0 (req->encoding, "base64") == 0;
  if (!nz_json_js_truthy (path_node))
    return refuse (refusal, missing, NULL);
  /* The worker checks the content's presence with the path's (spec C.5); the agent after the
   * path's type and the part. */
  if (op == NZ_FILE_OP_WRITE && wire == NZ_WIRE_WORKER && req->content == NULL)
    return refuse (refusal, missing, NULL);
  if (req->path == NULL)
    return refuse (refusal, NULL, NZ_FILE_PATH_TYPE_WORDS);
  if (op == NZ_FILE_OP_READ)
    {
      req->ranged
          = wire == NZ_WIRE_AGENT
            && (given (nz_json_member (body, "offset")) || given (nz_json_member (body, "length")));
      return TRUE;
    }
  if (given (part))
    {
      if (!JSON_NODE_HOLDS_OBJECT (part))
        return refuse (refusal, "write_part_invalid_shape", NULL);
      req->part = json_node_get_object (part);
      return TRUE;
    }
  if (req->content == NULL)
    return refuse (refusal, missing, NULL);
  return TRUE;
}
