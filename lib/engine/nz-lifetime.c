#include "nz-lifetime.h"

#include "nz-json.h"

struct _NzLifetime
{
  gint64 expires_at_ms;
  gint64 idle_timeout_ms;
  NzLifetimeBusyFunc busy;
  NzLifetimeFunc func;
  gpointer user_data;
  guint holds;
  gint64 idle_since_us; /* monotonic: the wall clock may jump, an idle period may not */
  guint deadline_id;
  guint idle_id;
  gboolean started;
  gboolean ended; /* fired or disarmed: never again */
};

NzLifetime *
nz_lifetime_new (gint64 expires_at_ms, gint64 idle_timeout_ms, NzLifetimeBusyFunc busy,
                 NzLifetimeFunc func, gpointer user_data)
{
  NzLifetime *lt;

  g_return_val_if_fail (func != NULL, NULL);
  lt = g_new0 (NzLifetime, 1);
  lt->expires_at_ms = MAX (expires_at_ms, 0);
  lt->idle_timeout_ms = MAX (idle_timeout_ms, 0);
  lt->busy = busy;
  lt->func = func;
  lt->user_data = user_data;
  return lt;
}

void
nz_lifetime_disarm (NzLifetime *lt)
{
  g_return_if_fail (lt != NULL);
  lt->ended = TRUE;
  g_clear_handle_id (&lt->deadline_id, g_source_remove);
  g_clear_handle_id (&lt->idle_id, g_source_remove);
}

void
nz_lifetime_free (NzLifetime *lt)
{
  if (lt == NULL)
    return;
  nz_lifetime_disarm (lt);
  g_free (lt);
}

static void
end (NzLifetime *lt, NzLifetimeEnd why, const char *message)
{
  nz_lifetime_disarm (lt);
  lt->func (lt, why, message, lt->user_data);
}

static gboolean deadline_fired (gpointer user_data);

static void
deadline_arm (NzLifetime *lt)
{
  gint64 left = lt->expires_at_ms - g_get_real_time () / 1000;

  /* At most a minute per timer: the monotonic timer and the wall clock drift apart across a
   * suspend or a clock step, and the deadline is the wall clock's. */
  lt->deadline_id = g_timeout_add ((guint)CLAMP (left, 0, 60000), deadline_fired, lt);
}

static gboolean
deadline_fired (gpointer user_data)
{
  NzLifetime *lt = user_data;
  g_autofree char *when = NULL;
  g_autofree char *msg = NULL;

  lt->deadline_id = 0;
  if (g_get_real_time () / 1000 < lt->expires_at_ms)
    {
      deadline_arm (lt);
      return G_SOURCE_REMOVE;
    }
  when = nz_json_format_time_ms (lt->expires_at_ms);
  msg = g_strdup_printf ("expired at %s — exiting", when);
  end (lt, NZ_LIFETIME_EXPIRED, msg);
  return G_SOURCE_REMOVE;
}

static gboolean
idle_tick (gpointer user_data)
{
  NzLifetime *lt = user_data;
  gint64 now = g_get_monotonic_time ();
  g_autofree char *msg = NULL;

  /* A command still running (detached, or its client gone) is activity too. */
  if (lt->busy != NULL && lt->busy (lt->user_data))
    {
      lt->idle_since_us = now;
      return G_SOURCE_CONTINUE;
    }
  if (now - lt->idle_since_us < lt->idle_timeout_ms * 1000)
    return G_SOURCE_CONTINUE;
  lt->idle_id = 0;
  msg = g_strdup_printf ("idle for %" G_GINT64_FORMAT "ms — exiting", lt->idle_timeout_ms);
  end (lt, NZ_LIFETIME_IDLE, msg);
  return G_SOURCE_REMOVE;
}

static void
idle_arm (NzLifetime *lt)
{
  g_clear_handle_id (&lt->idle_id, g_source_remove);
  if (lt->ended || !lt->started || lt->idle_timeout_ms <= 0 || lt->holds > 0)
    return;
  lt->idle_since_us = g_get_monotonic_time ();
  lt->idle_id
      = g_timeout_add ((guint)MIN (lt->idle_timeout_ms, NZ_LIFETIME_IDLE_TICK_MS), idle_tick, lt);
}

void
nz_lifetime_start (NzLifetime *lt)
{
  g_return_if_fail (lt != NULL);
  if (lt->started || lt->ended)
    return;
  lt->started = TRUE;
  if (lt->expires_at_ms > 0)
    deadline_arm (lt);
  idle_arm (lt);
}

void
nz_lifetime_hold (NzLifetime *lt)
{
  g_return_if_fail (lt != NULL);
  lt->holds++;
  g_clear_handle_id (&lt->idle_id, g_source_remove);
}

void
nz_lifetime_release (NzLifetime *lt)
{
  g_return_if_fail (lt != NULL && lt->holds > 0);
  if (--lt->holds == 0)
    idle_arm (lt);
}

guint
nz_lifetime_get_holds (NzLifetime *lt)
{
  return lt->holds;
}

gint64
nz_lifetime_get_idle_timeout_ms (NzLifetime *lt)
{
  return lt->idle_timeout_ms;
}
