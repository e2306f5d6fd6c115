/* bench-forward: throughput of namzu-port-forward against a direct loopback copy.
 *
 * The same python3 server (it sends N MiB from memory on every connection, then closes) runs
 * twice: inside a container:bwrap sandbox, reached through namzu-port-forward, and on the
 * host, reached directly. This process reads each to EOF, alternately, and prints the median
 * MiB/s of both and their ratio. */
#include <arpa/inet.h>
#include <errno.h>
#include <gio/gio.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-run.h"

static int opt_iterations = 9;
static int opt_mib = 64;
static char *opt_tools_dir;

static const GOptionEntry entries[]
    = { { "iterations", 'n', 0, G_OPTION_ARG_INT, &opt_iterations, "Transfers per side (default 9)",
          "N" },
        { "mib", 0, 0, G_OPTION_ARG_INT, &opt_mib, "MiB per transfer (default 64)", "N" },
        { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
          "Directory with the built namzu-* tools (default: ../tools beside this program)", "DIR" },
        { NULL } };

/* A client that goes away early (the readiness probe does) costs the server nothing. */
static const char server[] = "import socket, sys\n"
                             "port, mib = int(sys.argv[1]), int(sys.argv[2])\n"
                             "chunk = b'x' * (1 << 20)\n"
                             "s = socket.socket()\n"
                             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                             "s.bind(('127.0.0.1', port)); s.listen()\n"
                             "print('listening', flush=True)\n"
                             "while True:\n"
                             "    c, _ = s.accept()\n"
                             "    try:\n"
                             "        for _ in range(mib): c.sendall(chunk)\n"
                             "    except OSError: pass\n"
                             "    c.close()\n";

static char *
tool (const char *name)
{
  return g_build_filename (opt_tools_dir, name, NULL);
}

/* Bytes read from 127.0.0.1:@port until EOF; the time in *@us. */
static gint64
drain (guint port, gint64 *us)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((guint16)port) };
  static char buf[1 << 18];
  gint64 total = 0, t0 = g_get_monotonic_time ();
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  ssize_t n;

  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (fd < 0 || connect (fd, (struct sockaddr *)&sa, sizeof sa) < 0)
    return fprintf (stderr, "bench-forward: 127.0.0.1:%u: %s\n", port, g_strerror (errno)), -1;
  while ((n = read (fd, buf, sizeof buf)) > 0)
    total += n;
  close (fd);
  *us = g_get_monotonic_time () - t0;
  return total;
}

/* Spawns @argv with stdout piped and returns the first line it prints (or NULL). */
static char *
spawn_line (const char *const *argv, GPid *pid)
{
  g_autoptr (GError) error = NULL;
  char buf[512] = { 0 };
  struct pollfd pfd;
  int out;

  if (!g_spawn_async_with_pipes (NULL, (char **)argv, NULL,
                                 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL,
                                 pid, NULL, &out, NULL, &error))
    return fprintf (stderr, "bench-forward: %s\n", error->message), NULL;
  pfd = (struct pollfd){ .fd = out, .events = POLLIN };
  if (poll (&pfd, 1, 20000) != 1 || read (out, buf, sizeof buf - 1) <= 0)
    return close (out), NULL;
  close (out);
  return g_strdup (buf);
}

static void
stop (GPid pid)
{
  if (pid <= 0)
    return;
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- namzu-port-forward throughput");
  g_autoptr (GError) error = NULL;
  g_autofree char *create = NULL, *exec = NULL, *attach = NULL, *forward = NULL;
  g_autofree char *out = NULL, *id = NULL, *line = NULL, *mib = NULL, *fwd_port = NULL;
  g_autoptr (GArray) via = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GArray) direct = g_array_new (FALSE, FALSE, sizeof (gint64));
  GPid host_server = 0, fwd = 0;
  guint port = 0;
  int status = 0;
  char *p;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    return fprintf (stderr, "bench-forward: %s\n", error->message), 2;
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bindir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (bindir, "..", "tools", NULL);
    }
  create = tool ("namzu-create"), exec = tool ("namzu-exec"), attach = tool ("namzu-attach");
  forward = tool ("namzu-port-forward");
  mib = g_strdup_printf ("%d", MAX (opt_mib, 1));
  {
    const char *cargv[] = { create, NULL };

    if (!g_spawn_sync (NULL, (char **)cargv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                       NULL, NULL, NULL)
        || (p = strstr (out, "\"id\":\"")) == NULL)
      return fprintf (stderr, "bench-forward: namzu-create failed\n"), 1;
    id = g_strndup (p + 6, strcspn (p + 6, "\""));
  }
  {
    const char *sargv[]
        = { attach, "--sandbox", id,  "--start-detached", "bench", "--", "python3", "-c", server,
            "8400", mib,         NULL };
    const char *wargv[] = { exec,
                            "--sandbox",
                            id,
                            "--",
                            "python3",
                            "-c",
                            "import socket, time\n"
                            "for i in range(100):\n"
                            "    try: socket.create_connection(('127.0.0.1', 8400)); break\n"
                            "    except OSError: time.sleep(0.1)\n",
                            NULL };

    g_spawn_sync (NULL, (char **)sargv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                  NULL, NULL);
    g_spawn_sync (NULL, (char **)wargv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
  }
  {
    const char *fargv[] = { forward, "--sandbox", id, "0:8400", NULL };
    /* The python the sandbox runs: its root is the host's /usr. */
    const char *hargv[] = { "/usr/bin/python3", "-c", server, "8401", mib, NULL };

    line = spawn_line (fargv, &fwd);
    if (line == NULL || (p = strstr (line, "\"port\":")) == NULL)
      status = 1, fprintf (stderr, "bench-forward: namzu-port-forward did not start\n");
    else
      port = (guint)atoi (p + 7);
    g_free (line);
    line = status == 0 ? spawn_line (hargv, &host_server) : NULL;
    if (status == 0 && line == NULL)
      status = 1, fprintf (stderr, "bench-forward: the host-side server did not start\n");
  }
  /* Every way out from here stops the servers and destroys the sandbox. */
  for (int i = 0; status == 0 && i <= opt_iterations; i++)
    {
      gint64 us_via = 0, us_direct = 0;
      gint64 want = (gint64)MAX (opt_mib, 1) << 20;

      gint64 got_via = drain (port, &us_via), got_direct = drain (8401, &us_direct);

      if (got_via != want || got_direct != want)
        {
          fprintf (stderr,
                   "bench-forward: a transfer came back short: %" G_GINT64_FORMAT
                   " bytes through the forward, %" G_GINT64_FORMAT " direct, of %" G_GINT64_FORMAT
                   "\n",
                   got_via, got_direct, want);
          status = 1;
          break;
        }
      if (i == 0)
        continue; /* warm-up */
      g_array_append_val (via, us_via);
      g_array_append_val (direct, us_direct);
    }
  if (status == 0)
    {
      double ms_via = bench_median_ms (via), ms_direct = bench_median_ms (direct);
      double mibs_via = MAX (opt_mib, 1) / (ms_via / 1000.0);
      double mibs_direct = MAX (opt_mib, 1) / (ms_direct / 1000.0);

      printf ("measured: %d MiB per transfer from a python3 server, %d transfers per side, "
              "alternating (median, after one warm-up)\n",
              MAX (opt_mib, 1), opt_iterations);
      printf ("through namzu-port-forward (sandbox %s):  %8.1f MiB/s\n", id, mibs_via);
      printf ("direct loopback on the host:                    %8.1f MiB/s\n", mibs_direct);
      printf ("ratio port-forward / direct:                    %8.2f\n", mibs_via / mibs_direct);
    }
  stop (fwd);
  stop (host_server);
  {
    g_autofree char *destroy = tool ("namzu-destroy");
    const char *dargv[] = { destroy, "--sandbox", id, NULL };

    g_spawn_sync (NULL, (char **)dargv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, NULL,
                  NULL, NULL);
  }
  return status;
}
