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
#include "nz-request.h"

gboolean
nz_fileparts_is_temp_name (const char *basename)
{
  return nz_fileio_is_temp_name (basename);
}

static gboolean
is_enoent (const GError *error)
{
  return error != NULL && g_str_has_prefix (error->message, "ENOENT");
}

/* An entry of a directory opened race-free (nz-jail): every op below is an *at call on it. */
typedef struct
{
  int dir_fd;
  char *base;
  char *real; /* for messages and the in-flight key */
} Entry;

static void
entry_clear (Entry *e)
{
  nz_close_fd (&e->dir_fd);
  g_clear_pointer (&e->base, g_free);
  g_clear_pointer (&e->real, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Entry, entry_clear)

/* Discard: decided on the name first, never creates directories, ENOENT is success. */
static gboolean
discard (const char *lexical, const char *root, NzFilePartResult *out, GError **error)
{
  g_autofree char *base = g_path_get_basename (lexical);
  g_auto (Entry) e = { .dir_fd = -1 };
  g_autoptr (GError) local = NULL;

  out->discarded = TRUE;
  if (!nz_fileparts_is_temp_name (base))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_not_a_temp_file");
  e.dir_fd = nz_jail_open_parent_within (lexical, root, &e.real, &e.base, &local);
  if (e.dir_fd < 0)
    {
      if (is_enoent (local))
        return TRUE;
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  /* A symlink named like a temp must not make discard delete a real file. */
  if (!nz_fileparts_is_temp_name (e.base))
    return nz_throw (error, NZ_ERROR_INVALID_ARGS, "write_part_not_a_temp_file");
  /* unlinkat never follows: a link swapped in is removed itself, nothing it points at. */
  if (unlinkat (e.dir_fd, e.base, 0) != 0 && errno != ENOENT)
    return nz_jstext_throw_errno (error, errno, "unlink", e.real);
  return TRUE;
}

/* Lexical jail, race-free mkdir -p of the parent, the symlink step, the parent's fd. */
static gboolean
open_for_write (const char *lexical, const char *root, Entry *e, GError **error)
{
  e->dir_fd = nz_request_open_write_parent (lexical, root, &e->real, &e->base, error);
  return e->dir_fd >= 0;
}

static gboolean
offset_mismatch (GError **error, const char *have, gint64 offset)
{
  return nz_throw (error, NZ_ERROR_FAILED,
                   "write_part_offset_mismatch: temp file is %s, part starts at offset "
                   "%" G_GINT64_FORMAT,
                   have, offset);
}

/* Opens the temp: created (or truncated) for the first part, else it must be exactly
 * @offset bytes. Never through a symlink (O_NOFOLLOW), never anything but a regular file. */
static int
open_temp (const Entry *temp, gint64 offset, GError **error)
{
  const int common = O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
  nz_autofd int fd = -1;
  struct stat st;

  if (offset == 0)
    fd = openat (temp->dir_fd, temp->base, O_WRONLY | O_CREAT | O_TRUNC | common, 0666);
  else
    fd = openat (temp->dir_fd, temp->base, O_RDWR | common);
  if (fd < 0 && offset != 0 && errno == ENOENT)
    {
      offset_mismatch (error, "absent", offset);
      return -1;
    }
  if (fd < 0)
    {
      nz_jstext_throw_errno (error, errno, "open", temp->real);
      return -1;
    }
  if (fstat (fd, &st) != 0)
    {
      nz_jstext_throw_errno (error, errno, "fstat", NULL);
      return -1;
    }
  if (!S_ISREG (st.st_mode))
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "not_a_regular_file: '%s'", temp->real);
      return -1;
    }
  /* Parts are strictly sequential: a lost or repeated part can never leave a hole or a
   * duplicate that looks like a complete file. */
  if (offset != 0 && st.st_size != offset)
    {
      g_autofree char *have = g_strdup_printf ("%" G_GINT64_FORMAT " bytes", (gint64)st.st_size);

      offset_mismatch (error, have, offset);
      return -1;
    }
  return nz_steal_fd (&fd);
}

/* Steps 10-15: open at the right size, one pwrite, final chmod+fsync, checks, rename. */
static gboolean
write_part (const Entry *temp, const Entry *target, gint64 offset, gboolean final,
            const guint8 *data, gsize len, NzFilePartResult *out, GError **error)
{
  nz_autofd int fd = -1;
  struct stat st;
  gssize written = 0;

  if (offset == 0)
    nz_fileio_sweep_temps (temp->dir_fd, NZ_FILEIO_STALE_TEMP_SECONDS);
  if ((fd = open_temp (temp, offset, error)) < 0)
    return FALSE;
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
      if (fstatat (target->dir_fd, target->base, &target_st, AT_SYMLINK_NOFOLLOW) == 0
          && S_ISREG (target_st.st_mode) && fchmod (fd, target_st.st_mode & 07777) != 0)
        return nz_jstext_throw_errno (error, errno, "chmod", temp->real);
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
      if (renameat (temp->dir_fd, temp->base, target->dir_fd, target->base) != 0)
        return nz_jstext_throw_errno (error, errno, "rename", temp->real);
      if (!nz_fileio_fsync_dir (target->dir_fd, error))
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
  g_auto (Entry) temp = { .dir_fd = -1 };
  g_auto (Entry) target = { .dir_fd = -1 };
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
  if (!open_for_write (lexical, root, &temp, error))
    return FALSE;
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
  if (final)
    {
      g_autofree char *target_root = NULL;
      g_autofree char *target_lexical
          = nz_jail_resolve_write (guest->jail, rename_to, &target_root, error);

      if (target_lexical == NULL || !open_for_write (target_lexical, target_root, &target, error))
        return FALSE;
    }
  /* 8. One writer per temp at a time, keyed by its real path. */
  if (g_hash_table_contains (guest->parts_in_flight, temp.real))
    return nz_throw (error, NZ_ERROR_BUSY, "write_part_in_flight");
  g_hash_table_add (guest->parts_in_flight, g_strdup (temp.real));
  /* 9. */
  data = nz_json_content_bytes (content, encoding, &owned, &len);
  ok = write_part (&temp, &target, (gint64)offset, final, data, len, out, error);
  g_hash_table_remove (guest->parts_in_flight, temp.real);
  return ok;
}
