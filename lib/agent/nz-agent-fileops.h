/* nz-agent-fileops.h: the wire side of the file ops added with `write-file-parts` and the ranged
 * read-file of `read-file-stream` (spec A.6.6, A.6.9). Internal to nz-agent-ops. */
#pragma once

#include "nz-agent-conn.h"

G_BEGIN_DECLS

/* write-file with a valid `part` object; @path is body.path. Replies and ends. */
void nz_agent_fileops_write_part (NzAgentConn *conn, NzEnvelope *env, const char *path,
                                  JsonObject *part);
/* read-file with offset or length present: the ranged read. Replies and ends. */
void nz_agent_fileops_read_range (NzAgentConn *conn, NzEnvelope *env, const char *path);

G_END_DECLS
