/* lib/backend/kube/nz-kube-cache: the spec D.4 verification caches kept in the state
 * directory — a pass is fresh for NZ_KUBE_CACHE_TTL_MS and no longer, per kind and key; an
 * entry from the future, one that is no regular file, or no state directory at all is never
 * taken as a pass; NAMZU_KUBE_VERIFY_CACHE=0 switches them off. */
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <utime.h>

#include "nz-kube-cache.h"
#include "../nz-test.h"

static char *state;

static void
setup (void)
{
  state = nz_test_state_dir_make ("nz-kube-cache-XXXXXX");
}

static void
teardown (void)
{
  nz_test_state_dir_remove (&state);
}

/* The one entry file of the cache (there is exactly one in these cases). */
static char *
only_entry (void)
{
  g_autofree char *dir = g_build_filename (state, ".kube-verified", NULL);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name = d != NULL ? g_dir_read_name (d) : NULL;

  ck_assert_msg (name != NULL, "no cache entry in %s", dir);
  return g_build_filename (dir, name, NULL);
}

static void
set_age (const char *path, gint64 age_s)
{
  struct utimbuf t = { .actime = time (NULL) - age_s, .modtime = time (NULL) - age_s };

  ck_assert (utime (path, &t) == 0);
}

START_TEST (test_pass_is_fresh_per_kind_and_key)
{
  ck_assert (!nz_kube_cache_fresh ("ingress", "https://a|ns|{}"));
  nz_kube_cache_note ("ingress", "https://a|ns|{}");
  ck_assert (nz_kube_cache_fresh ("ingress", "https://a|ns|{}"));
  /* another key, another kind: not a pass */
  ck_assert (!nz_kube_cache_fresh ("ingress", "https://a|ns|{\"x\":\"y\"}"));
  ck_assert (!nz_kube_cache_fresh ("egress-union", "https://a|ns|{}"));
}
END_TEST

START_TEST (test_expiry)
{
  g_autofree char *path = NULL;

  nz_kube_cache_note ("egress-union", "k");
  path = only_entry ();
  set_age (path, NZ_KUBE_CACHE_TTL_MS / 1000 - 10);
  ck_assert (nz_kube_cache_fresh ("egress-union", "k"));
  set_age (path, NZ_KUBE_CACHE_TTL_MS / 1000 + 1);
  ck_assert (!nz_kube_cache_fresh ("egress-union", "k"));
  /* from the future (a clock set back): not trusted */
  set_age (path, -3600);
  ck_assert (!nz_kube_cache_fresh ("egress-union", "k"));
  /* noted again: fresh again, and an expired neighbour is pruned */
  set_age (path, NZ_KUBE_CACHE_TTL_MS / 1000 + 1);
  nz_kube_cache_note ("egress-union", "k");
  ck_assert (nz_kube_cache_fresh ("egress-union", "k"));
}
END_TEST

START_TEST (test_not_a_file)
{
  g_autofree char *path = NULL;
  g_autofree char *target = g_build_filename (state, "elsewhere", NULL);

  nz_kube_cache_note ("egress-named", "k");
  path = only_entry ();
  ck_assert (g_unlink (path) == 0);
  ck_assert (g_file_set_contents (target, "", 0, NULL));
  ck_assert (symlink (target, path) == 0);
  ck_assert (!nz_kube_cache_fresh ("egress-named", "k"));
}
END_TEST

START_TEST (test_no_state_dir)
{
  g_autofree char *gone = g_build_filename (state, "not-there", NULL);

  g_setenv ("NAMZU_STATE_DIR", gone, TRUE);
  nz_kube_cache_note ("ingress", "k");
  ck_assert (!nz_kube_cache_fresh ("ingress", "k"));
  ck_assert (!g_file_test (gone, G_FILE_TEST_EXISTS));
  g_setenv ("NAMZU_STATE_DIR", "relative/dir", TRUE);
  nz_kube_cache_note ("ingress", "k");
  ck_assert (!nz_kube_cache_fresh ("ingress", "k"));
}
END_TEST

START_TEST (test_switched_off)
{
  nz_kube_cache_note ("ingress", "k");
  ck_assert (nz_kube_cache_fresh ("ingress", "k"));
  g_setenv ("NAMZU_KUBE_VERIFY_CACHE", "0", TRUE);
  ck_assert (!nz_kube_cache_fresh ("ingress", "k"));
  nz_kube_cache_note ("egress-union", "k2");
  g_unsetenv ("NAMZU_KUBE_VERIFY_CACHE");
  ck_assert (!nz_kube_cache_fresh ("egress-union", "k2"));
  ck_assert (nz_kube_cache_fresh ("ingress", "k"));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-cache");
  TCase *tc = tcase_create ("cache");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_pass_is_fresh_per_kind_and_key);
  tcase_add_test (tc, test_expiry);
  tcase_add_test (tc, test_not_a_file);
  tcase_add_test (tc, test_no_state_dir);
  tcase_add_test (tc, test_switched_off);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
