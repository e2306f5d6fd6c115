/* nz-lifetime.h: how long a sandbox's server lives (namzu extension, docs/backends.md
 * "Lifetimes"): an absolute deadline on the wall clock and an idle timeout. Both servers
 * (namzu-agent, namzu-worker) run one; when it ends, the server exits and, being the sandbox's
 * payload, takes the sandbox with it, so no host process has to outlive the create.
 *
 * Idle means: no hold taken (a connection, a request) and nothing running (the @busy probe,
 * polled). The deadline is wall-clock milliseconds since the epoch, so it means the same
 * instant to the host that set it and to the server, whenever the server started. */
#pragma once

#include <glib.h>

#include "nz-errors.h"

G_BEGIN_DECLS

/* The status a server exits with when its deadline passes (and the agent also when idle). */
#define NZ_LIFETIME_EXIT_STATUS NZ_EXIT_EXPIRED

/* Poll period of the busy probe while idle: the idle timeout's resolution. */
#define NZ_LIFETIME_IDLE_TICK_MS 1000

typedef enum
{
  NZ_LIFETIME_EXPIRED, /* the deadline passed */
  NZ_LIFETIME_IDLE,    /* idle for the whole idle timeout */
} NzLifetimeEnd;

typedef struct _NzLifetime NzLifetime;

/* Called once, on the main context, when the lifetime ends; @message is the log line
 * ("expired at ..." / "idle for Nms"). The timers are disarmed by then. */
typedef void (*NzLifetimeFunc) (NzLifetime *lt, NzLifetimeEnd why, const char *message,
                                gpointer user_data);
/* TRUE while something the server started is still running. */
typedef gboolean (*NzLifetimeBusyFunc) (gpointer user_data);

/* @expires_at_ms: 0 for no deadline; @idle_timeout_ms: <= 0 for no idle timeout. Nothing is
 * armed until nz_lifetime_start. @busy may be NULL. */
NzLifetime *nz_lifetime_new (gint64 expires_at_ms, gint64 idle_timeout_ms, NzLifetimeBusyFunc busy,
                             NzLifetimeFunc func, gpointer user_data);
void nz_lifetime_free (NzLifetime *lt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzLifetime, nz_lifetime_free)

/* Arms the deadline and, with no hold taken, the idle clock (from now). A deadline already
 * past ends the lifetime on the next main-loop iteration. */
void nz_lifetime_start (NzLifetime *lt);
/* Activity begins / ends; the idle clock restarts when the last hold goes. */
void nz_lifetime_hold (NzLifetime *lt);
void nz_lifetime_release (NzLifetime *lt);
/* Stops both timers for good (a poisoned worker, a SIGTERM drain): nothing fires after it. */
void nz_lifetime_disarm (NzLifetime *lt);

/* The number of holds taken and not released (tests, the worker's lease count). */
guint nz_lifetime_get_holds (NzLifetime *lt);
gint64 nz_lifetime_get_idle_timeout_ms (NzLifetime *lt);

G_END_DECLS
