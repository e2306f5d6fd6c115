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
  gboolean capabilities_only; /* (worker read) capabilitiesOnly === true: the probe, no path */
  gboolean has_range;         /* (worker read) a valid `range` was given */
  gint64 range_offset;        /* ... its offset (0 when absent) */
  gint64 range_length;        /* ... its length, or -1 for the remainder */
} NzFileRequest;

/* The worker's bound on a ranged read (the reference's FILE_RANGE_BYTES, 32 MiB), which its
 * capability probe advertises as readFileRanges.maxBytes. */
#define NZ_FILE_RANGE_MAX_BYTES 33554432
#define NZ_FILE_RANGE_VERSION 1

/* The worker's range refusals, {ok: false, error: <words>} with a 400. The reference's own
 * strings are not recorded in the spec; these are ours, stable. */
#define NZ_FILE_RANGE_SHAPE_WORDS                                                                  \
  "invalid_range: range must be an object {version: 1, offset?, length?}"
#define NZ_FILE_RANGE_VERSION_WORDS "invalid_range: range.version must be 1"
#define NZ_FILE_RANGE_NUMBER_WORDS                                                                 \
  "invalid_range: range.offset and range.length must be safe integers >= 0"

/* The message both references give for a path that is no string: a refusal with no code,
 * which the worker sends as its file-op error {ok: false, error: message}. */
#define NZ_FILE_PATH_TYPE_WORDS "The \"path\" argument must be of type string"

/* Parses @body (may be NULL) for @op on @wire: (worker read) capabilitiesOnly, before all else;
 * a JS-truthy path (missing_path for a read, missing_path_or_content for a write), a string
 * path, (worker read) a `range` that is a non-array object of version 1 whose offset and length
 * are safe integers >= 0, the length at most NZ_FILE_RANGE_MAX_BYTES (no I/O yet: the
 * remainder's bound needs the file), (agent write) a part that is an object
 * (write_part_invalid_shape), a content member for a whole-file write. FALSE with *@refusal
 * set (all 400; a refusal with no code is the worker's file-op error). */
gboolean nz_op_file_parse (JsonObject *body, NzFileOp op, NzWire wire, NzFileRequest *req,
                           NzRefusal *refusal);

/* The words for a worker range of @wanted bytes over NZ_FILE_RANGE_MAX_BYTES (a length asked,
 * or the remainder of a range without one). Returns a new string. */
char *nz_op_file_range_too_large (gint64 wanted);

G_END_DECLS
