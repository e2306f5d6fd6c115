/* End to end for sandbox lifetimes (docs/backends.md "Lifetimes"): namzu-create --ttl and
 * --idle-timeout on container:bwrap (real bubblewrap, the real agent) and container:docker
 * (the real daemon and worker image), torn down by the sandbox's own server with no host
 * process left; namzu-ls shows the expiry; namzu-destroy is idempotent. The servers' knobs are
 * checked directly too. Waits are polling loops under generous bounds, never timed asserts. */
#include <glib/gstdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "nz-json.h"
#include "sandbox-harness.h"

#define DEFAULT_WORKER_IMAGE "namzu-worker:latest"

static gboolean have_docker;

static void
setup (void)
{
  harness_begin ("/tmp/nz-lifetime-e2e-XXXXXX");
  harness_start_reaper (0);
}

static void
teardown (void)
{
  harness_end ();
}

static const char *
worker_image (void)
{
  const char *image = g_getenv ("NAMZU_WORKER_IMAGE");

  return image != NULL && *image != '\0' ? image : DEFAULT_WORKER_IMAGE;
}

/* The private handle's number member @key under "private" (pids), or 0. */
static gint64
private_number (const char *id, const char *key)
{
  g_autofree char *path = g_build_filename (harness.state, id, "handle.json", NULL);
  g_autofree char *text = NULL;
  g_autoptr (JsonObject) obj = NULL;
  double v = 0;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  obj = nz_json_parse_object (text, -1, NULL);
  ck_assert (obj != NULL);
  ck_assert (nz_json_get_number (nz_json_get_object (obj, "private"), key, &v));
  return (gint64)v;
}

/* namzu-ls --no-probe's line for @id: its status, or NULL when it is not listed. */
static char *
ls_status (const char *id)
{
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-ls", "--no-probe", NULL);

  ck_assert_msg (rc == 0, "namzu-ls: %s", err);
  lines = g_strsplit (out, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      g_autoptr (JsonObject) o = **l != '\0' ? nz_json_parse_object (*l, -1, NULL) : NULL;

      ck_assert_msg (**l == '\0' || o != NULL, "namzu-ls printed: %s", *l);
      /* A tombstone is never listed as a sandbox. */
      if (o != NULL)
        ck_assert (!g_str_has_suffix (nz_json_get_string (o, "id"), ".destroyed"));
      if (o != NULL && g_strcmp0 (nz_json_get_string (o, "id"), id) == 0)
        return g_strdup (nz_json_get_string (o, "status"));
    }
  return NULL;
}

/* namzu-destroy @id: exit 0 and {"id","destroyed":true,"alreadyGone":@gone}. */
static void
destroy_expect (const char *id, gboolean gone)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) obj = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-destroy", "--sandbox", id, NULL);

  ck_assert_msg (rc == 0, "destroy %s (%d): %s", id, rc, err);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (obj != NULL, "%s", out);
  ck_assert_str_eq (nz_json_get_string (obj, "id"), id);
  ck_assert (nz_json_get_bool (obj, "destroyed", FALSE));
  ck_assert_msg (json_object_has_member (obj, "alreadyGone")
                     && nz_json_get_bool (obj, "alreadyGone", !gone) == gone,
                 "%s", out);
}

/* Waits (bounded, 60 s) until bwrap and the agent of sandbox @id are gone. */
static void
wait_bwrap_gone (pid_t bwrap, pid_t child)
{
  for (int i = 0; i < 1200 && !(pid_gone (bwrap) && pid_gone (child)); i++)
    g_usleep (50 * 1000);
  ck_assert_msg (pid_gone (bwrap) && pid_gone (child), "the sandbox outlived its lifetime");
}

/* After its lifetime ended: namzu-ls says expired, the destroy says already gone and cleans
 * up, a second destroy says so again, and namzu-ls lists nothing. */
static void
assert_expired_then_destroyed (const char *id)
{
  g_autofree char *st = ls_status (id);
  g_autofree char *after = NULL;

  ck_assert_msg (g_strcmp0 (st, "expired") == 0, "namzu-ls status: %s", st ? st : "(none)");
  destroy_expect (id, TRUE);
  destroy_expect (id, TRUE);
  after = ls_status (id);
  ck_assert_ptr_null (after);
}

START_TEST (test_bwrap_ttl)
{
  g_autoptr (JsonObject) h = create_handle ("--ttl", "2s", NULL);
  const char *id = nz_json_get_string (h, "id");
  const char *expires = nz_json_get_string (h, "expiresAt");
  g_autofree char *sid = g_strdup (id);

  /* RFC 3339 UTC, and no idle timeout asked for, none shown. */
  ck_assert_msg (expires != NULL && g_str_has_suffix (expires, "Z") && expires[10] == 'T',
                 "expiresAt: %s", expires ? expires : "(none)");
  ck_assert (!json_object_has_member (h, "idleTimeoutMs"));
  /* Nothing on the host runs for it: the agent itself ends the sandbox. */
  wait_bwrap_gone ((pid_t)private_number (sid, "bwrapPid"),
                   (pid_t)private_number (sid, "childPid"));
  assert_expired_then_destroyed (sid);
}
END_TEST

/* The idle timeout does not end a sandbox under a command that outlasts it, and ends it once
 * nothing runs. */
START_TEST (test_bwrap_idle_timeout)
{
  g_autoptr (JsonObject) h = create_handle ("--idle-timeout", "2s", NULL);
  g_autofree char *id = g_strdup (nz_json_get_string (h, "id"));
  g_autofree char *out = NULL;
  pid_t bwrap = (pid_t)private_number (id, "bwrapPid");
  pid_t child = (pid_t)private_number (id, "childPid");
  int rc;

  ck_assert_int_eq (json_object_get_int_member (h, "idleTimeoutMs"), 2000);
  ck_assert (!json_object_has_member (h, "expiresAt"));
  /* Three idle timeouts long, and it finishes. */
  rc = sh_in_sandbox (id, "sleep 6; echo still-here", &out);
  ck_assert_msg (rc == 0, "rc %d: %s", rc, out);
  ck_assert_msg (strstr (out, "still-here") != NULL, "%s", out);
  ck_assert (!pid_gone (child));
  wait_bwrap_gone (bwrap, child);
  assert_expired_then_destroyed (id);
}
END_TEST

START_TEST (test_destroy_is_idempotent)
{
  g_autofree char *id = create_sandbox (NULL, NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (JsonObject) e = NULL;
  int rc;

  destroy_expect (id, FALSE);
  destroy_expect (id, TRUE);
  /* An id namzu never knew stays a failure. */
  rc = run_tool (NULL, &out, &err, "namzu-destroy", "--sandbox", "nz-000000000000", NULL);
  ck_assert_int_eq (rc, 1);
  e = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (e != NULL && nz_json_get_object (e, "error") != NULL, "%s", out);
  ck_assert_str_eq (nz_json_get_string (nz_json_get_object (e, "error"), "code"), "not_found");
  ck_assert_msg (strstr (err, "unknown sandbox") != NULL, "%s", err);
}
END_TEST

static const char *const bad_durations[] = { "0", "-1", "abc", "1.5s", "", "5d", "0ms", "1 s" };

START_TEST (test_bad_lifetimes_refused)
{
  const char *bad = bad_durations[_i];
  const char *const flags[] = { "--ttl", "--idle-timeout" };

  for (gsize f = 0; f < G_N_ELEMENTS (flags); f++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int rc = run_tool (NULL, &out, &err, "namzu-create", flags[f], bad, NULL);

      ck_assert_msg (rc == 2, "%s '%s': rc %d", flags[f], bad, rc);
      ck_assert_msg (strstr (err, flags[f]) != NULL, "%s", err);
    }
  /* Refused before any I/O: no sandbox, no tombstone. */
  {
    g_autoptr (GDir) d = g_dir_open (harness.state, 0, NULL);

    ck_assert (d == NULL || g_dir_read_name (d) == NULL);
  }
}
END_TEST

START_TEST (test_bad_config_lifetimes_refused)
{
  static const char *const docs[] = { "{\"ttlMs\":0}", "{\"ttlMs\":-5}", "{\"ttlMs\":\"2s\"}",
                                      "{\"idleTimeoutMs\":0}", "{\"idleTimeoutMs\":1.5}" };

  for (gsize i = 0; i < G_N_ELEMENTS (docs); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int rc = run_tool (docs[i], &out, &err, "namzu-create", "--config", "-", NULL);

      ck_assert_msg (rc == 2, "%s: rc %d %s", docs[i], rc, err);
      ck_assert_msg (strstr (err, strstr (docs[i], "ttl") ? "ttlMs" : "idleTimeoutMs") != NULL,
                     "%s", err);
    }
}
END_TEST

/* Runs server @tool (namzu-agent or namzu-worker) on a loopback listener in harness.tmp with
 * @knob=@value, to its exit; returns its status, its stderr in @err. */
static int
run_server (const char *tool, const char *knob, const char *value, char **err)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_SILENCE
                                                                 | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autofree char *path = nz_test_tool (tool);
  g_autofree char *sock = g_build_filename (harness.tmp, "a.sock", NULL);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) errb = NULL;
  const char *argv[] = { path, NULL };

  g_subprocess_launcher_setenv (l, "NAMZU_SANDBOX_WORKSPACE", harness.tmp, TRUE);
  if (g_str_equal (tool, "namzu-agent"))
    g_subprocess_launcher_setenv (l, "NAMZU_AGENT_UNIX_PATH", sock, TRUE);
  else
    {
      g_subprocess_launcher_setenv (l, "NAMZU_SANDBOX_PORT", "0", TRUE);
      g_subprocess_launcher_setenv (l, "NAMZU_SANDBOX_BIND", "127.0.0.1", TRUE);
    }
  g_subprocess_launcher_setenv (l, knob, value, TRUE);
  p = g_subprocess_launcher_spawnv (l, argv, &error);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  ck_assert (g_subprocess_communicate (p, NULL, NULL, NULL, &errb, &error));
  *err = g_strndup (g_bytes_get_data (errb, NULL), g_bytes_get_size (errb));
  return g_subprocess_get_if_exited (p) ? g_subprocess_get_exit_status (p) : -1;
}

/* Each server ends with status 3 at its deadline (the agent also when idle) and says why; a
 * bad knob is a refusal to start. */
START_TEST (test_servers_end_with_status_3)
{
  g_autofree char *soon = g_strdup_printf ("%" G_GINT64_FORMAT, g_get_real_time () / 1000 + 500);
  static const struct
  {
    const char *tool, *knob, *value; /* value NULL: soon */
    int status;
    const char *says;
  } cases[] = {
    { "namzu-agent", "NAMZU_AGENT_EXPIRES_AT_MS", NULL, 3, "expired at " },
    { "namzu-agent", "NAMZU_AGENT_IDLE_TIMEOUT_MS", "300", 3, "idle for 300ms" },
    { "namzu-agent", "NAMZU_AGENT_IDLE_TIMEOUT_MS", "soon", 1, "NAMZU_AGENT_IDLE_TIMEOUT_MS" },
    { "namzu-agent", "NAMZU_AGENT_EXPIRES_AT_MS", "-1", 1, "NAMZU_AGENT_EXPIRES_AT_MS" },
    { "namzu-worker", "NAMZU_SANDBOX_EXPIRES_AT_MS", NULL, 3, "expired at " },
    { "namzu-worker", "NAMZU_SANDBOX_EXPIRES_AT_MS", "-1", 1, "NAMZU_SANDBOX_EXPIRES_AT_MS" },
    { "namzu-worker", "NAMZU_SANDBOX_EXPIRES_AT_MS", "1.5", 1, "NAMZU_SANDBOX_EXPIRES_AT_MS" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *err = NULL;
      int rc;

      if (g_str_equal (cases[i].tool, "namzu-worker") && g_getenv ("NZ_HAVE_WORKER") == NULL)
        continue;
      rc = run_server (cases[i].tool, cases[i].knob, cases[i].value ?: soon, &err);
      ck_assert_msg (rc == cases[i].status && strstr (err, cases[i].says) != NULL,
                     "%s %s=%s: rc %d: %s", cases[i].tool, cases[i].knob, cases[i].value ?: soon,
                     rc, err);
    }
}
END_TEST

/* container:docker: the worker ends at its deadline, and --rm removes the container. */
START_TEST (test_docker_ttl)
{
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  g_autoptr (JsonObject) h = NULL;
  g_autofree char *id = NULL;
  const char *name;
  g_autofree char *cmd = NULL;
  gboolean gone = FALSE;

  /* The image's uid 1001 must reach the outputs bind. */
  ck_assert (chmod (harness.tmp, 0755) == 0);
  ck_assert (g_mkdir (outputs, 0777) == 0 && chmod (outputs, 0777) == 0);
  h = create_handle ("--backend", "container:docker", "--image", worker_image (), "--outputs",
                     outputs, "--ttl", "5s", NULL);
  id = g_strdup (nz_json_get_string (h, "id"));
  name = nz_json_get_string (h, "container");
  cmd = g_strdup_printf ("docker inspect --format '{{.Id}}' '%s'", name);
  ck_assert (nz_json_get_string (h, "expiresAt") != NULL);
  /* No idle timeout asked for: the worker's own default, and the handle says so. */
  ck_assert_int_eq (json_object_get_int_member (h, "idleTimeoutMs"), 300000);
  ck_assert (name != NULL);
  for (int i = 0; i < 600 && !gone; i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int status = 0;

      ck_assert (g_spawn_command_line_sync (cmd, &out, &err, &status, NULL));
      gone = status != 0;
      if (!gone)
        g_usleep (100 * 1000);
    }
  ck_assert_msg (gone, "container %s outlived its --ttl", name);
  assert_expired_then_destroyed (id);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lifetime");
  TCase *tc = tcase_create ("bwrap");
  g_autofree char *docker = g_find_program_in_path ("docker");
  /* Not nz_test_tool: Check's asserts only work inside a case. */
  g_autofree char *worker
      = g_build_filename (g_getenv ("NZ_TOOLS_DIR") ?: ".", "namzu-worker", NULL);
  g_autofree char *inspect
      = g_strdup_printf ("docker image inspect --format '{{.Id}}' '%s'", worker_image ());
  g_autofree char *img = NULL, *img_err = NULL;
  int rc = 1;

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) not installed");
  if (g_file_test (worker, G_FILE_TEST_IS_EXECUTABLE))
    g_setenv ("NZ_HAVE_WORKER", "1", TRUE);
  have_docker
      = docker != NULL && g_spawn_command_line_sync (inspect, &img, &img_err, &rc, NULL) && rc == 0;
  /* The docker case needs the daemon and the image; under CI both are there. */
  if (nz_test_under_ci ())
    nz_test_require (have_docker, "a running docker daemon and the worker image");
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_bwrap_ttl);
  tcase_add_test (tc, test_bwrap_idle_timeout);
  tcase_add_test (tc, test_destroy_is_idempotent);
  tcase_add_loop_test (tc, test_bad_lifetimes_refused, 0, G_N_ELEMENTS (bad_durations));
  tcase_add_test (tc, test_bad_config_lifetimes_refused);
  tcase_add_test (tc, test_servers_end_with_status_3);
  suite_add_tcase (s, tc);
  if (have_docker)
    {
      TCase *dk = tcase_create ("docker");

      tcase_add_checked_fixture (dk, setup, teardown);
      tcase_set_timeout (dk, 180);
      tcase_add_test (dk, test_docker_ttl);
      suite_add_tcase (s, dk);
    }
  return nz_test_run (s);
}
