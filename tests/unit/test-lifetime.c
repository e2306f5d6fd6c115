/* Unit tests for lib/engine/nz-lifetime: what ends a lifetime and what keeps it going. Each
 * case runs a main loop until the lifetime ends or a generous guard timer (a failure) fires;
 * nothing asserts how long anything took. */
#include "nz-lifetime.h"
#include "../nz-test.h"

typedef struct
{
  GMainLoop *loop;
  int ended; /* times the callback ran */
  NzLifetimeEnd why;
  char *message;
  gboolean busy; /* what the busy probe answers */
  guint busy_polls;
  NzLifetime *lt;
} Ctx;

static void
on_end (NzLifetime *lt, NzLifetimeEnd why, const char *message, gpointer user_data)
{
  Ctx *c = user_data;

  c->ended++;
  c->why = why;
  g_free (c->message);
  c->message = g_strdup (message);
  g_main_loop_quit (c->loop);
}

static gboolean
busy (gpointer user_data)
{
  Ctx *c = user_data;

  c->busy_polls++;
  return c->busy;
}

static gboolean
quit (gpointer user_data)
{
  g_main_loop_quit (((Ctx *)user_data)->loop);
  return G_SOURCE_REMOVE;
}

/* Runs the loop until the lifetime ends or @guard_ms passes. */
static void
run_for (Ctx *c, guint guard_ms)
{
  guint id = g_timeout_add (guard_ms, quit, c);

  g_main_loop_run (c->loop);
  /* Either way the guard has not run yet unless it was what quit the loop. */
  if (g_main_context_find_source_by_id (NULL, id) != NULL)
    g_source_remove (id);
}

static void
ctx_init (Ctx *c, gint64 expires, gint64 idle)
{
  *c = (Ctx){ .loop = g_main_loop_new (NULL, FALSE) };
  c->lt = nz_lifetime_new (expires, idle, busy, on_end, c);
}

static void
ctx_clear (Ctx *c)
{
  nz_lifetime_free (c->lt);
  g_main_loop_unref (c->loop);
  g_free (c->message);
}

START_TEST (test_deadline_fires_once)
{
  Ctx c;

  ctx_init (&c, g_get_real_time () / 1000 + 200, 0);
  nz_lifetime_start (c.lt);
  /* Holds do not keep a deadline off. */
  nz_lifetime_hold (c.lt);
  run_for (&c, 30000);
  ck_assert_int_eq (c.ended, 1);
  ck_assert_int_eq (c.why, NZ_LIFETIME_EXPIRED);
  ck_assert_msg (g_str_has_prefix (c.message, "expired at 20"), "%s", c.message);
  /* Nothing fires again. */
  run_for (&c, 500);
  ck_assert_int_eq (c.ended, 1);
  nz_lifetime_release (c.lt);
  ctx_clear (&c);
}
END_TEST

START_TEST (test_deadline_in_the_past_fires_at_once)
{
  Ctx c;

  ctx_init (&c, 1, 0);
  nz_lifetime_start (c.lt);
  run_for (&c, 30000);
  ck_assert_int_eq (c.ended, 1);
  ck_assert_int_eq (c.why, NZ_LIFETIME_EXPIRED);
  ctx_clear (&c);
}
END_TEST

/* Nothing armed before start, and nothing with neither a deadline nor an idle timeout. */
START_TEST (test_nothing_without_start_or_limits)
{
  Ctx c, d;

  ctx_init (&c, 1, 100);
  run_for (&c, 600);
  ck_assert_int_eq (c.ended, 0);
  ctx_clear (&c);
  ctx_init (&d, 0, 0);
  nz_lifetime_start (d.lt);
  run_for (&d, 600);
  ck_assert_int_eq (d.ended, 0);
  ctx_clear (&d);
}
END_TEST

/* A hold keeps the idle timeout off for as long as it is held; the clock restarts at release. */
START_TEST (test_hold_keeps_idle_off)
{
  Ctx c;

  ctx_init (&c, 0, 200);
  nz_lifetime_hold (c.lt);
  nz_lifetime_start (c.lt);
  run_for (&c, 1500);
  ck_assert_int_eq (c.ended, 0);
  ck_assert_uint_eq (nz_lifetime_get_holds (c.lt), 1);
  nz_lifetime_release (c.lt);
  run_for (&c, 30000);
  ck_assert_int_eq (c.ended, 1);
  ck_assert_int_eq (c.why, NZ_LIFETIME_IDLE);
  ck_assert_str_eq (c.message, "idle for 200ms — exiting");
  ctx_clear (&c);
}
END_TEST

/* Something running (the busy probe) is activity, with no hold taken. */
START_TEST (test_busy_keeps_idle_off)
{
  Ctx c;

  ctx_init (&c, 0, 200);
  c.busy = TRUE;
  nz_lifetime_start (c.lt);
  run_for (&c, 1500);
  ck_assert_int_eq (c.ended, 0);
  ck_assert_uint_gt (c.busy_polls, 0);
  c.busy = FALSE;
  run_for (&c, 30000);
  ck_assert_int_eq (c.ended, 1);
  ck_assert_int_eq (c.why, NZ_LIFETIME_IDLE);
  ctx_clear (&c);
}
END_TEST

START_TEST (test_disarm_stops_everything)
{
  Ctx c;

  ctx_init (&c, g_get_real_time () / 1000 + 100, 100);
  nz_lifetime_start (c.lt);
  nz_lifetime_disarm (c.lt);
  /* A release after disarm arms nothing either. */
  nz_lifetime_hold (c.lt);
  nz_lifetime_release (c.lt);
  run_for (&c, 800);
  ck_assert_int_eq (c.ended, 0);
  ctx_clear (&c);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("lifetime");
  TCase *tc = tcase_create ("lifetime");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_deadline_fires_once);
  tcase_add_test (tc, test_deadline_in_the_past_fires_at_once);
  tcase_add_test (tc, test_nothing_without_start_or_limits);
  tcase_add_test (tc, test_hold_keeps_idle_off);
  tcase_add_test (tc, test_busy_keeps_idle_off);
  tcase_add_test (tc, test_disarm_stops_everything);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
