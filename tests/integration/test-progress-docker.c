/* namzu-create's waiting line on container:docker (issue 16), against the real dockerd and
 * $NAMZU_WORKER_IMAGE (default namzu-worker:latest): on a real pseudo-terminal a create that
 * is slow to start (a docker whose `run` takes 2 seconds longer) says it waits; in a pipe the
 * same create says nothing. test-progress-e2e does the same on container:bwrap. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "nz-json.h"
#include "sandbox-harness.h"

static char *real_docker;

static const char *
worker_image (void)
{
  const char *img = g_getenv ("NAMZU_WORKER_IMAGE");

  return img != NULL && *img != '\0' ? img : "namzu-worker:latest";
}

static void
setup (void)
{
  harness_begin ("/tmp/nz-progress-docker-XXXXXX");
  harness_start_reaper (0);
}

START_TEST (test_create_waiting_line_docker)
{
  g_autofree char *slow = g_build_filename (harness.tmp, "slow-docker", NULL);
  g_autofree char *script
      = g_strdup_printf ("#!/bin/sh\n[ \"$1\" = run ] && sleep 2\nexec '%s' \"$@\"\n", real_docker);
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  g_autofree char *out = NULL, *tty = NULL, *err = NULL;
  g_autoptr (JsonObject) h = NULL;
  g_autoptr (JsonObject) h2 = NULL;
  int rc;

  ck_assert (g_file_set_contents (slow, script, -1, NULL));
  ck_assert_int_eq (chmod (slow, 0755), 0);
  /* The image's uid 1001 writes the outputs. */
  ck_assert_int_eq (chmod (harness.tmp, 0755), 0);
  ck_assert_int_eq (g_mkdir (outputs, 0777), 0);
  ck_assert_int_eq (chmod (outputs, 0777), 0);
  g_setenv ("NAMZU_DOCKER", slow, TRUE);
  rc = run_tool_on_tty (&out, &tty, "namzu-create", "--backend", "container:docker", "--image",
                        worker_image (), "--outputs", outputs, NULL);
  ck_assert_msg (rc == 0, "namzu-create: %s", tty);
  h = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (h != NULL, "stdout: %s", out);
  ck_assert_msg (strstr (tty, "\rnamzu-create: waiting for the sandbox to be ready (") != NULL
                     && g_str_has_suffix (tty, "s)\033[K\r\n"),
                 "no waiting line: '%s'", tty);
  g_clear_pointer (&out, g_free);

  /* In a pipe, the same slow create says nothing. */
  rc = run_tool (NULL, &out, &err, "namzu-create", "--backend", "container:docker", "--image",
                 worker_image (), "--outputs", outputs, NULL);
  ck_assert_msg (rc == 0, "namzu-create: %s", err);
  ck_assert_str_eq (err, "");
  h2 = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (h2 != NULL, "stdout: %s", out);
  g_unsetenv ("NAMZU_DOCKER");
  destroy_ok (nz_json_get_string (h, "id"));
  destroy_ok (nz_json_get_string (h2, "id"));
}
END_TEST

int
main (void)
{
  g_autofree char *info = NULL, *img = NULL, *inspect = NULL, *what = NULL;
  Suite *s = suite_create ("progress-docker");
  TCase *tc = tcase_create ("progress-docker");
  gboolean have_docker;
  int rc = 1;

  real_docker = g_find_program_in_path ("docker");
  have_docker = real_docker != NULL
                && g_spawn_command_line_sync ("docker info --format '{{.ServerVersion}}'", &info,
                                              NULL, &rc, NULL)
                && rc == 0;
  nz_test_require (have_docker, "a running docker daemon (scripts/start-dockerd)");
  inspect = g_strdup_printf ("docker image inspect --format '{{.Id}}' '%s'", worker_image ());
  what = g_strdup_printf ("the %s image (scripts/build-images)", worker_image ());
  nz_test_require (g_spawn_command_line_sync (inspect, &img, NULL, &rc, NULL) && rc == 0, what);
  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 180);
  tcase_add_test (tc, test_create_waiting_line_docker);
  suite_add_tcase (s, tc);
  rc = nz_test_run (s);
  g_free (real_docker);
  return rc;
}
