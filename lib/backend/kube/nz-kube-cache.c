/* nz-kube-cache.c: passed cluster verifications kept in the state directory (nz-kube-cache.h). */
#include "nz-kube-cache.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>

#include "nz-state.h"

#define CACHE_DIR ".kube-verified"

/* <state>/.kube-verified/<kind>-<sha256 of key>, or NULL. */
static char *
entry_path (const char *kind, const char *key)
{
  g_autofree char *state = nz_state_dir (NULL);
  g_autofree char *sum = NULL;
  g_autofree char *name = NULL;

  if (state == NULL)
    return NULL;
  sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, key, -1);
  name = g_strdup_printf ("%s-%s", kind, sum);
  return g_build_filename (state, CACHE_DIR, name, NULL);
}

static gint64
age_ms (const struct stat *st)
{
  gint64 then = (gint64)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;

  return g_get_real_time () / 1000 - then;
}

static gboolean
cache_off (void)
{
  return g_strcmp0 (g_getenv ("NAMZU_KUBE_VERIFY_CACHE"), "0") == 0;
}

gboolean
nz_kube_cache_fresh (const char *kind, const char *key)
{
  g_autofree char *path = NULL;
  struct stat st;
  gint64 age;

  if (cache_off ())
    return FALSE;
  path = entry_path (kind, key);
  if (path == NULL || lstat (path, &st) != 0 || !S_ISREG (st.st_mode))
    return FALSE;
  age = age_ms (&st);
  return age >= 0 && age < NZ_KUBE_CACHE_TTL_MS;
}

static void
prune (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *p = g_build_filename (dir, name, NULL);
      struct stat st;

      if (lstat (p, &st) == 0 && (!S_ISREG (st.st_mode) || age_ms (&st) >= NZ_KUBE_CACHE_TTL_MS))
        g_unlink (p);
    }
}

void
nz_kube_cache_note (const char *kind, const char *key)
{
  g_autofree char *path = entry_path (kind, key);
  g_autofree char *dir = NULL;
  g_autofree char *state = NULL;

  /* The state directory is made (0700) by the create that asks; not made here. */
  if (cache_off () || path == NULL || (state = nz_state_dir (NULL)) == NULL
      || !g_file_test (state, G_FILE_TEST_IS_DIR))
    return;
  dir = g_path_get_dirname (path);
  if (g_mkdir (dir, 0700) != 0 && !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return;
  prune (dir);
  /* A new file (and so a new mtime) each time: the rename replaces any old entry. */
  g_file_set_contents_full (path, "", 0, G_FILE_SET_CONTENTS_NONE, 0600, NULL);
}
