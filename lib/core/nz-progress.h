/* nz-progress.h: one progress line on stderr for long work (DESIGN.md, CLI contract), drawn
 * only when stderr is a terminal and $NAMZU_PROGRESS is not "0"; a pipe or a log gets nothing.
 *
 * Two kinds of line, redrawn in place ("\r", the line, clear-to-end-of-line) at most ~10 times
 * a second:
 * - bytes: "namzu-cp: big.iso  1.5 MiB / 10.0 MiB  15%  2.3 MiB/s  ETA 0:04" (no "/ total",
 *   percentage or ETA while the total is unknown); nz_progress_finish() draws the last one
 *   with the elapsed time in place of the ETA, and a newline;
 * - waiting (nz_progress_new_wait): "namzu-create: waiting for the sandbox to be ready (3s)",
 *   nothing at all before its delay, so work that ends quickly prints nothing.
 *
 * Every function takes NULL and then does nothing: the constructors return NULL when progress
 * is off, so callers hold one pointer and never test for a terminal themselves.
 *
 * Many files, one line (a recursive copy): create it with the sum of the sizes (or -1), and
 * report the running total across files, not each file's own count:
 *
 *   p = nz_progress_new ("namzu-cp: dir/", total_of_all_files);
 *   for each file: ... on each chunk: nz_progress_update (p, bytes_of_finished_files + done);
 *                  (nz_progress_set_label() may name the file in flight)
 *   nz_progress_finish (p);
 *
 * Not thread-safe: drive one NzProgress from one thread. */
#pragma once

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct _NzProgress NzProgress;

/* A monotonic clock in microseconds (g_get_monotonic_time() unless a test injects one). */
typedef gint64 (*NzProgressClock) (void);

/* Whether progress is drawn at all: stderr is a terminal and $NAMZU_PROGRESS is not "0". */
gboolean nz_progress_enabled (void);

/* A bytes line labelled @label (e.g. "namzu-cp: report.json"; control characters and invalid
 * UTF-8 are replaced), of @total bytes (-1: unknown). NULL when progress is off. Draws
 * nothing until the first update. */
NzProgress *nz_progress_new (const char *label, gint64 total);

/* A waiting line: "@label (Ns)", first drawn once @delay_ms passed. NULL when progress is off.
 * Drive it with nz_progress_tick() from the waiting loop. */
NzProgress *nz_progress_new_wait (const char *label, guint delay_ms);

/* For tests and callers with their own stream: always on, writes to @out, times with @clock
 * (NULL: g_get_monotonic_time), truncates lines to @columns - 1 (0: no limit). Bytes kind;
 * nz_progress_set_wait() turns it into the waiting kind. */
NzProgress *nz_progress_new_full (FILE *out, NzProgressClock clock, guint columns,
                                  const char *label, gint64 total);
void nz_progress_set_wait (NzProgress *p, guint delay_ms);

/* A new total (-1: unknown), e.g. once a download's length is announced. */
void nz_progress_set_total (NzProgress *p, gint64 total);

/* A new label from the next redraw on (the file or step in flight). */
void nz_progress_set_label (NzProgress *p, const char *label);

/* @done bytes so far (a running total; never less than the last one for a sane rate). */
void nz_progress_update (NzProgress *p, gint64 done);

/* Redraws a waiting line if it is due (its delay passed and the throttle allows). */
void nz_progress_tick (NzProgress *p);

/* Restarts a waiting line's elapsed time and its delay (the next step of a wait). */
void nz_progress_restart (NzProgress *p);

/* Draws the last line and a newline, if anything was drawn (a bytes line always is once
 * updated; a waiting line only after its delay). Later calls do nothing. */
void nz_progress_finish (NzProgress *p);

/* Erases the line in flight (the last one drawn and not finished), if any, so that a message
 * can be printed on a line of its own; the next update or tick redraws it at once.
 * nz_cli_warn() calls it. */
void nz_progress_make_room (void);

/* An NzAgentFilesProgress-shaped callback for one transfer (@progress is the NzProgress):
 * adopts @total when it is known and updates with @done. */
void nz_progress_transfer_cb (gint64 done, gint64 total, gpointer progress);

/* Finishes (see nz_progress_finish) and frees. */
void nz_progress_free (NzProgress *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzProgress, nz_progress_free)

/* Formatting, for the line and its tests. "512 B", "1.5 KiB", "10.0 MiB", "2.0 GiB" (binary
 * units, one decimal above bytes). */
char *nz_progress_format_bytes (gint64 bytes);
/* "0:04", "12:30", "1:02:03" for whole seconds. */
char *nz_progress_format_duration (gint64 seconds);

G_END_DECLS
