/* nz-sessions.h: the session registry (spec C.10): persistent terminals and start-detached
 * programs that outlive their connection. Each keeps an output ring read whether or not anyone
 * is attached, and at most one attachment at a time. Wire-neutral: the attachment is a set of
 * callbacks. */
#pragma once

#include <glib.h>

#include "nz-guest.h"
#include "nz-output-log.h"
#include "nz-pty.h"

G_BEGIN_DECLS

typedef enum
{
  NZ_SESSION_TERMINAL,
  NZ_SESSION_DETACHED,
} NzSessionKind;

typedef struct _NzSession NzSession;
typedef struct _NzSessionRegistry NzSessionRegistry;

/* The one attachment of a session. */
typedef struct
{
  /* A chunk of output (stream 0 stdout, 1 stderr) at @offset in the ring. */
  void (*output) (NzSession *s, int stream, guint64 offset, const guint8 *data, gsize len,
                  gpointer user_data);
  /* The program exited; the attachment is dropped right after. */
  void (*exited) (NzSession *s, gpointer user_data);
  /* Another attachment took over (@reason "superseded"); dropped right after. */
  void (*detached) (NzSession *s, const char *reason, gpointer user_data);
} NzSessionAttachFuncs;

struct _NzSession
{
  gint ref_count;
  NzSessionRegistry *reg; /* NULL once removed from the registry */
  char *id;
  NzSessionKind kind;
  char *command;
  char **args;
  gint64 started_at;
  gint64 last_input_at;
  gint64 last_output_at;
  NzOutputLog *log;
  gboolean exited;
  int exit_code; /* -1 when a signal ended it */
  int signal;    /* numeric; 0 when none */
  gint64 exited_at;
  gint64 expires_at;
  GPid pid; /* leader: unixSessionIds = [pid], processGroupId = pid */
  NzPty *pty;
  int out_fd;
  int err_fd;
  guint out_watch;
  guint err_watch;
  const NzSessionAttachFuncs *attach;
  gpointer attach_data;
  GPtrArray *exit_waiters;
};

NzSession *nz_session_ref (NzSession *s);
void nz_session_unref (NzSession *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzSession, nz_session_unref)

/* ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ */
gboolean nz_session_id_is_valid (const char *id);
const char *nz_session_kind_to_string (NzSessionKind kind);

/* The guest's registry, created on first use (and registered as a quiesce process provider:
 * every running session's kernel session and process group are owned). */
NzSessionRegistry *nz_session_registry_get (NzGuest *guest);
/* Kills every running session's tree (SIGKILL) and frees the registry. */
void nz_session_registry_free (NzSessionRegistry *reg);

/* Deletes exited sessions whose retention ran out. */
void nz_session_registry_prune (NzSessionRegistry *reg, gint64 now_ms);
NzSession *nz_session_registry_lookup (NzSessionRegistry *reg, const char *id); /* borrowed */
/* makeRoomForSession: if full, evicts exited sessions (oldest expiry first). FALSE when every
 * slot holds a running session (session_capacity). */
gboolean nz_session_registry_make_room (NzSessionRegistry *reg);
/* Sessions in start order; borrowed. Returns a new array. */
GPtrArray *nz_session_registry_list (NzSessionRegistry *reg);

/* Starts and registers a session. @id must be valid and free, and room made. Terminal: on a
 * PTY of @cols x @rows. Detached: stdin /dev/null, stdout and stderr to the ring; a program
 * that cannot start is NZ_ERROR_FAILED with Node's "spawn <cmd> <CODE>" and is not
 * registered. Returns a borrowed session. */
NzSession *nz_session_start (NzSessionRegistry *reg, NzSessionKind kind, const char *id,
                             const char *command, const char *const *args, const char *cwd,
                             char **envp, guint cols, guint rows, GError **error);

/* Becomes the attachment; the previous one, if any, is told `superseded` first. */
void nz_session_attach (NzSession *s, const NzSessionAttachFuncs *funcs, gpointer user_data);
/* Drops the attachment if it is @user_data's. */
void nz_session_detach (NzSession *s, gpointer user_data);
gboolean nz_session_is_attached (NzSession *s);

/* Terminal input (FALSE: queued, see NzPtyCallbacks.input_drained -> @drained). */
gboolean nz_session_write_input (NzSession *s, const void *data, gsize len, GSourceFunc drained,
                                 gpointer drained_data);
void nz_session_resize (NzSession *s, guint cols, guint rows);
/* Signals the session's whole tree (spec C.9); returns the number of pids signalled. */
guint nz_session_signal (NzSession *s, int signo);

/* @func(@user_data) once the session exited, or after @timeout_ms. */
void nz_session_wait_exit (NzSession *s, gint64 timeout_ms, GSourceFunc func, gpointer user_data);

G_END_DECLS
