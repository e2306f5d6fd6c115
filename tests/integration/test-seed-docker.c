/* End to end for namzu-seed on container:docker: the real dockerd, the namzu-worker image, and
 * real git repositories the test makes on the host and serves over git's smart HTTP protocol.
 * The cases every backend runs are in seed-cases.c; this file sets them up on docker and adds
 * what only docker has (the outputs bind, a plain http:// seed URL).
 *
 * How the sandbox reaches the repositories: main() creates a docker bridge network of its own,
 * and each case starts git-http.py (the real `git http-backend` behind a small HTTP server) on
 * that network's gateway address, which is the host's side of the bridge, so nothing listens
 * anywhere else. The case's sandbox is created on that network with allow-all egress (the
 * egress allowlist on docker is not what is under test here) and maps the seeds'
 * https://seed.test/ to the server in the sandbox user's git config; one case names the server's
 * http:// URL in the seed itself. Upload-pack runs on the host, so a hook that holds a clone
 * lives in the server's own git config. Under CI=true a missing daemon or image is a failure. */
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seed-cases.h"

#define TEST_LABEL "ai.namzu.test=test-seed-docker"
#define OUTPUTS "/mnt/user-data/outputs"

static char base[] = "/tmp/nz-seed-docker-XXXXXX";
static const char *image; /* $NAMZU_WORKER_IMAGE, else namzu-worker:latest */
static char *network;     /* this binary's own docker network */
static char *gateway;     /* the host's address on it */
static char *server_url;  /* the case's http://gateway:port/ */
static char *outputs;     /* the case's outputs bind source */

/* The server's git config and its hook's flags live in the case's directory on the host. */
static char *
case_path (const char *name)
{
  return g_build_filename (harness.tmp, name, NULL);
}

static void
docker_pack_hook (const char *script)
{
  g_autofree char *hook = case_path ("pack-hook");
  g_autofree char *config = case_path ("server.gitconfig");
  g_autofree char *flags = case_path ("flags");
  g_autofree char *text = NULL;

  if (script == NULL)
    {
      g_free (
          host_sh ("git config --file \"$1\" --unset uploadpack.packObjectsHook", config, NULL));
      return;
    }
  text = g_strdup_printf ("#!/bin/sh\nF='%s'\n%s\nexec \"$@\"\n", flags, script);
  ck_assert (g_file_set_contents (hook, text, -1, NULL));
  ck_assert_int_eq (chmod (hook, 0755), 0);
  g_free (
      host_sh ("git config --file \"$1\" uploadpack.packObjectsHook \"$2\"", config, hook, NULL));
}

static gboolean
docker_flag (const char *name)
{
  g_autofree char *path = g_build_filename (harness.tmp, "flags", name, NULL);

  return g_file_test (path, G_FILE_TEST_EXISTS);
}

static void
docker_raise_flag (const char *name)
{
  g_autofree char *path = g_build_filename (harness.tmp, "flags", name, NULL);

  ck_assert (g_file_set_contents (path, "", 0, NULL));
}

static const SeedServer docker_server = { docker_pack_hook, docker_flag, docker_raise_flag };

static void
new_session (gpointer user_data)
{
  setsid ();
}

/* git-http.py on the gateway, in a session of its own (the reaper kills its process group,
 * with any upload-pack a hook still holds); returns its pid. */
static GPid
start_server (void)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autofree char *script
      = g_build_filename (g_getenv ("NZ_SOURCE_DIR"), "tests", "integration", "git-http.py", NULL);
  g_autofree char *config = case_path ("server.gitconfig");
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GDataInputStream) in = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *port = NULL;

  ck_assert (g_file_set_contents (config, "", 0, NULL));
  g_subprocess_launcher_setenv (l, "GIT_CONFIG_GLOBAL", config, TRUE);
  g_subprocess_launcher_set_child_setup (l, new_session, NULL, NULL);
  p = g_subprocess_launcher_spawn (l, &error, "python3", script, seed_up, gateway, NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  /* The ready line: the bound port. */
  in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (p));
  port = g_data_input_stream_read_line (in, NULL, NULL, &error);
  ck_assert_msg (port != NULL && *port != '\0', "git-http.py did not start: %s",
                 error ? error->message : "no port");
  server_url = g_strdup_printf ("http://%s:%s/", gateway, port);
  return (GPid)atoi (g_subprocess_get_identifier (p));
}

static void
setup (void)
{
  g_autofree char *templ = g_build_filename (base, "case-XXXXXX", NULL);
  g_autofree char *flags = NULL;
  g_autofree char *map = NULL;
  GPid server;

  seed_begin (templ);
  flags = case_path ("flags");
  outputs = case_path ("out");
  ck_assert_int_eq (g_mkdir (flags, 0755), 0);
  ck_assert_int_eq (g_mkdir (outputs, 0755), 0);
  /* The image's uid 1001 writes there. */
  ck_assert_int_eq (chmod (outputs, 0777), 0);
  server = start_server ();
  harness_start_reaper (server);
  harness.sandbox = create_sandbox ("--backend", "container:docker", "--image", image, "--network",
                                    "allow-all", "--docker-network", network, "--outputs", outputs,
                                    "--label", TEST_LABEL, NULL);
  map = g_strdup_printf ("git config --global url.%s.insteadOf " URL_BASE, server_url);
  sh_in_ok (map);
}

/* Runs only after a passing case: the reaper destroys the sandbox and stops the server. */
static void
teardown (void)
{
  seed_end ();
  g_clear_pointer (&server_url, g_free);
  g_clear_pointer (&outputs, g_free);
}

/* The outputs bind is the worker's workspace and what the host collects as the task's result:
 * a root on it, however it is spelt, is refused before anything reaches the sandbox, and
 * nothing lands in the host's outputs directory. A sibling path is not the bind: the rule lets
 * it through and the preflight then finds it unwritable. */
START_TEST (test_root_on_outputs_bind)
{
  static const char *const on_bind[]
      = { OUTPUTS, OUTPUTS "/seeds", "/mnt/user-data/./outputs/seeds/",
          "//mnt/user-data//outputs" };
  g_autofree char *head = make_repo ("r", 1);
  g_autofree char *path = seed_file ("{\"name\":\"s\",\"repositories\":["
                                     "{\"name\":\"r\",\"url\":\"" URL_BASE "r.git\"}]}");
  g_autoptr (GDir) d = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (on_bind); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      g_autoptr (JsonObject) doc = NULL;
      int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", harness.sandbox, "--root",
                         on_bind[i], path, NULL);

      ck_assert_msg (rc == 2, "%s: exit %d: %s", on_bind[i], rc, err);
      doc = nz_json_parse_object (out, -1, NULL);
      ck_assert_msg (doc != NULL, "%s", out);
      ck_assert_str_eq (error_code (doc), "invalid");
      ck_assert_msg (strstr (error_message (doc), "is on the docker outputs bind (" OUTPUTS ")")
                         != NULL,
                     "%s", error_message (doc));
      ck_assert (strchr (err, '\n') == err + strlen (err) - 1);
    }
  d = g_dir_open (outputs, 0, NULL);
  ck_assert (d != NULL);
  ck_assert_msg (g_dir_read_name (d) == NULL, "something landed in the outputs bind");
  ck_assert (!sandbox_has ("-e " OUTPUTS "/seeds -o -e " OUTPUTS "/.namzu"));
  {
    g_autofree char *out = NULL, *err = NULL;
    g_autoptr (JsonObject) doc = NULL;
    int rc = run_tool (NULL, &out, &err, "namzu-seed", "--sandbox", harness.sandbox, "--root",
                       OUTPUTS "-x", path, NULL);

    ck_assert_msg (rc == 1, "exit %d: %s", rc, err);
    doc = nz_json_parse_object (out, -1, NULL);
    ck_assert (doc != NULL);
    ck_assert_msg (strstr (error_message (doc), "is not writable in the sandbox") != NULL, "%s",
                   error_message (doc));
  }
}
END_TEST

/* The seed names the server's own http:// URL, no mapping: the clone crosses the docker network
 * to git http-backend, the checkout records that URL as its origin, and the next call only
 * checks. */
START_TEST (test_http_url_over_the_network)
{
  g_autofree char *head = make_repo ("r", 3);
  g_autofree char *url = g_strconcat (server_url, "r.git", NULL);
  g_autofree char *json = g_strdup_printf (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"%s\",\"ref\":\"main\"}]}", url);
  g_autofree char *e1 = NULL, *e2 = NULL, *origin = NULL, *depth = NULL;
  g_autoptr (JsonObject) d1 = NULL;
  g_autoptr (JsonObject) d2 = NULL;
  int rc;

  {
    g_autofree char *unmap = g_strdup_printf ("git config --global --unset url.%s.insteadOf && "
                                              "! git config --global --get-regexp '^url\\.'",
                                              server_url);

    sh_in_ok (unmap);
  }
  rc = seed (json, &d1, &e1, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e1);
  assert_repo (d1, 0, "r", "cloned", head);
  origin = sh_in_out ("git -C " ROOT "/r config --get remote.origin.url");
  ck_assert_str_eq (origin, url);
  /* The default depth is 1: one commit of the three came over. */
  depth = sh_in_out ("git -C " ROOT "/r rev-list --count HEAD");
  ck_assert_str_eq (depth, "1");
  rc = seed (json, &d2, &e2, NULL);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, e2);
  assert_repo (d2, 0, "r", "present", head);
}
END_TEST

static Suite *
seed_suite (void)
{
  Suite *s = suite_create ("seed-docker");
  TCase *tc = seed_tcase ("docker", &docker_server, setup, teardown);

  tcase_add_test (tc, test_root_on_outputs_bind);
  tcase_add_test (tc, test_http_url_over_the_network);
  suite_add_tcase (s, tc);
  return s;
}

/* `docker ARGS...` on the host: its trimmed stdout, or NULL when it failed. */
static char *
docker (const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  char *out = NULL;
  int status = -1;

  g_ptr_array_add (argv, (gpointer) "docker");
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (gpointer)*args);
  g_ptr_array_add (argv, NULL);
  if (!g_spawn_sync (NULL, (char **)argv->pdata, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL,
                     &status, NULL)
      || !g_spawn_check_wait_status (status, NULL))
    g_clear_pointer (&out, g_free);
  return out != NULL ? g_strstrip (out) : NULL;
}

int
main (void)
{
  g_autofree char *info = NULL, *img = NULL, *created = NULL;
  g_autofree char *python = g_find_program_in_path ("python3");
  g_autofree char *git = g_find_program_in_path ("git");
  g_autofree char *cleanup = NULL;
  const char *const info_args[] = { "info", "--format", "{{.ServerVersion}}", NULL };
  int rc;

  image = g_getenv ("NAMZU_WORKER_IMAGE") != NULL ? g_getenv ("NAMZU_WORKER_IMAGE")
                                                  : "namzu-worker:latest";
  nz_test_require (git != NULL, "git is not installed");
  nz_test_require (python != NULL, "python3 is not installed (it serves git over HTTP)");
  info = docker (info_args);
  nz_test_require (info != NULL, "a running docker daemon (scripts/start-dockerd)");
  {
    const char *const a[] = { "image", "inspect", "--format", "{{.Id}}", image, NULL };

    img = docker (a);
    nz_test_require (img != NULL, "the worker image (scripts/build-images)");
  }
  network = g_strdup_printf ("namzu-test-seed-%d", (int)getpid ());
  {
    const char *const mk[] = { "network", "create", "--label", TEST_LABEL, network, NULL };
    const char *const gw[]
        = { "network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", network, NULL };

    created = docker (mk);
    gateway = created != NULL ? docker (gw) : NULL;
  }
  if (gateway == NULL || *gateway == '\0' || g_mkdtemp (base) == NULL || chmod (base, 0755) != 0)
    {
      printf ("1..1\nnot ok 1 - could not create docker network %s or %s\n", network, base);
      return EXIT_FAILURE;
    }
  rc = nz_test_run (seed_suite ());
  /* A failed case's reaper may still be destroying its sandbox: the network goes once the
   * last one has left it. */
  cleanup = g_strdup_printf (
      "for d in '%s'/case-*/state/nz-*; do [ -d \"$d\" ] || continue; "
      "NAMZU_STATE_DIR=\"${d%%/*}\" '%s/namzu-destroy' --sandbox \"${d##*/}\" >/dev/null 2>&1; "
      "done; i=0; until docker network rm '%s' >/dev/null 2>&1; do i=$((i+1)); "
      "[ $i -lt 60 ] || exit 1; sleep 1; done; rm -rf '%s'",
      base, g_getenv ("NZ_TOOLS_DIR"), network, base);
  if (system (cleanup) != 0)
    {
      fprintf (stderr, "cleanup of %s / network %s failed\n", base, network);
      rc = EXIT_FAILURE;
    }
  return rc;
}
