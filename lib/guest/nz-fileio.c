#include "nz-fileio.h"

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
nz_fileio_mkdir_p (const char *path, GError **error)
{
  struct stat st;

  g_return_val_if_fail (path != NULL, FALSE);
  if (g_mkdir_with_parents (path, 0777) == 0)
    return TRUE;
  {
    int errsv = errno;

    /* g_mkdir_with_parents reports EEXIST for a non-directory in the way; say ENOTDIR-ish. */
    if (stat (path, &st) == 0 && S_ISDIR (st.st_mode))
      return TRUE;
    return nz_jstext_throw_errno (error, errsv, "mkdir", path);
  }
}

GBytes *
nz_fileio_read_all (const char *path, GError **error)
{
  nz_autofd int fd = -1;
  g_autoptr (GByteArray) buf = NULL;
  struct stat st;

  g_return_val_if_fail (path != NULL, NULL);
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    {
      nz_jstext_throw_errno (error, errno, "open", path);
      return NULL;
    }
  if (fstat (fd, &st) != 0)
    {
      nz_jstext_throw_errno (error, errno, "fstat", path);
      return NULL;
    }
  if (S_ISDIR (st.st_mode))
    {
      nz_jstext_throw_errno (error, EISDIR, "read", NULL);
      return NULL;
    }
  /* Read to EOF rather than trusting st_size: procfs files stat as 0 bytes. */
  buf = g_byte_array_sized_new (st.st_size > 0 ? (guint)MIN (st.st_size + 1, G_MAXINT) : 4096);
  for (;;)
    {
      guint8 chunk[65536];
      ssize_t n = read (fd, chunk, sizeof chunk);

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
    }
  return g_byte_array_free_to_bytes (g_steal_pointer (&buf));
}

static gboolean
fsync_dir (const char *dir, GError **error)
{
  nz_autofd int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return nz_jstext_throw_errno (error, errno, "open", dir);
  if (fsync (fd) != 0)
    return nz_jstext_throw_errno (error, errno, "fsync", NULL);
  return TRUE;
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
nz_fileio_write_durable (const char *path, const void *data, gsize len, GError **error)
{
  g_autofree char *dir = NULL;
  g_autofree char *base = NULL;
  g_autofree char *uuid = NULL;
  g_autofree char *temp_name = NULL;
  g_autofree char *temp = NULL;
  nz_autofd int fd = -1;
  struct stat st = { 0 };
  gboolean have_mode;

  g_return_val_if_fail (path != NULL, FALSE);
  dir = g_path_get_dirname (path);
  base = g_path_get_basename (path);
  uuid = nz_uuid_v4 ();
  temp_name = g_strdup_printf (".namzu-write-%s.%s.part", base, uuid);
  temp = g_build_filename (dir, temp_name, NULL);

  have_mode = stat (path, &st) == 0;
  /* Exclusive create: never write into a file someone else (or a symlink) put there. */
  fd = open (temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0)
    return nz_jstext_throw_errno (error, errno, "open", temp);
  if (!fill_temp (fd, have_mode, st.st_mode & 07777, data, len, error))
    {
      nz_close_fd (&fd);
      unlink (temp);
      return FALSE;
    }
  if (close (nz_steal_fd (&fd)) != 0)
    {
      nz_jstext_throw_errno (error, errno, "close", NULL);
      unlink (temp);
      return FALSE;
    }
  /* The target is replaced, never truncated in place: a failure up to here leaves it as it
   * was, and a crash leaves at most a stray temp sibling. */
  if (rename (temp, path) != 0)
    {
      nz_jstext_throw_errno (error, errno, "rename", temp);
      unlink (temp);
      return FALSE;
    }
  /* The rename is only durable once the directory entry is on disk. */
  return fsync_dir (dir, error);
}
