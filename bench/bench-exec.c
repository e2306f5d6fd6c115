/* bench-exec: the round trip of `namzu-exec -- true` on a warm sandbox against a fresh
 * `bwrap --unshare-all ... true` per command, and the idle RSS of namzu-agent after healthz.
 * Prints numbers and ratios; never a pass/fail (see bench/README.md).
 *
 * The sandbox comes from namzu-create (the bwrap backend) when it is built and works;
 * otherwise namzu-agent is started directly inside `bwrap --unshare-all`, and the output says
 * which one was measured. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "bench-run.h"
#include "nz-agent-client.h"
#include "nz-json.h"
#include "nz-state.h"

static int opt_iterations = 50;
static char *opt_tools_dir;
static char *opt_bwrap = (char *)"/usr/bin/bwrap";

static const GOptionEntry entries[] = {
  { "iterations", 'n', 0, G_OPTION_ARG_INT, &opt_iterations, "Commands per side (default 50)",
    "N" },
  { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
    "Directory with the built namzu-* tools (default: ../tools beside this program)", "DIR" },
  { "bwrap", 0, 0, G_OPTION_ARG_FILENAME, &opt_bwrap, "bubblewrap binary", "PATH" },
  { NULL }
};

static char *
tool (const char *name)
{
  return g_build_filename (opt_tools_dir, name, NULL);
}

static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

/* Median of @n in-process reserve + execute round trips of `true` through lib/client, after
 * one warm-up: the agent's share of a namzu-exec, without starting a process for the client. */
static double
inprocess_ms (NzAgentClient *client, int n)
{
  g_autoptr (GArray) t = g_array_new (FALSE, FALSE, sizeof (gint64));

  for (int i = -1; i < n; i++)
    {
      g_autoptr (JsonObject) body = json_object_new ();
      g_autoptr (JsonObject) result = NULL;
      gint64 t0 = g_get_monotonic_time (), dt;

      json_object_set_string_member (body, "command", "true");
      json_object_set_array_member (body, "args", json_array_new ());
      result = nz_agent_client_exec (client, body, NULL, NULL, NULL, NULL, NULL);
      if (result == NULL)
        return -1;
      dt = g_get_monotonic_time () - t0;
      if (i >= 0)
        g_array_append_val (t, dt);
    }
  return bench_median_ms (t);
}

/* VmRSS of @pid in KiB, or -1. */
static long
vmrss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strstr (text, "VmRSS:")) == NULL)
    return -1;
  return strtol (p + strlen ("VmRSS:"), NULL, 10);
}

/* Every pid whose comm is namzu-agent. */
static GHashTable *
agent_pids (void)
{
  GHashTable *set = g_hash_table_new (NULL, NULL);
  g_autoptr (GDir) d = g_dir_open ("/proc", 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%s/comm", name);
      g_autofree char *comm = NULL;

      if (g_ascii_isdigit (name[0]) && g_file_get_contents (path, &comm, NULL, NULL)
          && g_str_equal (g_strstrip (comm), "namzu-agent"))
        g_hash_table_add (set, GINT_TO_POINTER (atoi (name)));
    }
  return set;
}

static GPid
new_agent_pid (GHashTable *before)
{
  g_autoptr (GHashTable) after = agent_pids ();
  GHashTableIter it;
  gpointer k;

  g_hash_table_iter_init (&it, after);
  while (g_hash_table_iter_next (&it, &k, NULL))
    if (!g_hash_table_contains (before, k))
      return GPOINTER_TO_INT (k);
  return 0;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- time namzu-exec against bwrap");
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) before = agent_pids ();
  g_autoptr (GSubprocess) agent = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) health = NULL;
  g_autoptr (NzHandle) handle = NULL;
  g_autofree char *dir = NULL, *exec = NULL, *endpoint = NULL, *sandbox = NULL, *how = NULL;
  const char *baseline[] = { opt_bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/",
                             "/", "--dev", "/dev", "--proc", "/proc", "true", NULL };
  double warm, fresh, start_ms, inproc_ms = -1, create_ms = -1, run_ms = -1, run_warm = -1;
  long rss;
  GPid pid;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return fprintf (stderr, "bench-exec: %s\n", error->message), 2;
  if (opt_iterations < 1)
    opt_iterations = 1;
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bindir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (bindir, "..", "tools", NULL);
    }
  baseline[0] = opt_bwrap;
  exec = tool ("namzu-exec");
  dir = g_dir_make_tmp ("nz-bench-XXXXXX", NULL);

  /* Prefer the real backend; fall back to the agent inside bwrap, and say so. */
  {
    g_autofree char *create = tool ("namzu-create");
    g_autofree char *out = NULL;
    const char *cargv[] = { create, NULL };
    int status = 0;

    gint64 t0 = g_get_monotonic_time ();

    /* namzu-create returns once healthz answered, so its wall time is create-to-ready. */
    if (g_file_test (create, G_FILE_TEST_IS_EXECUTABLE)
        && g_spawn_sync (NULL, (char **)cargv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                         &out, NULL, &status, NULL)
        && g_spawn_check_wait_status (status, NULL))
      {
        create_ms = (double)(g_get_monotonic_time () - t0) / 1000.0;
        g_autoptr (JsonObject) h = nz_json_parse_object (out, -1, NULL);

        if (h != NULL && nz_json_get_string (h, "id") != NULL)
          {
            sandbox = g_strdup (nz_json_get_string (h, "id"));
            how = g_strdup_printf ("sandbox %s from namzu-create", sandbox);
          }
      }
  }
  if (sandbox == NULL)
    {
      g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
      g_autofree char *sock = g_build_filename (dir, "agent.sock", NULL);
      g_autofree char *ws = g_build_filename (dir, "ws", NULL);
      g_autofree char *agent_bin = tool ("namzu-agent");
      g_autoptr (GDataInputStream) in = NULL;
      g_autofree char *line = NULL;

      g_mkdir (ws, 0700);
      g_subprocess_launcher_set_child_setup (l, die_with_parent, NULL, NULL);
      agent = g_subprocess_launcher_spawn (
          l, &error, opt_bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
          "--dev", "/dev", "--proc", "/proc", "--bind", dir, dir, "--setenv",
          "NAMZU_AGENT_UNIX_PATH", sock, "--setenv", "NAMZU_SANDBOX_WORKSPACE", ws, agent_bin,
          NULL);
      if (agent == NULL)
        return fprintf (stderr, "bench-exec: %s\n", error->message), 1;
      in = g_data_input_stream_new (g_subprocess_get_stdout_pipe (agent));
      line = g_data_input_stream_read_line_utf8 (in, NULL, NULL, NULL);
      if (line == NULL)
        return fprintf (stderr, "bench-exec: namzu-agent inside bwrap printed no ready line\n"), 1;
      endpoint = g_strdup_printf ("unix:%s", sock);
      how = g_strdup ("namzu-agent started directly inside bwrap --unshare-all (namzu-create "
                      "not available)");
    }

  /* Idle RSS: the agent has served exactly one healthz and nothing else. */
  pid = new_agent_pid (before);
  if (sandbox != NULL && (handle = nz_handle_load (sandbox, &error)) == NULL)
    return fprintf (stderr, "bench-exec: %s\n", error->message), 1;
  if (handle != NULL || endpoint != NULL)
    {
      client = handle != NULL ? nz_agent_client_new (handle->endpoint, handle->token)
                              : nz_agent_client_new (endpoint, NULL);
      health = nz_agent_client_healthz (client, NULL, &error);
      if (health == NULL)
        return fprintf (stderr, "bench-exec: healthz: %s\n", error->message), 1;
    }
  rss = pid > 0 ? vmrss_kib (pid) : -1;

  {
    const char *sandbox_argv[] = { exec, "--sandbox", sandbox, "--", "true", NULL };
    const char *endpoint_argv[] = { exec, "--endpoint", endpoint, "--", "true", NULL };

    /* The GLib program namzu-exec hands other options to: only that path pays its start. */
    g_autofree char *full = tool ("namzu-exec-full");
    const char *version_argv[] = { full, "--version", NULL };

    bench_interleaved (sandbox != NULL ? sandbox_argv : endpoint_argv, baseline, opt_iterations,
                       &warm, &fresh);
    start_ms = bench_run_median_ms (version_argv, opt_iterations);
    if (client != NULL)
      inproc_ms = inprocess_ms (client, opt_iterations);
    /* namzu-run pays a create and a destroy per command: fewer samples, against the warm
     * namzu-exec again, interleaved so both see the same load. */
    if (sandbox != NULL)
      {
        g_autofree char *run = tool ("namzu-run");
        const char *run_argv[] = { run, "--", "true", NULL };

        bench_interleaved (run_argv, sandbox_argv, MAX (opt_iterations / 5, 5), &run_ms,
                           &run_warm);
      }
  }

  printf ("measured: %s\n", how);
  printf ("iterations: %d per side, alternating (median, after one warm-up)\n", opt_iterations);
  printf ("namzu-exec -- true, warm sandbox:        %8.2f ms\n", warm);
  printf ("bwrap --unshare-all ... true, fresh:      %8.2f ms\n", fresh);
  if (warm > 0 && fresh > 0)
    {
      printf ("ratio fresh bwrap / warm namzu-exec:      %8.2f\n", fresh / warm);
      printf ("ratio warm namzu-exec / fresh bwrap:      %8.2f (target <= 0.50: %s)\n",
              warm / fresh, warm / fresh <= 0.5 ? "met" : "over");
    }
  /* Where a namzu-exec goes: the agent's work, and the rest (the libc-only front's start, the
   * handle lookup, two connections from a fresh process). */
  if (warm > 0 && inproc_ms > 0)
    {
      printf ("breakdown of the warm namzu-exec:\n");
      printf ("  reserve + execute of true, in-process:  %8.2f ms\n", inproc_ms);
      printf ("  the rest (start, handle, connections):  %8.2f ms\n", warm - inproc_ms);
    }
  if (start_ms > 0)
    printf ("namzu-exec-full --version (GLib start, paid only when the front hands over): "
            "%.2f ms\n", start_ms);
  if (create_ms >= 0)
    printf ("namzu-create to ready (container:bwrap):  %8.2f ms\n", create_ms);
  if (run_ms > 0 && run_warm > 0)
    {
      printf ("namzu-run -- true (create, run, destroy): %8.2f ms\n", run_ms);
      printf ("  against a warm namzu-exec -- true:      %8.2f ms (overhead %.2f ms, ratio %.2f)\n",
              run_warm, run_ms - run_warm, run_ms / run_warm);
    }
  if (rss >= 0)
    printf ("namzu-agent idle VmRSS after healthz:     %8ld KiB (target <= 6144 KiB: %s)\n", rss,
            rss <= 6144 ? "met" : "over");
  else
    printf ("namzu-agent idle VmRSS after healthz:     unknown (agent pid not found)\n");
  fflush (stdout);

  if (sandbox != NULL)
    {
      g_autofree char *destroy = tool ("namzu-destroy");
      const char *dargv[] = { destroy, "--sandbox", sandbox, NULL };

      g_spawn_sync (NULL, (char **)dargv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                    NULL, NULL, NULL);
    }
  if (agent != NULL)
    {
      g_subprocess_send_signal (agent, SIGTERM);
      g_subprocess_wait (agent, NULL, NULL);
    }
  {
    const char *rm[] = { "/bin/rm", "-rf", dir, NULL };

    g_spawn_sync (NULL, (char **)rm, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
  }
  return 0;
}
