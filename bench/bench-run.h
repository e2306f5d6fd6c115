/* bench-run.h: timing helpers shared by the benchmarks. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Wall time in µs of one run of @argv (argv[0] searched in PATH) to completion, stdout and
 * stderr discarded; -1 if it could not start or did not exit 0. @envp NULL: ours. It starts
 * the program with posix_spawn, not fork: a fork of this (GIO-sized) process would add
 * milliseconds to every sample on both sides of a ratio and hide what is measured. */
gint64 bench_run_us (const char *const *argv, char **envp);

/* Median of @samples (gint64 µs) in ms, sorting them; -1 when empty. */
double bench_median_ms (GArray *samples);

/* Median in ms of @n runs of @argv after one untimed warm-up; -1 if a run failed. */
double bench_run_median_ms (const char *const *argv, int n);

/* Runs @a and @b alternately, @n times each after one untimed warm-up of each, so both
 * sides see the same machine load; their medians in *@a_ms and *@b_ms (-1 if one failed). */
void bench_interleaved (const char *const *a, const char *const *b, int n, double *a_ms,
                        double *b_ms);

G_END_DECLS
