/* nz-state.h: the private state directory and sandbox handles (DESIGN.md "Handles and state").
 *
 * Layout: <state>/<id>/handle.json holds the full private handle (endpoint, token, pids,
 * cgroups), written atomically; the directory is 0700 and every file 0600, because the token
 * in it is the sandbox's credential. <state> is $NAMZU_STATE_DIR, else $XDG_RUNTIME_DIR/namzu,
 * else /run/namzu for root. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define NZ_HANDLE_FILE "handle.json"

typedef struct
{
  char *id;             /* "nz-" + 12 lowercase hex digits */
  char *backend;        /* e.g. "container:bwrap" */
  char *tier;           /* "container" | "microvm" */
  gint64 created_at_ms; /* wall clock, ms since the epoch */
  char *dir;            /* <state>/<id> */
  char *endpoint;       /* transport address, "unix:/abs/path" for bwrap */
  char *token;          /* per-instance credential; never printed on stdout */
  JsonObject *priv;     /* backend-private members (pids, cgroups, policy) */
  gint64 expires_at_ms; /* wall clock, ms since the epoch; 0 = no deadline */
  gint64 idle_timeout_ms; /* the server's idle timeout; 0 = none */
} NzHandle;

NzHandle *nz_handle_new (void);
void nz_handle_free (NzHandle *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzHandle, nz_handle_free)

/* The state directory's path (not created). Returns a new string, or NULL when none of
 * $NAMZU_STATE_DIR, $XDG_RUNTIME_DIR or root's /run applies. */
char *nz_state_dir (GError **error);
/* Creates the state directory if needed (0700) and checks it is ours and private. */
char *nz_state_dir_ensure (GError **error);

/* A fresh sandbox id: "nz-" + 12 hex digits (48 random bits). */
char *nz_state_new_id (void);
/* TRUE when @id has the shape of a sandbox id, so it can never name a path outside <state>. */
gboolean nz_state_id_is_valid (const char *id);

/* Creates <state>/<id> (0700) for a new handle and sets h->dir. Fails with BUSY if it exists. */
gboolean nz_handle_make_dir (NzHandle *h, GError **error);
/* Writes the private handle to <dir>/handle.json atomically with mode 0600. */
gboolean nz_handle_save (NzHandle *h, GError **error);
/* Loads the handle of sandbox @id; NOT_FOUND names the state dir and suggests namzu-ls. */
NzHandle *nz_handle_load (const char *id, GError **error);
/* Every sandbox in the state dir, sorted by creation time (array of NzHandle *, owns them).
 * A sandbox directory whose handle exists but cannot be read or parsed is left out and, when
 * @unreadable is not NULL, described there (char *, "sandbox 'ID' (DIR): why"). One with no
 * handle file yet (being created) or any more (being destroyed) is left out silently. */
GPtrArray *nz_state_list (GPtrArray *unreadable, GError **error);
/* Removes <dir> and everything in it. */
gboolean nz_handle_remove_dir (NzHandle *h, GError **error);

/* The private handle as stored on disk (includes the token). Returns a new reference. */
JsonObject *nz_handle_to_private_json (const NzHandle *h);
/* Parses a private handle. Returns a new handle (dir unset), or NULL with INVALID_ARGS. */
NzHandle *nz_handle_from_private_json (JsonObject *obj, GError **error);

/* Resolves the sandbox a tool should act on: @sandbox_arg (--sandbox), then $NAMZU_SANDBOX,
 * then, if @allow_stdin and stdin is not a TTY, one JSON public handle read from stdin (its
 * "id"). Errors: nothing given (INVALID_ARGS), malformed id or handle JSON (INVALID_ARGS),
 * unknown sandbox (NOT_FOUND, naming the state dir). */
NzHandle *nz_handle_resolve (const char *sandbox_arg, gboolean allow_stdin, GError **error);
/* Same, reading the stdin handle from @fd (tests). */
NzHandle *nz_handle_resolve_fd (const char *sandbox_arg, int fd, GError **error);
/* Only the id those would load (not checked against the state dir). Returns a new string. */
char *nz_handle_resolve_id (const char *sandbox_arg, gboolean allow_stdin, GError **error);
char *nz_handle_resolve_id_fd (const char *sandbox_arg, int fd, GError **error);

/* Tombstones: <state>/<id>.destroyed, left by a destroy so that destroying the same id again
 * is a success ("already gone") rather than "unknown sandbox"; kept NZ_TOMBSTONE_KEEP_DAYS
 * days (older ones are pruned whenever a new one is written). Never listed as sandboxes. */
#define NZ_TOMBSTONE_SUFFIX ".destroyed"
#define NZ_TOMBSTONE_KEEP_DAYS 7
gboolean nz_state_bury (const char *id, GError **error);
gboolean nz_state_is_buried (const char *id);
/* TRUE for a state-dir entry name that is a tombstone ("nz-<12 hex>.destroyed"). */
gboolean nz_state_is_tombstone_name (const char *name);

G_END_DECLS
