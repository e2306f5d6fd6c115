/* End to end for container:bwrap with real bubblewrap, the real namzu-agent and namzu-exec:
 * namzu-create -> namzu-exec -> namzu-destroy, what the sandbox can and cannot do, limits
 * that really bite, and the failures a user meets (each one line, right exit code, nothing
 * half-created). Every case gets its own NAMZU_STATE_DIR. */
#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-json.h"
#include "sandbox-harness.h"

/* Every case gets its own directory and NAMZU_STATE_DIR, and a reaper that destroys what it
 * left running however it ends (sandbox-harness.h). */
static void
setup (void)
{
  harness_begin ("/tmp/nz-bwrap-e2e-XXXXXX");
  harness_start_reaper (0);
}

/* A failure as the CLI contract says: exit @code, one stderr line (two for a usage error), one
 * JSON error object. */
static void
assert_cli_failure (int rc, int code, const char *out, const char *err, const char *needle)
{
  g_autoptr (JsonObject) obj = NULL;
  JsonObject *eo;

  ck_assert_msg (rc == code, "exit %d, wanted %d; stderr: %s", rc, code, err);
  /* namzu-create's usage errors (exit 2) add the "Try '--help'" line. */
  ck_assert_msg (count_lines (err) == (strstr (err, "\nTry 'namzu-create --help'") ? 2 : 1),
                 "stderr is not one line: '%s'", err);
  ck_assert_msg (code == 2 || strstr (err, "\nTry '") == NULL, "a Try line for exit %d", code);
  obj = nz_json_parse_object (out, -1, NULL);
  ck_assert_msg (obj != NULL, "stdout is not one JSON object: '%s'", out);
  eo = nz_json_get_object (obj, "error");
  ck_assert (eo != NULL);
  ck_assert (nz_json_get_string (eo, "code") != NULL);
  ck_assert_msg (strstr (nz_json_get_string (eo, "message"), needle) != NULL,
                 "message '%s' lacks '%s'", nz_json_get_string (eo, "message"), needle);
}

static guint
count_sandboxes (void)
{
  g_autoptr (GDir) d = g_dir_open (harness.state, 0, NULL);
  const char *name;
  guint n = 0;

  /* Not the tombstones a destroy leaves ("nz-<id>.destroyed"). */
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    n += !g_str_has_suffix (name, ".destroyed");
  return n;
}

static JsonObject *
private_handle (const char *id)
{
  g_autofree char *path = g_build_filename (harness.state, id, "handle.json", NULL);
  g_autofree char *text = NULL;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  return nz_json_parse_object (text, -1, NULL);
}

static pid_t
priv_pid (JsonObject *h, const char *member)
{
  double v = 0;

  ck_assert (nz_json_get_number (nz_json_get_object (h, "private"), member, &v));
  return (pid_t)v;
}

/* Gone, or a zombie nobody has reaped yet. */
START_TEST (test_lifecycle_and_confinement)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autoptr (JsonObject) priv = private_handle (id);
  g_autofree char *dir = g_build_filename (harness.state, id, NULL);
  g_autofree char *hfile = g_build_filename (dir, "handle.json", NULL);
  g_autofree char *out = NULL, *ls = NULL, *host_ns = g_file_read_link ("/proc/self/ns/net", NULL);
  g_autofree char *status = NULL;
  pid_t bwrap = priv_pid (priv, "bwrapPid"), child = priv_pid (priv, "childPid");
  struct stat st;

  ck_assert_int_eq (stat (dir, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0700);
  ck_assert_int_eq (stat (hfile, &st), 0);
  ck_assert_int_eq (st.st_mode & 07777, 0600);
  ck_assert_str_eq (nz_json_get_string (pub, "network"), "deny-all");
  /* the agent's healthz features, learnt at readiness */
  ck_assert (nz_json_get_array (nz_json_get_object (pub, "capabilities"), "features") != NULL);

  ck_assert_int_eq (run_tool (NULL, &ls, NULL, "namzu-ls", NULL), 0);
  ck_assert (strstr (ls, id) != NULL);
  ck_assert (strstr (ls, "\"status\":\"running\"") != NULL);

  /* No capabilities, no-new-privs, seccomp filter mode. */
  ck_assert_int_eq (sh_in_sandbox (id, "cat /proc/self/status", &status), 0);
  ck_assert_msg (strstr (status, "CapEff:\t0000000000000000") != NULL, "%s", status);
  ck_assert (strstr (status, "NoNewPrivs:\t1") != NULL);
  ck_assert (strstr (status, "Seccomp:\t2") != NULL);
  /* The host's private places are not there; the system is read-only. */
  ck_assert_int_ne (sh_in_sandbox (id, "ls /root", NULL), 0);
  ck_assert_int_eq (sh_in_sandbox (id, "test ! -e /root && test ! -e /home/namzu/../../root", NULL), 0);
  ck_assert_int_ne (sh_in_sandbox (id, "touch /usr/namzu-x", NULL), 0);
  ck_assert_int_ne (sh_in_sandbox (id, "touch /etc/namzu-x", NULL), 0);
  ck_assert_int_ne (sh_in_sandbox (id, "touch /namzu-x", NULL), 0);
  ck_assert_int_ne (sh_in_sandbox (id, "cat /etc/shadow", NULL), 0);
  /* The scratch paths are writable and executable. */
  ck_assert_int_eq (sh_in_sandbox (id, "for d in /tmp /var/tmp /workspace /home/namzu; do "
                               "cp /bin/true $d/t && $d/t || exit 1; done", NULL), 0);
  ck_assert_int_eq (sh_in_sandbox (id, "test \"$(pwd)\" = /workspace && test \"$(hostname)\" = namzu "
                               "&& test \"$(id -u)\" = 1001", NULL), 0);
  /* deny-all: only loopback, nothing routes out, and its own network namespace. */
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (sh_in_sandbox (id, "grep -c : /proc/net/dev; readlink /proc/self/ns/net", &out), 0);
  ck_assert_msg (g_str_has_prefix (out, "1\n"), "%s", out);
  ck_assert (strstr (out, host_ns) == NULL);
  ck_assert_int_ne (sh_in_sandbox (id, "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'", NULL), 0);
  /* No nested namespaces, and the token is not in the workload's environment. */
  ck_assert_int_ne (sh_in_sandbox (id, "unshare -U true", NULL), 0);
  ck_assert_int_eq (sh_in_sandbox (id, "! env | grep -q NAMZU_AGENT_", NULL), 0);

  destroy_ok (id);
  ck_assert (!g_file_test (dir, G_FILE_TEST_EXISTS));
  ck_assert (pid_gone (bwrap));
  ck_assert (pid_gone (child));
  g_clear_pointer (&ls, g_free);
  ck_assert_int_eq (run_tool (NULL, &ls, NULL, "namzu-ls", NULL), 0);
  ck_assert_str_eq (ls, "");
}
END_TEST

START_TEST (test_stdin_handle_pipeline)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  g_autofree char *handle = nz_json_object_to_string (pub, NULL);
  g_autofree char *line = g_strdup_printf ("%s\n", handle);
  g_autofree char *out = NULL, *err = NULL;

  ck_assert_int_eq (run_tool (line, &out, &err, "namzu-exec", "--", "echo", "piped", NULL), 0);
  ck_assert_str_eq (out, "piped\n");
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&err, g_free);
  ck_assert_int_eq (run_tool (line, &out, &err, "namzu-destroy", NULL), 0);
  ck_assert (strstr (out, "\"destroyed\":true") != NULL);
  ck_assert_uint_eq (count_sandboxes (), 0);
}
END_TEST

static gboolean
cgroup_v2 (void)
{
  return g_file_test ("/sys/fs/cgroup/cgroup.controllers", G_FILE_TEST_EXISTS);
}

/* This process's own v1 cgroup for @ctrl ("4:memory:/a/b" in /proc/self/cgroup). */
static char *
own_v1 (const char *ctrl)
{
  g_autofree char *text = NULL;
  g_autofree char *needle = g_strdup_printf (":%s:", ctrl);
  const char *hit, *end;

  ck_assert (g_file_get_contents ("/proc/self/cgroup", &text, NULL, NULL));
  hit = strstr (text, needle);
  if (hit == NULL)
    return g_strdup ("/");
  hit += strlen (needle);
  end = strchr (hit, '\n');
  return g_strndup (hit, end != NULL ? (gsize)(end - hit) : strlen (hit));
}

/* <controller>/<our own cgroup>/namzu/<id>/<file> on cgroup v1 (sandboxes nest under the
 * caller's cgroup), namzu/<id>/<file> on v2. */
static char *
cgroup_path (const char *ctrl, const char *id, const char *file)
{
  g_autofree char *own = NULL;

  if (cgroup_v2 ())
    return g_build_filename ("/sys/fs/cgroup/namzu", id, file, NULL);
  own = own_v1 (ctrl);
  return g_build_filename ("/sys/fs/cgroup", ctrl, own, "namzu", id, file, NULL);
}

static char *
read_cgroup (const char *ctrl, const char *id, const char *file)
{
  g_autofree char *path = cgroup_path (ctrl, id, file);
  char *text = NULL;

  ck_assert_msg (g_file_get_contents (path, &text, NULL, NULL), "cannot read %s", path);
  return g_strstrip (text);
}

START_TEST (test_limits_bite)
{
  g_autoptr (JsonObject) pub = create_handle ("--max-processes", "32", "--memory-mb", "128", "--cpus",
                                       "0.5", NULL);
  const char *id = nz_json_get_string (pub, "id");
  gboolean v2 = cgroup_v2 ();
  g_autofree char *pids_max = read_cgroup ("pids", id, "pids.max");
  g_autofree char *mem = read_cgroup ("memory", id, v2 ? "memory.max" : "memory.limit_in_bytes");
  g_autofree char *quota = read_cgroup ("cpu", id, v2 ? "cpu.max" : "cpu.cfs_quota_us");
  g_autofree char *events = NULL;
  g_autofree char *memdir = cgroup_path ("memory", id, NULL);

  ck_assert_str_eq (pids_max, "32");
  ck_assert_str_eq (mem, "134217728");
  ck_assert_str_eq (quota, v2 ? "50000 100000" : "50000");
  /* Positive controls: within the limits things work. */
  ck_assert_int_eq (sh_in_sandbox (id, "sleep 0.1 & sleep 0.1 & wait", NULL), 0);
  ck_assert_int_eq (sh_in_sandbox (id, "dd if=/dev/zero of=/dev/null bs=16M count=1 2>/dev/null", NULL),
                    0);
  /* 200 MB in one buffer under a 128 MB limit: the kernel kills it (128 + SIGKILL). */
  ck_assert_int_eq (sh_in_sandbox (id, "dd if=/dev/zero of=/dev/null bs=200M count=1 2>/dev/null", NULL),
                    128 + SIGKILL);
  /* More processes than allowed: fork fails, and the pids controller counted it. */
  ck_assert_int_ne (sh_in_sandbox (id, "i=0; while [ $i -lt 64 ]; do sleep 5 & i=$((i+1)); done; wait",
                           NULL), 0);
  events = read_cgroup ("pids", id, "pids.events");
  ck_assert_msg (strstr (events, "max 0") == NULL, "pids.events: %s", events);

  destroy_ok (id);
  ck_assert (!g_file_test (memdir, G_FILE_TEST_EXISTS));
}
END_TEST

START_TEST (test_layout_and_allow_all)
{
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  g_autofree char *uploads = g_build_filename (harness.tmp, "uploads", NULL);
  g_autofree char *in = g_build_filename (uploads, "in.txt", NULL);
  g_autofree char *result = g_build_filename (outputs, "out.txt", NULL);
  g_autofree char *text = NULL, *out = NULL;
  g_autofree char *host_ns = g_file_read_link ("/proc/self/ns/net", NULL);
  g_autoptr (JsonObject) pub = NULL;
  const char *id;

  ck_assert_int_eq (g_mkdir (outputs, 0755), 0);
  ck_assert_int_eq (g_mkdir (uploads, 0755), 0);
  ck_assert (g_file_set_contents (in, "from-host", -1, NULL));
  pub = create_handle ("--outputs", outputs, "--uploads", uploads, "--network", "allow-all", NULL);
  id = nz_json_get_string (pub, "id");
  ck_assert_str_eq (nz_json_get_string (pub, "rootDir"), "/mnt/user-data/outputs");
  ck_assert_str_eq (nz_json_get_string (pub, "network"), "allow-all");
  ck_assert_int_eq (sh_in_sandbox (id, "cat /mnt/user-data/uploads/in.txt > out.txt && pwd", &out), 0);
  ck_assert_str_eq (out, "/mnt/user-data/outputs\n");
  ck_assert (g_file_get_contents (result, &text, NULL, NULL));
  ck_assert_str_eq (text, "from-host");
  ck_assert_int_ne (sh_in_sandbox (id, "touch /mnt/user-data/uploads/x", NULL), 0);
  /* allow-all shares the host's network namespace */
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (sh_in_sandbox (id, "readlink /proc/self/ns/net", &out), 0);
  ck_assert_msg (strstr (out, host_ns) != NULL, "%s vs %s", out, host_ns);
  destroy_ok (id);
  /* the host directories are the host's: destroy leaves them */
  ck_assert (g_file_test (result, G_FILE_TEST_EXISTS));
}
END_TEST

START_TEST (test_dead_sandbox)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autoptr (JsonObject) priv = private_handle (id);
  pid_t bwrap = priv_pid (priv, "bwrapPid"), child = priv_pid (priv, "childPid");
  g_autofree char *ls = NULL, *out = NULL, *err = NULL;
  int rc;

  /* Killed behind namzu's back. */
  ck_assert_int_eq (kill (child, SIGKILL), 0);
  kill (bwrap, SIGKILL);
  for (int i = 0; i < 500 && !(pid_gone (bwrap) && pid_gone (child)); i++)
    g_usleep (10000);
  ck_assert_int_eq (run_tool (NULL, &ls, NULL, "namzu-ls", NULL), 0);
  ck_assert_msg (strstr (ls, "\"status\":\"dead\"") != NULL, "%s", ls);
  rc = run_tool (NULL, &out, &err, "namzu-exec", "--sandbox", id, "--", "true", NULL);
  ck_assert_int_eq (rc, 125);
  ck_assert_msg (count_lines (err) == 1, "%s", err);
  /* Destroying a dead sandbox cleans up what is left. */
  destroy_ok (id);
  ck_assert_uint_eq (count_sandboxes (), 0);
}
END_TEST

START_TEST (test_bad_input)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *file = g_build_filename (harness.tmp, "file", NULL);
  g_autofree char *bad_state = g_build_filename (file, "state", NULL);
  g_autofree char *config = g_build_filename (harness.tmp, "config.json", NULL);
  int rc;

  rc = run_tool (NULL, &out, &err, "namzu-destroy", "--sandbox", "nz-0123456789ab", NULL);
  assert_cli_failure (rc, 1, out, err, "unknown sandbox 'nz-0123456789ab'");
  ck_assert (strstr (err, harness.state) != NULL);
  g_free (out), g_free (err);

  rc = run_tool ("{\"id\": nz-", &out, &err, "namzu-destroy", NULL);
  assert_cli_failure (rc, 2, out, err, "stdin");
  g_free (out), g_free (err);

  rc = run_tool (NULL, &out, &err, "namzu-destroy", NULL);
  assert_cli_failure (rc, 2, out, err, "no sandbox given");
  g_free (out), g_free (err);

  g_setenv ("NAMZU_BWRAP", "/nonexistent/bwrap", TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
  assert_cli_failure (rc, 1, out, err, "apt-get install bubblewrap");
  g_unsetenv ("NAMZU_BWRAP");
  ck_assert_uint_eq (count_sandboxes (), 0);
  g_free (out), g_free (err);

  /* Allowlists go through the egress proxy now; an entry outside the grammar is refused. */
  rc = run_tool (NULL, &out, &err, "namzu-create", "--egress", "*.example.com", NULL);
  assert_cli_failure (rc, 1, out, err, "contains '*'");
  g_free (out), g_free (err);

  rc = run_tool (NULL, &out, &err, "namzu-create", "--backend", "microvm:firecracker", NULL);
  assert_cli_failure (rc, 1, out, err, "is not available in this build yet");
  g_free (out), g_free (err);

  rc = run_tool (NULL, &out, &err, "namzu-create", "--memory-mb", "lots", NULL);
  assert_cli_failure (rc, 2, out, err, "--memory-mb");
  g_free (out), g_free (err);

  ck_assert (g_file_set_contents (config, "{\"defaultMaxProcesses\":-4}", -1, NULL));
  rc = run_tool (NULL, &out, &err, "namzu-create", "--config", config, NULL);
  assert_cli_failure (rc, 2, out, err, "defaultMaxProcesses");
  g_free (out), g_free (err);

  rc = run_tool ("{\"backend\":{\"tier\":\"container\",\"runtime\":\"bwrap\",\"image\":\"x\"}}",
                 &out, &err, "namzu-create", "--config", "-", NULL);
  assert_cli_failure (rc, 2, out, err, "backend.image");
  ck_assert_uint_eq (count_sandboxes (), 0);
  g_free (out), g_free (err);

  /* A limit the host cannot enforce is refused, and nothing is left behind. */
  g_setenv ("NAMZU_CGROUP_ROOT", harness.tmp, TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", "--memory-mb", "64", NULL);
  assert_cli_failure (rc, 1, out, err, "--memory-mb cannot be enforced");
  g_unsetenv ("NAMZU_CGROUP_ROOT");
  ck_assert_uint_eq (count_sandboxes (), 0);
  g_free (out), g_free (err);

  /* A state directory whose socket path cannot fit a sockaddr_un: refused, nothing left. */
  {
    g_autofree char *longdir = g_strdup_printf ("%s/%0100d", harness.tmp, 0);
    g_autoptr (GDir) d = NULL;

    g_setenv ("NAMZU_STATE_DIR", longdir, TRUE);
    rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
    assert_cli_failure (rc, 2, out, err, "too long for a unix socket");
    d = g_dir_open (longdir, 0, NULL);
    ck_assert (d == NULL || g_dir_read_name (d) == NULL);
    g_setenv ("NAMZU_STATE_DIR", harness.state, TRUE);
    g_free (out), g_free (err);
  }

  /* An unusable state directory. */
  ck_assert (g_file_set_contents (file, "", 0, NULL));
  g_setenv ("NAMZU_STATE_DIR", bad_state, TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
  assert_cli_failure (rc, 1, out, err, bad_state);
  g_setenv ("NAMZU_STATE_DIR", harness.state, TRUE);
}
END_TEST

START_TEST (test_path_without_bwrap)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *path = g_strdup (g_getenv ("PATH"));
  int rc;

  g_setenv ("PATH", harness.tmp, TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", NULL);
  g_setenv ("PATH", path, TRUE);
  assert_cli_failure (rc, 1, out, err, "apt-get install bubblewrap");
  ck_assert_uint_eq (count_sandboxes (), 0);
}
END_TEST

static guint
count_cgroups (void)
{
  g_autoptr (GDir) d = g_dir_open (cgroup_v2 () ? "/sys/fs/cgroup/namzu"
                                                : "/sys/fs/cgroup/pids/namzu", 0, NULL);
  const char *name;
  guint n = 0;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    n += g_str_has_prefix (name, "nz-");
  return n;
}

/* A create that fails after starting things undoes all of it. */
START_TEST (test_failed_create_leaves_nothing)
{
  g_autofree char *crash = g_build_filename (harness.tmp, "crashing-agent", NULL);
  g_autofree char *silent = g_build_filename (harness.tmp, "silent-agent", NULL);
  g_autofree char *out = NULL, *err = NULL;
  guint cgroups_before = count_cgroups ();
  int rc;

  ck_assert (g_file_set_contents (crash, "#!/bin/sh\necho agent exploded >&2\nexit 3\n", -1, NULL));
  ck_assert (g_file_set_contents (silent, "#!/bin/sh\nexec sleep 600\n", -1, NULL));
  ck_assert_int_eq (chmod (crash, 0755), 0);
  ck_assert_int_eq (chmod (silent, 0755), 0);

  g_setenv ("NAMZU_AGENT_BIN", crash, TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", "--max-processes", "50", NULL);
  assert_cli_failure (rc, 1, out, err, "agent exploded");
  ck_assert_uint_eq (count_sandboxes (), 0);
  ck_assert_uint_eq (count_cgroups (), cgroups_before);
  ck_assert (!host_process_mentions (crash));
  g_free (out), g_free (err);

  g_setenv ("NAMZU_AGENT_BIN", silent, TRUE);
  rc = run_tool (NULL, &out, &err, "namzu-create", "--ready-timeout", "500", "--max-processes",
                 "50", NULL);
  assert_cli_failure (rc, 1, out, err, "did not become ready within 500 ms");
  ck_assert (strstr (out, "timed_out") != NULL);
  ck_assert_uint_eq (count_sandboxes (), 0);
  ck_assert_uint_eq (count_cgroups (), cgroups_before);
  ck_assert (!host_process_mentions (silent));
}
END_TEST

/* SIGTERM while the agent is not ready yet: rolled back, not orphaned. */
START_TEST (test_interrupted_create_leaves_nothing)
{
  g_autofree char *silent = g_build_filename (harness.tmp, "silent-agent", NULL);
  g_autofree char *tool = nz_test_tool ("namzu-create");
  g_autofree char *out_path = g_build_filename (harness.tmp, "create.out", NULL);
  g_autofree char *err_path = g_build_filename (harness.tmp, "create.err", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) p = NULL;
  const char *argv[] = { tool, "--ready-timeout", "30000", NULL };
  gint64 start;

  ck_assert (g_file_set_contents (silent, "#!/bin/sh\nexec sleep 600\n", -1, NULL));
  ck_assert_int_eq (chmod (silent, 0755), 0);
  g_setenv ("NAMZU_AGENT_BIN", silent, TRUE);
  /* after setenv: a launcher copies the environment when it is made */
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_subprocess_launcher_set_stdout_file_path (launcher, out_path);
  g_subprocess_launcher_set_stderr_file_path (launcher, err_path);
  p = g_subprocess_launcher_spawnv (launcher, argv, NULL);
  ck_assert (p != NULL);
  /* wait until the sandbox exists, then interrupt */
  for (int i = 0; i < 500 && count_sandboxes () == 0; i++)
    g_usleep (10000);
  g_usleep (200000);
  ck_assert_uint_eq (count_sandboxes (), 1);
  start = g_get_monotonic_time ();
  g_subprocess_send_signal (p, SIGTERM);
  ck_assert (g_subprocess_wait (p, NULL, NULL));
  ck_assert_int_lt (g_get_monotonic_time () - start, 5 * G_USEC_PER_SEC);
  ck_assert (g_file_get_contents (out_path, &out, NULL, NULL));
  ck_assert (g_file_get_contents (err_path, &err, NULL, NULL));
  assert_cli_failure (g_subprocess_get_exit_status (p), 1, out, err, "interrupted");
  ck_assert_uint_eq (count_sandboxes (), 0);
  ck_assert (!host_process_mentions (silent));
}
END_TEST

static void
write_handle (const char *id, int pid, guint64 start)
{
  g_autofree char *dir = g_build_filename (harness.state, id, NULL);
  g_autofree char *file = g_build_filename (dir, "handle.json", NULL);
  g_autofree char *text = g_strdup_printf (
    "{\"id\":\"%s\",\"backend\":\"container:bwrap\",\"tier\":\"container\","
    "\"createdAt\":1,\"endpoint\":\"unix:/nonexistent/agent.sock\",\"token\":\"t\","
    "\"private\":{\"bwrapPid\":%d,\"bwrapStartTime\":%" G_GUINT64_FORMAT ",\"childPid\":%d,"
    "\"childStartTime\":%" G_GUINT64_FORMAT ",\"cgroups\":[]}}", id, pid, start, pid, start);

  ck_assert_int_eq (g_mkdir_with_parents (dir, 0700), 0);
  ck_assert (g_file_set_contents (file, text, -1, NULL));
}

/* namzu-destroy --sandbox @id run as nobody (its state directory is nobody's); the exit code. */
static int
destroy_as_nobody (const char *destroy, const char *id, char **out, char **err)
{
  g_autofree char *state_env = g_strdup_printf ("NAMZU_STATE_DIR=%s", harness.state);
  const char *argv[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env",
                         state_env, destroy, "--sandbox", id, NULL };
  g_autoptr (GError) error = NULL;
  int status = 0;

  ck_assert (g_spawn_sync (harness.tmp, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out,
                           err, &status, &error));
  ck_assert (WIFEXITED (status));
  return WEXITSTATUS (status);
}

/* A sandbox whose processes survive SIGKILL: destroy says so, exits 1, and keeps the state for
 * a retry. Run as nobody against a process of root's, SIGKILL is refused (EPERM), the way a
 * process that cannot die looks to destroy; once the process is gone, the retry cleans up. */
START_TEST (test_destroy_unconfirmed_keeps_state)
{
  const char *id = "nz-00000000dead";
  const char *victim_argv[] = { "sleep", "60", NULL };
  g_autofree char *destroy = nz_test_tool_for_others ("namzu-destroy");
  g_autofree char *dir = g_build_filename (harness.state, id, NULL);
  g_autofree char *file = g_build_filename (dir, "handle.json", NULL);
  g_autofree char *stat_path = NULL, *stat_text = NULL, *out = NULL, *err = NULL;
  g_autofree char *out2 = NULL, *err2 = NULL;
  g_auto (GStrv) fields = NULL;
  g_autoptr (GError) error = NULL;
  GPid victim = 0;
  int rc;

  ck_assert (g_spawn_async (NULL, (char **)victim_argv, NULL,
                            G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &victim,
                            &error));
  stat_path = g_strdup_printf ("/proc/%d/stat", (int)victim);
  ck_assert (g_file_get_contents (stat_path, &stat_text, NULL, NULL));
  fields = g_strsplit (strrchr (stat_text, ')') + 2, " ", -1);
  write_handle (id, victim, g_ascii_strtoull (fields[19], NULL, 10));
  ck_assert_int_eq (chmod (harness.tmp, 0711), 0);
  ck_assert_int_eq (chown (harness.state, 65534, 65534), 0);
  ck_assert_int_eq (chown (dir, 65534, 65534), 0);
  ck_assert_int_eq (chown (file, 65534, 65534), 0);
  rc = destroy_as_nobody (destroy, id, &out, &err);
  assert_cli_failure (rc, 1, out, err, "could not be confirmed gone");
  ck_assert (g_file_test (file, G_FILE_TEST_IS_REGULAR));
  ck_assert_int_eq (kill (victim, SIGKILL), 0);
  ck_assert_int_eq (waitpid (victim, NULL, 0), victim);
  ck_assert_int_eq (destroy_as_nobody (destroy, id, &out2, &err2), 0);
  ck_assert_msg (!g_file_test (dir, G_FILE_TEST_EXISTS), "%s", err2);
}
END_TEST

/* namzu-ls does not hide a sandbox it cannot read: the corrupt handle (what `--cpus 1e17`
 * once wrote) and the unreadable one are named on stderr, the readable one is still listed,
 * and the exit status is 1. */
START_TEST (test_ls_reports_unreadable_handles)
{
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *corrupt = g_build_filename (harness.state, "nz-00000000bad1", NULL);
  g_autofree char *corrupt_h = g_build_filename (corrupt, "handle.json", NULL);
  g_autofree char *isdir_h = g_build_filename (harness.state, "nz-00000000bad2", "handle.json",
                                               NULL);
  int rc;

  write_handle ("nz-00000000900d", 0, 0);
  ck_assert_int_eq (g_mkdir_with_parents (corrupt, 0700), 0);
  ck_assert (g_file_set_contents (corrupt_h, "{\"id\":\"nz-00000000bad1\",\"limits\":"
                                  "{\"cpus\":1e+17.0}}", -1, NULL));
  ck_assert_int_eq (g_mkdir_with_parents (isdir_h, 0700), 0);
  rc = run_tool (NULL, &out, &err, "namzu-ls", "--no-probe", NULL);
  ck_assert_msg (rc == 1, "namzu-ls exited %d: %s", rc, err);
  ck_assert_uint_eq (count_lines (out), 1);
  ck_assert_msg (strstr (out, "\"id\":\"nz-00000000900d\"") != NULL, "%s", out);
  ck_assert_uint_eq (count_lines (err), 2);
  ck_assert_msg (g_str_has_prefix (err, "namzu-ls: "), "%s", err);
  ck_assert_msg (strstr (err, "nz-00000000bad1") != NULL && strstr (err, corrupt) != NULL,
                 "%s", err);
  ck_assert_msg (strstr (err, "nz-00000000bad2") != NULL, "%s", err);
  ck_assert (strstr (err, "nz-00000000900d") == NULL);
}
END_TEST

static void
set_immutable (const char *path, gboolean on)
{
  nz_autofd int fd = open (path, O_RDONLY | O_CLOEXEC);
  int flags = on ? FS_IMMUTABLE_FL : 0;

  ck_assert (fd >= 0);
  ck_assert_msg (ioctl (fd, FS_IOC_SETFLAGS, &flags) == 0, "chattr %ci %s: %s", on ? '+' : '-',
                 path, g_strerror (errno));
}

/* A destroy that cannot finish keeps the handle, so namzu-ls still shows the sandbox and the
 * retry finds it; the retry succeeds once the obstacle is gone, through a tree deeper than
 * the open-file limit with mode-000 directories (what a workload can leave behind). */
START_TEST (test_destroy_retries_through_deep_tree)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *dir = g_build_filename (harness.state, id, NULL);
  g_autofree char *leftover = g_build_filename (dir, "leftover", NULL);
  g_autofree char *stuck = g_build_filename (leftover, "stuck", NULL);
  g_autofree char *out = NULL, *err = NULL, *ls = NULL;
  g_autofree char *deep = NULL;
  struct rlimit old, low;
  int rc;

  /* 300 levels (the path stays under PATH_MAX for mkdir -p) against 64 fds. */
  deep = host_sh ("mkdir -p \"$1\"/$(printf 'd/%.0s' $(seq 300)) && "
                  "chmod 000 \"$1\"/d/d/d \"$1\"/d && touch \"$1\"/stuck && echo ok",
                  leftover, NULL);
  ck_assert_str_eq (deep, "ok");
  set_immutable (stuck, TRUE);
  ck_assert_int_eq (getrlimit (RLIMIT_NOFILE, &old), 0);
  low = old;
  low.rlim_cur = 64;
  ck_assert_int_eq (setrlimit (RLIMIT_NOFILE, &low), 0);
  rc = run_tool (NULL, &out, &err, "namzu-destroy", "--sandbox", id, NULL);
  assert_cli_failure (rc, 1, out, err, "stuck");
  /* Still there to retry: listed, and its handle intact. */
  ck_assert_int_eq (run_tool (NULL, &ls, NULL, "namzu-ls", "--no-probe", NULL), 0);
  ck_assert_msg (strstr (ls, id) != NULL, "%s", ls);
  set_immutable (stuck, FALSE);
  g_clear_pointer (&err, g_free);
  rc = run_tool (NULL, NULL, &err, "namzu-destroy", "--sandbox", id, NULL);
  ck_assert_int_eq (setrlimit (RLIMIT_NOFILE, &old), 0);
  ck_assert_msg (rc == 0, "retry: %s", err);
  ck_assert_msg (!g_file_test (dir, G_FILE_TEST_EXISTS), "%s is still there", dir);
}
END_TEST

/* --disk-mb bounds every writable scratch filesystem: writing past it fails with ENOSPC
 * inside, and none of it reached the host's disk (the state directory, the only host
 * directory the sandbox could see, did not grow). Beside a writable outputs directory, which
 * a tmpfs size cannot bound, it is refused. */
START_TEST (test_disk_bound)
{
  g_autofree char *id = create_sandbox ("--disk-mb", "8", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *outputs = g_build_filename (harness.tmp, "outputs", NULL);
  g_autofree char *before = host_sh ("du -sk \"$1\" | cut -f1", harness.state, NULL);
  g_autofree char *after = NULL;
  const char *const paths[] = { "/tmp", "/var/tmp", "/workspace", "/home/namzu", "/dev/shm" };
  int rc;

  harness.sandbox = g_strdup (id);
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *script = g_strdup_printf (
        "dd if=/dev/zero of=%s/fill bs=1M count=32 2>&1; echo rc=$?", paths[i]);
      g_autofree char *res = sh_in_out (script);

      ck_assert_msg (strstr (res, "No space left on device") != NULL, "%s: %s", paths[i], res);
      ck_assert_msg (strstr (res, "rc=1") != NULL, "%s: %s", paths[i], res);
      g_free (script);
      script = g_strdup_printf ("du -k %s/fill | cut -f1; rm %s/fill", paths[i], paths[i]);
      g_free (res);
      res = sh_in_out (script);
      ck_assert_msg (g_ascii_strtoll (res, NULL, 10) <= 8192, "%s holds %s KiB", paths[i], res);
    }
  /* Nowhere else writable: the /etc masks and /dev are read-only. */
  ck_assert (!sandbox_has ("-w /etc/ssl/private"));
  ck_assert (!sandbox_has ("-w /dev"));
  /* No writable mount of a real filesystem: the host's disk is only reachable through one.
   * /run/namzu (the egress socket dir) is bound read-only. */
  {
    g_autofree char *rw = sh_in_out (
      "awk '$4 ~ /^rw/ && $3 !~ /^(tmpfs|devtmpfs|proc|devpts|mqueue|sysfs|cgroup2?)$/ "
      "{print $2, $3}' /proc/mounts");

    ck_assert_msg (*rw == '\0', "writable host filesystems in the sandbox: %s", rw);
  }
  ck_assert_int_eq (sh_in ("echo x > /dev/null", NULL), 0);
  after = host_sh ("du -sk \"$1\" | cut -f1", harness.state, NULL);
  ck_assert_msg (g_ascii_strtoll (after, NULL, 10) < g_ascii_strtoll (before, NULL, 10) + 1024,
                 "the state directory grew from %s to %s KiB", before, after);
  destroy_ok (id);

  ck_assert_int_eq (g_mkdir (outputs, 0700), 0);
  rc = run_tool (NULL, &out, &err, "namzu-create", "--disk-mb", "8", "--outputs", outputs, NULL);
  ck_assert_msg (rc == 2, "exit %d: %s", rc, err);
  ck_assert_msg (strstr (out, "--disk-mb cannot bound layout.outputs") != NULL, "%s", out);
  ck_assert_uint_eq (count_sandboxes (), 0);

  /* Unless the outputs directory is on a filesystem no larger than the bound. */
  g_free (host_sh ("mount -t tmpfs -o size=8m nz-outputs \"$1\"", outputs, NULL));
  {
    g_autofree char *id2 = create_sandbox ("--disk-mb", "8", "--outputs", outputs, NULL);
    g_autofree char *res = NULL;

    rc = sh_in_sandbox (id2, "dd if=/dev/zero of=/mnt/user-data/outputs/fill bs=1M count=32 "
                        "2>&1", &res);
    destroy_ok (id2);
    g_free (host_sh ("umount \"$1\"", outputs, NULL));
    ck_assert_msg (rc != 0 && strstr (res, "No space left on device") != NULL, "%s", res);
  }
}
END_TEST

/* A cancel the agent cannot confirm (the leader died on SIGTERM, a member ignoring it keeps
 * the group: the agent will not SIGKILL a reusable pgid and fences itself) leaves an outcome
 * nobody knows: namzu-exec retires the sandbox through the backend and exits 125. */
START_TEST (test_unconfirmed_cancel_retires)
{
  g_autoptr (JsonObject) pub = create_handle (NULL, NULL);
  const char *id = nz_json_get_string (pub, "id");
  g_autofree char *dir = g_build_filename (harness.state, id, NULL);
  g_autofree char *tool = nz_test_tool ("namzu-exec");

  nz_test_exec_unconfirmed_cancel (tool, id, NULL);
  /* Retired like a destroy: nothing of the sandbox is left. */
  ck_assert_msg (!g_file_test (dir, G_FILE_TEST_EXISTS), "%s is still there", dir);
}
END_TEST

/* The workload against its own agent (docs/security.md): it cannot read the agent's environment
 * or memory, take its fds, signal or trace it, see or replace its socket, or write onto the
 * host's disk through a bind; and the host still hears the truth afterwards. On main all but
 * ptrace worked. The attacks are tests/integration/privsep-attack.c, copied in. */
START_TEST (test_workload_cannot_reach_agent)
{
  g_autofree char *id = create_sandbox (NULL, NULL);
  g_autofree char *attack = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests",
                                              "privsep-attack", NULL);
  g_autofree char *attack_dst = g_strdup_printf ("%s:privsep-attack", id);
  g_autofree char *out = NULL, *owned = NULL;
  g_autofree char *sock_dir = g_build_filename (harness.state, id, "sock", NULL);
  g_autofree char *local = g_build_filename (harness.tmp, "in.txt", NULL);
  g_autofree char *dst = g_strdup_printf ("%s:in.txt", id);
  static const char *const attacks[]
      = { "proc-environ", "proc-mem", "proc-mem-read", "proc-fd-list", "pidfd_getfd", "kill-0",
          "kill-SIGSTOP", "ptrace-attach", "socket-in-view", "socket-replace",
          "host-disk-write", "environ-content", "proc-fd-open" };
  int rc;

  ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-cp", attack, attack_dst, NULL), 0);
  rc = sh_in_sandbox (id, "chmod +x privsep-attack && ./privsep-attack namzu-agent", &out);
  ck_assert_msg (rc == 0, "rc %d: %s", rc, out);
  ck_assert_msg (strstr (out, "found namzu-agent") != NULL, "%s", out);
  ck_assert_msg (strstr (out, "BREACH") == NULL, "%s", out);
  for (gsize i = 0; i < G_N_ELEMENTS (attacks); i++)
    {
      g_autofree char *line = g_strdup_printf ("refused %s\n", attacks[i]);

      ck_assert_msg (strstr (out, line) != NULL, "no '%s' in %s", attacks[i], out);
    }
  /* Nothing landed on the host's disk, and the agent still tells the truth. */
  ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-exec", "--sandbox", id, "--", "false",
                              NULL), 1);
  {
    g_autoptr (GDir) d = g_dir_open (sock_dir, 0, NULL);

    ck_assert (d != NULL && g_dir_read_name (d) == NULL);
  }
  /* What the agent writes for the host is the workload's to read and change. */
  ck_assert (g_file_set_contents (local, "from host\n", -1, NULL));
  ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-cp", local, dst, NULL), 0);
  ck_assert_int_eq (sh_in_sandbox (id, "echo more >> in.txt && cat in.txt && stat -c %u in.txt",
                                   &owned), 0);
  ck_assert_str_eq (owned, "from host\nmore\n1001\n");
  /* A terminal and a detached session are the workload's too: uid 1001, no capability. */
  {
    g_autofree char *term = NULL, *sess = NULL;

    ck_assert_int_eq (run_tool ("echo u-$(id -u)-$(grep -c 'CapEff:.0000000000000000' "
                                "/proc/self/status)-end; exit 0\n",
                                &term, NULL, "namzu-attach", "--sandbox", id, "--terminal", NULL),
                      0);
    ck_assert_msg (strstr (term, "u-1001-1-end") != NULL, "%s", term);
    ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-attach", "--sandbox", id,
                                "--start-detached", "who", "--", "sh", "-c",
                                "echo u-$(id -u)-$(grep -c 'CapEff:.0000000000000000' "
                                "/proc/self/status)-end", NULL),
                      0);
    ck_assert_int_eq (run_tool (NULL, &sess, NULL, "namzu-attach", "--sandbox", id, "--session",
                                "who", NULL),
                      0);
    ck_assert_msg (strstr (sess, "u-1001-1-end") != NULL, "%s", sess);
  }
  destroy_ok (id);
}
END_TEST

/* A session and a terminal that stay quiet for twenty heartbeats (100 ms) are not mistaken for
 * a silent peer: the agent keeps beating, namzu-attach keeps answering, and the late output and
 * the exit status arrive. (A peer that goes silent is test-hostile-replies' ready-silent.) */
START_TEST (test_quiet_streams_keep_their_heartbeat)
{
  g_autofree char *id = create_sandbox (NULL, NULL);
  g_autofree char *out = NULL, *err = NULL, *term = NULL, *term_err = NULL;

  g_setenv ("NAMZU_STREAM_HEARTBEAT_MS", "100", TRUE);
  ck_assert_int_eq (run_tool (NULL, NULL, NULL, "namzu-attach", "--sandbox", id,
                              "--start-detached", "quiet", "--", "sh", "-c",
                              "sleep 2; echo late; exit 3", NULL),
                    0);
  ck_assert_int_eq (run_tool (NULL, &out, &err, "namzu-attach", "--sandbox", id, "--session",
                              "quiet", NULL),
                    3);
  ck_assert_msg (strstr (out, "late\n") != NULL, "out %s err %s", out, err);
  ck_assert_int_eq (run_tool (NULL, &term, &term_err, "namzu-attach", "--sandbox", id,
                              "--terminal", "--", "sh", "-c", "sleep 2; echo tlate", NULL),
                    0);
  ck_assert_msg (strstr (term, "tlate") != NULL, "out %s err %s", term, term_err);
  g_unsetenv ("NAMZU_STREAM_HEARTBEAT_MS");
  destroy_ok (id);
}
END_TEST

/* namzu-create run by a user who is not root (nobody here), in a mount namespace of its own
 * where /etc/subuid and /etc/subgid are a file of the test's: loop 0 gives nobody a
 * subordinate range, so the agent gets a uid of its own through uidmap's newuidmap/newgidmap
 * and every attack is refused as under root; loop 1 gives it none: namzu-create refuses,
 * and with --agent-shares-uid takes the weaker mode of docs/security.md, where the agent shares
 * the workload's uid: non-dumpable still refuses everything but a signal. */
static const char *const unprivileged_script =
    "mount --bind \"$1\" /etc/subuid && mount --bind \"$1\" /etc/subgid || exit 3\n"
    "exec setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH=/usr/bin:/bin HOME=/ "
    "NAMZU_STATE_DIR=\"$2\" NAMZU_AGENT_BIN=\"$3\" sh -c '\n"
    "  out=$(\"$1\" --backend container:bwrap ${6:+\"$6\"}) || exit 4\n"
    "  id=$(printf %s \"$out\" | sed -n \"s/.*\\\"id\\\":\\\"\\([^\\\"]*\\)\\\".*/\\1/p\")\n"
    "  \"$4\" \"$5\" \"$id:privsep-attack\" >/dev/null || exit 5\n"
    "  \"$2\" --sandbox \"$id\" -- sh -c \"chmod +x privsep-attack && ./privsep-attack "
    "namzu-agent && grep -E \\\"^Uid:\\\" /proc/2/status\"\n"
    "  \"$2\" --sandbox \"$id\" -- false; echo \"false-exit=$?\"\n"
    "  \"$3\" --sandbox \"$id\" >/dev/null || exit 6\n"
    "' sh \"$4\" \"$5\" \"$6\" \"$7\" \"$8\" \"$9\"\n";

/* Runs unprivileged_script; returns the wait status. */
static int
run_unprivileged (const char *subids, const char *agent, const char *create, const char *exec,
                  const char *destroy, const char *cp, const char *attack, const char *flag,
                  char **out, char **err)
{
  const char *argv[] = { "unshare", "-m", "sh", "-c", unprivileged_script, "sh", subids,
                         harness.state, agent, create, exec, destroy, cp, attack, flag, NULL };
  g_autoptr (GError) error = NULL;
  int status = 0;

  ck_assert (g_spawn_sync (harness.tmp, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, out,
                           err, &status, &error));
  return status;
}

START_TEST (test_unprivileged_workload_cannot_reach_agent)
{
  g_autofree char *newuidmap = g_find_program_in_path ("newuidmap");
  g_autofree char *subids = g_build_filename (harness.tmp, "subids", NULL);
  g_autofree char *create = nz_test_tool_for_others ("namzu-create");
  g_autofree char *exec = nz_test_tool_for_others ("namzu-exec");
  g_autofree char *destroy = nz_test_tool_for_others ("namzu-destroy");
  g_autofree char *cp = nz_test_tool_for_others ("namzu-cp");
  g_autofree char *agent = nz_test_tool_for_others ("namzu-agent");
  g_autofree char *attack = NULL, *out = NULL;
  gboolean own_uid = _i == 0;
  g_auto (GStrv) lines = NULL;
  guint refused = 0;

  ck_assert_msg (newuidmap != NULL, "newuidmap missing (uidmap; scripts/install-deps)");
  {
    /* The attack binary, where nobody can read it. */
    g_autofree char *src = g_build_filename (g_getenv ("NZ_BUILD_DIR"), "tests",
                                             "privsep-attack", NULL);

    attack = nz_test_file_for_others (src);
  }
  ck_assert (g_file_set_contents (subids, own_uid ? "nobody:300000:65536\n" : "", -1, NULL));
  /* nobody's state directory, under a temp directory it may pass through. */
  ck_assert_int_eq (chmod (harness.tmp, 0711), 0);
  ck_assert_int_eq (g_mkdir (harness.state, 0700), 0);
  ck_assert_int_eq (chown (harness.state, 65534, 65534), 0);
  if (!own_uid)
    {
      /* Refuse, do not degrade: without a range the weaker mode must be asked for. */
      g_autofree char *rout = NULL, *rerr = NULL;
      int status = run_unprivileged (subids, agent, create, exec, destroy, cp, attack, "", &rout,
                                     &rerr);

      ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 4, "status %d: %s %s", status,
                     rout, rerr);
      ck_assert_msg (strstr (rerr, "container:bwrap cannot give the agent a uid of its own")
                         != NULL
                     && strstr (rerr, "--agent-shares-uid") != NULL,
                     "%s", rerr);
    }
  {
    g_autofree char *err = NULL;
    int status = run_unprivileged (subids, agent, create, exec, destroy, cp, attack,
                                   own_uid ? "" : "--agent-shares-uid", &out, &err);

    ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d: %s\n%s", status,
                   out, err);
  }
  ck_assert_msg (strstr (out, "found namzu-agent") != NULL, "%s", out);
  /* The agent (pid 2, after bwrap) runs as uid 0 of the namespace, or as the workload. */
  ck_assert_msg (strstr (out, own_uid ? "Uid:\t0\t0\t0\t1001\n" : "Uid:\t1001\t1001\t1001\t1001\n")
                     != NULL,
                 "%s", out);
  ck_assert_msg (strstr (out, "false-exit=1\n") != NULL, "%s", out);
  lines = g_strsplit (out, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      gboolean signal_line = g_str_has_prefix (lines[i], "BREACH kill-0 ")
                             || g_str_has_prefix (lines[i], "BREACH kill-SIGSTOP ");

      refused += g_str_has_prefix (lines[i], "refused ") ? 1 : 0;
      ck_assert_msg (!g_str_has_prefix (lines[i], "BREACH") || (!own_uid && signal_line),
                     "%s in %s", lines[i], out);
    }
  /* Every attack answered: 13 refused, or 11 and the two signals in the weaker mode. */
  ck_assert_msg (refused == (own_uid ? 13 : 11), "%u refused: %s", refused, out);
}
END_TEST

static Suite *
bwrap_suite (void)
{
  Suite *s = suite_create ("bwrap-e2e");
  TCase *tc = tcase_create ("bwrap-e2e");

  tcase_add_checked_fixture (tc, setup, harness_end);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_lifecycle_and_confinement);
  tcase_add_test (tc, test_stdin_handle_pipeline);
  tcase_add_test (tc, test_limits_bite);
  tcase_add_test (tc, test_layout_and_allow_all);
  tcase_add_test (tc, test_dead_sandbox);
  tcase_add_test (tc, test_bad_input);
  tcase_add_test (tc, test_path_without_bwrap);
  tcase_add_test (tc, test_failed_create_leaves_nothing);
  tcase_add_test (tc, test_interrupted_create_leaves_nothing);
  tcase_add_test (tc, test_destroy_unconfirmed_keeps_state);
  tcase_add_test (tc, test_unconfirmed_cancel_retires);
  tcase_add_test (tc, test_ls_reports_unreadable_handles);
  tcase_add_test (tc, test_destroy_retries_through_deep_tree);
  tcase_add_test (tc, test_disk_bound);
  tcase_add_test (tc, test_workload_cannot_reach_agent);
  tcase_add_test (tc, test_quiet_streams_keep_their_heartbeat);
  tcase_add_loop_test (tc, test_unprivileged_workload_cannot_reach_agent, 0, 2);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  const char *dir = g_getenv ("NZ_TOOLS_DIR");
  g_autofree char *agent = g_build_filename (dir ? dir : ".", "namzu-agent", NULL);
  g_autofree char *exec = g_build_filename (dir ? dir : ".", "namzu-exec", NULL);

  nz_test_require (bwrap != NULL, "bubblewrap (bwrap) is not installed");
  nz_test_require (g_file_test (agent, G_FILE_TEST_IS_EXECUTABLE), "namzu-agent is not built");
  nz_test_require (g_file_test (exec, G_FILE_TEST_IS_EXECUTABLE), "namzu-exec is not built");
  nz_test_require (access ("/sys/fs/cgroup/pids", W_OK) == 0 || geteuid () == 0,
                   "no writable cgroups (run as root)");
  return nz_test_run (bwrap_suite ());
}
