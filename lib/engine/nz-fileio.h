/* nz-fileio.h: whole-file reads and durable, atomic whole-file writes (spec C.7, C.8).
 * Paths are already jailed and real (nz-jail); errors carry Node-style messages because they
 * go to the wire verbatim. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* How old (mtime, seconds) a temp must be before a write in its directory sweeps it. */
#define NZ_FILEIO_STALE_TEMP_SECONDS (30 * 60)

/* After a race-free open with O_NONBLOCK: regular files only (clears O_NONBLOCK). A directory
 * fails with Node's EISDIR message, anything else (FIFO, device, socket) with
 * "not_a_regular_file: '<@shown>'". */
gboolean nz_fileio_check_regular (int fd, const char *shown, GError **error);

/* Reads @fd from offset 0 to EOF (procfs files that stat as 0 bytes included). */
GBytes *nz_fileio_read_all_fd (int fd, GError **error);

/* ^\.namzu-write-[\s\S]+\.part$ on a basename: the temp names of both kinds of write. */
gboolean nz_fileio_is_temp_name (const char *basename);

/* Unlinks the regular temp files (nz_fileio_is_temp_name) in @dir_fd whose mtime is at least
 * @older_than_s seconds old: what writes killed before their rename left behind. */
void nz_fileio_sweep_temps (int dir_fd, gint64 older_than_s);

gboolean nz_fileio_fsync_dir (int dir_fd, GError **error);

/* writeFileDurably in @dir_fd, the real parent of @real opened race-free (nz-jail): temp
 * sibling ".namzu-write-<basename>.<uuid>.part" created O_EXCL, fchmod to the target's old
 * mode, one pwrite, fstat short-write check, fsync, renameat, fsync of the directory. The
 * target is never truncated in place; on failure the temp is removed and the old file is
 * untouched. Stale temps in the directory are swept first. */
gboolean nz_fileio_write_durable_at (int dir_fd, const char *real, const void *data, gsize len,
                                     GError **error);

G_END_DECLS
