/* nz-fileio.h: whole-file reads and durable, atomic whole-file writes (spec C.7, C.8).
 * Paths are already jailed and real (nz-jail); errors carry Node-style messages because they
 * go to the wire verbatim. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* mkdir -p, mode 0777 & ~umask. */
gboolean nz_fileio_mkdir_p (const char *path, GError **error);

/* Reads @path to EOF (procfs files that stat as 0 bytes included). */
GBytes *nz_fileio_read_all (const char *path, GError **error);

/* writeFileDurably: temp sibling ".namzu-write-<basename>.<uuid>.part" created O_EXCL, fchmod
 * to the target's old mode, one pwrite, fstat short-write check, fsync, rename, fsync of the
 * directory. The target is never truncated in place; on failure the temp is removed and the
 * old file is untouched. */
gboolean nz_fileio_write_durable (const char *path, const void *data, gsize len, GError **error);

G_END_DECLS
