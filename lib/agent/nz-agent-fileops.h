/* nz-agent-fileops.h: the wire side of the file ops added with `write-file-parts` and the ranged
 * read-file of `read-file-stream` (spec A.6.6, A.6.9). Internal to nz-agent-ops. */
#pragma once

#include "nz-agent-conn.h"
#include "nz-op-files.h"

G_BEGIN_DECLS

/* write-file with a valid `part` object (@req->part). Replies and ends. */
void nz_agent_fileops_write_part (NzAgentConn *conn, const NzFileRequest *req);
/* read-file with offset or length present (@req->ranged): the ranged read of @env's body.
 * Replies and ends. */
void nz_agent_fileops_read_range (NzAgentConn *conn, NzEnvelope *env, const NzFileRequest *req);

G_END_DECLS
