/* nz-envelope.h: the agent request envelope {op, token?, body?} (spec A.3). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef struct
{
  char *op;    /* String(op) of the request; never NULL after a successful parse */
  char *token; /* "" when absent or not a string (spec: a non-string token counts as "") */
  JsonObject *body; /* NULL when absent or not an object */
  JsonObject *root;
} NzEnvelope;

/* Parses the first frame. Not JSON or not an object -> FALSE (the caller destroys the socket
 * with no reply). */
NzEnvelope *nz_envelope_parse (GBytes *payload, GError **error);
void nz_envelope_free (NzEnvelope *env);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzEnvelope, nz_envelope_free)

/* What the credential gate needs of a first frame, read without building a tree (an
 * unauthenticated 8 MiB frame of small members would cost json-glib hundreds of MiB). */
typedef struct
{
  gboolean healthz; /* op is exactly the string "healthz" */
  char *token;      /* decoded, NULs kept; "" when absent, not a string or over the bound */
  gsize token_len;
} NzEnvelopePeek;

/* A presented token longer than this (as JSON text) is never decoded and never matches:
 * minted tokens are 64 characters. */
#define NZ_ENVELOPE_MAX_TOKEN_TEXT 4096

/* Validates @payload as one JSON object (nesting bounded like nz_json_parse_object, messages
 * starting NZ_JSON_TOO_DEEP_CODE when too deep) and reads op and token. Extra memory is the
 * token and a few bytes, whatever the payload holds. FALSE with NZ_ERROR_PROTOCOL otherwise. */
gboolean nz_envelope_peek (GBytes *payload, NzEnvelopePeek *out, GError **error);
void nz_envelope_peek_clear (NzEnvelopePeek *peek);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzEnvelopePeek, nz_envelope_peek_clear)
/* The envelope of a request that arrived some other way than as a first frame (namzu-worker's
 * POST /v1/agent/<op>, whose body the HTTP layer parsed): {op, body?}, no token. @body (may be
 * NULL) gets a new reference. */
NzEnvelope *nz_envelope_new (const char *op, JsonObject *body);
/* The envelope of a healthz answered from a peek: {op:"healthz"}, no token, no body. */
NzEnvelope *nz_envelope_new_healthz (void);

/* Builds {op, token?, body?}. @token and @body may be NULL. */
JsonObject *nz_envelope_build (const char *op, const char *token, JsonObject *body);

G_END_DECLS
