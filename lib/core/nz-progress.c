/* nz-progress.c: the progress line of long work (see nz-progress.h). */
#include "nz-progress.h"

#include <math.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* ~10 redraws a second: smooth to a person, nothing a slow terminal or ssh link notices. */
#define REDRAW_INTERVAL_US (G_USEC_PER_SEC / 10)
/* Longer than this (100 days) is no estimate. */
#define ETA_MAX_S (100.0 * 24 * 3600)

struct _NzProgress
{
  FILE *out;
  NzProgressClock clock;
  guint columns;    /* 0: no limit */
  gboolean dumb;    /* TERM=dumb: blank the rest with spaces, not an escape sequence */
  gboolean waiting; /* the waiting kind */
  gint64 delay_us;  /* waiting: nothing drawn before this much time */
  char *label;
  gint64 total; /* -1: unknown */
  gint64 done;
  gint64 start_us;
  gint64 last_draw_us;
  gboolean drawn, finished;
  glong last_len;  /* characters of the last line, for the dumb terminal's blanking */
  gboolean erased; /* nz_progress_make_room() took it away: redraw without waiting */
};

/* The line on screen that a message would tear (nz_progress_make_room). */
static NzProgress *in_flight;

gboolean
nz_progress_enabled (void)
{
  return g_strcmp0 (g_getenv ("NAMZU_PROGRESS"), "0") != 0 && isatty (STDERR_FILENO);
}

/* The label goes to a terminal: no control characters (a file name or URL could carry escape
 * sequences), valid UTF-8 so truncation counts characters. */
static char *
clean_label (const char *label)
{
  char *s = g_utf8_make_valid (label != NULL ? label : "", -1);

  for (char *c = s; *c != '\0'; c++)
    if ((guchar)*c < 0x20 || *c == 0x7f)
      *c = '?';
  /* C1 controls (U+0080..U+009F) are escape sequences to some terminals too. */
  for (char *c = s; *c != '\0'; c = g_utf8_next_char (c))
    if ((guchar)c[0] == 0xc2 && (guchar)c[1] >= 0x80 && (guchar)c[1] <= 0x9f)
      c[0] = '?', c[1] = '?';
  return s;
}

NzProgress *
nz_progress_new_full (FILE *out, NzProgressClock clock, guint columns, const char *label,
                      gint64 total)
{
  NzProgress *p;

  g_return_val_if_fail (out != NULL, NULL);
  p = g_new0 (NzProgress, 1);
  p->out = out;
  p->clock = clock != NULL ? clock : g_get_monotonic_time;
  p->columns = columns;
  p->label = clean_label (label);
  p->total = total < 0 ? -1 : total;
  p->start_us = p->clock ();
  return p;
}

static NzProgress *
new_on_stderr (const char *label, gint64 total)
{
  struct winsize ws = { 0 };
  NzProgress *p;

  if (!nz_progress_enabled ())
    return NULL;
  /* A line longer than the terminal wraps, and "\r" then only returns to its last row. */
  if (ioctl (STDERR_FILENO, TIOCGWINSZ, &ws) != 0)
    ws.ws_col = 0;
  p = nz_progress_new_full (stderr, NULL, ws.ws_col, label, total);
  p->dumb = g_strcmp0 (g_getenv ("TERM"), "dumb") == 0;
  return p;
}

NzProgress *
nz_progress_new (const char *label, gint64 total)
{
  return new_on_stderr (label, total);
}

NzProgress *
nz_progress_new_wait (const char *label, guint delay_ms)
{
  NzProgress *p = new_on_stderr (label, -1);

  nz_progress_set_wait (p, delay_ms);
  return p;
}

void
nz_progress_set_wait (NzProgress *p, guint delay_ms)
{
  if (p == NULL)
    return;
  p->waiting = TRUE;
  p->delay_us = (gint64)delay_ms * 1000;
}

void
nz_progress_set_total (NzProgress *p, gint64 total)
{
  if (p != NULL)
    p->total = total < 0 ? -1 : total;
}

void
nz_progress_set_label (NzProgress *p, const char *label)
{
  if (p == NULL)
    return;
  g_free (p->label);
  p->label = clean_label (label);
}

char *
nz_progress_format_bytes (gint64 bytes)
{
  static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double v = (double)bytes;
  gsize u = 0;

  if (bytes < 1024)
    return g_strdup_printf ("%" G_GINT64_FORMAT " B", MAX (bytes, 0));
  v /= 1024;
  /* 1023.95 KiB would print as "1024.0 KiB": carry into the next unit first. */
  while (v >= 1023.95 && u + 1 < G_N_ELEMENTS (units))
    v /= 1024, u++;
  return g_strdup_printf ("%.1f %s", v, units[u]);
}

char *
nz_progress_format_duration (gint64 seconds)
{
  seconds = MAX (seconds, 0);
  if (seconds >= 3600)
    return g_strdup_printf ("%" G_GINT64_FORMAT ":%02d:%02d", seconds / 3600,
                            (int)(seconds / 60 % 60), (int)(seconds % 60));
  return g_strdup_printf ("%d:%02d", (int)(seconds / 60), (int)(seconds % 60));
}

/* A waiting line's elapsed time: "3s", "1m05s". */
static void
append_wait_time (GString *line, gint64 seconds)
{
  if (seconds < 60)
    g_string_append_printf (line, "%ds", (int)seconds);
  else
    g_string_append_printf (line, "%" G_GINT64_FORMAT "m%02ds", seconds / 60, (int)(seconds % 60));
}

static void
append_bytes_body (NzProgress *p, GString *line, gint64 elapsed_us, gboolean final)
{
  g_autofree char *done = nz_progress_format_bytes (p->done);
  g_autofree char *rate = NULL;
  /* The average since the start: steadier than the last chunk's, and honest about stalls.
   * Under a millisecond there is no rate to speak of yet (the first chunk's is absurd). */
  double per_s = elapsed_us < 1000 ? -1 : (double)p->done * G_USEC_PER_SEC / (double)elapsed_us;

  /* Bounded before the conversion: a double beyond gint64 does not convert. */
  rate = per_s < 0 ? g_strdup ("-- B") : nz_progress_format_bytes ((gint64)MIN (per_s, 1e18));
  g_string_append_printf (line, "  %s", done);
  if (p->total >= 0)
    {
      g_autofree char *total = nz_progress_format_bytes (p->total);
      int pct = p->total > 0 ? (int)(MIN (p->done, p->total) * 100.0 / p->total) : 100;

      /* 100% only when it is all there (a double rounds a huge count up). */
      if (pct == 100 && p->done < p->total)
        pct = 99;
      g_string_append_printf (line, " / %s  %d%%", total, pct);
    }
  g_string_append_printf (line, "  %s/s", rate);
  if (final)
    {
      g_autofree char *took = nz_progress_format_duration (elapsed_us / G_USEC_PER_SEC);

      g_string_append_printf (line, "  in %s", took);
    }
  else if (p->total >= 0)
    {
      g_autofree char *eta = NULL;
      double left_s = per_s > 0 ? (double)(p->total - p->done) / per_s : -1;

      /* No rate yet, or a stall (or a total a peer announced) a person would never wait out:
       * no number is better than a wrong one. */
      if (p->done >= p->total)
        eta = nz_progress_format_duration (0);
      else if (per_s < 1 || left_s > ETA_MAX_S)
        eta = g_strdup ("--:--");
      else
        eta = nz_progress_format_duration ((gint64)ceil (left_s));
      g_string_append_printf (line, "  ETA %s", eta);
    }
}

static void
draw (NzProgress *p, gint64 now, gboolean final)
{
  g_autoptr (GString) line = g_string_new ("\r");
  gint64 elapsed = now - p->start_us;
  glong len;

  g_string_append (line, p->label);
  if (p->waiting)
    {
      g_string_append (line, " (");
      append_wait_time (line, elapsed / G_USEC_PER_SEC);
      g_string_append_c (line, ')');
    }
  else
    append_bytes_body (p, line, elapsed, final);
  len = g_utf8_strlen (line->str + 1, -1);
  if (p->columns > 1 && len > (glong)p->columns - 1)
    {
      len = p->columns - 1;
      g_string_truncate (line, g_utf8_offset_to_pointer (line->str + 1, len) - line->str);
    }
  if (p->dumb)
    for (glong i = len; i < p->last_len; i++)
      g_string_append_c (line, ' ');
  else
    g_string_append (line, "\033[K");
  if (final)
    g_string_append_c (line, '\n');
  fwrite (line->str, 1, line->len, p->out);
  fflush (p->out);
  p->last_len = final ? 0 : len;
  p->last_draw_us = now;
  p->drawn = TRUE;
  p->erased = FALSE;
  in_flight = final ? NULL : p;
}

void
nz_progress_make_room (void)
{
  NzProgress *p = in_flight;

  if (p == NULL)
    return;
  in_flight = NULL;
  fputc ('\r', p->out);
  if (p->dumb)
    for (glong i = 0; i < p->last_len; i++)
      fputc (' ', p->out);
  else
    fputs ("\033[K", p->out);
  if (p->dumb)
    fputc ('\r', p->out);
  fflush (p->out);
  p->last_len = 0;
  p->erased = TRUE;
}

/* Draws unless the last redraw was under REDRAW_INTERVAL_US ago (the first always draws). */
static void
maybe_draw (NzProgress *p)
{
  gint64 now = p->clock ();

  if (p->finished)
    return;
  if (p->waiting && now - p->start_us < p->delay_us)
    return;
  if (p->erased)
    {
      draw (p, now, FALSE);
      return;
    }
  if (p->drawn && now - p->last_draw_us < REDRAW_INTERVAL_US)
    return;
  /* A waiting line changes once a second: redrawing the same text says nothing. */
  if (p->waiting && p->drawn
      && (now - p->start_us) / G_USEC_PER_SEC == (p->last_draw_us - p->start_us) / G_USEC_PER_SEC)
    return;
  draw (p, now, FALSE);
}

void
nz_progress_update (NzProgress *p, gint64 done)
{
  if (p == NULL)
    return;
  p->done = MAX (done, 0);
  maybe_draw (p);
}

void
nz_progress_tick (NzProgress *p)
{
  if (p != NULL)
    maybe_draw (p);
}

void
nz_progress_restart (NzProgress *p)
{
  if (p == NULL)
    return;
  p->start_us = p->clock ();
  p->finished = FALSE;
  p->drawn = FALSE;
}

void
nz_progress_finish (NzProgress *p)
{
  if (p == NULL || p->finished)
    return;
  p->finished = TRUE;
  if (in_flight == p)
    in_flight = NULL;
  if (p->drawn)
    draw (p, p->clock (), TRUE);
}

void
nz_progress_transfer_cb (gint64 done, gint64 total, gpointer progress)
{
  NzProgress *p = progress;

  if (p == NULL)
    return;
  if (total >= 0)
    p->total = total;
  nz_progress_update (p, done);
}

void
nz_progress_free (NzProgress *p)
{
  if (p == NULL)
    return;
  nz_progress_finish (p);
  if (in_flight == p)
    in_flight = NULL;
  g_free (p->label);
  g_free (p);
}
