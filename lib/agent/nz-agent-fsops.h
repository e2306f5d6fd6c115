/* nz-agent-fsops.h: the framed wire of the `file-ops` feature (list-files, walk-files,
 * stat-file, remove-file, move-file; nz-fsops.h). Internal to nz-agent-ops. */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* TRUE when @op is one of the file-ops verbs. */
gboolean nz_agent_fsops_handles (const char *op);
/* Runs @op (nz_agent_fsops_handles() said yes) on @env's body; replies and ends. */
void nz_agent_fsops_op (NzAgentConn *conn, NzEnvelope *env);

G_END_DECLS
