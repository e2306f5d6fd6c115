/* bench-docker: container:docker against the docker CLI itself, in one run (bench/README.md):
 *   - `namzu-exec -- true` on a warm docker sandbox vs `docker exec <ctr> true` (target <= 0.1x);
 *   - namzu-create to ready vs a bare `docker run -d` of the same image plus waiting until its
 *     published port answers.
 * Prints numbers and ratios; never a pass/fail. Everything it starts is labelled
 * ai.namzu.bench=bench-docker and removed at the end. */
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench-run.h"
#include "nz-json.h"

static int opt_iterations = 30;
static int opt_creates = 5;
static char *opt_tools_dir;
static char *opt_image = (char *)"namzu-worker:latest";

static const GOptionEntry entries[] = {
  { "iterations", 'n', 0, G_OPTION_ARG_INT, &opt_iterations, "Commands per side (default 30)",
    "N" },
  { "creates", 'c', 0, G_OPTION_ARG_INT, &opt_creates, "Creates per side (default 5)", "N" },
  { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
    "Directory with the built namzu-* tools (default: ../tools beside this program)", "DIR" },
  { "image", 0, 0, G_OPTION_ARG_STRING, &opt_image, "Worker image (default namzu-worker:latest)",
    "IMAGE" },
  { NULL }
};

static char *
tool (const char *name)
{
  return g_build_filename (opt_tools_dir, name, NULL);
}

/* Runs @argv; returns wall µs (or -1 on failure); stdout in @out when non-NULL (then through
 * g_spawn_sync, which forks: only the create timings capture, and both of their sides do). */
static gint64
time_run (const char *const *argv, char **envp, char **out)
{
  gint64 t0 = g_get_monotonic_time ();
  int status = 0;

  if (out == NULL)
    return bench_run_us (argv, envp);
  if (!g_spawn_sync (NULL, (char **)argv, envp,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, out, NULL, &status, NULL)
      || !g_spawn_check_wait_status (status, NULL))
    return -1;
  return g_get_monotonic_time () - t0;
}

/* Until GET / on 127.0.0.1:@port gets any answer: the worker listens (docker's port proxy
 * accepts before it does, so a bare connect proves nothing). */
static gboolean
wait_port_answers (guint port, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  while (g_get_monotonic_time () < deadline)
    {
      g_autoptr (GSocketClient) c = g_socket_client_new ();
      g_autoptr (GSocketConnection) conn = g_socket_client_connect_to_host (c, "127.0.0.1", port,
                                                                            NULL, NULL);
      char buf[16];

      if (conn != NULL
          && g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)),
                                        "GET / HTTP/1.0\r\n\r\n", 18, NULL, NULL, NULL)
          && g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), buf,
                                  sizeof buf, NULL, NULL) > 0)
        return TRUE;
      g_usleep (5 * 1000);
    }
  return FALSE;
}

static void
docker_rm (const char *name)
{
  const char *const argv[] = { "docker", "rm", "-f", name, NULL };

  time_run (argv, NULL, NULL);
}

/* One bare `docker run -d` + wait; returns µs or -1. */
static gint64
bare_run_once (int i)
{
  g_autofree char *name = g_strdup_printf ("namzu-bench-bare-%d-%d", (int)getpid (), i);
  g_auto (GStrv) envp = g_environ_setenv (g_get_environ (), "NAMZU_SANDBOX_TOKEN",
                                          "bench-token-bench-token-bench-token-bench", TRUE);
  const char *const run[] = { "docker", "run", "-d", "--rm", "--name", name, "--label",
                              "ai.namzu.bench=bench-docker", "--network", "bridge", "--publish",
                              "127.0.0.1::2024", "--env", "NAMZU_SANDBOX_TOKEN", opt_image, NULL };
  const char *const port_argv[] = { "docker", "inspect", "--format",
                                    "{{(index (index .NetworkSettings.Ports \"2024/tcp\") 0).HostPort}}",
                                    name, NULL };
  g_autofree char *port = NULL;
  gint64 t0 = g_get_monotonic_time (), t = -1;

  if (time_run (run, envp, NULL) >= 0 && time_run (port_argv, NULL, &port) >= 0
      && wait_port_answers ((guint)atoi (port), 30000))
    t = g_get_monotonic_time () - t0;
  docker_rm (name);
  return t;
}

/* One namzu-create to ready (+ destroy, untimed); returns µs or -1; keeps the id in @keep. */
static gint64
create_once (const char *outputs, char **keep)
{
  g_autofree char *create = tool ("namzu-create");
  g_autofree char *destroy = tool ("namzu-destroy");
  const char *const argv[] = { create, "--backend", "container:docker", "--image", opt_image,
                               "--network", "allow-all", "--docker-network", "bridge",
                               "--outputs", outputs, "--label", "ai.namzu.bench=bench-docker",
                               NULL };
  g_autofree char *out = NULL;
  g_autoptr (JsonObject) pub = NULL;
  gint64 t = time_run (argv, NULL, &out);
  const char *id;

  if (t < 0 || (pub = nz_json_parse_object (out, -1, NULL)) == NULL
      || (id = nz_json_get_string (pub, "id")) == NULL)
    return -1;
  if (keep != NULL && *keep == NULL)
    *keep = g_strdup (id);
  else
    {
      const char *const d[] = { destroy, "--sandbox", id, NULL };

      time_run (d, NULL, NULL);
    }
  return t;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- container:docker vs docker CLI");
  g_autoptr (GError) error = NULL;
  g_autofree char *work = g_dir_make_tmp ("nz-bench-docker-XXXXXX", NULL);
  g_autofree char *outputs = g_build_filename (work, "out", NULL);
  g_autofree char *state = g_build_filename (work, "state", NULL);
  g_autoptr (GArray) creates = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GArray) bares = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autofree char *warm = NULL;
  g_autofree char *exec = NULL;
  g_autofree char *destroy = NULL;
  g_autofree char *name = NULL;
  double ns, ds, cm, bm;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "bench-docker: %s\n", error->message);
      return 2;
    }
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *dir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (dir, "..", "tools", NULL);
    }
  g_mkdir (outputs, 0777);
  chmod (work, 0755);
  chmod (outputs, 0777);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  exec = tool ("namzu-exec");
  destroy = tool ("namzu-destroy");

  printf ("image: %s\n", opt_image);
  /* create-to-ready: namzu-create (run + inspect + healthz with protocol admission) vs a bare
   * run + the first answer on its port. */
  for (int i = 0; i < opt_creates; i++)
    {
      gint64 c = create_once (outputs, i == 0 ? &warm : NULL);
      gint64 b = bare_run_once (i);

      if (c >= 0)
        g_array_append_val (creates, c);
      if (b >= 0)
        g_array_append_val (bares, b);
    }
  cm = bench_median_ms (creates);
  bm = bench_median_ms (bares);
  printf ("create to ready, median of %d:\n", opt_creates);
  printf ("  namzu-create --backend container:docker: %8.1f ms\n", cm);
  printf ("  docker run -d + port answers:            %8.1f ms\n", bm);
  if (cm > 0 && bm > 0)
    printf ("  ratio namzu-create / bare docker run:    %8.2f\n", cm / bm);
  if (warm == NULL)
    {
      printf ("exec: no sandbox could be created; skipped\n");
      return 0;
    }
  name = g_strconcat ("namzu-sandbox-", warm, NULL);
  {
    const char *const n_argv[] = { exec, "--sandbox", warm, "--", "true", NULL };
    const char *const d_argv[] = { "docker", "exec", name, "true", NULL };

    bench_interleaved (n_argv, d_argv, opt_iterations, &ns, &ds);
  }
  printf ("exec on a warm sandbox, median of %d alternating runs after one warm-up:\n",
          opt_iterations);
  if (ns < 0)
    printf ("  namzu-exec -- true:                      failed\n");
  else
    printf ("  namzu-exec -- true:                      %8.2f ms\n", ns);
  printf ("  docker exec <ctr> true:                  %8.2f ms\n", ds);
  if (ns > 0 && ds > 0)
    printf ("  ratio namzu-exec / docker exec:          %8.3f (target <= 0.1: %s)\n", ns / ds,
            ns / ds <= 0.1 ? "met" : "over");
  {
    const char *const d[] = { destroy, "--sandbox", warm, NULL };
    g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", work);

    time_run (d, NULL, NULL);
    if (system (rm) != 0)
      return 1;
  }
  return 0;
}
