/* guard.h: namzu-run's guard, a second namzu-run in a session of its own that destroys the
 * sandbox if the first one ends without saying it is done (SIGKILL, a crash). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Set in the guard's environment only: main() then runs nz_run_guard_main(). */
#define NZ_RUN_GUARD_ENV "NAMZU_RUN_GUARD"

typedef struct
{
  int fd; /* our end of the socket the guard reads; -1 when not started */
} NzRunGuard;

#define NZ_RUN_GUARD_INIT                                                                          \
  {                                                                                                \
    -1                                                                                             \
  }

/* Starts the guard (not our child: GLib's double fork, then setsid, so neither our exit nor
 * the terminal's signals reach it). */
gboolean nz_run_guard_start (NzRunGuard *guard, GError **error);
/* The sandbox exists: from now on the guard destroys @id unless disarmed. */
void nz_run_guard_arm (NzRunGuard *guard, const char *id);
/* We destroyed it (or tried, and kept its state for a retry): the guard exits quietly. */
void nz_run_guard_disarm (NzRunGuard *guard);
void nz_run_guard_clear (NzRunGuard *guard);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzRunGuard, nz_run_guard_clear)

/* The guard's own main: reads the id and "done" lines until EOF; destroys on EOF without
 * "done". Returns its exit status. */
int nz_run_guard_main (void);

G_END_DECLS
