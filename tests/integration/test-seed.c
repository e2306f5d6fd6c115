/* End to end for namzu-seed on container:bwrap: real bubblewrap sandboxes, the real agent, and
 * real git repositories the test makes on the host. The cases every backend runs are in
 * seed-cases.c; this file sets them up on bwrap and adds what only bwrap can show.
 *
 * How the sandbox reaches the repositories: each case creates its sandbox with
 * `--uploads <seed_up>`, so they are bound read-only at /mnt/user-data/uploads, and maps the
 * seeds' https://seed.test/ to file:///mnt/user-data/uploads/ in the sandbox user's git config.
 * Seeds themselves only accept https:// and http:// URLs (spec G.2 refuses file://). The
 * sandbox's own upload-pack serves the clone, so a hook that holds it lives in the sandbox. */
#include <gio/gio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "seed-cases.h"

/* The hook is written on the host into the uploads bind, and copied out of it: the bind is
 * read-only to the sandbox, its flags live in the sandbox's /tmp. */
static void
bwrap_pack_hook (const char *script)
{
  g_autofree char *path = g_build_filename (seed_up, "pack-hook", NULL);
  g_autofree char *text = NULL;

  if (script == NULL)
    {
      sh_in_ok ("git config --global --unset uploadpack.packObjectsHook");
      return;
    }
  text = g_strdup_printf ("#!/bin/sh\nF=/tmp\n%s\nexec \"$@\"\n", script);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
  sh_in_ok ("cp /mnt/user-data/uploads/pack-hook /home/namzu/pack-hook && chmod +x "
            "/home/namzu/pack-hook && git config --global uploadpack.packObjectsHook "
            "/home/namzu/pack-hook");
}

static gboolean
bwrap_flag (const char *name)
{
  g_autofree char *expr = g_strdup_printf ("-e /tmp/%s", name);

  return sandbox_has (expr);
}

static void
bwrap_raise_flag (const char *name)
{
  g_autofree char *script = g_strdup_printf ("touch /tmp/%s", name);

  sh_in_ok (script);
}

static const SeedServer bwrap_server = { bwrap_pack_hook, bwrap_flag, bwrap_raise_flag };

static void
setup (void)
{
  g_autofree char *templ = g_build_filename (g_get_tmp_dir (), "nz-seed-e2e-XXXXXX", NULL);

  seed_begin (templ);
  harness_start_reaper (0);
  harness.sandbox = create_sandbox ("--uploads", seed_up, NULL);
  sh_in_ok ("git config --global url.file:///mnt/user-data/uploads/.insteadOf " URL_BASE);
}

/* Runs only after a passing case: hand the cleanup to the reaper and wait for it. */
static void
teardown (void)
{
  seed_end ();
}

/* A repository that asks for credentials fails at once: no prompt, no askpass program and no
 * credential helper is consulted, though the sandbox user's git config names both. The server
 * is a 401-only HTTP server on the sandbox's own loopback, run through namzu-exec. */
START_TEST (test_credentials_never_asked)
{
  g_autofree char *server = g_build_filename (seed_up, "auth.py", NULL);
  g_autofree char *tool = nz_test_tool ("namzu-exec");
  g_autofree char *port = NULL, *json = NULL, *err = NULL, *asked = NULL;
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) doc = NULL;
  int rc;

  ck_assert (
      g_file_set_contents (server,
                           "import http.server, os\n"
                           "class H(http.server.BaseHTTPRequestHandler):\n"
                           "    def do_GET(self):\n"
                           "        self.send_response(401)\n"
                           "        self.send_header('WWW-Authenticate', 'Basic realm=\"seed\"')\n"
                           "        self.send_header('Content-Length', '0')\n"
                           "        self.end_headers()\n"
                           "    def log_message(self, *a):\n"
                           "        pass\n"
                           "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
                           "open('/tmp/port.tmp', 'w').write(str(s.server_port))\n"
                           "os.rename('/tmp/port.tmp', '/tmp/port')\n"
                           "s.serve_forever()\n",
                           -1, NULL));
  sh_in_ok ("printf '#!/bin/sh\\ntouch /tmp/askpass-asked\\necho x\\n' > /home/namzu/askpass && "
            "chmod +x /home/namzu/askpass && git config --global core.askPass /home/namzu/askpass "
            "&& git config --global credential.helper "
            "'!f() { touch /tmp/helper-asked; echo username=x; echo password=y; }; f'");
  g_subprocess_launcher_set_stdout_file_path (launcher, "/dev/null");
  g_subprocess_launcher_set_stderr_file_path (launcher, "/dev/null");
  p = g_subprocess_launcher_spawn (launcher, &error, tool, "--sandbox", harness.sandbox, "--",
                                   "python3", "/mnt/user-data/uploads/auth.py", NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  for (int i = 0; i < 200 && !sandbox_has ("-e /tmp/port"); i++)
    g_usleep (100 * 1000);
  port = sh_in_out ("cat /tmp/port");

  json = g_strdup_printf ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":"
                          "\"http://127.0.0.1:%s/r.git\"}]}",
                          port);
  rc = seed (json, &doc, &err, "--timeout=20000");
  ck_assert_msg (rc == 1, "exit %d: %s", rc, err);
  ck_assert_str_eq (error_code (doc), "clone-failed");
  ck_assert_msg (strstr (error_message (doc), "terminal prompts disabled") != NULL, "%s",
                 error_message (doc));
  asked = sh_in_out ("ls /tmp/askpass-asked /tmp/helper-asked 2>/dev/null; :");
  ck_assert_msg (*asked == '\0', "asked: %s", asked);

  g_subprocess_send_signal (p, SIGTERM);
  ck_assert (g_subprocess_wait (p, NULL, NULL));
}
END_TEST

static Suite *
seed_suite (void)
{
  Suite *s = suite_create ("seed-e2e");
  TCase *tc = seed_tcase ("bwrap", &bwrap_server, setup, teardown);

  tcase_add_test (tc, test_credentials_never_asked);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  g_autofree char *git = g_find_program_in_path ("git");
  const char *dir = g_getenv ("NZ_TOOLS_DIR");
  g_autofree char *agent = g_build_filename (dir ? dir : ".", "namzu-agent", NULL);

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (git != NULL, "git is not installed");
  nz_test_require (g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE), "namzu-agent is not built");
  return nz_test_run (seed_suite ());
}
