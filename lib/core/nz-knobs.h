/* nz-knobs.h: environment knobs, parsed the way the reference does (spec B.1). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Largest integer a JS Number holds exactly; the reference's "safe integer". */
#define NZ_MAX_SAFE_INTEGER G_GINT64_CONSTANT (9007199254740991)

/* Reads env var @name. Unset -> @fallback. Otherwise it must be a safe integer > 0
 * (>= 0 with @allow_zero); an empty string is *not* unset. On a bad value sets
 * "<NAME> must be a positive safe integer" (or "non-negative") and returns FALSE. */
gboolean nz_knob_int (const char *name, gint64 fallback, gboolean allow_zero, gint64 *out,
                      GError **error);

/* Parses @text like JS Number(): trims whitespace, "" is 0, accepts decimal, 0x hex, exponent
 * forms. Returns FALSE when it is not a finite number. */
gboolean nz_parse_js_number (const char *text, double *out);

/* True for a double that is an integer of magnitude <= 2^53-1. */
gboolean nz_is_safe_integer (double v);

G_END_DECLS
