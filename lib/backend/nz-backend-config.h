/* nz-backend-config.h: what a backend's parse_config (nz-backend.h) shares with the reference
 * config parser: refusals that name the field, collected so the whole document is judged at
 * once. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Appends one refusal to @reasons. */
void nz_config_refuse (GPtrArray *reasons, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* The positive safe integer @member of @obj (at most @max); 0 when absent, or refused naming
 * @field. */
gint64 nz_config_positive_int (GPtrArray *reasons, JsonObject *obj, const char *member,
                               const char *field, gint64 max);

G_END_DECLS
