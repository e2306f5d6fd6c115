/* nz-worker-body.h: a worker route's JSON body, decoded the way the reference's readBody does
 * (spec C.4), plus namzu's bounds: pure code, so it is unit-tested through the server and
 * fuzzed directly (tests/fuzz/fuzz-worker-request.c). */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct
{
  guint status;      /* HTTP status */
  const char *code;  /* the reply's "error" */
  char *message;     /* the reply's "message", or NULL */
} NzWorkerBodyRefusal;

void nz_worker_body_refusal_clear (NzWorkerBodyRefusal *refusal);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzWorkerBodyRefusal, nz_worker_body_refusal_clear)

/* Empty is {}; over @max_bytes, not JSON, or nested deeper than NZ_JSON_MAX_DEPTH is 400
 * invalid_body; a \u0000 escape is 400 json_nul_unsupported (json-glib strings would stop
 * there); null is 500 internal (the reference's catch-all); any other non-object is {}.
 * Returns a new reference, or NULL with *@refusal filled in. */
JsonObject *nz_worker_body_parse (const char *data, gsize len, gint64 max_bytes,
                                  NzWorkerBodyRefusal *refusal);

G_END_DECLS
