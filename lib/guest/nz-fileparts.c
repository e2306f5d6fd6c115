#include "nz-fileparts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-errors.h"
#include "nz-fileio.h"
#include "nz-jail.h"
#include "nz-json.h"
#include "nz-jstext.h"
#include "nz-knobs.h"

gboolean
nz_fileparts_is_temp_name (const char *basename)
{
  gsize len = strlen (basename);
  static const char prefix[] = ".namzu-write-";
  static const char suffix[] = ".part";

  /* [\s\S]+ needs at least one character between prefix and suffix. */
  return len >= strlen (prefix) + 1 + strlen (suffix) && g_str_has_prefix (basename, prefix)
         && g_str_has_suffix (basename, suffix);
}

static gboolean
is_enoent (const GError *error)
{
  return error != NULL && g_str_has_prefix (error->message, "ENOENT");
}

/* Discard: decided on the name first, never creates directories, ENOENT is success. */
static gboolean
discard (const char *lexical, const char *root, NzFilePartResult *out, GError **error)
{
  g_autofree char *base = g_path_get_basename (lexical);
  g_autofree char *real = NULL;
  g_autofree char *real_base = NULL;
  g_autoptr (GError) local = NULL;

  out->discarded = TRUE;
  if (!nz_fileparts_is_temp_name (base))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_not_a_temp_file");
  real = nz_jail_realpath_within (lexical, root, &local);
  if (real == NULL)
    {
      if (is_enoent (local))
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  /* A symlink named like a temp must not make discard delete a real file. */
  real_base = g_path_get_basename (real);
  if (!nz_fileparts_is_temp_name (real_base))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_not_a_temp_file");
  if (unlink (real) != 0 && errno != ENOENT)
    return nz_jstext_throw_errno (error, errno, "unlink", real);
  return TRUE;
}

/* Lexical jail, mkdir -p of the parent, then the realpath check. Returns the real path. */
static char *
resolve_for_write (NzGuest *guest, const char *path, GError **error)
{
  g_autofree char *root = NULL;
  g_autofree char *lexical = nz_jail_resolve_write (guest->jail, path, &root, error);
  g_autofree char *dir = NULL;

  if (lexical == NULL)
    return NULL;
  dir = g_path_get_dirname (lexical);
  if (!nz_fileio_mkdir_p (dir, error))
    return NULL;
  return nz_jail_realpath_within (lexical, root, error);
}

static gboolean
fsync_dir_of (const char *path, GError **error)
{
  g_autofree char *dir = g_path_get_dirname (path);
  nz_autofd int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return nz_jstext_throw_errno (error, errno, "open", dir);
  if (fsync (fd) != 0)
    return nz_jstext_throw_errno (error, errno, "fsync", NULL);
  return TRUE;
}

/* Steps 10-15: open at the right size, one pwrite, final chmod+fsync, checks, rename. */
static gboolean
write_part (const char *temp, const char *target, gint64 offset, gboolean final,
            const guint8 *data, gsize len, NzFilePartResult *out, GError **error)
{
  nz_autofd int fd = -1;
  struct stat st;
  gssize written = 0;

  if (offset == 0)
    fd = open (temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
  else
    {
      /* Parts are strictly sequential: a lost or repeated part can never leave a hole or a
       * duplicate that looks like a complete file. */
      if (stat (temp, &st) != 0 || st.st_size != offset)
        {
          g_autofree char *have = stat (temp, &st) != 0
                                      ? g_strdup ("absent")
                                      : g_strdup_printf ("%" G_GINT64_FORMAT " bytes",
                                                         (gint64)st.st_size);

          return nz_throw (error, NZ_ERROR_FAILED,
                           "write_part_offset_mismatch: temp file is %s, part starts at offset "
                           "%" G_GINT64_FORMAT,
                           have, offset);
        }
      fd = open (temp, O_RDWR | O_CLOEXEC | O_NOCTTY);
    }
  if (fd < 0)
    return nz_jstext_throw_errno (error, errno, "open", temp);
  if (len > 0)
    {
      do
        written = pwrite (fd, data, len, offset);
      while (written < 0 && errno == EINTR);
      if (written < 0)
        return nz_jstext_throw_errno (error, errno, "write", NULL);
    }
  if (fstat (fd, &st) != 0)
    return nz_jstext_throw_errno (error, errno, "fstat", NULL);
  if (final)
    {
      struct stat target_st;

      /* The replacement keeps the target's permission bits; if that fails, nothing is
       * renamed and the temp stays for discard. */
      if (stat (target, &target_st) == 0 && fchmod (fd, target_st.st_mode & 07777) != 0)
        return nz_jstext_throw_errno (error, errno, "chmod", temp);
      if (fsync (fd) != 0)
        return nz_jstext_throw_errno (error, errno, "fsync", NULL);
    }
  if (close (nz_steal_fd (&fd)) != 0)
    return nz_jstext_throw_errno (error, errno, "close", NULL);
  if ((gsize)written != len || st.st_size != offset + (gint64)len)
    return nz_throw (error, NZ_ERROR_FAILED,
                     "write_part_short_write: wrote %" G_GSSIZE_FORMAT " of %" G_GSIZE_FORMAT
                     " bytes at offset %" G_GINT64_FORMAT ", temp file is %" G_GINT64_FORMAT
                     " bytes",
                     written, len, offset, (gint64)st.st_size);
  if (final)
    {
      if (rename (temp, target) != 0)
        return nz_jstext_throw_errno (error, errno, "rename", temp);
      if (!fsync_dir_of (target, error))
        return FALSE;
    }
  out->bytes_written = written;
  out->size_bytes = st.st_size;
  return TRUE;
}

gboolean
nz_fileparts_apply (NzGuest *guest, const char *path, JsonObject *part, JsonNode *content,
                    const char *encoding, NzFilePartResult *out, GError **error)
{
  g_autofree char *root = NULL;
  g_autofree char *lexical = NULL;
  g_autofree char *temp = NULL;
  g_autofree char *target = NULL;
  g_autofree gpointer owned = NULL;
  JsonNode *offset_node = json_object_get_member (part, "offset");
  const char *rename_to = nz_json_get_string (part, "renameTo");
  gboolean final = nz_json_get_bool (part, "final", FALSE);
  const guint8 *data;
  gsize len = 0;
  double offset = 0;
  gboolean ok;

  memset (out, 0, sizeof *out);
  /* 1. The temp path, lexically. */
  lexical = nz_jail_resolve_write (guest->jail, path, &root, error);
  if (lexical == NULL)
    return FALSE;
  /* 2. Discard runs before any mkdir. */
  if (nz_json_get_bool (part, "discard", FALSE))
    return discard (lexical, root, out, error);
  /* 3. */
  {
    g_autofree char *dir = g_path_get_dirname (lexical);

    if (!nz_fileio_mkdir_p (dir, error)
        || (temp = nz_jail_realpath_within (lexical, root, error)) == NULL)
      return FALSE;
  }
  /* 4. */
  if (content == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "missing_path_or_content");
  /* 5. offset ?? 0: a safe integer >= 0. */
  if (offset_node != NULL && !JSON_NODE_HOLDS_NULL (offset_node))
    {
      if (!nz_json_get_number (part, "offset", &offset) || !nz_is_safe_integer (offset)
          || offset < 0)
        {
          g_autofree char *shown = nz_json_to_string (offset_node, NULL);

          return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_invalid_offset: %s", shown);
        }
    }
  /* 6-7. The target is jailed before any byte is written: an escaping renameTo is a no-op. */
  if (final && (rename_to == NULL || *rename_to == '\0'))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_missing_rename_target");
  if (final && (target = resolve_for_write (guest, rename_to, error)) == NULL)
    return FALSE;
  /* 8. One writer per temp at a time, keyed by its real path. */
  if (g_hash_table_contains (guest->parts_in_flight, temp))
    return nz_throw (error, NZ_ERROR_BUSY, "write_part_in_flight");
  g_hash_table_add (guest->parts_in_flight, g_strdup (temp));
  /* 9. */
  data = nz_json_content_bytes (content, encoding, &owned, &len);
  ok = write_part (temp, target, (gint64)offset, final, data, len, out, error);
  g_hash_table_remove (guest->parts_in_flight, temp);
  return ok;
}
