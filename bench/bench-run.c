#include "bench-run.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

gint64
bench_run_us (const char *const *argv, char **envp)
{
  posix_spawn_file_actions_t fa;
  gint64 t0 = g_get_monotonic_time ();
  pid_t pid;
  int status = 0, r;

  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen (&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  r = posix_spawnp (&pid, argv[0], &fa, NULL, (char *const *)argv,
                    envp != NULL ? envp : environ);
  posix_spawn_file_actions_destroy (&fa);
  if (r != 0)
    return -1;
  while (waitpid (pid, &status, 0) < 0)
    ;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return -1;
  return g_get_monotonic_time () - t0;
}

static int
cmp_i64 (gconstpointer a, gconstpointer b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;

  return x < y ? -1 : x > y;
}

double
bench_median_ms (GArray *samples)
{
  if (samples->len == 0)
    return -1;
  g_array_sort (samples, cmp_i64);
  return g_array_index (samples, gint64, samples->len / 2) / 1000.0;
}

double
bench_run_median_ms (const char *const *argv, int n)
{
  g_autoptr (GArray) t = g_array_new (FALSE, FALSE, sizeof (gint64));

  if (bench_run_us (argv, NULL) < 0)
    return -1;
  for (int i = 0; i < n; i++)
    {
      gint64 us = bench_run_us (argv, NULL);

      if (us < 0)
        return -1;
      g_array_append_val (t, us);
    }
  return bench_median_ms (t);
}

void
bench_interleaved (const char *const *a, const char *const *b, int n, double *a_ms,
                   double *b_ms)
{
  g_autoptr (GArray) sa = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_autoptr (GArray) sb = g_array_new (FALSE, FALSE, sizeof (gint64));
  gboolean a_ok = bench_run_us (a, NULL) >= 0, b_ok = bench_run_us (b, NULL) >= 0;

  for (int i = 0; i < n && (a_ok || b_ok); i++)
    {
      gint64 ta = a_ok ? bench_run_us (a, NULL) : -1;
      gint64 tb = b_ok ? bench_run_us (b, NULL) : -1;

      a_ok = a_ok && ta >= 0;
      b_ok = b_ok && tb >= 0;
      if (a_ok)
        g_array_append_val (sa, ta);
      if (b_ok)
        g_array_append_val (sb, tb);
    }
  *a_ms = a_ok ? bench_median_ms (sa) : -1;
  *b_ms = b_ok ? bench_median_ms (sb) : -1;
}
