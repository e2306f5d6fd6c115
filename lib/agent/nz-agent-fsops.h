/* nz-agent-fsops.h: the framed wire of the `file-ops` feature (list-files, walk-files,
 * stat-file, remove-file, move-file) and the `file-tree-ops` feature (make-directory,
 * make-symlink, set-file-mode); nz-fsops.h. Internal to nz-agent-ops. */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* The feature ("file-ops" or "file-tree-ops") whose verb @op is, or NULL. */
const char *nz_agent_fsops_feature (const char *op);
/* Runs @op (nz_agent_fsops_feature() named one) on @env's body; replies and ends. */
void nz_agent_fsops_op (NzAgentConn *conn, NzEnvelope *env);

G_END_DECLS
