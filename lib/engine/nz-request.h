/* nz-request.h: the request handling namzu-agent's ops and namzu-worker's reference routes
 * share (spec A.6, C.4, C.5): execute's cwd/timeout/maxOutputBytes rules, the result
 * members, whole-file read-file/write-file, and the ranged reads' offset/length. Each caller keeps its own reply shape. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "nz-exec.h"
#include "nz-guest.h"

G_BEGIN_DECLS

/* execute's cwd: falsy -> the workspace; not a string -> "The \"path\" argument must be of
 * type string"; otherwise resolved inside the jail. Returns a new string, or NULL with the
 * message both wire shapes carry after "invalid_cwd". */
char *nz_request_resolve_cwd (NzGuest *guest, JsonNode *cwd_node, GError **error);

/* TRUE for a finite timeout in (0, NAMZU_SANDBOX_MAX_TIMEOUT_MS]. */
gboolean nz_request_timeout_in_range (NzGuest *guest, double timeout_ms);

/* maxOutputBytes as JS Number(); NaN or 0 -> the default. */
double nz_request_max_output (JsonNode *node);

/* exitCode, timedOut, durationMs, signal?, stdoutTruncated, stderrTruncated. */
void nz_request_set_result_members (JsonObject *obj, const NzExecResult *r);

/* Appends the execute stream's output event for a chunk of @stream, as both wires send it:
 * {"type":"stdout_delta"|"stderr_delta","data":<lossy UTF-8 of @data>}, and with @offsets
 * (the agent, a retained record) the chunk's byte span in @rec's output log, which the chunk
 * was just appended to: "offset", "nextOffset". Built by hand: the lossy decode may hold
 * U+0000, which a C-string JSON builder would cut short. */
void nz_request_append_delta (GString *out, NzExecRecord *rec, NzExecStream stream,
                              const guint8 *data, gsize len, gboolean offsets);

/* terminalPayload: {ok:true, guestBootId?, state:<outcome>, started, result?, error?}
 * (spec C.2); @boot_id NULL leaves guestBootId out, as the reference worker does. Returns a
 * new reference. */
JsonObject *nz_request_terminal_payload (NzExecRecord *rec, const char *boot_id);

/* cancel of a reserved or starting execution: it becomes terminal `cancelled` now, so that
 * id can never start later. Does nothing for any other state. */
void nz_request_cancel_unadmitted (NzGuest *guest, NzExecRecord *rec);

/* execute's stdin as JS String(), or NULL when absent. Returns a new reference. */
GBytes *nz_request_stdin (JsonNode *stdin_node);

/* Opens @path for reading race-free (lexical jail, the symlink step, then an open beneath the
 * root that follows no symlink), O_RDONLY | O_NONBLOCK so a FIFO cannot block the open.
 * *@out_real gets the real path. Returns the fd or -1. */
int nz_request_open_read (NzGuest *guest, const char *path, char **out_real, GError **error);

/* A ranged read's offset/length member: absent or null -> @fallback; otherwise it must be a
 * safe integer >= 0 (FALSE when it is not). */
/* Not in the reference's catalogue: ours, stable; read-file and read-file-stream share it. */
#define NZ_REQUEST_INVALID_RANGE "invalid_range: offset and length must be safe integers >= 0"

gboolean nz_request_range_member (JsonObject *body, const char *name, gint64 fallback,
                                  gint64 *out);

/* The whole file at @path (jailed, race-free; regular files only). Returns a new reference. */
GBytes *nz_request_read_file (NzGuest *guest, const char *path, GError **error);

/* Appends `"content":…,"sizeBytes":N,"encoding":"…"}`: the tail of a read-file reply, whose
 * head the caller writes up to and including the comma. */
void nz_request_append_content (GString *reply, GBytes *content, gboolean base64);

/* For a write to @lexical (jailed to @root): race-free mkdir -p of its parent, then the parent
 * opened race-free (nz_jail_open_parent_within). Returns the directory fd or -1. */
int nz_request_open_write_parent (const char *lexical, const char *root, char **out_real,
                                  char **out_base, GError **error);

/* write-file's whole-file path: jail, race-free mkdir -p of the parent, symlink check and
 * race-free open of the parent directory, JS String() of
 * @content_node (base64-decoded when @encoding says so), durable write. */
gboolean nz_request_write_file (NzGuest *guest, const char *path, JsonNode *content_node,
                                const char *encoding, gsize *out_written, GError **error);

G_END_DECLS
