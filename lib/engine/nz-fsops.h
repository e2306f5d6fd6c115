/* nz-fsops.h: the file verbs beyond read and write (feature `file-ops`, docs/agent.md):
 * list-files / walk-files, stat-file, remove-file and move-file, parsed and run once for any
 * wire. Every path goes through the workspace jail; no symlink is ever followed below a walk's
 * root, and stat/remove/move act on the entry itself (lstat semantics). Each call fills
 * @reply with the op's members (the wire adds `ok` and `guestBootId`) or fails with the
 * agent's error string as the message. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

/* Defaults and bounds of a walk's body members. maxEntries bounds the reply frame (with the
 * byte budget below); maxDepth bounds the directory fds a walk holds open at once. */
#define NZ_FSOPS_DEFAULT_MAX_ENTRIES 1000
#define NZ_FSOPS_MAX_ENTRIES 100000
#define NZ_FSOPS_MAX_DEPTH 128
/* The reference's default examined-entry budget (maxVisitedEntries, spec walkFiles). */
#define NZ_FSOPS_DEFAULT_MAX_VISITED 20000
#define NZ_FSOPS_MAX_VISITED 10000000
/* A reply stops growing here (truncated: true), whatever maxEntries allows. */
#define NZ_FSOPS_REPLY_BUDGET_BYTES (16 * 1024 * 1024)

/* The examined-entry budget ran out: the whole walk fails (the reference's
 * ERR_FILE_WALK_LIMIT), rather than returning a listing that silently misses entries. */
#define NZ_FSOPS_WALK_LIMIT_PREFIX "file_walk_limit"

/* list-files (@files_only FALSE: every entry, maxDepth default 1) or walk-files (@files_only
 * TRUE: regular files only, maxDepth default NZ_FSOPS_MAX_DEPTH). Body: {root, maxEntries?,
 * maxDepth?, maxVisitedEntries?, includeHidden?, pattern?}. Reply: {root, entries:[{path,
 * type, size, mode, mtimeMs, target?}], truncated}. A root that does not exist is an empty
 * listing. */
gboolean nz_fsops_walk (NzGuest *guest, JsonObject *body, gboolean files_only, JsonObject *reply,
                        GError **error);

/* stat-file {path}: {entry:{…}} of the entry itself (a symlink is reported, not followed). */
gboolean nz_fsops_stat (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error);

/* remove-file {path, recursive?}: {removed} (false when nothing was there). A directory needs
 * recursive: true; a symlink is removed itself; no root of the jail can be removed. */
gboolean nz_fsops_remove (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error);

/* move-file {from, to}: rename(2) inside the write roots; the entry itself moves (a symlink
 * stays a link); neither side may be a root. Reply: {from, to}. */
gboolean nz_fsops_move (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error);

/* file-tree-ops (docs/agent.md), each in the write roots and never on a root of the jail:
 * make-directory {path, mode?}: mkdir -p, the last directory's permission bits set exactly
 * (0..0777) whether it was made or there; reply {path, created}. */
gboolean nz_fsops_make_directory (NzGuest *guest, JsonObject *body, JsonObject *reply,
                                  GError **error);
/* make-symlink {path, target}: a link (its target only text) in an existing parent; a file or
 * link already there is replaced by a rename, a directory is not. Reply {path, target}. */
gboolean nz_fsops_make_symlink (NzGuest *guest, JsonObject *body, JsonObject *reply,
                                GError **error);
/* set-file-mode {path, mode}: chmod of the entry itself (0..0777); a symlink is refused, never
 * followed. Reply {path, mode}. */
gboolean nz_fsops_set_mode (NzGuest *guest, JsonObject *body, JsonObject *reply, GError **error);

G_END_DECLS
