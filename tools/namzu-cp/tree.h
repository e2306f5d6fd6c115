/* tree.h: namzu-cp -r, directory copies into and out of a sandbox (tree.c). */
#pragma once

#include <gio/gio.h>

#include "nz-agent-client.h"
#include "nz-agent-files.h"

G_BEGIN_DECLS

/* What a copy did, for the result line. */
typedef struct
{
  char *source;      /* as resolved: the local path, or the sandbox path the agent named */
  char *destination; /* likewise */
  gint64 bytes;      /* file content moved */
  gint64 files, directories, symlinks;
  gint64 skipped; /* entries that are neither file, directory nor symlink (a FIFO, a socket) */
} NzCpTree;

void nz_cp_tree_clear (NzCpTree *t);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzCpTree, nz_cp_tree_clear)

/* Copies the local @src (a directory and everything below it, a file, or a symlink as a
 * symlink) to the sandbox path @dst: into @dst/<basename> when @dst is a directory there or
 * ends in '/', else to @dst. No local symlink is followed, the root included. @progress gets
 * the bytes moved across every file against the tree's total. */
gboolean nz_cp_tree_upload (NzAgentClient *c, const char *src, const char *dst,
                            NzAgentProgressFunc progress, gpointer user_data, NzCpTree *out,
                            GError **error);

/* Copies the sandbox path @src (as above) to the local @dst (into @dst/<basename> when @dst is
 * a directory). The agent's listing is untrusted: every path is checked to lie below @src,
 * and everything is made with *at() calls under directory fds this copy opened without
 * following a symlink, so nothing lands outside the destination whatever the agent says. */
gboolean nz_cp_tree_download (NzAgentClient *c, const char *src, const char *dst,
                              NzAgentProgressFunc progress, gpointer user_data, NzCpTree *out,
                              GError **error);

G_END_DECLS
