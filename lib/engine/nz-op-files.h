/* nz-op-files.h: read-file and write-file parsed and validated once, for both wires (spec
 * A.6.6 for namzu-agent's framed wire, C.5 for namzu-worker's POST /read-file and
 * /write-file): a typed request, or a refusal in the spec's exact strings, which each wire
 * words in its own reply shape. Where the two references differ, @wire says which is asked. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-op-execute.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_FILE_OP_READ,
  NZ_FILE_OP_WRITE,
} NzFileOp;

typedef struct
{
  const char *path;     /* borrowed from the body */
  const char *encoding; /* the encoding member when it is a string, or NULL */
  gboolean base64;      /* encoding is "base64" */
  gboolean ranged;      /* (agent read) offset or length is given and not null */
  JsonObject *part;     /* (agent write) a part upload's object, or NULL; borrowed */
  JsonNode *content;    /* (write) the content member (a part's chunk), or NULL; borrowed */
} NzFileRequest;

/* The message both references give for a path that is no string: a refusal with no code,
 * which the worker sends as its file-op error {ok: false, error: message}. */
#define NZ_FILE_PATH_TYPE_WORDS "The \"path\" argument must be of type string"

/* Parses @body (may be NULL) for @op on @wire: a JS-truthy path (missing_path for a read,
 * missing_path_or_content for a write), a string path, (agent write) a part that is an object
 * (write_part_invalid_shape), a content member for a whole-file write. FALSE with *@refusal
 * set (all 400). */
gboolean nz_op_file_parse (JsonObject *body, NzFileOp op, NzWire wire, NzFileRequest *req,
                           NzRefusal *refusal);

G_END_DECLS
