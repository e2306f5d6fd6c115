#include "nz-fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-jstext.h"
#include "nz-token.h"

gboolean
nz_fileio_check_regular (int fd, const char *shown, GError **error)
{
  struct stat st;
  int fl;

  if (fstat (fd, &st) != 0)
    return nz_jstext_throw_errno (error, errno, "fstat", shown);
  if (S_ISDIR (st.st_mode))
    return nz_jstext_throw_errno (error, EISDIR, "read", NULL);
  /* A FIFO, device or socket would block the only thread or never end. */
  if (!S_ISREG (st.st_mode))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "not_a_regular_file: '%s'", shown);
  /* Opened O_NONBLOCK so a FIFO could not block the open; a regular file reads as usual. */
  fl = fcntl (fd, F_GETFL);
  if (fl >= 0 && (fl & O_NONBLOCK) != 0)
    fcntl (fd, F_SETFL, fl & ~O_NONBLOCK);
  return TRUE;
}

GBytes *
nz_fileio_read_all_fd (int fd, GError **error)
{
  g_autoptr (GByteArray) buf = NULL;
  struct stat st;
  gint64 pos = 0;

  if (fstat (fd, &st) != 0)
    {
      nz_jstext_throw_errno (error, errno, "fstat", NULL);
      return NULL;
    }
  /* Read to EOF rather than trusting st_size: procfs files stat as 0 bytes. */
  buf = g_byte_array_sized_new (st.st_size > 0 ? (guint)MIN (st.st_size + 1, G_MAXINT) : 4096);
  for (;;)
    {
      guint8 chunk[65536];
      ssize_t n = pread (fd, chunk, sizeof chunk, pos);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          nz_jstext_throw_errno (error, errno, "read", NULL);
          return NULL;
        }
      if (n == 0)
        break;
      g_byte_array_append (buf, chunk, (guint)n);
      pos += n;
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
}

gboolean
nz_fileio_fsync_dir (int dir_fd, GError **error)
{
  if (fsync (dir_fd) != 0)
    return nz_jstext_throw_errno (error, errno, "fsync", NULL);
  return TRUE;
}

void
nz_fileio_sweep_temps (int dir_fd, gint64 older_than_s)
{
  nz_autofd int fd = openat (dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  DIR *d;
  struct dirent *e;

  if (fd < 0 || (d = fdopendir (fd)) == NULL)
    return;
  nz_steal_fd (&fd);
  while ((e = readdir (d)) != NULL)
    {
      struct stat st;

      if (!nz_fileio_is_temp_name (e->d_name))
        continue;
      /* Only a regular file that nobody touched for a while: an upload in progress writes
       * its temp part by part, so its mtime stays fresh. */
      if (fstatat (dirfd (d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG (st.st_mode)
          || now - (gint64)st.st_mtime < older_than_s)
        continue;
      if (unlinkat (dirfd (d), e->d_name, 0) == 0)
        g_debug ("swept stale temp %s", e->d_name);
    }
  closedir (d);
}

gboolean
nz_fileio_is_temp_name (const char *basename)
{
  gsize len = strlen (basename);
  static const char prefix[] = ".namzu-write-";
  static const char suffix[] = ".part";

  /* [\s\S]+ needs at least one character between prefix and suffix. */
  return len >= strlen (prefix) + 1 + strlen (suffix) && g_str_has_prefix (basename, prefix)
         && g_str_has_suffix (basename, suffix);
}

/* Fills the open temp file: fchmod to the old mode, one pwrite, the short-write check, fsync. */
static gboolean
fill_temp (int fd, gboolean have_mode, mode_t mode, const void *data, gsize len, GError **error)
{
  struct stat st;
  gssize written = 0;

  /* The replacement keeps the target's permission bits. */
  if (have_mode && fchmod (fd, mode) != 0)
    return nz_jstext_throw_errno (error, errno, "fchmod", NULL);
  /* One positional write of the whole buffer; a short write is reported, never retried, so
   * a full disk cannot leave a half-written file that looks complete. */
  if (len > 0)
    {
      do
        written = pwrite (fd, data, len, 0);
      while (written < 0 && errno == EINTR);
      if (written < 0)
        return nz_jstext_throw_errno (error, errno, "write", NULL);
    }
  if (fstat (fd, &st) != 0)
    return nz_jstext_throw_errno (error, errno, "fstat", NULL);
  if ((gsize)written != len || (gsize)st.st_size != len)
    return nz_throw (error, NZ_ERROR_FAILED,
                     "write_short_write: wrote %" G_GSSIZE_FORMAT " of %" G_GSIZE_FORMAT
                     " bytes, temp file is %" G_GINT64_FORMAT " bytes",
                     written, len, (gint64)st.st_size);
  if (fsync (fd) != 0)
    return nz_jstext_throw_errno (error, errno, "fsync", NULL);
  return TRUE;
}

gboolean
nz_fileio_write_durable_at (int dir_fd, const char *real, const void *data, gsize len,
                            GError **error)
{
  g_autofree char *base = NULL;
  g_autofree char *uuid = NULL;
  g_autofree char *temp_name = NULL;
  g_autofree char *temp = NULL;
  nz_autofd int fd = -1;
  struct stat st = { 0 };
  gboolean have_mode;

  g_return_val_if_fail (real != NULL, FALSE);
  base = g_path_get_basename (real);
  uuid = nz_uuid_v4 ();
  temp_name = g_strdup_printf (".namzu-write-%s.%s.part", base, uuid);
  {
    g_autofree char *dir = g_path_get_dirname (real);

    temp = g_build_filename (dir, temp_name, NULL);
  }
  /* A write killed before its rename left its temp behind: sweep the old ones here. */
  nz_fileio_sweep_temps (dir_fd, NZ_FILEIO_STALE_TEMP_SECONDS);
  /* Every step names an entry of the one directory fd opened beneath the root: nothing here
   * follows a symlink (the rename replaces a link swapped in, it never writes through it). */
  have_mode = fstatat (dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode);
  /* Exclusive create: never write into a file someone else (or a symlink) put there. */
  fd = openat (dir_fd, temp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
               0666);
  if (fd < 0)
    return nz_jstext_throw_errno (error, errno, "open", temp);
  if (!fill_temp (fd, have_mode, st.st_mode & 07777, data, len, error))
    {
      nz_close_fd (&fd);
      unlinkat (dir_fd, temp_name, 0);
      return FALSE;
    }
  if (close (nz_steal_fd (&fd)) != 0)
    {
      nz_jstext_throw_errno (error, errno, "close", NULL);
      unlinkat (dir_fd, temp_name, 0);
      return FALSE;
    }
  /* The target is replaced, never truncated in place: a failure up to here leaves it as it
   * was, and a crash leaves at most a stray temp sibling (swept by a later write). */
  if (renameat (dir_fd, temp_name, dir_fd, base) != 0)
    {
      nz_jstext_throw_errno (error, errno, "rename", temp);
      unlinkat (dir_fd, temp_name, 0);
      return FALSE;
    }
  /* The rename is only durable once the directory entry is on disk. */
  return nz_fileio_fsync_dir (dir_fd, error);
}
