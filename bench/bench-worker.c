/* bench-worker: namzu-worker's idle memory. Starts the built worker on loopback with a
 * token, serves one GET /healthz (and then one execute of `true`), and prints VmRSS, PSS and
 * anonymous PSS from /proc. Target: idle VmRSS <= 6 MiB (the reference's Node worker is tens
 * of MiB). Not a test: it prints, it does not pass or fail. */
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

static void
report (GPid pid, const char *when)
{
  long rss = proc_kib (pid, "status", "VmRSS:");

  printf ("namzu-worker VmRSS %-22s %6ld KiB (target <= 6144 KiB: %s)\n", when, rss,
          rss >= 0 && rss <= 6144 ? "met" : "over");
  printf ("namzu-worker PSS   %-22s %6ld KiB (anonymous %ld KiB)\n", when,
          proc_kib (pid, "smaps_rollup", "Pss:"), proc_kib (pid, "smaps_rollup", "Pss_Anon:"));
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- measure namzu-worker idle memory");
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) worker = NULL;
  g_autoptr (GDataInputStream) out = NULL;
  g_autofree char *tool = NULL, *ws = NULL, *line = NULL;
  const char *colon;
  guint16 port;
  GPid pid;

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
  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_PORT", "0", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_BIND", "127.0.0.1", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_TOKEN", "bench-token", TRUE);
  g_subprocess_launcher_setenv (launcher, "NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
  worker = g_subprocess_launcher_spawn (launcher, &error, tool, NULL);
  if (worker == NULL)
    return fprintf (stderr, "bench-worker: %s\n", error->message), 1;
  out = g_data_input_stream_new (g_subprocess_get_stdout_pipe (worker));
  line = g_data_input_stream_read_line (out, NULL, NULL, NULL);
  if (line == NULL || (colon = strstr (line, "127.0.0.1:")) == NULL)
    return fprintf (stderr, "bench-worker: no listening line\n"), 1;
  port = (guint16)atoi (colon + strlen ("127.0.0.1:"));
  pid = atoi (g_subprocess_get_identifier (worker));

  printf ("measured: %s\n", tool);
  {
    /* Which libsoup the worker carries (static or shared): the largest lever on its memory. */
    const char *vargv[] = { tool, "--version", NULL };
    g_autofree char *version = NULL;

    if (g_spawn_sync (NULL, (char **)vargv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &version,
                      NULL, NULL, NULL)
        && strchr (version, '\n') != NULL)
      printf ("linked: %s", strchr (version, '\n') + 1);
  }
  report (pid, "at start:");
  request (port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  g_usleep (100 * 1000);
  report (pid, "after healthz:");
  request (port, "POST /execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Authorization: Bearer bench-token\r\nContent-Length: 18\r\n\r\n"
                 "{\"command\":\"true\"}");
  g_usleep (100 * 1000);
  report (pid, "after one execute:");
  g_subprocess_send_signal (worker, SIGTERM);
  g_subprocess_wait (worker, NULL, NULL);
  g_rmdir (ws);
  return 0;
}
