/* bench-egress: namzu-egress proxy against a direct connection and against Debian's tinyproxy,
 * all on loopback. Prints numbers and ratios; never a pass/fail (see bench/README.md).
 *
 *  1. CONNECT tunnel throughput: N MiB (default 1024) written through a tunnel to a sink that
 *     acknowledges the last byte; direct / namzu-egress / tinyproxy.
 *  2. Added latency per request: median of plain HTTP GETs (one connection each) through the
 *     proxy minus direct.
 *  3. Proxy RSS (VmRSS) holding 200 concurrent open tunnels.
 *
 * The proxy reaches 127.0.0.1 only because the bench names the sink "sink.bench", maps it with
 * the proxy's test-only resolver table and lists it in allowInwardFor. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#define CHUNK (256 * 1024)

static int opt_mib = 1024;
static int opt_rounds = 3;
static int opt_requests = 200;
static int opt_tunnels = 200;
static char *opt_tools_dir;
static char *opt_tinyproxy = (char *)"/usr/bin/tinyproxy";

static const GOptionEntry entries[] = {
  { "mib", 'm', 0, G_OPTION_ARG_INT, &opt_mib, "MiB per throughput run (default 1024)", "N" },
  { "rounds", 'r', 0, G_OPTION_ARG_INT, &opt_rounds,
    "throughput rounds, each direct then namzu then tinyproxy; medians printed (3)", "N" },
  { "requests", 'n', 0, G_OPTION_ARG_INT, &opt_requests, "requests per latency side (200)", "N" },
  { "tunnels", 't', 0, G_OPTION_ARG_INT, &opt_tunnels, "concurrent tunnels for RSS (200)", "N" },
  { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
    "directory with namzu-egress (default: ../tools beside this program)", "DIR" },
  { "tinyproxy", 0, 0, G_OPTION_ARG_FILENAME, &opt_tinyproxy, "tinyproxy binary", "PATH" },
  { NULL }
};

static int
listen_loopback (int *port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;

  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind (fd, (struct sockaddr *)&a, sizeof a) != 0 || listen (fd, 1024) != 0)
    g_error ("listen: %s", g_strerror (errno));
  getsockname (fd, (struct sockaddr *)&a, &len);
  *port = ntohs (a.sin_port);
  return fd;
}

static int
dial (int port)
{
  struct sockaddr_in a = { .sin_family = AF_INET,
                           .sin_addr.s_addr = htonl (INADDR_LOOPBACK),
                           .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;

  if (connect (fd, (struct sockaddr *)&a, sizeof a) != 0)
    {
      close (fd);
      return -1;
    }
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static gboolean
write_all (int fd, const char *buf, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, buf, len);

      if (n <= 0)
        return FALSE;
      buf += n, len -= n;
    }
  return TRUE;
}

/* ---- the sink: reads until it has the announced byte count, then acks one byte ---- */

static gpointer
sink_conn (gpointer data)
{
  int fd = GPOINTER_TO_INT (data);
  guint64 want = 0, got = 0;
  char *buf = g_malloc (CHUNK);
  ssize_t n;

  /* First 8 bytes: how many bytes follow (0 = just hold the connection open). */
  while (got < 8 && (n = read (fd, (char *)&want + got, 8 - got)) > 0)
    got += n;
  got = 0;
  while (want > 0 && got < want && (n = read (fd, buf, CHUNK)) > 0)
    got += n;
  if (want > 0)
    write_all (fd, "k", 1);
  else
    while (read (fd, buf, CHUNK) > 0)
      ;
  g_free (buf);
  close (fd);
  return NULL;
}

/* ---- the HTTP origin for the latency run ---- */

static gpointer
http_conn (gpointer data)
{
  static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
  int fd = GPOINTER_TO_INT (data);
  char buf[8192];
  size_t len = 0;
  ssize_t n;

  while (len < sizeof buf - 1 && (n = read (fd, buf + len, sizeof buf - 1 - len)) > 0)
    {
      len += n;
      buf[len] = '\0';
      if (strstr (buf, "\r\n\r\n") != NULL)
        break;
    }
  write_all (fd, reply, strlen (reply));
  close (fd);
  return NULL;
}

typedef struct
{
  int fd;
  GThreadFunc fn;
} Server;

static gpointer
serve (gpointer data)
{
  Server *s = data;

  for (;;)
    {
      int c = accept4 (s->fd, NULL, NULL, SOCK_CLOEXEC);

      if (c >= 0)
        g_thread_unref (g_thread_new ("conn", s->fn, GINT_TO_POINTER (c)));
    }
  return NULL;
}

static int
start_server (GThreadFunc fn)
{
  Server *s = g_new0 (Server, 1);
  int port;

  s->fd = listen_loopback (&port);
  s->fn = fn;
  g_thread_unref (g_thread_new ("server", serve, s));
  return port;
}

/* ---- proxies ---- */

static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static GPid
start_namzu (int sink_port, int http_port, int *port)
{
  g_autofree char *bin = g_build_filename (opt_tools_dir, "namzu-egress", NULL);
  char *argv[] = { bin,
                   "proxy",
                   "--listen=127.0.0.1",
                   "--port=0",
                   "--log=/dev/null",
                   "--max-connections=4096",
                   "--test-resolve=sink.bench=127.0.0.1",
                   NULL };
  g_auto (GStrv) envp
      = g_environ_setenv (g_get_environ (), "NAMZU_EGRESS_PROXY_CONFIG",
                          "{\"allowedHosts\":[\"sink.bench\"],\"allowInwardFor\":[\"sink.bench\"],"
                          "\"upgradeToHttps\":false}",
                          TRUE);
  g_autoptr (GError) error = NULL;
  char line[512] = "";
  GPid pid;
  int out;
  FILE *f;

  if (!g_spawn_async_with_pipes (NULL, argv, envp, G_SPAWN_DO_NOT_REAP_CHILD, die_with_parent, NULL,
                                 &pid, NULL, &out, NULL, &error))
    g_error ("namzu-egress: %s", error->message);
  f = fdopen (out, "r");
  if (fgets (line, sizeof line, f) == NULL || strstr (line, "127.0.0.1:") == NULL)
    g_error ("namzu-egress did not start: %s", line);
  *port = atoi (strstr (line, "127.0.0.1:") + strlen ("127.0.0.1:"));
  (void)sink_port, (void)http_port;
  return pid;
}

static GPid
start_tinyproxy (const char *dir, int *port)
{
  g_autofree char *conf = g_build_filename (dir, "tinyproxy.conf", NULL);
  g_autofree char *text = NULL;
  g_autofree char *bin = g_strdup (opt_tinyproxy);
  char *argv[] = { bin, "-d", "-c", conf, NULL };
  g_autoptr (GError) error = NULL;
  GPid pid;
  int probe = listen_loopback (port);

  close (probe); /* tinyproxy takes no port 0: pick a free one and hand it over */
  /* No ConnectPort line: every CONNECT port is allowed, like the namzu run. MaxClients covers
   * the RSS run. */
  text = g_strdup_printf ("Port %d\nListen 127.0.0.1\nTimeout 600\nMaxClients 1024\n"
                          "Allow 127.0.0.1\nLogLevel Critical\nDisableViaHeader Yes\n",
                          *port);
  g_file_set_contents (conf, text, -1, NULL);
  if (!g_spawn_async (NULL, argv, NULL,
                      G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL
                          | G_SPAWN_STDERR_TO_DEV_NULL,
                      die_with_parent, NULL, &pid, &error))
    g_error ("tinyproxy: %s", error->message);
  for (int i = 0; i < 200; i++)
    {
      int fd = dial (*port);

      if (fd >= 0)
        {
          close (fd);
          return pid;
        }
      g_usleep (10 * 1000);
    }
  g_error ("tinyproxy did not listen on %d", *port);
}

static void
stop (GPid pid)
{
  kill (pid, SIGTERM);
  waitpid (pid, NULL, 0);
}

/* Opens a tunnel to the sink through @proxy_port (0 = direct). Returns the fd or -1. */
static int
tunnel (int proxy_port, const char *sink_host, int sink_port)
{
  char buf[1024];
  size_t len = 0;
  int fd;

  if (proxy_port == 0)
    return dial (sink_port);
  fd = dial (proxy_port);
  if (fd < 0)
    return -1;
  g_snprintf (buf, sizeof buf, "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", sink_host,
              sink_port, sink_host, sink_port);
  write_all (fd, buf, strlen (buf));
  /* Read the status head byte by byte so no tunnel byte is swallowed. */
  while (len < sizeof buf - 1 && read (fd, buf + len, 1) == 1)
    {
      buf[++len] = '\0';
      if (len >= 4 && memcmp (buf + len - 4, "\r\n\r\n", 4) == 0)
        break;
    }
  if (strstr (buf, " 200") == NULL)
    {
      close (fd);
      return -1;
    }
  return fd;
}

static double
throughput (int proxy_port, const char *host, int sink_port)
{
  guint64 total = (guint64)opt_mib * 1024 * 1024;
  char *buf = g_malloc0 (CHUNK);
  int fd = tunnel (proxy_port, host, sink_port);
  gint64 t0;
  guint64 sent = 0;
  char ack;
  double secs;

  if (fd < 0)
    g_error ("tunnel to the sink failed");
  t0 = g_get_monotonic_time ();
  write_all (fd, (const char *)&total, 8);
  while (sent < total)
    {
      size_t n = MIN ((guint64)CHUNK, total - sent);

      if (!write_all (fd, buf, n))
        g_error ("write: %s", g_strerror (errno));
      sent += n;
    }
  if (read (fd, &ack, 1) != 1)
    g_error ("no ack from the sink");
  secs = (g_get_monotonic_time () - t0) / 1e6;
  close (fd);
  g_free (buf);
  return opt_mib / secs;
}

static int
cmp_double (gconstpointer a, gconstpointer b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

static double
median (GArray *a)
{
  g_array_sort (a, cmp_double);
  return a->len == 0 ? 0 : g_array_index (a, double, a->len / 2);
}

/* Median wall time (µs) of one GET with a fresh connection. */
static double
latency (int proxy_port, int http_port)
{
  g_autoptr (GArray) t = g_array_new (FALSE, FALSE, sizeof (double));
  char req[256], buf[1024];

  for (int i = 0; i < opt_requests + 1; i++)
    {
      gint64 t0 = g_get_monotonic_time ();
      int fd = dial (proxy_port != 0 ? proxy_port : http_port);
      double us;

      if (proxy_port != 0)
        g_snprintf (req, sizeof req,
                    "GET http://sink.bench:%d/ HTTP/1.1\r\nHost: sink.bench:%d\r\n"
                    "\r\n",
                    http_port, http_port);
      else
        g_snprintf (req, sizeof req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", http_port);
      write_all (fd, req, strlen (req));
      while (read (fd, buf, sizeof buf) > 0)
        ;
      close (fd);
      us = g_get_monotonic_time () - t0;
      if (i > 0) /* the first one warms up */
        g_array_append_val (t, us);
    }
  g_array_sort (t, cmp_double);
  return g_array_index (t, double, t->len / 2);
}

static long
rss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", pid);
  g_autofree char *data = NULL;
  const char *p;

  if (!g_file_get_contents (path, &data, NULL, NULL) || (p = strstr (data, "VmRSS:")) == NULL)
    return -1;
  return atol (p + 6);
}

static long
rss_under_tunnels (GPid pid, int proxy_port, const char *host, int sink_port)
{
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (int));
  guint64 zero = 0;
  long rss;

  for (int i = 0; i < opt_tunnels; i++)
    {
      int fd = tunnel (proxy_port, host, sink_port);

      if (fd < 0)
        break;
      write_all (fd, (const char *)&zero, 8); /* "hold" */
      g_array_append_val (fds, fd);
    }
  g_usleep (300 * 1000);
  rss = fds->len == (guint)opt_tunnels ? rss_kib (pid) : -1;
  for (guint i = 0; i < fds->len; i++)
    close (g_array_index (fds, int, i));
  return rss;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("- namzu-egress against direct and tinyproxy");
  g_autoptr (GError) error = NULL;
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  g_autofree char *dir = g_dir_make_tmp ("bench-egress-XXXXXX", NULL);
  gboolean have_tiny;
  int sink_port, http_port, nz_port, tiny_port = 0;
  GPid nz, tiny = 0;
  double direct_mbs, nz_mbs, tiny_mbs = 0, direct_us, nz_us, tiny_us = 0;
  long nz_rss, tiny_rss = -1;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "bench-egress: %s\n", error->message);
      return 2;
    }
  if (opt_tools_dir == NULL)
    {
      g_autofree char *d = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (d, "..", "tools", NULL);
    }
  signal (SIGPIPE, SIG_IGN);
  have_tiny = g_file_test (opt_tinyproxy, G_FILE_TEST_IS_EXECUTABLE);
  sink_port = start_server (sink_conn);
  http_port = start_server (http_conn);
  nz = start_namzu (sink_port, http_port, &nz_port);
  if (have_tiny)
    tiny = start_tinyproxy (dir, &tiny_port);

  /* Interleaved rounds and medians: on a shared machine one run of each says little. The
   * ratios are medians of each round's own ratio, so a round measures both under the same
   * load. */
  printf ("throughput: %d MiB through one CONNECT tunnel on loopback, median of %d rounds\n",
          opt_mib, opt_rounds);
  {
    g_autoptr (GArray) d = g_array_new (FALSE, FALSE, sizeof (double));
    g_autoptr (GArray) n = g_array_new (FALSE, FALSE, sizeof (double));
    g_autoptr (GArray) t = g_array_new (FALSE, FALSE, sizeof (double));
    g_autoptr (GArray) rd = g_array_new (FALSE, FALSE, sizeof (double));
    g_autoptr (GArray) rt = g_array_new (FALSE, FALSE, sizeof (double));

    for (int r = 0; r < opt_rounds; r++)
      {
        double v, dv, nv;

        dv = throughput (0, NULL, sink_port);
        g_array_append_val (d, dv);
        nv = throughput (nz_port, "sink.bench", sink_port);
        g_array_append_val (n, nv);
        v = nv / dv;
        g_array_append_val (rd, v);
        if (have_tiny)
          {
            double tv = throughput (tiny_port, "127.0.0.1", sink_port);

            g_array_append_val (t, tv);
            v = nv / tv;
            g_array_append_val (rt, v);
          }
      }
    direct_mbs = median (d);
    nz_mbs = median (n);
    printf ("  direct:                 %8.0f MiB/s\n", direct_mbs);
    printf ("  namzu-egress:           %8.0f MiB/s\n", nz_mbs);
    if (have_tiny)
      {
        tiny_mbs = median (t);
        printf ("  tinyproxy:              %8.0f MiB/s\n", tiny_mbs);
      }
    printf ("  ratio namzu/direct:     %8.2f   (target >= 0.8)\n", median (rd));
    if (have_tiny)
      printf ("  ratio namzu/tinyproxy:  %8.2f   (target >= 1)\n", median (rt));
    else
      printf ("  tinyproxy: not installed (scripts/install-deps), no ratio\n");
  }

  printf ("latency: median of %d plain HTTP GETs, one connection each\n", opt_requests);
  direct_us = latency (0, http_port);
  nz_us = latency (nz_port, http_port);
  printf ("  direct:                 %8.0f us\n", direct_us);
  printf ("  namzu-egress:           %8.0f us (added %.0f us)\n", nz_us, nz_us - direct_us);
  if (have_tiny)
    {
      tiny_us = latency (tiny_port, http_port);
      printf ("  tinyproxy:              %8.0f us (added %.0f us)\n", tiny_us, tiny_us - direct_us);
    }

  printf ("memory: VmRSS holding %d concurrent tunnels\n", opt_tunnels);
  printf ("  namzu-egress idle:      %8ld KiB\n", rss_kib (nz));
  nz_rss = rss_under_tunnels (nz, nz_port, "sink.bench", sink_port);
  printf ("  namzu-egress:           %8ld KiB\n", nz_rss);
  if (have_tiny)
    {
      tiny_rss = rss_under_tunnels (tiny, tiny_port, "127.0.0.1", sink_port);
      printf ("  tinyproxy (main process only; it may fork workers): %ld KiB\n", tiny_rss);
    }
  stop (nz);
  if (have_tiny)
    stop (tiny);
  {
    g_autofree char *conf = g_build_filename (dir, "tinyproxy.conf", NULL);

    g_unlink (conf);
    g_rmdir (dir);
  }
  return 0;
}
