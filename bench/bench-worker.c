/* bench-worker: namzu-worker's idle memory and what density costs. Starts the built worker on
 * loopback with a token, serves one GET /healthz (and then one execute of `true`), and prints
 * VmRSS, PSS and anonymous PSS from /proc; then starts ten workers from the same binary at once,
 * serves each a /healthz and prints their proportional set size per worker (shared pages
 * divided among them). Targets: idle VmRSS <= 8 MiB, PSS per worker with ten <= 4 MiB (the
 * reference's Node worker is tens of MiB). Not a test: it prints, it does not pass or fail. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

static char *opt_tools_dir;

static const GOptionEntry entries[] = {
  { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
    "Directory with the built tools (default: ../tools next to this binary)", "DIR" },
  { NULL }
};

/* @key ("VmRSS:", "Pss:", "Pss_Anon:") from @file of @pid, in KiB, or -1. */
static long
proc_kib (GPid pid, const char *file, const char *key)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/%s", (int)pid, file);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strstr (text, key)) == NULL)
    return -1;
  return strtol (p + strlen (key), NULL, 10);
}

/* One request on a fresh connection; the reply is read to EOF and dropped. */
static gboolean
request (guint16 port, const char *req)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GError) error = NULL;
  char buf[4096];

  conn = g_socket_client_connect_to_host (client, "127.0.0.1", port, NULL, &error);
  if (conn == NULL
      || !g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)), req,
                                     strlen (req), NULL, NULL, &error))
    return FALSE;
  while (g_input_stream_read (g_io_stream_get_input_stream (G_IO_STREAM (conn)), buf, sizeof buf,
                              NULL, NULL)
         > 0)
    ;
  return TRUE;
}

#define IDLE_RSS_TARGET_KIB 8192
#define DENSE_PSS_TARGET_KIB 4096
#define DENSE_WORKERS 10

static void
report (GPid pid, const char *when)
{
  long rss = proc_kib (pid, "status", "VmRSS:");

  printf ("namzu-worker VmRSS %-22s %6ld KiB (target <= %d KiB: %s)\n", when, rss,
          IDLE_RSS_TARGET_KIB, rss >= 0 && rss <= IDLE_RSS_TARGET_KIB ? "met" : "over");
  printf ("namzu-worker PSS   %-22s %6ld KiB (anonymous %ld KiB)\n", when,
          proc_kib (pid, "smaps_rollup", "Pss:"), proc_kib (pid, "smaps_rollup", "Pss_Anon:"));
}

typedef struct
{
  GSubprocess *proc;
  GPid pid;
  guint16 port;
} Worker;

/* Starts @tool on an ephemeral loopback port with workspace @ws; FALSE with a message. */
static gboolean
worker_start (const char *tool, const char *ws, Worker *w)
{
  g_autoptr (GSubprocessLauncher) launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_autoptr (GDataInputStream) out = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *line = NULL;
  const char *colon;

  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_PORT", "0", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_BIND", "127.0.0.1", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_TOKEN", "bench-token", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
  w->proc = g_subprocess_launcher_spawn (launcher, &error, tool, NULL);
  if (w->proc == NULL)
    return fprintf (stderr, "bench-worker: %s\n", error->message), FALSE;
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (w->proc));
  line = g_data_input_stream_read_line (out, NULL, NULL, NULL);
  if (line == NULL || (colon = strstr (line, "127.0.0.1:")) == NULL)
    return fprintf (stderr, "bench-worker: no listening line\n"), FALSE;
  w->port = (guint16)atoi (colon + strlen ("127.0.0.1:"));
  w->pid = atoi (g_subprocess_get_identifier (w->proc));
  return TRUE;
}

static void
worker_stop (Worker *w)
{
  if (w->proc == NULL)
    return;
  g_subprocess_send_signal (w->proc, SIGTERM);
  g_subprocess_wait (w->proc, NULL, NULL);
  g_clear_object (&w->proc);
}

static const char healthz[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* Ten workers of the same binary at once, each past one /healthz: the sum of their PSS (a page
 * shared by k processes counts 1/k in each) over ten is what one more sandbox's worker costs. */
static int
dense (const char *tool, const char *ws)
{
  Worker w[DENSE_WORKERS] = { 0 };
  long sum = 0, anon = 0, rss = 0;
  int i, rc = 0;

  for (i = 0; i < DENSE_WORKERS && rc == 0; i++)
    if (!worker_start (tool, ws, &w[i]) || !request (w[i].port, healthz))
      rc = 1;
  g_usleep (100 * 1000);
  for (i = 0; i < DENSE_WORKERS && rc == 0; i++)
    {
      long pss = proc_kib (w[i].pid, "smaps_rollup", "Pss:");

      if (pss < 0)
        rc = 1;
      sum += pss;
      anon += proc_kib (w[i].pid, "smaps_rollup", "Pss_Anon:");
      rss += proc_kib (w[i].pid, "status", "VmRSS:");
    }
  for (i = 0; i < DENSE_WORKERS; i++)
    worker_stop (&w[i]);
  if (rc != 0)
    return fprintf (stderr, "bench-worker: could not measure %d workers\n", DENSE_WORKERS), rc;
  printf ("namzu-worker PSS per worker, %d at once: %6ld KiB (target <= %d KiB: %s; "
          "anonymous %ld KiB, VmRSS %ld KiB)\n",
          DENSE_WORKERS, sum / DENSE_WORKERS, DENSE_PSS_TARGET_KIB,
          sum / DENSE_WORKERS <= DENSE_PSS_TARGET_KIB ? "met" : "over", anon / DENSE_WORKERS,
          rss / DENSE_WORKERS);
  return 0;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- measure namzu-worker idle memory");
  g_autoptr (GError) error = NULL;
  g_autofree char *tool = NULL, *ws = NULL;
  Worker w = { 0 };
  int rc;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return fprintf (stderr, "bench-worker: %s\n", error->message), 2;
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bindir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (bindir, "..", "tools", NULL);
    }
  tool = g_build_filename (opt_tools_dir, "namzu-worker", NULL);
  ws = g_dir_make_tmp ("nz-bench-worker-XXXXXX", NULL);
  if (!worker_start (tool, ws, &w))
    return 1;

  printf ("measured: %s\n", tool);
  {
    /* Which libsoup serves the API. */
    const char *vargv[] = { tool, "--version", NULL };
    g_autofree char *version = NULL;

    if (g_spawn_sync (NULL, (char **)vargv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &version,
                      NULL, NULL, NULL)
        && strchr (version, '\n') != NULL)
      printf ("linked: %s", strchr (version, '\n') + 1);
  }
  report (w.pid, "at start:");
  request (w.port, healthz);
  g_usleep (100 * 1000);
  report (w.pid, "after healthz:");
  request (w.port, "POST /execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                   "Authorization: Bearer bench-token\r\nContent-Length: 18\r\n\r\n"
                   "{\"command\":\"true\"}");
  g_usleep (100 * 1000);
  report (w.pid, "after one execute:");
  worker_stop (&w);
  rc = dense (tool, ws);
  g_rmdir (ws);
  return rc;
}
