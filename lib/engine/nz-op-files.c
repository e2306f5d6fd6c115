/* nz-op-files: see nz-op-files.h. */
#include "nz-op-files.h"

#include "nz-json.h"
#include "nz-request.h"

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

char *
nz_op_file_range_too_large (gint64 wanted)
{
  return g_strdup_printf ("read_file_range_too_large: the range asks %" G_GINT64_FORMAT
                          " bytes, over the %d-byte limit (readFileRanges.maxBytes)",
                          wanted, NZ_FILE_RANGE_MAX_BYTES);
}

/* The worker's `range` member (spec C.5, post-23.0.0), when present. */
static gboolean
parse_range (JsonNode *range, NzFileRequest *req, NzRefusal *refusal)
{
  JsonObject *o;
  double version = 0;

  if (!JSON_NODE_HOLDS_OBJECT (range))
    return refuse (refusal, NULL, NZ_FILE_RANGE_SHAPE_WORDS);
  o = json_node_get_object (range);
  if (!nz_json_get_number (o, "version", &version) || version != NZ_FILE_RANGE_VERSION)
    return refuse (refusal, NULL, NZ_FILE_RANGE_VERSION_WORDS);
  if (!nz_request_range_member (o, "offset", 0, &req->range_offset)
      || !nz_request_range_member (o, "length", -1, &req->range_length))
    return refuse (refusal, NULL, NZ_FILE_RANGE_NUMBER_WORDS);
  if (req->range_length > NZ_FILE_RANGE_MAX_BYTES)
    {
      g_autofree char *words = nz_op_file_range_too_large (req->range_length);

      return refuse (refusal, NULL, words);
    }
  req->has_range = TRUE;
  return TRUE;
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
    .range_length = -1,
  };
  req->base64 = g_strcmp0 (req->encoding, "base64") == 0;
  if (wire == NZ_WIRE_WORKER && op == NZ_FILE_OP_READ)
    {
      JsonNode *probe = nz_json_member (body, "capabilitiesOnly");

      /* === true: only the JSON literal. */
      if (probe != NULL && JSON_NODE_HOLDS_VALUE (probe)
          && json_node_get_value_type (probe) == G_TYPE_BOOLEAN && json_node_get_boolean (probe))
        return (req->capabilities_only = TRUE);
    }
  if (!nz_json_js_truthy (path_node))
    return refuse (refusal, missing, NULL);
  /* The worker checks the content's presence with the path's (spec C.5); the agent after the
   * path's type and the part. */
  if (op == NZ_FILE_OP_WRITE && wire == NZ_WIRE_WORKER && req->content == NULL)
    return refuse (refusal, missing, NULL);
  if (req->path == NULL)
    return refuse (refusal, NULL, NZ_FILE_PATH_TYPE_WORDS);
  if (op == NZ_FILE_OP_READ && wire == NZ_WIRE_WORKER)
    {
      JsonNode *range = nz_json_member (body, "range");

      /* Present at all (null included) is a range to check; only an absent one is no range. */
      return range == NULL || parse_range (range, req, refusal);
    }
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
