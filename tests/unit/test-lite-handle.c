/* lib/lite/nz-lite-handle: the sandbox handles namzu-exec's front serves itself and the ones
 * it hands to namzu-exec-full. A microvm:kubernetes handle is the front's only while opening it
 * needs no API call: a task sandbox whose lease has more than 55% of claimTtlSeconds left (the
 * full path renews from 45-55% on), or a Running workspace. */
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "nz-lite-handle.h"
#include "../nz-test.h"

#define ID "nz-0123456789ab"

static char *state;

static void
setup (void)
{
  state = nz_test_state_dir_make ("nz-lite-handle-XXXXXX");
}

static void
teardown (void)
{
  nz_test_state_dir_remove (&state);
}

/* Writes ID's handle with @backend and the private record @priv (JSON, may be NULL). */
static void
write_handle (const char *backend, const char *priv)
{
  g_autofree char *dir = g_build_filename (state, ID, NULL);
  g_autofree char *path = g_build_filename (dir, "handle.json", NULL);
  g_autofree char *text
      = g_strdup_printf ("{\"id\":\"" ID "\",\"backend\":\"%s\",\"tier\":\"t\",\"createdAt\":1,"
                         "\"endpoint\":\"tcp:127.0.0.1:1024\",\"token\":\"tok\"%s%s}",
                         backend, priv != NULL ? ",\"private\":" : "", priv != NULL ? priv : "");

  ck_assert (g_mkdir_with_parents (dir, 0700) == 0);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
}

static gboolean
front_serves (void)
{
  NzLiteHandle h;
  gboolean ok = nz_lite_handle_load (ID, &h);

  if (ok)
    ck_assert_str_eq (h.token, "tok");
  nz_lite_handle_clear (&h);
  return ok;
}

/* A task sandbox's private record: a claimTtlSeconds-100 lease with @left_pct of it left. */
static char *
lease (int left_pct)
{
  gint64 now = g_get_real_time () / 1000;

  return g_strdup_printf ("{\"objectKind\":\"SandboxClaim\",\"claimTtlSeconds\":100,"
                          "\"leaseExpiresAt\":%" G_GINT64_FORMAT "}",
                          now + (gint64)left_pct * 1000);
}

START_TEST (test_other_backends)
{
  write_handle ("container:bwrap", NULL);
  ck_assert (front_serves ());
}
END_TEST

START_TEST (test_kube_task_lease)
{
  g_autofree char *far = lease (90);
  g_autofree char *edge = lease (56);
  g_autofree char *due = lease (50);
  g_autofree char *gone = lease (-5);

  write_handle ("microvm:kubernetes", far);
  ck_assert (front_serves ());
  write_handle ("microvm:kubernetes", edge);
  ck_assert (front_serves ());
  /* the renewal's jittered point (45-55% left) may have come: the full path decides */
  write_handle ("microvm:kubernetes", due);
  ck_assert (!front_serves ());
  /* run out: the full path says so */
  write_handle ("microvm:kubernetes", gone);
  ck_assert (!front_serves ());
  /* a record without the lease, or no record */
  write_handle ("microvm:kubernetes", "{\"objectKind\":\"SandboxClaim\",\"claimTtlSeconds\":100}");
  ck_assert (!front_serves ());
  write_handle ("microvm:kubernetes", "{\"leaseExpiresAt\":99999999999999}");
  ck_assert (!front_serves ());
  write_handle ("microvm:kubernetes", NULL);
  ck_assert (!front_serves ());
  write_handle ("microvm:kubernetes", "[1]");
  ck_assert (!front_serves ());
}
END_TEST

START_TEST (test_kube_workspace)
{
  write_handle ("microvm:kubernetes", "{\"workspace\":\"w1\",\"operatingMode\":\"Running\"}");
  ck_assert (front_serves ());
  /* suspended: refused without dialling, by the full path */
  write_handle ("microvm:kubernetes", "{\"workspace\":\"w1\",\"operatingMode\":\"Suspended\"}");
  ck_assert (!front_serves ());
  write_handle ("microvm:kubernetes", "{\"workspace\":\"w1\"}");
  ck_assert (!front_serves ());
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lite-handle");
  TCase *tc = tcase_create ("handle");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_other_backends);
  tcase_add_test (tc, test_kube_task_lease);
  tcase_add_test (tc, test_kube_workspace);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
