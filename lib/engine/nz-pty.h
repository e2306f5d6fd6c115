/* nz-pty.h: a program on a pseudo-terminal owned by the agent (spec C.9): openpty, fork, a new
 * kernel session with the slave as controlling terminal, exec. No helper process: the leader's
 * pid is the session id and the process group id. Wire-neutral. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define NZ_PTY_MAX_COLS 1000
#define NZ_PTY_MAX_ROWS 1000

typedef struct _NzPty NzPty;

typedef struct
{
  /* Raw bytes the program wrote to the terminal. */
  void (*output) (NzPty *pty, const guint8 *data, gsize len, gpointer user_data);
  /* Input queued by nz_pty_write() has all been written (backpressure released). */
  void (*input_drained) (NzPty *pty, gpointer user_data);
  /* The leader was reaped; the output it wrote has been delivered. Called once. */
  void (*exited) (NzPty *pty, int wait_status, gpointer user_data);
} NzPtyCallbacks;

/* Starts @command (PATH-searched) with @args (without argv[0]) in @cwd with @envp on a new
 * terminal of @cols x @rows. A program that cannot be executed exits 127 (126 when found but
 * not executable) after printing why on the terminal, like a shell. Requires the exec reaper
 * (nz_exec_reaper_install). */
NzPty *nz_pty_spawn (const char *command, const char *const *args, const char *cwd,
                     char *const *envp, guint cols, guint rows, const NzPtyCallbacks *callbacks,
                     gpointer user_data, GError **error);
/* Stops watching (the program is not signalled). */
void nz_pty_free (NzPty *pty);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzPty, nz_pty_free)

GPid nz_pty_get_pid (NzPty *pty);
gboolean nz_pty_has_exited (NzPty *pty);

/* Writes to the terminal's input. FALSE when some of it had to be queued: the caller should
 * stop reading its source until input_drained. */
gboolean nz_pty_write (NzPty *pty, const void *data, gsize len);
/* TIOCSWINSZ; the kernel tells the foreground group with SIGWINCH. */
gboolean nz_pty_resize (NzPty *pty, guint cols, guint rows, GError **error);
/* Backpressure on the output side: stop or restart reading the terminal. */
void nz_pty_set_output_paused (NzPty *pty, gboolean paused);

/* Every pid whose kernel session is one of @sids (ids <= 1 and the agent's own session never
 * count), found by scanning /proc, gets @signo; then the process group @pgid (if > 1) does.
 * Reaches jobs a shell put in the background, even ones ignoring SIGHUP (spec C.9). Returns
 * the number of pids signalled. */
guint nz_pty_signal_sessions (const GPid *sids, guint n_sids, GPid pgid, int signo);

/* The signal of a terminal `kill` event or kill-session: SIGTERM, SIGKILL, SIGINT or SIGHUP
 * by name; anything else (or NULL) becomes @fallback. */
int nz_pty_allowed_signal (const char *name, int fallback);

G_END_DECLS
