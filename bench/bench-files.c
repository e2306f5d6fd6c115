/* bench-files: file transfer through namzu-agent against a raw unix-socket pipe.
 *
 *  - read-file-stream of a SIZE file (default 1 GiB) into /dev/null through lib/client, against
 *    `cat FILE` writing into a unix socket that we read and discard: throughput ratio, and the
 *    agent's VmRSS growth (peak while streaming minus before; target <= 2 MiB).
 *  - the same SIZE uploaded with namzu-cp (write-file parts) from stdin: throughput ratio
 *    against the same baseline, and the agent's VmRSS growth.
 *
 * The agent runs directly on a unix socket in a temporary directory (no sandbox: this measures
 * the protocol and the agent, not bwrap). The source file is sparse, so neither side waits on
 * a disk; uploads do write SIZE bytes into the temporary directory. Prints numbers and
 * ratios; never a pass/fail (see bench/README.md). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>

#include "nz-agent-client.h"
#include "nz-agent-files.h"

static gint64 opt_mib = 1024;
static gint opt_rounds = 3;
static char *opt_tools_dir;

static const GOptionEntry entries[] = {
  { "mib", 'm', 0, G_OPTION_ARG_INT64, &opt_mib, "File size in MiB (default 1024)", "MIB" },
  { "rounds", 'n', 0, G_OPTION_ARG_INT, &opt_rounds,
    "Download rounds, each against its own cat run; medians are printed (default 3)", "N" },
  { "tools-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_tools_dir,
    "Directory with the built namzu-* tools (default: ../tools beside this program)", "DIR" },
  { NULL }
};

static void
die_with_parent (gpointer user_data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static gint64
rss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  const char *p;

  if (!g_file_get_contents (path, &text, NULL, NULL) || (p = strstr (text, "VmRSS:")) == NULL)
    return -1;
  return g_ascii_strtoll (p + 6, NULL, 10);
}

typedef struct
{
  GPid pid;
  gint64 peak;
  gboolean stop;
} Sampler;

static gpointer
sample_rss (gpointer data)
{
  Sampler *s = data;

  while (!g_atomic_int_get (&s->stop))
    {
      s->peak = MAX (s->peak, rss_kib (s->pid));
      g_usleep (5000);
    }
  return NULL;
}

/* Baseline: `cat FILE` into one end of a unix socket pair, read and discarded at the other. */
static double
baseline_seconds (const char *file)
{
  int sv[2];
  const char *argv[] = { "cat", file, NULL };
  g_autoptr (GError) error = NULL;
  char buf[262144];
  gint64 t0 = g_get_monotonic_time ();
  GPid pid;
  int status;

  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return -1;
  if (!g_spawn_async_with_pipes_and_fds (NULL, argv, NULL,
                                         G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD, NULL,
                                         NULL, -1, sv[1], -1, NULL, NULL, 0, &pid, NULL, NULL,
                                         NULL, &error))
    {
      fprintf (stderr, "bench-files: cat: %s\n", error->message);
      return -1;
    }
  close (sv[1]);
  while (read (sv[0], buf, sizeof buf) > 0)
    ;
  close (sv[0]);
  waitpid (pid, &status, 0);
  g_spawn_close_pid (pid);
  return (g_get_monotonic_time () - t0) / 1e6;
}

/* Reads @file once, untimed. A sparse file's holes enter the page cache on their first read,
 * which costs more than everything measured here; without this, whichever side ran first
 * would pay for it alone. */
static void
warm_page_cache (const char *file)
{
  static char buf[262144];
  int fd = open (file, O_RDONLY | O_CLOEXEC);

  while (fd >= 0 && read (fd, buf, sizeof buf) > 0)
    ;
  if (fd >= 0)
    close (fd);
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;

  return x < y ? -1 : x > y;
}

static double
median (double *v, int n)
{
  qsort (v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- file transfer through namzu-agent");
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL, *ws = NULL, *sock = NULL, *file = NULL, *agent = NULL;
  g_autofree char *cp = NULL, *endpoint = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  gint64 size, before, got = 0;
  double base_s, stream_s, up_s;
  Sampler sampler = { 0 };
  GThread *thread;
  GPid agent_pid;
  int agent_out, devnull, fd, status;
  char line[256] = { 0 };

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "bench-files: %s\n", error->message);
      return 2;
    }
  if (opt_tools_dir == NULL)
    {
      g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
      g_autofree char *bench_dir = g_path_get_dirname (self);

      opt_tools_dir = g_build_filename (bench_dir, "..", "tools", NULL);
    }
  size = opt_mib * 1024 * 1024;
  dir = g_dir_make_tmp ("nz-bench-files-XXXXXX", &error);
  ws = g_build_filename (dir, "ws", NULL);
  sock = g_build_filename (dir, "agent.sock", NULL);
  file = g_build_filename (ws, "big.bin", NULL);
  agent = g_build_filename (opt_tools_dir, "namzu-agent", NULL);
  cp = g_build_filename (opt_tools_dir, "namzu-cp", NULL);
  g_mkdir (ws, 0755);
  fd = open (file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate (fd, size) != 0)
    {
      perror ("bench-files: sparse file");
      return 1;
    }
  close (fd);

  {
    g_auto (GStrv) env = g_get_environ ();
    const char *agent_argv[] = { agent, NULL };

    env = g_environ_setenv (env, "NAMZU_SANDBOX_WORKSPACE", ws, TRUE);
    env = g_environ_setenv (env, "NAMZU_AGENT_UNIX_PATH", sock, TRUE);
    if (!g_spawn_async_with_pipes (NULL, (char **)agent_argv, env, G_SPAWN_DO_NOT_REAP_CHILD,
                                   die_with_parent, NULL, &agent_pid, NULL, &agent_out, NULL,
                                   &error))
      {
        fprintf (stderr, "bench-files: %s\n", error->message);
        return 1;
      }
  }
  for (gsize n = 0; n < sizeof line - 1 && read (agent_out, line + n, 1) == 1; n++)
    if (line[n] == '\n')
      break;
  endpoint = g_strdup_printf ("unix:%s", sock);
  client = nz_agent_client_new (endpoint, NULL);
  if (!nz_agent_client_wait_ready (client, 5000, &error))
    {
      fprintf (stderr, "bench-files: agent not ready: %s\n", error->message);
      return 1;
    }
  printf ("measured: namzu-agent on a unix socket, %" G_GINT64_FORMAT
          " MiB sparse file, read once beforehand so every run reads it from the page cache\n",
          opt_mib);

  if (opt_rounds < 1)
    opt_rounds = 1;
  warm_page_cache (file);

  /* read-file-stream against cat, interleaved round by round so that load from elsewhere on
   * the machine hits both sides alike; medians of each. */
  {
    g_autofree double *base = g_new0 (double, opt_rounds);
    g_autofree double *stream = g_new0 (double, opt_rounds);
    gint64 growth = 0;

    for (int r = 0; r < opt_rounds; r++)
      {
        gint64 t0;

        base[r] = baseline_seconds (file);
        before = rss_kib (agent_pid);
        sampler = (Sampler){ .pid = agent_pid, .peak = before };
        thread = g_thread_new ("rss", sample_rss, &sampler);
        devnull = open ("/dev/null", O_WRONLY);
        t0 = g_get_monotonic_time ();
        if (!nz_agent_files_download (client, "big.bin", devnull, NULL, NULL, &got, NULL, &error))
          {
            fprintf (stderr, "bench-files: download: %s\n", error->message);
            return 1;
          }
        stream[r] = (g_get_monotonic_time () - t0) / 1e6;
        g_atomic_int_set (&sampler.stop, TRUE);
        g_thread_join (thread);
        close (devnull);
        growth = MAX (growth, sampler.peak - before);
      }
    base_s = median (base, opt_rounds);
    stream_s = median (stream, opt_rounds);
    printf ("cat FILE over a unix socket (median of %d):   %8.2f s  %8.1f MiB/s\n", opt_rounds,
            base_s, opt_mib / base_s);
    printf ("read-file-stream, decoded into /dev/null:    %8.2f s  %8.1f MiB/s\n", stream_s,
            opt_mib / stream_s);
    printf ("ratio read-file-stream / cat throughput:     %8.2f  (target >= 0.50: %s)\n",
            base_s / stream_s, base_s / stream_s >= 0.5 ? "met" : "over");
    printf ("agent VmRSS growth while streaming (max):    %8" G_GINT64_FORMAT
            " KiB (target <= 2048 KiB: %s)\n",
            growth, growth <= 2048 ? "met" : "over");
  }

  /* upload with namzu-cp from stdin */
  before = rss_kib (agent_pid);
  sampler = (Sampler){ .pid = agent_pid, .peak = before };
  thread = g_thread_new ("rss", sample_rss, &sampler);
  {
    const char *cp_argv[] = { cp, "--endpoint", endpoint, "-", ":up.bin", NULL };
    int in = open (file, O_RDONLY);
    gint64 t0 = g_get_monotonic_time ();
    GPid cp_pid;

    if (!g_spawn_async_with_pipes_and_fds (NULL, cp_argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                                           NULL, NULL, in, -1, -1, NULL, NULL, 0, &cp_pid, NULL,
                                           NULL, NULL, &error))
      {
        fprintf (stderr, "bench-files: namzu-cp: %s\n", error->message);
        return 1;
      }
    waitpid (cp_pid, &status, 0);
    g_spawn_close_pid (cp_pid);
    close (in);
    up_s = (g_get_monotonic_time () - t0) / 1e6;
  }
  g_atomic_int_set (&sampler.stop, TRUE);
  g_thread_join (thread);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fprintf (stderr, "bench-files: namzu-cp failed (status %d)\n", status);
  printf ("namzu-cp - :up.bin (256 KiB parts):         %8.2f s  %8.1f MiB/s\n", up_s,
          opt_mib / up_s);
  printf ("ratio namzu-cp upload / cat throughput:      %8.2f\n", base_s / up_s);
  printf ("agent VmRSS growth while uploading:          %8" G_GINT64_FORMAT " KiB (target <= 2048 KiB: %s)\n",
          sampler.peak - before, sampler.peak - before <= 2048 ? "met" : "over");

  kill (agent_pid, SIGTERM);
  waitpid (agent_pid, &status, 0);
  {
    g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", dir);

    if (system (cmd) != 0)
      fprintf (stderr, "bench-files: could not remove %s\n", dir);
  }
  return 0;
}
