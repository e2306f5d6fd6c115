/* Unit tests for lib/core/nz-progress: units, rate, ETA, throttling and the waiting line, on a
 * memory stream with an injected clock (the tools' own lines are tested under a real
 * pseudo-terminal by test-progress-e2e). */
#include <stdio.h>
#include <string.h>

#include "nz-cli.h"
#include "nz-progress.h"
#include "../nz-test.h"

#define MIB (1024 * 1024)

static gint64 fake_now;

static gint64
fake_clock (void)
{
  return fake_now;
}

typedef struct
{
  char *buf;
  size_t len;
  FILE *f;
  size_t seen; /* bytes already returned by take() */
} Capture;

static void
capture_open (Capture *c)
{
  memset (c, 0, sizeof *c);
  c->f = open_memstream (&c->buf, &c->len);
  ck_assert (c->f != NULL);
}

/* What was written since the last take(). */
static char *
take (Capture *c)
{
  char *s;

  fflush (c->f);
  s = g_strndup (c->buf + c->seen, c->len - c->seen);
  c->seen = c->len;
  return s;
}

/* Forgets what was written so far. */
static void
drop (Capture *c)
{
  g_free (take (c));
}

static void
capture_close (Capture *c)
{
  fclose (c->f);
  free (c->buf);
}

static void
check_bytes (gint64 n, const char *want)
{
  g_autofree char *s = nz_progress_format_bytes (n);

  ck_assert_str_eq (s, want);
}

START_TEST (test_units)
{
  g_autofree char *d1 = nz_progress_format_duration (4);
  g_autofree char *d2 = nz_progress_format_duration (750);
  g_autofree char *d3 = nz_progress_format_duration (3723);

  check_bytes (0, "0 B");
  check_bytes (1023, "1023 B");
  check_bytes (1024, "1.0 KiB");
  check_bytes (1536, "1.5 KiB");
  check_bytes (10 * MIB, "10.0 MiB");
  /* 1023.999 KiB is carried to the next unit, never "1024.0 KiB". */
  check_bytes (MIB - 1, "1.0 MiB");
  check_bytes (G_GINT64_CONSTANT (3) * 1024 * MIB / 2, "1.5 GiB");
  check_bytes (G_GINT64_CONSTANT (5) * 1024 * 1024 * MIB, "5.0 TiB");
  check_bytes (G_MAXINT64, "8.0 EiB");
  ck_assert_str_eq (d1, "0:04");
  ck_assert_str_eq (d2, "12:30");
  ck_assert_str_eq (d3, "1:02:03");
}
END_TEST

START_TEST (test_bytes_line)
{
  g_autoptr (NzProgress) p = NULL;
  Capture c;
  char *s;

  capture_open (&c);
  fake_now = 5 * G_USEC_PER_SEC;
  p = nz_progress_new_full (c.f, fake_clock, 0, "namzu-cp: big.iso", 10 * MIB);
  fake_now += G_USEC_PER_SEC;
  nz_progress_update (p, MIB);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-cp: big.iso  1.0 MiB / 10.0 MiB  10%  1.0 MiB/s  ETA 0:09\033[K");
  g_free (s);

  /* Throttled: under a tenth of a second after the last redraw, nothing is written. */
  fake_now += G_USEC_PER_SEC / 20;
  nz_progress_update (p, 2 * MIB);
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);
  fake_now += G_USEC_PER_SEC / 20;
  nz_progress_update (p, 2 * MIB);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-cp: big.iso  2.0 MiB / 10.0 MiB  20%  1.8 MiB/s  ETA 0:05\033[K");
  g_free (s);

  /* The last line: the elapsed time instead of the ETA, and a newline; once. */
  fake_now = 9 * G_USEC_PER_SEC;
  nz_progress_update (p, 10 * MIB);
  drop (&c);
  nz_progress_finish (p);
  s = take (&c);
  ck_assert_str_eq (s,
                    "\rnamzu-cp: big.iso  10.0 MiB / 10.0 MiB  100%  2.5 MiB/s  in 0:04\033[K\n");
  g_free (s);
  nz_progress_finish (p);
  nz_progress_update (p, 11 * MIB);
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  capture_close (&c);
}
END_TEST

START_TEST (test_unknown_total_and_aggregate)
{
  g_autoptr (NzProgress) p = NULL;
  Capture c;
  char *s;

  capture_open (&c);
  fake_now = 0;
  p = nz_progress_new_full (c.f, fake_clock, 0, "namzu-cp: -", -1);
  fake_now = 2 * G_USEC_PER_SEC;
  nz_progress_update (p, 3 * 1024);
  s = take (&c);
  /* No total: no "/ total", no percentage, no ETA. */
  ck_assert_str_eq (s, "\rnamzu-cp: -  3.0 KiB  1.5 KiB/s\033[K");
  g_free (s);

  /* A transfer's callback adopts its announced total. */
  fake_now = 4 * G_USEC_PER_SEC;
  nz_progress_transfer_cb (4 * 1024, 8 * 1024, p);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-cp: -  4.0 KiB / 8.0 KiB  50%  1.0 KiB/s  ETA 0:04\033[K");
  g_free (s);

  /* A stalled transfer has no ETA to offer. */
  g_clear_pointer (&p, nz_progress_free);
  drop (&c);
  fake_now = 0;
  p = nz_progress_new_full (c.f, fake_clock, 0, "x", 100);
  nz_progress_update (p, 0);
  s = take (&c);
  ck_assert_str_eq (s, "\rx  0 B / 100 B  0%  -- B/s  ETA --:--\033[K");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  drop (&c);

  /* A total a peer announced can be anything: no ETA beyond any wait, no overflow. */
  fake_now = 0;
  p = nz_progress_new_full (c.f, fake_clock, 0, "x", G_MAXINT64);
  fake_now = G_USEC_PER_SEC;
  nz_progress_update (p, 1024);
  s = take (&c);
  ck_assert_str_eq (s, "\rx  1.0 KiB / 8.0 EiB  0%  1.0 KiB/s  ETA --:--\033[K");
  g_free (s);
  fake_now = 2 * G_USEC_PER_SEC;
  nz_progress_update (p, G_MAXINT64 - 1);
  s = take (&c);
  ck_assert_str_eq (s, "\rx  8.0 EiB / 8.0 EiB  99%  888.2 PiB/s  ETA 0:01\033[K");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  drop (&c);

  /* Many files on one line: the label follows the file, the count is the running total. */
  fake_now = 0;
  p = nz_progress_new_full (c.f, fake_clock, 0, "namzu-cp: a", 4 * MIB);
  fake_now = G_USEC_PER_SEC;
  nz_progress_update (p, MIB);
  drop (&c);
  nz_progress_set_label (p, "namzu-cp: b");
  fake_now = 2 * G_USEC_PER_SEC;
  nz_progress_update (p, 2 * MIB + 0);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-cp: b  2.0 MiB / 4.0 MiB  50%  1.0 MiB/s  ETA 0:02\033[K");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  /* Freeing finishes a line that was drawn. */
  s = take (&c);
  ck_assert (g_str_has_suffix (s, "in 0:02\033[K\n"));
  g_free (s);
  capture_close (&c);
}
END_TEST

START_TEST (test_waiting_line)
{
  g_autoptr (NzProgress) p = NULL;
  Capture c;
  char *s;

  capture_open (&c);
  fake_now = 0;
  p = nz_progress_new_full (c.f, fake_clock, 0, "namzu-create: waiting for the sandbox to be ready",
                            -1);
  nz_progress_set_wait (p, 1000);
  /* Fast work prints nothing at all: not before the delay, not at the finish. */
  fake_now = G_USEC_PER_SEC / 2;
  nz_progress_tick (p);
  nz_progress_finish (p);
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);

  nz_progress_restart (p);
  fake_now += 3 * G_USEC_PER_SEC;
  nz_progress_tick (p);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-create: waiting for the sandbox to be ready (3s)\033[K");
  g_free (s);
  /* The same second again: the same text, not redrawn. */
  fake_now += G_USEC_PER_SEC / 2;
  nz_progress_tick (p);
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);
  fake_now += 61 * G_USEC_PER_SEC + G_USEC_PER_SEC / 2;
  nz_progress_tick (p);
  nz_progress_finish (p);
  s = take (&c);
  ck_assert_str_eq (s, "\rnamzu-create: waiting for the sandbox to be ready (1m05s)\033[K"
                       "\rnamzu-create: waiting for the sandbox to be ready (1m05s)\033[K\n");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);
  capture_close (&c);
}
END_TEST

START_TEST (test_label_is_cleaned_and_truncated)
{
  g_autoptr (NzProgress) p = NULL;
  Capture c;
  char *s;

  capture_open (&c);
  fake_now = 0;
  /* A file name is anyone's bytes: no escape sequence of its own reaches the terminal. */
  p = nz_progress_new_full (c.f, fake_clock, 0,
                            "a\033[2J\r\xc2\x9b"
                            "b\xff",
                            10);
  nz_progress_update (p, 10);
  s = take (&c);
  ck_assert_str_eq (s, "\ra?[2J???b\xef\xbf\xbd  10 B / 10 B  100%  -- B/s  ETA 0:00\033[K");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  drop (&c);

  /* Never wider than the terminal (a wrapped line would not be redrawn in place); cut at a
   * character, not in the middle of one. */
  p = nz_progress_new_full (c.f, fake_clock, 8, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9xyz", -1);
  nz_progress_set_wait (p, 0);
  nz_progress_tick (p);
  s = take (&c);
  ck_assert_str_eq (s, "\r\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9xy\033[K");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  capture_close (&c);
}
END_TEST

/* A message in the middle of a transfer gets a line of its own: the line is erased first and
 * redrawn at the next update, throttle or not. */
START_TEST (test_make_room)
{
  g_autoptr (NzProgress) p = NULL;
  Capture c;
  char *s;

  capture_open (&c);
  fake_now = 0;
  nz_progress_make_room (); /* nothing in flight: nothing to do */
  p = nz_progress_new_full (c.f, fake_clock, 0, "x", 100);
  fake_now = G_USEC_PER_SEC;
  nz_progress_update (p, 50);
  drop (&c);
  nz_cli_warn ("a message");
  s = take (&c);
  ck_assert_str_eq (s, "\r\033[K");
  g_free (s);
  nz_progress_make_room (); /* already erased */
  fake_now += 1000;
  nz_progress_update (p, 60);
  s = take (&c);
  ck_assert_str_eq (s, "\rx  60 B / 100 B  60%  59 B/s  ETA 0:01\033[K");
  g_free (s);
  /* A finished line is not in flight any more. */
  nz_progress_finish (p);
  drop (&c);
  nz_progress_make_room ();
  s = take (&c);
  ck_assert_str_eq (s, "");
  g_free (s);
  g_clear_pointer (&p, nz_progress_free);
  capture_close (&c);
}
END_TEST

START_TEST (test_off)
{
  /* Under meson, stderr is a file or a pipe: off, and every call takes the NULL it returns. */
  ck_assert (!isatty (STDERR_FILENO));
  ck_assert (!nz_progress_enabled ());
  ck_assert (nz_progress_new ("x", 1) == NULL);
  ck_assert (nz_progress_new_wait ("x", 0) == NULL);
  nz_progress_update (NULL, 1);
  nz_progress_tick (NULL);
  nz_progress_set_label (NULL, "y");
  nz_progress_set_total (NULL, 2);
  nz_progress_set_wait (NULL, 1);
  nz_progress_restart (NULL);
  nz_progress_transfer_cb (1, 2, NULL);
  nz_progress_finish (NULL);
  nz_progress_free (NULL);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("progress");
  TCase *tc = tcase_create ("progress");

  tcase_add_test (tc, test_units);
  tcase_add_test (tc, test_bytes_line);
  tcase_add_test (tc, test_unknown_total_and_aggregate);
  tcase_add_test (tc, test_waiting_line);
  tcase_add_test (tc, test_label_is_cleaned_and_truncated);
  tcase_add_test (tc, test_make_room);
  tcase_add_test (tc, test_off);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
