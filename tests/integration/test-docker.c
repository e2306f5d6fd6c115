/* End to end for container:docker and container:runsc against the real dockerd and the images
 * scripts/build-images builds (no mock): namzu-create -> namzu-worker in a container ->
 * namzu-destroy. The baseline is read from inside the container through the worker itself
 * (its own /proc/1/status, mounts, cgroup files); the token is looked for in every `ps`
 * sample taken while docker runs; a wrong token must get 401 and write nothing; teardown
 * failure is reported and retryable; runsc must really be gVisor; a daemon without the
 * runtime is refused; the duplex verbs (a terminal with a resize, tcp-connect) and the
 * upgrade's 401 work on docker and runsc; an unconfirmed cancel removes the container; and one
 * parity script (exec, files, namzu-cp, terminal, session, quiesce) runs on bwrap, docker and
 * runsc. The image is $NAMZU_WORKER_IMAGE, default namzu-worker:latest.
 *
 * One docker sandbox is created in main() (with `ps` sampled while it starts) and shared by
 * the read-only cases; cases that destroy or fail a sandbox make their own. Under CI=true a
 * missing daemon or image is a failure. */
#include <errno.h>
#include <gio/gio.h>
#include <poll.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-agent-sessions.h"
#include "nz-backend.h"
#include "nz-json.h"
#include "../nz-test.h"
#include "../nz-test-exec.h"

/* NAMZU_WORKER_IMAGE overrides it, so a branch can test its own build of the image. */
#define DEFAULT_WORKER_IMAGE "namzu-worker:latest"
#define TEST_LABEL "ai.namzu.test=test-docker"

static char base[] = "/tmp/nz-docker-e2e-XXXXXX";
static char *state;   /* NAMZU_STATE_DIR shared by every case */
static char *outputs; /* the shared sandbox's outputs dir */
static char *shared_id;
static char *ps_samples; /* every `ps` line seen while the shared sandbox was created */
static int ps_docker_run_seen;

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *
worker_image (void)
{
  const char *image = g_getenv ("NAMZU_WORKER_IMAGE");

  return image != NULL && *image != '\0' ? image : DEFAULT_WORKER_IMAGE;
}

#define REQUIRE NZ_TEST_REQUIRE

static char *
tool_path (const char *name)
{
  const char *dir = g_getenv ("NZ_TOOLS_DIR");

  REQUIRE (dir != NULL, "NZ_TOOLS_DIR is not set");
  return g_build_filename (dir, name, NULL);
}

/* Runs argv with stdout/stderr captured through files (GLib 2.74's communicate() leaks);
 * extra environment entries in @env ("K=V", NULL-terminated, may be NULL). */
static int
run_argv (const char *const *argv, const char *const *env, const char *stdin_text, char **out,
          char **err)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("nz-docker-run-XXXXXX", NULL);
  g_autofree char *in = g_build_filename (dir, "in", NULL);
  g_autofree char *o = g_build_filename (dir, "out", NULL);
  g_autofree char *e = g_build_filename (dir, "err", NULL);
  int status;

  REQUIRE (g_file_set_contents (in, stdin_text ? stdin_text : "", -1, NULL), "write %s", in);
  g_subprocess_launcher_set_stdin_file_path (l, in);
  g_subprocess_launcher_set_stdout_file_path (l, o);
  g_subprocess_launcher_set_stderr_file_path (l, e);
  g_subprocess_launcher_setenv (l, "NAMZU_STATE_DIR", state, TRUE);
  for (; env != NULL && *env != NULL; env++)
    {
      g_auto (GStrv) kv = g_strsplit (*env, "=", 2);

      g_subprocess_launcher_setenv (l, kv[0], kv[1], TRUE);
    }
  p = g_subprocess_launcher_spawnv (l, argv, &error);
  REQUIRE (p != NULL, "spawn %s: %s", argv[0], error ? error->message : "");
  REQUIRE (g_subprocess_wait (p, NULL, NULL), "wait %s", argv[0]);
  status = g_subprocess_get_if_exited (p) ? g_subprocess_get_exit_status (p)
                                          : 128 + g_subprocess_get_term_sig (p);
  if (out != NULL)
    REQUIRE (g_file_get_contents (o, out, NULL, NULL), "read %s", o);
  if (err != NULL)
    REQUIRE (g_file_get_contents (e, err, NULL, NULL), "read %s", e);
  g_unlink (in);
  g_unlink (o);
  g_unlink (e);
  g_rmdir (dir);
  return status;
}

/* A built tool with extra env and args (NULL-terminated list after @tool). */
static int tool (const char *const *env, char **out, char **err, const char *name,
                 ...) G_GNUC_NULL_TERMINATED;

static int
tool (const char *const *env, char **out, char **err, const char *name, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  va_list ap;
  const char *a;

  g_ptr_array_add (argv, tool_path (name));
  va_start (ap, name);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  return run_argv ((const char *const *)argv->pdata, env, NULL, out, err);
}

static char *
docker_out (const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  char *out = NULL;

  g_ptr_array_add (argv, (gpointer) "docker");
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (gpointer)*args);
  g_ptr_array_add (argv, NULL);
  if (run_argv ((const char *const *)argv->pdata, NULL, NULL, &out, NULL) != 0)
    g_clear_pointer (&out, g_free);
  return out != NULL ? g_strstrip (out) : NULL;
}

static JsonObject *
private_handle (const char *id)
{
  g_autofree char *path = g_build_filename (state, id, "handle.json", NULL);
  g_autofree char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return nz_json_parse_object (text, -1, NULL);
}

/* namzu-create with the shared flags; returns the new id or NULL (stderr in @err). */
static char *
create (const char *const *env, const char *backend, const char *out_dir, char **err,
        const char *extra1, const char *extra2)
{
  g_autofree char *out = NULL;
  g_autoptr (JsonObject) pub = NULL;
  int rc = tool (env, &out, err, "namzu-create", "--backend", backend, "--image", worker_image (),
                 "--network", "allow-all", "--docker-network", "bridge", "--outputs", out_dir,
                 "--label", TEST_LABEL, extra1, extra2, NULL);

  if (rc != 0)
    return NULL;
  pub = nz_json_parse_object (out, -1, NULL);
  ck_assert_ptr_nonnull (pub);
  ck_assert_msg (strstr (out, "token") == NULL, "the public handle carries a token: %s", out);
  return g_strdup (nz_json_get_string (pub, "id"));
}

static char *
new_outputs (void)
{
  char *dir = g_build_filename (base, "out-XXXXXX", NULL);

  REQUIRE (g_mkdtemp (dir) != NULL, "mkdtemp %s", dir);
  /* The image's uid 1001 writes here. */
  REQUIRE (chmod (dir, 0777) == 0, "chmod %s", dir);
  return dir;
}

/* One HTTP call to the worker with curl: the token goes in a header FILE, never in argv.
 * @token NULL sends no Authorization header. Returns the status; the body in @body. */
static int
worker_http (const char *id, const char *token, const char *path, const char *body_json,
             char **body)
{
  g_autoptr (JsonObject) h = private_handle (id);
  g_autofree char *dir = g_dir_make_tmp ("nz-docker-http-XXXXXX", NULL);
  g_autofree char *hdr = g_build_filename (dir, "hdr", NULL);
  g_autofree char *req = g_build_filename (dir, "req", NULL);
  g_autofree char *resp = g_build_filename (dir, "resp", NULL);
  g_autofree char *hdr_arg = g_strconcat ("@", hdr, NULL);
  g_autofree char *req_arg = g_strconcat ("@", req, NULL);
  g_autofree char *url = NULL;
  g_autofree char *code = NULL;
  g_autofree char *line = NULL;

  ck_assert_ptr_nonnull (h);
  url = g_strconcat (nz_json_get_string (h, "endpoint"), path, NULL);
  line = token != NULL ? g_strdup_printf ("Authorization: Bearer %s\n", token) : g_strdup ("");
  ck_assert (g_file_set_contents (hdr, line, -1, NULL));
  ck_assert (g_file_set_contents (req, body_json != NULL ? body_json : "", -1, NULL));
  {
    const char *const argv[]
        = { "curl",          "-s",    "-o",    resp, "-w",
            "%{http_code}",  "-H",    hdr_arg, "-H", "content-type: application/json",
            "--data-binary", req_arg, url,     NULL };

    ck_assert_int_eq (run_argv (argv, NULL, NULL, &code, NULL), 0);
  }
  if (body != NULL)
    ck_assert (g_file_get_contents (resp, body, NULL, NULL));
  g_unlink (hdr);
  g_unlink (req);
  g_unlink (resp);
  g_rmdir (dir);
  return atoi (code);
}

/* Runs @argv (a JSON array text) through the worker's /execute with the right token; returns
 * the exit code and the stdout. */
static int
worker_exec (const char *id, const char *command, const char *args_json, char **stdout_text)
{
  g_autoptr (JsonObject) h = private_handle (id);
  g_autofree char *req = g_strdup_printf ("{\"command\":\"%s\",\"args\":%s}", command, args_json);
  g_autofree char *body = NULL;
  g_auto (GStrv) lines = NULL;
  GString *out = g_string_new (NULL);
  int exit_code = -1000;

  ck_assert_int_eq (worker_http (id, nz_json_get_string (h, "token"), "/execute", req, &body), 200);
  lines = g_strsplit (body, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      g_autoptr (JsonObject) ev = **l ? nz_json_parse_object (*l, -1, NULL) : NULL;
      const char *type = ev != NULL ? nz_json_get_string (ev, "type") : NULL;
      double v;

      if (g_strcmp0 (type, "stdout_delta") == 0)
        g_string_append (out, nz_json_get_string (ev, "data"));
      else if (g_strcmp0 (type, "result") == 0 && nz_json_get_number (ev, "exitCode", &v))
        exit_code = (int)v;
    }
  *stdout_text = g_string_free (out, FALSE);
  return exit_code;
}

static char *
sh (const char *id, const char *script, int *rc)
{
  g_autoptr (JsonNode) s = json_node_init_string (json_node_alloc (), script);
  g_autofree char *quoted = nz_json_to_string (s, NULL);
  g_autofree char *args = g_strdup_printf ("[\"-c\",%s]", quoted);
  char *out = NULL;
  int r = worker_exec (id, "sh", args, &out);

  if (rc != NULL)
    *rc = r;
  else
    ck_assert_msg (r == 0, "sh -c '%s' exited %d: %s", script, r, out);
  return out;
}

/* A fake docker on $NAMZU_DOCKER: runs the real one except for the verb it fails. */
static char *
fake_docker (const char *name, const char *body)
{
  g_autofree char *real = g_find_program_in_path ("docker");
  char *path = g_build_filename (base, name, NULL);
  g_autofree char *script = g_strdup_printf (
      "#!/bin/sh\n# test-docker fake: %s\n%s\nexec %s \"$@\"\n", name, body, real);

  ck_assert (g_file_set_contents (path, script, -1, NULL));
  ck_assert_int_eq (chmod (path, 0755), 0);
  return path;
}

/* ---- the baseline, read from inside ------------------------------------------------------- */

START_TEST (test_caps_and_no_new_privs)
{
  g_autofree char *pid1
      = sh (shared_id, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/1/status", NULL);
  g_autofree char *self = sh (shared_id, "grep -E '^(CapEff|NoNewPrivs):' /proc/self/status", NULL);
  g_autofree char *id = sh (shared_id, "id -u; echo $HOME", NULL);

  /* The worker (PID 1): CAP_KILL, CAP_SETGID and CAP_SETUID (0xe0) and nothing else, to start
   * commands as the workload (privsep); what it runs: no capability at all; no-new-privs. */
  ck_assert_ptr_nonnull (strstr (pid1, "CapEff:\t00000000000000e0"));
  ck_assert_ptr_nonnull (strstr (pid1, "CapPrm:\t00000000000000e0"));
  ck_assert_ptr_nonnull (strstr (pid1, "CapBnd:\t00000000000000e0"));
  ck_assert_ptr_nonnull (strstr (pid1, "NoNewPrivs:\t1"));
  ck_assert_ptr_nonnull (strstr (self, "CapEff:\t0000000000000000"));
  ck_assert_ptr_nonnull (strstr (self, "NoNewPrivs:\t1"));
  ck_assert_str_eq (id, "1001\n/home/namzu\n");
}
END_TEST

/* namzu-exec --json's result carries the exec's phases on docker too (through the worker). */
START_TEST (test_exec_json_timing)
{
  g_autofree char *out = NULL, *err = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (JsonObject) result = NULL;
  guint n;

  ck_assert_int_eq (tool (NULL, &out, &err, "namzu-exec", "--sandbox", shared_id, "--json", "--",
                          "sh", "-c", "echo x; sleep 0.1", NULL),
                    0);
  lines = g_strsplit (out, "\n", -1);
  n = g_strv_length (lines);
  ck_assert_msg (n >= 2, "%s", out);
  result = nz_json_parse_object (lines[n - 2], -1, NULL);
  ck_assert_ptr_nonnull (result);
  ck_assert_str_eq (nz_json_get_string (result, "type"), "result");
  nz_test_check_exec_timing (result, 100);
}
END_TEST

START_TEST (test_read_only_root_and_exec_tmpfs)
{
  static const char *const paths[] = { "/tmp", "/var/tmp", "/workspace", "/home/namzu" };
  int rc = 0;
  g_autofree char *ro = sh (shared_id,
                            "echo x > /etc/nz-probe 2>&1 || echo x > /usr/nz-probe 2>&1; "
                            "touch /nz-probe 2>&1",
                            &rc);
  g_autofree char *mounts = sh (shared_id, "cat /proc/mounts", NULL);

  ck_assert_int_ne (rc, 0);
  ck_assert_msg (strstr (ro, "Read-only file system") != NULL, "root is writable: %s", ro);
  ck_assert_ptr_nonnull (strstr (mounts, "overlay / overlay ro,"));
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *script
          = g_strdup_printf ("cp /bin/true %s/nz-t && %s/nz-t && echo ok", paths[i], paths[i]);
      g_autofree char *ok = sh (shared_id, script, NULL);
      g_autofree char *line = g_strdup_printf ("tmpfs %s tmpfs rw,nosuid,nodev,", paths[i]);
      const char *m = strstr (mounts, line);

      /* Writable and executable: a program built there runs. */
      ck_assert_str_eq (ok, "ok\n");
      ck_assert_msg (m != NULL, "%s is not a nosuid,nodev tmpfs: %s", paths[i], mounts);
      ck_assert (strstr (m, "noexec") == NULL || strstr (m, "noexec") > strchr (m, '\n'));
    }
  /* The outputs bind is the only other writable place, and the host sees what lands there. */
  {
    g_autofree char *w
        = sh (shared_id, "echo from-inside > /mnt/user-data/outputs/probe && echo ok", NULL);
    g_autofree char *host = g_build_filename (outputs, "probe", NULL);
    g_autofree char *text = NULL;

    ck_assert_str_eq (w, "ok\n");
    ck_assert (g_file_get_contents (host, &text, NULL, NULL));
    ck_assert_str_eq (text, "from-inside\n");
  }
}
END_TEST

START_TEST (test_limits)
{
  /* cgroup v1 (this host) or v2, whichever the container sees. */
  g_autofree char *mem = sh (shared_id,
                             "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat "
                             "/sys/fs/cgroup/memory.max",
                             NULL);
  g_autofree char *pids
      = sh (shared_id,
            "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max", NULL);
  g_autofree char *cpu = sh (shared_id,
                             "if [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then "
                             "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat "
                             "/sys/fs/cgroup/cpu/cpu.cfs_period_us); "
                             "else cat /sys/fs/cgroup/cpu.max; fi",
                             NULL);

  ck_assert_str_eq (mem, "268435456\n");
  ck_assert_str_eq (pids, "64\n");
  ck_assert_str_eq (cpu, "50000 100000\n");
}
END_TEST

/* ---- the token ------------------------------------------------------------------------------ */

START_TEST (test_token_in_no_ps_output)
{
  g_autoptr (JsonObject) h = private_handle (shared_id);
  const char *token = nz_json_get_string (h, "token");

  ck_assert_ptr_nonnull (token);
  ck_assert (g_regex_match_simple ("^[A-Za-z0-9_-]{43}$", token, 0, 0));
  /* The sampling did see the docker CLI's argv, so its absence means something. */
  ck_assert_msg (ps_docker_run_seen > 0, "no ps sample caught `docker run`");
  ck_assert_ptr_nonnull (strstr (ps_samples, "--env NAMZU_SANDBOX_TOKEN "));
  ck_assert_msg (strstr (ps_samples, token) == NULL, "the token is in a ps sample");
}
END_TEST

START_TEST (test_wrong_token_gets_401_and_writes_nothing)
{
  g_autoptr (JsonObject) h = private_handle (shared_id);
  g_autofree char *body = NULL;
  g_autofree char *b2 = NULL, *b3 = NULL;
  g_autofree char *victim = g_build_filename (outputs, "intruder.txt", NULL);
  g_autofree char *good = g_build_filename (outputs, "welcome.txt", NULL);
  const char *req = "{\"path\":\"intruder.txt\",\"content\":\"aGk=\",\"encoding\":\"base64\"}";

  ck_assert_int_eq (worker_http (shared_id, "not-the-token", "/write-file", req, &body), 401);
  ck_assert_str_eq (body, "{\"error\":\"unauthorized\"}");
  ck_assert_int_eq (worker_http (shared_id, NULL, "/write-file", req, &b2), 401);
  ck_assert (!g_file_test (victim, G_FILE_TEST_EXISTS));
  /* Positive control: the right token writes. */
  ck_assert_int_eq (
      worker_http (shared_id, nz_json_get_string (h, "token"), "/write-file",
                   "{\"path\":\"welcome.txt\",\"content\":\"aGk=\",\"encoding\":\"base64\"}", &b3),
      200);
  ck_assert (g_file_test (good, G_FILE_TEST_EXISTS));
}
END_TEST

/* A failed docker run reports its argv with every --env value redacted, and the token that
 * docker was handed through its environment appears nowhere in the message. */
START_TEST (test_run_failure_message_is_redacted)
{
  g_autofree char *seen = g_build_filename (base, "fake-run-token", NULL);
  g_autofree char *body
      = g_strdup_printf ("if [ \"$1\" = run ]; then printf %%s \"$NAMZU_SANDBOX_TOKEN\" > %s; "
                         "echo 'docker: simulated failure' >&2; exit 125; fi",
                         seen);
  g_autofree char *fake = fake_docker ("docker-fail-run", body);
  g_autofree char *env0 = g_strconcat ("NAMZU_DOCKER=", fake, NULL);
  const char *const env[] = { env0, NULL };
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL;
  g_autofree char *token = NULL;
  g_autofree char *id = create (env, "container:docker", out_dir, &err, NULL, NULL);

  ck_assert_ptr_null (id);
  ck_assert (g_file_get_contents (seen, &token, NULL, NULL));
  ck_assert_int_eq (strlen (token), 43);
  ck_assert_msg (strstr (err, "exited 125: docker: simulated failure") != NULL, "%s", err);
  ck_assert_ptr_nonnull (strstr (err, "--env NAMZU_SANDBOX_WORKSPACE=<redacted>"));
  ck_assert_ptr_nonnull (strstr (err, "--env NAMZU_SANDBOX_TOKEN "));
  ck_assert_ptr_null (strstr (err, "/mnt/user-data/outputs --env"));
  ck_assert_ptr_null (strstr (err, token));
}
END_TEST

/* ---- teardown ------------------------------------------------------------------------------ */

START_TEST (test_teardown_failure_is_reported_and_retryable)
{
  g_autofree char *fake = fake_docker (
      "docker-fail-rm", "if [ \"$1\" = rm ]; then echo 'simulated rm failure' >&2; exit 1; fi");
  g_autofree char *env0 = g_strconcat ("NAMZU_DOCKER=", fake, NULL);
  const char *const env[] = { env0, NULL };
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *id = create (NULL, "container:docker", out_dir, NULL, NULL, NULL);
  g_autofree char *name = NULL;
  g_autofree char *err = NULL;
  g_autofree char *running = NULL, *gone = NULL;
  g_autofree char *dir = NULL;

  ck_assert_ptr_nonnull (id);
  name = g_strconcat ("namzu-sandbox-", id, NULL);
  dir = g_build_filename (state, id, NULL);
  /* docker rm -f failing is an error: exit 1, the state stays, the container too. */
  ck_assert_int_eq (tool (env, NULL, &err, "namzu-destroy", "--sandbox", id, NULL), 1);
  ck_assert_msg (strstr (err, "rm -f") != NULL && strstr (err, "simulated rm failure") != NULL,
                 "%s", err);
  ck_assert (g_file_test (dir, G_FILE_TEST_IS_DIR));
  {
    const char *const a[] = { "inspect", "--format", "{{.State.Running}}", name, NULL };

    running = docker_out (a);
    ck_assert_str_eq (running, "true");
  }
  /* The retry with a working docker removes it and drops the state. */
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
  ck_assert (!g_file_test (dir, G_FILE_TEST_EXISTS));
  {
    const char *const a[] = { "inspect", "--format", "{{.State.Running}}", name, NULL };

    gone = docker_out (a);
    ck_assert_ptr_null (gone);
  }
}
END_TEST

/* An unconfirmed cancellation retires the container (spec B.7 retire()): checked like
 * destroy, within the 5 s retirement deadline, and a failed one keeps the state. */
START_TEST (test_retire_after_unknown_outcome)
{
  g_autofree char *fake
      = fake_docker ("docker-fail-rm-retire",
                     "if [ \"$1\" = rm ]; then echo 'simulated rm failure' >&2; exit 1; fi");
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *id = create (NULL, "container:docker", out_dir, NULL, NULL, NULL);
  g_autofree char *name = NULL, *dir = NULL, *gone = NULL;
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (NzHandle) h2 = NULL;
  g_autoptr (GError) error = NULL;
  gint64 t0;

  ck_assert_ptr_nonnull (id);
  name = g_strconcat ("namzu-sandbox-", id, NULL);
  dir = g_build_filename (state, id, NULL);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  h = nz_handle_load (id, &error);
  ck_assert_ptr_nonnull (h);
  g_setenv ("NAMZU_DOCKER", fake, TRUE);
  ck_assert (!nz_backend_retire (h, &error));
  ck_assert_msg (strstr (error->message, "retirement") != NULL
                     && strstr (error->message, "simulated rm failure") != NULL,
                 "%s", error->message);
  ck_assert (g_file_test (dir, G_FILE_TEST_IS_DIR));
  g_clear_error (&error);
  g_unsetenv ("NAMZU_DOCKER");
  h2 = nz_handle_load (id, &error);
  ck_assert_ptr_nonnull (h2);
  t0 = g_get_monotonic_time ();
  ck_assert_msg (nz_backend_retire (h2, &error), "%s", error ? error->message : "");
  ck_assert_int_lt (g_get_monotonic_time () - t0, 5500 * 1000);
  ck_assert (!g_file_test (dir, G_FILE_TEST_EXISTS));
  {
    const char *const a[] = { "inspect", "--format", "{{.State.Running}}", name, NULL };

    gone = docker_out (a);
    ck_assert_ptr_null (gone);
  }
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------------ */

/* No sandbox in the state directory but the shared one. */
static void
assert_nothing_left (void)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  const char *n;

  /* Tombstones of sandboxes destroyed before are not left behind. */
  while (d != NULL && (n = g_dir_read_name (d)) != NULL)
    ck_assert_msg (g_strcmp0 (n, shared_id) == 0 || g_str_has_suffix (n, ".destroyed"),
                   "left behind: %s", n);
}

START_TEST (test_refusals_read_back_from_the_daemon)
{
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err1 = NULL, *err2 = NULL, *err3 = NULL;
  g_autofree char *fake = fake_docker (
      "docker-no-runsc",
      "if [ \"$1\" = info ]; then echo '{\"runc\":{\"path\":\"runc\"}}'; exit 0; fi");
  g_autofree char *env0 = g_strconcat ("NAMZU_DOCKER=", fake, NULL);
  const char *const env[] = { env0, NULL };

  /* The default network 'none' publishes nothing. */
  ck_assert_int_eq (tool (NULL, NULL, &err1, "namzu-create", "--backend", "container:docker",
                          "--image", worker_image (), "--network", "allow-all", "--outputs",
                          out_dir, NULL),
                    1);
  ck_assert_ptr_nonnull (strstr (err1, "cannot publish the worker's port on network 'none'"));
  /* deny-all on a network the daemon says is not internal, whatever it is called. */
  ck_assert_int_eq (tool (NULL, NULL, &err2, "namzu-create", "--backend", "container:docker",
                          "--image", worker_image (), "--network", "deny-all", "--docker-network",
                          "bridge", "--host-reachability", "container-network", "--outputs",
                          out_dir, NULL),
                    1);
  ck_assert_ptr_nonnull (strstr (err2, "docker network create --internal"));
  /* runsc on a daemon without the runtime. */
  ck_assert_ptr_null (create (env, "container:runsc", out_dir, &err3, NULL, NULL));
  ck_assert_msg (strstr (err3, "container:runsc needs the docker daemon to have a 'runsc' "
                               "runtime")
                     != NULL,
                 "%s", err3);
  /* Nothing was left behind by any of them. */
  assert_nothing_left ();
}
END_TEST

/* namzu-create --env/--env-file: in the container's environment (the worker's, so every
 * command's), after the per-command env, which wins; names only in the handle; a reserved name
 * (here the one that would switch the worker's auth off) refused before docker runs. */
START_TEST (test_sandbox_env)
{
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *file = g_build_filename (base, "sandbox.env", NULL);
  g_autofree char *out = NULL, *err = NULL, *id = NULL, *inspect = NULL;
  g_autoptr (JsonObject) pub = NULL;
  JsonArray *names;
  int rc;

  ck_assert (g_file_set_contents (file, "# docker's format\nB=from the file\nA=file\n", -1, NULL));
  rc = tool (NULL, &out, &err, "namzu-create", "--backend", "container:docker", "--image",
             worker_image (), "--network", "allow-all", "--docker-network", "bridge", "--outputs",
             out_dir, "--label", TEST_LABEL, "--env-file", file, "--env", "A=1", NULL);
  ck_assert_msg (rc == 0, "rc %d: %s", rc, err);
  pub = nz_json_parse_object (out, -1, NULL);
  id = g_strdup (nz_json_get_string (pub, "id"));
  names = nz_json_get_array (pub, "envNames");
  ck_assert_ptr_nonnull (names);
  ck_assert_uint_eq (json_array_get_length (names), 2);
  ck_assert_str_eq (json_array_get_string_element (names, 0), "B");
  ck_assert_str_eq (json_array_get_string_element (names, 1), "A");
  ck_assert_ptr_null (strstr (out, "from the file"));
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  ck_assert_int_eq (
      tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--", "printenv", "A", NULL), 0);
  ck_assert_str_eq (out, "1\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--env", "A=2", "--",
                          "sh", "-c", "echo \"$A|$B\"", NULL),
                    0);
  ck_assert_str_eq (out, "2|from the file\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* The next command has the sandbox's value again. */
  ck_assert_int_eq (
      tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--", "printenv", "A", NULL), 0);
  ck_assert_str_eq (out, "1\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  /* The token stays the worker's: the sandbox's env came before it in the argv. */
  ck_assert_int_eq (tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--", "sh", "-c",
                          "env | grep '^NAMZU_SANDBOX_' || true", NULL),
                    0);
  ck_assert_str_eq (out, "");
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);

  rc = tool (NULL, &out, &err, "namzu-create", "--backend", "container:docker", "--image",
             worker_image (), "--network", "allow-all", "--docker-network", "bridge", "--outputs",
             out_dir, "--label", TEST_LABEL, "--env", "NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED=1",
             NULL);
  ck_assert_msg (rc == 2 && strstr (err, "is reserved") != NULL, "rc %d: %s", rc, err);
  assert_nothing_left ();
}
END_TEST

/* deny-all on an --internal network, reached on that network from the host. */
START_TEST (test_deny_all_on_internal_network)
{
  g_autofree char *net = g_strdup_printf ("namzu-test-int-%d", (int)getpid ());
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *out = NULL, *err = NULL, *r = NULL;
  g_autoptr (JsonObject) pub = NULL;
  const char *const mk[] = { "network", "create", "--internal", "--label", TEST_LABEL, net, NULL };
  const char *const rm[] = { "network", "rm", net, NULL };
  const char *id;
  int rc, crc = 0;

  r = docker_out (mk);
  ck_assert_ptr_nonnull (r);
  rc = tool (NULL, &out, &err, "namzu-create", "--backend", "container:docker", "--image",
             worker_image (), "--network", "deny-all", "--docker-network", net,
             "--host-reachability", "container-network", "--outputs", out_dir, "--label",
             TEST_LABEL, NULL);
  ck_assert_msg (rc == 0, "create on an internal network failed: %s", err);
  pub = nz_json_parse_object (out, -1, NULL);
  id = nz_json_get_string (pub, "id");
  {
    /* No route off the internal network (the backend dropped the default route docker 20.10
     * still writes), so a connect fails at once and not one packet is sent; the sandbox has
     * no capability to add a route back. 192.0.2.1 is TEST-NET-1. */
    g_autofree char *o = sh (id,
                             "timeout 5 bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' 2>&1; "
                             "grep -c . /proc/net/route",
                             &crc);

    ck_assert_msg (strstr (o, "Network is unreachable") != NULL, "%s", o);
  }
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
  g_free (docker_out (rm));
}
END_TEST

/* --disk-mb on docker: every scratch tmpfs and /dev/shm stop the workload with ENOSPC at the
 * bound, the root stays read-only, and the container has no writable layer on the host's disk
 * (SizeRw stays 0). Beside a writable outputs directory it is refused before docker runs. */
START_TEST (test_disk_bound)
{
  static const char *const paths[]
      = { "/tmp", "/var/tmp", "/workspace", "/home/namzu", "/dev/shm", "/mnt/user-data/outputs" };
  g_autofree char *err = NULL, *name = NULL, *size_rw = NULL, *id = NULL, *ro = NULL;
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *mount_cmd = g_strdup_printf ("mount -t tmpfs -o size=8m,mode=0777 nz-outputs "
                                                "'%s'",
                                                out_dir);
  g_autofree char *umount_cmd = g_strdup_printf ("umount '%s'", out_dir);
  g_autoptr (GString) failures = g_string_new (NULL);
  int rc = 0;

  /* docker needs an outputs directory: one on a filesystem no larger than the bound is one
   * the bound holds for; any other is refused (below). What goes wrong is collected and
   * asserted after the umount, so a failure leaves no mount behind. */
  ck_assert_int_eq (system (mount_cmd), 0);
  id = create (NULL, "container:docker", out_dir, &err, "--disk-mb", "8");
  if (id == NULL)
    g_string_append_printf (failures, "create --disk-mb failed: %s", err);
  for (gsize i = 0; id != NULL && i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *script
          = g_strdup_printf ("dd if=/dev/zero of=%s/fill bs=1M count=32 2>&1; echo rc=$?; "
                             "du -k %s/fill | cut -f1; rm -f %s/fill",
                             paths[i], paths[i], paths[i]);
      g_autofree char *res = sh (id, script, NULL);
      g_auto (GStrv) lines = g_strsplit (res, "\n", -1);
      guint n = g_strv_length (lines);

      if (strstr (res, "No space left on device") == NULL || strstr (res, "rc=1") == NULL || n < 2
          || g_ascii_strtoll (lines[n - 2], NULL, 10) > 8192)
        g_string_append_printf (failures, "%s is not bounded at 8 MiB: %s\n", paths[i], res);
    }
  if (id != NULL)
    {
      const char *const a[]
          = { "container", "inspect", "--size", "--format", "{{.SizeRw}}", NULL, NULL };
      const char *a2[G_N_ELEMENTS (a)];

      memcpy (a2, a, sizeof a);
      name = g_strconcat ("namzu-sandbox-", id, NULL);
      a2[5] = name;
      ro = sh (id, "{ echo x > /nz-probe; } 2>&1; { echo x > /etc/nz-probe; } 2>&1", &rc);
      if (strstr (ro, "Read-only file system") == NULL)
        g_string_append_printf (failures, "the root is writable: %s\n", ro);
      /* No writable mount of a real filesystem but the (sized) outputs directory: docker's
       * /etc/hosts, hostname and resolv.conf binds are read-only under --read-only. */
      {
        g_autofree char *rw
            = sh (id,
                  "awk '$4 ~ /^rw/ && $3 !~ /^(tmpfs|devtmpfs|proc|devpts|mqueue|sysfs|cgroup2?)$/ "
                  "{print $2, $3}' /proc/mounts",
                  NULL);

        if (*rw != '\0')
          g_string_append_printf (failures, "writable host filesystems: %s\n", rw);
      }
      /* Nothing landed in a writable layer on the host's disk. */
      size_rw = docker_out (a2);
      if (size_rw == NULL || g_ascii_strtoll (size_rw, NULL, 10) >= 1024 * 1024)
        g_string_append_printf (failures, "the writable layer holds %s bytes\n", size_rw);
      if (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL) != 0)
        g_string_append (failures, "destroy failed\n");
    }
  ck_assert_int_eq (system (umount_cmd), 0);
  ck_assert_msg (failures->len == 0, "%s", failures->str);

  g_clear_pointer (&err, g_free);
  g_free (create (NULL, "container:docker", out_dir, &err, "--disk-mb", "8"));
  ck_assert_msg (err != NULL && strstr (err, "--disk-mb cannot bound layout.outputs") != NULL, "%s",
                 err);
}
END_TEST

/* ---- the workload against its worker (privsep) ------------------------------------------ */

/* tests/integration/privsep-attack.c as the workload (uid 1001), copied in with namzu-cp:
 * reading the worker's environment (the token) or memory, taking its fds, signalling or
 * tracing it, replacing a socket, writing onto the host: all refused, where on main all but
 * ptrace worked. @id is a sandbox on docker or runsc. */
static void
assert_worker_out_of_reach (const char *id, const char *out_dir, gboolean gvisor)
{
  g_autofree char *written = g_build_filename (out_dir, "w.txt", NULL);
  struct stat st;
  g_autofree char *attack
      = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests", "privsep-attack", NULL);
  g_autofree char *attack_dst = g_strdup_printf ("%s:privsep-attack", id);
  g_autofree char *out = NULL, *owner = NULL, *err = NULL;
  static const char *const attacks[]
      = { "proc-environ",    "proc-mem",        "proc-mem-read", "proc-fd-list",   "pidfd_getfd",
          "kill-0",          "kill-SIGSTOP",    "ptrace-attach", "socket-in-view", "socket-replace",
          "host-disk-write", "environ-content", "proc-fd-open",  "port-takeover" };
  int rc;

  ck_assert_msg (tool (NULL, NULL, &err, "namzu-cp", attack, attack_dst, NULL) == 0, "%s", err);
  out = sh (id, "chmod +x privsep-attack && ./privsep-attack namzu-worker", &rc);
  ck_assert_msg (rc == 0, "exit %d: %s", rc, out);
  ck_assert_msg (strstr (out, "found namzu-worker") != NULL, "%s", out);
  for (gsize i = 0; i < G_N_ELEMENTS (attacks); i++)
    {
      g_autofree char *line = g_strdup_printf ("refused %s\n", attacks[i]);

      /* gVisor's own /proc lets any uid open a process's environ (mode 0444) and list its fd
       * directory, dumpable or not (docs/security.md, runsc): there the environment must read
       * as NULs (environ-content) and no descriptor may open (proc-fd-open). */
      if (gvisor
          && (strcmp (attacks[i], "proc-environ") == 0 || strcmp (attacks[i], "proc-fd-list") == 0))
        continue;
      ck_assert_msg (strstr (out, line) != NULL, "no '%s' in %s", attacks[i], out);
    }
  {
    g_auto (GStrv) lines = g_strsplit (out, "\n", -1);

    for (guint i = 0; lines[i] != NULL; i++)
      ck_assert_msg (!g_str_has_prefix (lines[i], "BREACH")
                         || (gvisor
                             && (g_str_has_prefix (lines[i], "BREACH proc-environ ")
                                 || g_str_has_prefix (lines[i], "BREACH proc-fd-list "))),
                     "%s in %s", lines[i], out);
  }
  /* The worker still tells the truth, and what it writes is the workload's. */
  g_free (sh (id, "false", &rc));
  ck_assert_int_eq (rc, 1);
  {
    g_autoptr (JsonObject) h = private_handle (id);

    ck_assert_int_eq (worker_http (id, nz_json_get_string (h, "token"), "/write-file",
                                   "{\"path\":\"w.txt\",\"content\":\"from host\\n\"}", NULL),
                      200);
  }
  owner = sh (id, "echo more >> w.txt && cat w.txt", NULL);
  ck_assert_str_eq (owner, "from host\nmore\n");
  /* Read on the host: gVisor's stat of a file its gofer has just seen change can fail. */
  ck_assert_int_eq (stat (written, &st), 0);
  ck_assert_int_eq (st.st_uid, 1001);
}

START_TEST (test_workload_cannot_reach_worker_docker)
{
  assert_worker_out_of_reach (shared_id, outputs, FALSE);
}
END_TEST

START_TEST (test_workload_cannot_reach_worker_runsc)
{
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL;
  g_autofree char *id = create (NULL, "container:runsc", out_dir, &err, NULL, NULL);

  ck_assert_msg (id != NULL, "runsc create failed: %s", err);
  assert_worker_out_of_reach (id, out_dir, TRUE);
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
}
END_TEST

/* ---- runsc ---------------------------------------------------------------------------------- */

START_TEST (test_runsc_is_gvisor)
{
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL;
  g_autofree char *id = create (NULL, "container:runsc", out_dir, &err, NULL, NULL);
  g_autofree char *dmesg = NULL, *caps = NULL;

  ck_assert_msg (id != NULL, "runsc create failed: %s", err);
  dmesg = sh (id, "dmesg 2>&1 | head -n 3; uname -a", NULL);
  ck_assert_msg (strstr (dmesg, "gVisor") != NULL, "not gVisor: %s", dmesg);
  /* gVisor answers EACCES before EROFS for uid 1001, so the mount table says read-only. */
  caps = sh (id,
             "grep -E '^CapEff:' /proc/1/status; grep ' / ' /proc/mounts; "
             "cp /bin/true /tmp/t && /tmp/t && echo tmp-exec-ok",
             NULL);
  ck_assert_ptr_nonnull (strstr (caps, "CapEff:\t00000000000000e0"));
  ck_assert_msg (g_regex_match_simple ("^\\S+ / \\S+ ro,", caps, G_REGEX_MULTILINE, 0), "%s", caps);
  ck_assert_ptr_nonnull (strstr (caps, "tmp-exec-ok"));
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
}
END_TEST

/* ---- every verb over the worker's upgrade route (docker and runsc) ------------------------- */

static const char *const upgrade_backends[] = { "container:docker", "container:runsc" };

/* The next frame of a duplex stream, waiting for it; NULL at EOF. */
static JsonObject *
duplex_next (NzAgentDuplex *d)
{
  for (gboolean may_read = FALSE;; may_read = TRUE)
    {
      g_autoptr (GError) error = NULL;
      JsonObject *frame = NULL;
      struct pollfd p = { nz_agent_duplex_get_fd (d), POLLIN, 0 };

      switch (nz_agent_duplex_next (d, may_read, &frame, &error))
        {
        case NZ_DUPLEX_FRAME:
          return frame;
        case NZ_DUPLEX_AGAIN:
          ck_assert_int_ge (poll (&p, 1, -1), 0);
          break;
        case NZ_DUPLEX_TERMINATOR:
        case NZ_DUPLEX_EOF:
          return NULL;
        case NZ_DUPLEX_ERROR:
        default:
          ck_abort_msg ("duplex: %s", error != NULL ? error->message : "?");
        }
    }
}

static void
duplex_send (NzAgentDuplex *d, const char *json)
{
  g_autoptr (JsonObject) frame = nz_json_parse_object (json, -1, NULL);
  g_autoptr (GError) error = NULL;

  ck_assert_ptr_nonnull (frame);
  ck_assert_msg (nz_agent_duplex_send (d, frame, &error), "%s", error ? error->message : "");
}

static NzAgentClient *
client_for (const char *id)
{
  g_autoptr (JsonObject) h = private_handle (id);

  ck_assert_ptr_nonnull (h);
  ck_assert (g_str_has_prefix (nz_json_get_string (h, "endpoint"), "http://"));
  return nz_agent_client_new (nz_json_get_string (h, "endpoint"), nz_json_get_string (h, "token"));
}

/* An interactive terminal through the worker: input reaches the shell, a resize reaches the
 * pty (the shell waits until stty sees it), the shell's status comes back. */
static void
check_terminal (NzAgentClient *c)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzAgentDuplex) d = NULL;
  g_autoptr (JsonObject) body = nz_json_parse_object ("{\"cols\":80,\"rows\":24}", -1, NULL);
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (JsonObject) ready = NULL;
  JsonObject *frame;
  double code = -1;

  d = nz_agent_duplex_open (c, "terminal", body, &error);
  ck_assert_msg (d != NULL, "terminal: %s", error ? error->message : "");
  ready = duplex_next (d);
  ck_assert_ptr_nonnull (ready);
  ck_assert_str_eq (nz_json_get_string (ready, "type"), "ready");
  duplex_send (d, "{\"type\":\"resize\",\"cols\":132,\"rows\":43}");
  duplex_send (d, "{\"type\":\"input\",\"data\":\"until [ \\\"$(stty size)\\\" = "
                  "'43 132' ]; do sleep 0.05; done; echo size-$(stty size | tr ' ' x) "
                  "in-the-$((6*7)); exit 5\\n\"}");
  while ((frame = duplex_next (d)) != NULL)
    {
      const char *type = nz_json_get_string (frame, "type");

      if (g_strcmp0 (type, "data") == 0)
        g_string_append (out, nz_json_get_string (frame, "data"));
      if (g_strcmp0 (type, "exit") == 0)
        {
          ck_assert (nz_json_get_number (frame, "exitCode", &code));
          json_object_unref (frame);
          break;
        }
      json_object_unref (frame);
    }
  ck_assert_msg (strstr (out->str, "size-43x132 in-the-42") != NULL, "terminal said: %s", out->str);
  ck_assert_msg (code == 5, "terminal exit %g: %s", code, out->str);
}

/* tcp-connect to a service started in the sandbox (a one-shot python echo server). */
static void
check_tcp_connect (const char *id, NzAgentClient *c, const char *out_dir)
{
  g_autofree char *ready_file = g_build_filename (out_dir, "srv-ready", NULL);
  g_autofree char *err = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (NzAgentDuplex) d = NULL;
  g_autoptr (JsonObject) body
      = nz_json_parse_object ("{\"host\":\"127.0.0.1\",\"port\":7007}", -1, NULL);
  g_autoptr (JsonObject) ready = NULL;
  g_autoptr (GString) got = g_string_new (NULL);
  JsonObject *frame;
  gboolean done;
  int rc;

  rc = tool (NULL, NULL, &err, "namzu-attach", "--sandbox", id, "--start-detached", "srv", "--",
             "python3", "-c",
             "import socket\n"
             "s = socket.socket()\n"
             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "s.bind(('127.0.0.1', 7007))\n"
             "s.listen(1)\n"
             "open('srv-ready', 'w').close()\n"
             "c, _ = s.accept()\n"
             "c.sendall(b'echo:' + c.recv(100))\n"
             "c.close()\n",
             NULL);
  ck_assert_msg (rc == 0, "start-detached: %s", err);
  /* The server says it listens through the shared outputs dir; bounded, not timed. */
  for (int i = 0; i < 1000 && !g_file_test (ready_file, G_FILE_TEST_EXISTS); i++)
    g_usleep (20 * 1000);
  ck_assert_msg (g_file_test (ready_file, G_FILE_TEST_EXISTS), "the echo server never listened");
  d = nz_agent_duplex_open (c, "tcp-connect", body, &error);
  ck_assert_msg (d != NULL, "tcp-connect: %s", error ? error->message : "");
  ready = duplex_next (d);
  ck_assert_ptr_nonnull (ready);
  ck_assert_str_eq (nz_json_get_string (ready, "type"), "ready");
  duplex_send (d, "{\"type\":\"data\",\"data\":\"cGluZw==\"}"); /* "ping" */
  while ((frame = duplex_next (d)) != NULL)
    {
      const char *type = nz_json_get_string (frame, "type");

      if (g_strcmp0 (type, "data") == 0)
        {
          gsize n = 0;
          g_autofree guchar *bytes = g_base64_decode (nz_json_get_string (frame, "data"), &n);

          g_string_append_len (got, (const char *)bytes, (gssize)n);
        }
      ck_assert_msg (g_strcmp0 (type, "error") != 0, "tcp-connect error: %s",
                     nz_json_get_string (frame, "error"));
      /* @type points into @frame. */
      done = g_strcmp0 (type, "end") == 0;
      json_object_unref (frame);
      if (done)
        break;
    }
  ck_assert_str_eq (got->str, "echo:ping");
}

START_TEST (test_terminal_and_tcp_connect)
{
  const char *backend = upgrade_backends[_i];
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL;
  g_autofree char *id = create (NULL, backend, out_dir, &err, NULL, NULL);
  g_autoptr (NzAgentClient) c = NULL;

  ck_assert_msg (id != NULL, "%s create failed: %s", backend, err);
  c = client_for (id);
  check_terminal (c);
  check_tcp_connect (id, c, out_dir);
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
}
END_TEST

/* A wrong token on the upgrade route: the exact 401, and nothing it carried runs — neither a
 * frame pipelined behind the request nor what namzu-exec asks for. */
START_TEST (test_upgrade_wrong_token)
{
  const char *backend = upgrade_backends[_i];
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL, *out = NULL, *raw = NULL;
  g_autofree char *id = create (NULL, backend, out_dir, &err, NULL, NULL);
  g_autofree char *pwned = g_build_filename (out_dir, "pwned", NULL);
  g_autofree char *pwned2 = g_build_filename (out_dir, "pwned2", NULL);
  g_autofree char *token_env = NULL, *endpoint = NULL;
  g_autoptr (JsonObject) h = NULL;
  g_autoptr (GSocketClient) sc = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) reply = g_string_new (NULL);
  const char *frame_json
      = "{\"op\":\"execute\",\"body\":{\"command\":\"touch\",\"args\":[\"pwned\"]}}";
  g_autofree char *req = NULL;
  guint port;
  char buf[4096];
  gssize n;
  int rc;

  ck_assert_msg (id != NULL, "%s create failed: %s", backend, err);
  h = private_handle (id);
  endpoint = g_strdup (nz_json_get_string (h, "endpoint"));
  port = (guint)atoi (strrchr (endpoint, ':') + 1);
  req = g_strdup_printf ("GET /v1/agent HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: Upgrade\r\n"
                         "Upgrade: namzu-agent/2\r\nAuthorization: Bearer not-%s\r\n\r\n"
                         "%08zx\n%s",
                         port, nz_json_get_string (h, "token"), strlen (frame_json), frame_json);
  conn = g_socket_client_connect_to_host (sc, "127.0.0.1", (guint16)port, NULL, &error);
  ck_assert_msg (conn != NULL, "%s", error ? error->message : "");
  ck_assert (g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)), req,
                                        strlen (req), NULL, NULL, NULL));
  /* The 401 has a Content-Length; read until it is whole or the worker closes. */
  while (strstr (reply->str, "{\"error\":\"unauthorized\"}") == NULL
         && (n = g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), buf,
                                      sizeof buf, NULL, NULL))
                > 0)
    g_string_append_len (reply, buf, n);
  ck_assert_msg (g_str_has_prefix (reply->str, "HTTP/1.1 401"), "%s", reply->str);
  ck_assert (strstr (reply->str, "WWW-Authenticate: Bearer realm=\"namzu-sandbox-worker\"")
             != NULL);
  ck_assert (strstr (reply->str, "\r\n\r\n{\"error\":\"unauthorized\"}") != NULL);
  g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);

  token_env = g_strdup ("NAMZU_TOKEN=wrong-token-value");
  {
    const char *const env[] = { token_env, NULL };

    rc = tool (env, &out, &raw, "namzu-exec", "--endpoint", endpoint, "--", "touch", "pwned2",
               NULL);
  }
  ck_assert_msg (rc == 125, "namzu-exec with a wrong token exited %d: %s", rc, raw);
  ck_assert_msg (strstr (raw, "HTTP 401") != NULL, "%s", raw);
  ck_assert (strstr (raw, "wrong-token-value") == NULL);
  ck_assert (strstr (raw, nz_json_get_string (h, "token")) == NULL);
  /* The right token then works, so the files' absence means nothing ran, not a dead worker. */
  {
    int src = -1;
    g_autofree char *seen = sh (id, "ls -a", &src);

    ck_assert_int_eq (src, 0);
    ck_assert_msg (strstr (seen, "pwned") == NULL, "%s", seen);
  }
  ck_assert (!g_file_test (pwned, G_FILE_TEST_EXISTS) && !g_file_test (pwned2, G_FILE_TEST_EXISTS));
  ck_assert_int_eq (tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", id, NULL), 0);
}
END_TEST

/* A cancel the worker cannot confirm (the leader dies on SIGTERM, a group member ignoring it
 * keeps the group: the engine will not SIGKILL a reusable pgid and fences itself) leaves an
 * unknown outcome: namzu-exec retires the sandbox, and the container is gone. */
START_TEST (test_unconfirmed_cancel_retires_the_container)
{
  g_autofree char *out_dir = new_outputs ();
  g_autofree char *err = NULL;
  g_autofree char *id = create (NULL, "container:docker", out_dir, &err, NULL, NULL);
  g_autofree char *exec_bin = tool_path ("namzu-exec");
  g_autofree char *name = NULL, *dir = NULL, *gone = NULL;
  g_auto (GStrv) env = g_environ_setenv (g_get_environ (), "NAMZU_STATE_DIR", state, TRUE);

  ck_assert_msg (id != NULL, "create failed: %s", err);
  name = g_strconcat ("namzu-sandbox-", id, NULL);
  dir = g_build_filename (state, id, NULL);
  nz_test_exec_unconfirmed_cancel (exec_bin, id, env);
  ck_assert_msg (!g_file_test (dir, G_FILE_TEST_EXISTS), "%s is still there", dir);
  {
    const char *const a[] = { "inspect", "--format", "{{.State.Running}}", name, NULL };

    gone = docker_out (a);
    ck_assert_msg (gone == NULL, "container %s still exists: %s", name, gone);
  }
}
END_TEST

/* ---- parity ------------------------------------------------------------------------------- */

static void
parity (const char *backend)
{
  g_autofree char *script
      = g_build_filename (g_getenv ("NZ_SOURCE_DIR"), "tests", "e2e", "parity.sh", NULL);
  g_autofree char *env0 = g_strconcat ("NZ_TOOLS_DIR=", g_getenv ("NZ_TOOLS_DIR"), NULL);
  g_autofree char *env1 = g_strconcat ("NZ_PARITY_IMAGE=", worker_image (), NULL);
  const char *const env[] = { env0, env1, NULL };
  const char *const argv[] = { "sh", script, backend, NULL };
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_argv (argv, env, NULL, &out, &err);

  ck_assert_msg (rc == 0, "parity.sh %s exited %d:\n%s\n%s", backend, rc, out, err);
  ck_assert_ptr_nonnull (strstr (out, "parity: ok"));
}

START_TEST (test_parity_bwrap)
{
  parity ("container:bwrap");
}
END_TEST

START_TEST (test_parity_docker)
{
  parity ("container:docker");
}
END_TEST

START_TEST (test_parity_runsc)
{
  parity ("container:runsc");
}
END_TEST

/* ---- main --------------------------------------------------------------------------------- */

/* Creates the shared sandbox while sampling `ps` every few ms, so the token test can look at
 * the docker CLI's argv as the host saw it. */
static void
create_shared (void)
{
  g_autofree char *create_bin = tool_path ("namzu-create");
  g_autofree char *out_path = g_build_filename (base, "shared.json", NULL);
  g_autofree char *cmd = g_strdup_printf (
      "NAMZU_STATE_DIR='%s' '%s' --backend container:docker --image '%s'"
      " --network allow-all --docker-network bridge --outputs '%s' --label " TEST_LABEL
      " --memory-mb 256 --max-processes 64 --cpus 0.5 > '%s'",
      state, create_bin, worker_image (), outputs, out_path);
  GString *samples = g_string_new (NULL);
  g_autofree char *text = NULL;
  g_autoptr (JsonObject) pub = NULL;
  GPid pid;
  int status = -1;
  const char *const argv[] = { "/bin/sh", "-c", cmd, NULL };

  if (!g_spawn_async (NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, NULL))
    return;
  for (;;)
    {
      g_autofree char *ps = NULL;
      int st;

      if (g_spawn_command_line_sync ("ps -eo args", &ps, NULL, NULL, NULL) && ps != NULL)
        {
          g_auto (GStrv) lines = g_strsplit (ps, "\n", -1);

          for (char **l = lines; *l != NULL; l++)
            if (strstr (*l, "docker") != NULL || strstr (*l, "namzu") != NULL)
              {
                if (strstr (*l, " run --detach") != NULL)
                  ps_docker_run_seen++;
                g_string_append_printf (samples, "%s\n", *l);
              }
        }
      if (waitpid (pid, &st, WNOHANG) == pid)
        {
          status = st;
          break;
        }
    }
  g_spawn_close_pid (pid);
  ps_samples = g_string_free (samples, FALSE);
  if (status == 0 && g_file_get_contents (out_path, &text, NULL, NULL)
      && (pub = nz_json_parse_object (text, -1, NULL)) != NULL)
    shared_id = g_strdup (nz_json_get_string (pub, "id"));
}

static Suite *
suite (void)
{
  Suite *s = suite_create ("docker");
  TCase *inside = tcase_create ("inside");
  TCase *token = tcase_create ("token");
  TCase *life = tcase_create ("lifecycle");
  TCase *par = tcase_create ("parity");
  TCase *verbs = tcase_create ("verbs");

  tcase_set_timeout (inside, 60);
  tcase_add_test (inside, test_caps_and_no_new_privs);
  tcase_add_test (inside, test_exec_json_timing);
  tcase_add_test (inside, test_read_only_root_and_exec_tmpfs);
  tcase_add_test (inside, test_limits);
  tcase_add_test (inside, test_workload_cannot_reach_worker_docker);
  tcase_add_test (inside, test_workload_cannot_reach_worker_runsc);
  suite_add_tcase (s, inside);
  tcase_set_timeout (token, 60);
  tcase_add_test (token, test_token_in_no_ps_output);
  tcase_add_test (token, test_wrong_token_gets_401_and_writes_nothing);
  tcase_add_test (token, test_run_failure_message_is_redacted);
  suite_add_tcase (s, token);
  tcase_set_timeout (life, 120);
  tcase_add_test (life, test_teardown_failure_is_reported_and_retryable);
  tcase_add_test (life, test_retire_after_unknown_outcome);
  tcase_add_test (life, test_refusals_read_back_from_the_daemon);
  tcase_add_test (life, test_deny_all_on_internal_network);
  tcase_add_test (life, test_sandbox_env);
  tcase_add_test (life, test_disk_bound);
  tcase_add_test (life, test_runsc_is_gvisor);
  suite_add_tcase (s, life);
  tcase_set_timeout (verbs, 120);
  tcase_add_loop_test (verbs, test_terminal_and_tcp_connect, 0, G_N_ELEMENTS (upgrade_backends));
  tcase_add_loop_test (verbs, test_upgrade_wrong_token, 0, G_N_ELEMENTS (upgrade_backends));
  tcase_add_test (verbs, test_unconfirmed_cancel_retires_the_container);
  suite_add_tcase (s, verbs);
  tcase_set_timeout (par, 180);
  tcase_add_test (par, test_parity_bwrap);
  tcase_add_test (par, test_parity_docker);
  tcase_add_test (par, test_parity_runsc);
  suite_add_tcase (s, par);
  return s;
}

int
main (void)
{
  g_autofree char *info = NULL;
  g_autofree char *img = NULL;
  g_autofree char *inspect = NULL, *what = NULL;
  g_autofree char *docker = g_find_program_in_path ("docker");
  int rc;
  gboolean have_docker = docker != NULL
                         && g_spawn_command_line_sync ("docker info --format '{{.ServerVersion}}'",
                                                       &info, NULL, &rc, NULL)
                         && rc == 0;

  nz_test_require (have_docker, "a running docker daemon (scripts/start-dockerd)");
  inspect = g_strdup_printf ("docker image inspect --format '{{.Id}}' '%s'", worker_image ());
  what = g_strdup_printf ("the %s image (scripts/build-images)", worker_image ());
  nz_test_require (g_spawn_command_line_sync (inspect, &img, NULL, &rc, NULL) && rc == 0, what);
  REQUIRE (g_mkdtemp (base) != NULL, "mkdtemp");
  /* The image's uid 1001 must be able to reach the outputs dirs below. */
  REQUIRE (chmod (base, 0755) == 0, "chmod %s", base);
  state = g_build_filename (base, "state", NULL);
  outputs = new_outputs ();
  create_shared ();
  if (shared_id == NULL)
    {
      printf ("1..1\nnot ok 1 - the shared docker sandbox could not be created\n");
      return EXIT_FAILURE;
    }
  rc = nz_test_run (suite ());
  /* Whatever a failed case left: every sandbox in our state dir goes. */
  {
    g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
    const char *n;
    g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", base);

    while (d != NULL && (n = g_dir_read_name (d)) != NULL)
      tool (NULL, NULL, NULL, "namzu-destroy", "--sandbox", n, NULL);
    if (system (cmd) != 0)
      rc = EXIT_FAILURE;
  }
  return rc;
}
