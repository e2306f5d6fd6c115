/* nz-fileparts.h: the write-file parts protocol (spec A.6.9): a temp sibling filled part by
 * part at exact offsets, renamed onto its target by the final part; and discard. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

typedef struct
{
  gboolean discarded; /* a discard request (no boot id on its reply) */
  gint64 bytes_written;
  gint64 size_bytes; /* the temp's size after this part */
} NzFilePartResult;

/* ^\.namzu-write-[\s\S]+\.part$ on a basename. */
gboolean nz_fileparts_is_temp_name (const char *basename);

/* One part request: @path is body.path (the temp), @part the `part` object, @content the
 * `content` member (NULL when absent), @encoding body.encoding (NULL = utf8). Checks run in the
 * reference's order; the error message is the wire string (write_part_*, jail and Node-style
 * system errors). On a failed part the temp is left for the host's discard. */
gboolean nz_fileparts_apply (NzGuest *guest, const char *path, JsonObject *part, JsonNode *content,
                             const char *encoding, NzFilePartResult *out, GError **error);

G_END_DECLS
