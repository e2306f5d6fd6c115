/* nz-fileread.h: reads of a byte range of a file (spec C.7), for ranged read-file and
 * read-file-stream: one open fd, the whole-file size, positional reads. A regular file that
 * stats as 0 bytes (procfs) is read to EOF first and served from memory. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _NzFileReader NzFileReader;

/* Takes @fd (opened race-free by nz_request_open_read, O_NONBLOCK) whatever happens. Regular
 * files only: a directory fails with Node's EISDIR message, anything else with
 * "not_a_regular_file: '<@shown>'". */
NzFileReader *nz_file_reader_new (int fd, const char *shown, GError **error);
void nz_file_reader_free (NzFileReader *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzFileReader, nz_file_reader_free)

/* The whole file's size (the real content length for a procfs file). */
gint64 nz_file_reader_get_size (NzFileReader *r);

/* One positional read; short at EOF (0 when the file shrank under us). */
gssize nz_file_reader_pread (NzFileReader *r, void *buf, gsize len, gint64 offset,
                             GError **error);

/* The range rule: rest = max(0, size - offset); wanted = min(length (or rest if < 0), rest). */
gint64 nz_file_reader_wanted (NzFileReader *r, gint64 offset, gint64 length);

G_END_DECLS
