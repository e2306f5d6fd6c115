/* nz-agent-files.h: host-side file transfer and workload control over the guest-agent
 * protocol (spec D.2.7, D.2.8): uploads through the write-file parts protocol, downloads
 * through read-file-stream, and the quiesce / flush calls. Blocking, like nz-agent-client. */
#pragma once

#include <gio/gio.h>

#include "nz-agent-client.h"

G_BEGIN_DECLS

/* Raw bytes per uploaded part by default: small enough that neither side holds much of a
 * big file in memory, large enough that a part costs little next to its connection. */
#define NZ_AGENT_FILES_DEFAULT_PART_BYTES (256 * 1024)

/* Called after each part or chunk with the bytes moved so far and the total (-1: unknown). */
typedef void (*NzAgentProgressFunc) (gint64 done, gint64 total, gpointer user_data);

/* "<dir>/.namzu-write-<uuid>-<basename[0:96]>.part" beside @target (spec D.2.7). New string. */
char *nz_agent_files_temp_path (const char *target);

/* Reads @in_fd to EOF and writes it to @path in the sandbox atomically: parts of
 * @part_bytes (0 = default) to a temp sibling, the last one renaming it onto @path. The
 * target is untouched unless the whole upload succeeded; on failure the temp is discarded.
 * Needs the `write-file-parts` feature. *@out_bytes (may be NULL) receives the size. */
gboolean nz_agent_files_upload (NzAgentClient *c, int in_fd, const char *path, gsize part_bytes,
                                NzAgentProgressFunc progress, gpointer user_data,
                                gint64 *out_bytes, GCancellable *cancellable, GError **error);

/* Streams @path from the sandbox to @out_fd (read-file-stream, `read-file-stream` feature),
 * checking that end.bytesSent, what arrived and meta.length agree. */
gboolean nz_agent_files_download (NzAgentClient *c, const char *path, int out_fd,
                                  NzAgentProgressFunc progress, gpointer user_data,
                                  gint64 *out_bytes, GCancellable *cancellable, GError **error);

/* quiesce {graceMs?} (@grace_ms 0: the agent's default). Returns the agent's reply (new
 * reference) whatever its `ok`; only transport failures are errors. */
JsonObject *nz_agent_client_quiesce (NzAgentClient *c, gint64 grace_ms,
                                     GCancellable *cancellable, GError **error);
/* flush {timeoutMs?} (@timeout_ms 0: the agent's default). As above. */
JsonObject *nz_agent_client_flush (NzAgentClient *c, gint64 timeout_ms, GCancellable *cancellable,
                                   GError **error);

G_END_DECLS
