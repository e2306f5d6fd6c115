#include "nz-fileread.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-errors.h"
#include "nz-fileio.h"
#include "nz-jstext.h"

struct _NzFileReader
{
  int fd;
  gint64 size;
  GBytes *whole; /* procfs-style file, read to EOF at open */
};

NzFileReader *
nz_file_reader_new (int fd, const char *shown, GError **error)
{
  g_autoptr (NzFileReader) r = g_new0 (NzFileReader, 1);
  struct stat st;

  g_return_val_if_fail (fd >= 0, NULL);
  r->fd = fd;
  if (!nz_fileio_check_regular (r->fd, shown, error))
    return NULL;
  if (fstat (r->fd, &st) != 0)
    {
      nz_jstext_throw_errno (error, errno, "fstat", shown);
      return NULL;
    }
  r->size = st.st_size;
  if (st.st_size == 0)
    {
      /* procfs and sysfs files stat as 0 bytes: their real size is what reading gives. */
      r->whole = nz_fileio_read_all_fd (r->fd, error);
      if (r->whole == NULL)
        return NULL;
      r->size = (gint64)g_bytes_get_size (r->whole);
    }
  return g_steal_pointer (&r);
}

void
nz_file_reader_free (NzFileReader *r)
{
  if (r == NULL)
    return;
  if (r->fd >= 0)
    close (r->fd);
  g_clear_pointer (&r->whole, g_bytes_unref);
  g_free (r);
}

gint64
nz_file_reader_get_size (NzFileReader *r)
{
  return r->size;
}

gint64
nz_file_reader_wanted (NzFileReader *r, gint64 offset, gint64 length)
{
  gint64 rest = MAX (0, r->size - offset);

  return length < 0 ? rest : MIN (length, rest);
}

gssize
nz_file_reader_pread (NzFileReader *r, void *buf, gsize len, gint64 offset, GError **error)
{
  gssize n;

  if (r->whole != NULL)
    {
      gsize have = g_bytes_get_size (r->whole);

      if (offset < 0 || (guint64)offset >= have)
        return 0;
      n = (gssize)MIN (len, have - (gsize)offset);
      memcpy (buf, (const guint8 *)g_bytes_get_data (r->whole, NULL) + offset, (gsize)n);
      return n;
    }
  do
    n = pread (r->fd, buf, len, offset);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    nz_jstext_throw_errno (error, errno, "read", NULL);
  return n;
}
