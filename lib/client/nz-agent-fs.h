/* nz-agent-fs.h: host-side file verbs beyond read and write: list, walk, stat, remove, move,
 * and mkdir, symlink, chmod for directory copies.
 * Each uses the agent's `file-ops` / `file-tree-ops` ops when healthz advertises the feature
 * (docs/agent.md),
 * and otherwise runs GNU find / rm / mv through `execute` with an argv (no shell), which is
 * what a reference agent or a namzu-worker without the feature offers. Blocking, like
 * nz-agent-client.
 *
 * Every result is checked as untrusted input and rebuilt: entries are {path, type, size, mode,
 * mtimeMs, target?} with type one of file, directory, symlink, other. Through `execute` the
 * commands run with the workload's rights (the workload can do the same itself); the jail
 * applies to the ops. */
#pragma once

#include <gio/gio.h>

#include "nz-agent-client.h"

G_BEGIN_DECLS

#define NZ_AGENT_FS_FEATURE "file-ops"
/* make-directory, make-symlink, set-file-mode: what a directory copy needs besides writes. */
#define NZ_AGENT_FS_TREE_FEATURE "file-tree-ops"

#define NZ_AGENT_FS_ERROR (nz_agent_fs_error_quark ())
GQuark nz_agent_fs_error_quark (void);

typedef enum
{
  /* The examined-entry budget (maxVisitedEntries) ran out: the reference's
   * ERR_FILE_WALK_LIMIT. */
  NZ_AGENT_FS_ERROR_WALK_LIMIT,
} NzAgentFsErrorCode;

/* The error code the reference names for NZ_AGENT_FS_ERROR_WALK_LIMIT. */
#define NZ_AGENT_FS_WALK_LIMIT_CODE "ERR_FILE_WALK_LIMIT"

typedef struct
{
  const char *root;   /* relative to the workspace, or absolute */
  gint64 max_entries; /* 0: 1000 */
  gint max_depth;     /* 0: 1 for a list, 128 for a walk; children are depth 1 */
  gint64 max_visited; /* 0: 20000 (the reference's default) */
  gboolean include_hidden;
  const char *pattern; /* fnmatch(3) on the entry's name, or NULL */
} NzAgentFsWalkOptions;

/* A list (@files_only FALSE: every entry) or a walk (@files_only TRUE: regular files only) of
 * @o->root, never following a symlink below it. Returns {root, entries, truncated, via}
 * (new reference; via is "file-ops" or "execute"). A root that does not exist is an empty
 * listing; a spent examined-entry budget is NZ_AGENT_FS_ERROR_WALK_LIMIT. */
JsonObject *nz_agent_fs_walk (NzAgentClient *c, gboolean files_only, const NzAgentFsWalkOptions *o,
                              GCancellable *cancellable, GError **error);

/* lstat of @path: the entry object (new reference); NZ_ERROR_NOT_FOUND when absent. */
JsonObject *nz_agent_fs_stat (NzAgentClient *c, const char *path, GCancellable *cancellable,
                              GError **error);

/* Removes @path (a directory only with @recursive; a symlink itself). *@out_removed (may be
 * NULL) says whether anything was there. The workspace root is refused. */
gboolean nz_agent_fs_remove (NzAgentClient *c, const char *path, gboolean recursive,
                             gboolean *out_removed, GCancellable *cancellable, GError **error);

/* rename(2) of @from to @to (a symlink moves as a link; an existing @to file is replaced). */
gboolean nz_agent_fs_move (NzAgentClient *c, const char *from, const char *to,
                           GCancellable *cancellable, GError **error);

/* mkdir -p of @path; with @mode >= 0 (permission bits, at most 0777) the last directory gets
 * exactly those bits, also when it was there. Returns the directory's absolute path in the
 * sandbox (new string), so later calls need no workspace lookup. Through `execute`:
 * `install -d -m MODE` (or `mkdir -p`). */
char *nz_agent_fs_make_directory (NzAgentClient *c, const char *path, gint mode,
                                  GCancellable *cancellable, GError **error);

/* A symlink @path -> @target (only text; the parent must exist). A file or a link at @path is
 * replaced, a directory is not. Through `execute`: `ln -sfnT`. */
gboolean nz_agent_fs_make_symlink (NzAgentClient *c, const char *path, const char *target,
                                   GCancellable *cancellable, GError **error);

/* chmod of @path itself to @mode (0..0777); the op refuses a symlink. Through `execute`:
 * `chmod` (which, run with the workload's rights, follows one). */
gboolean nz_agent_fs_set_mode (NzAgentClient *c, const char *path, gint mode,
                               GCancellable *cancellable, GError **error);

G_END_DECLS
