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

/* Builds {op, token?, body?}. @token and @body may be NULL. */
JsonObject *nz_envelope_build (const char *op, const char *token, JsonObject *body);

G_END_DECLS
