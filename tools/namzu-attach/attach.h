/* attach.h: namzu-attach's modes. main.c parses the options and runs one; each returns as a tool
 * does (nz-cli.h): TRUE for exit 0, else FALSE with the exit status it has explained or the
 * error nz_cli_main() reports. */
#pragma once

#include "nz-agent-client.h"

G_BEGIN_DECLS

/* follow.c: an execution's or a session's output, replayed from @from and followed; the exit
 * status is the command's. @timeout_ms: the longest the execution may still run. */
gboolean nz_attach_follow_execution (NzAgentClient *c, const char *execution_id, guint64 from,
                                     long long timeout_ms, gint64 heartbeat_ms, GError **error);
gboolean nz_attach_follow_session (NzAgentClient *c, const char *session_id, guint64 from,
                                   gint64 heartbeat_ms, GError **error);

/* What follow.c shares with the terminal: output bytes on our stdout or stderr, the status an
 * exit frame carries, and a failure of namzu itself (said on stderr, NZ_EXEC_EXIT_NAMZU). */
void nz_attach_write_output (int stream, const char *data, gsize len, gpointer user_data);
int nz_attach_session_status (JsonObject *exit_frame);
int nz_attach_fail (const GError *cause);
gboolean nz_attach_exit_status (GError **error, int status);

/* terminal.c: an interactive terminal running @command (NULL or empty: the agent's shell);
 * @persistent_id: the session it keeps running as after we detach, or NULL; @heartbeat_ms: the
 * heartbeat to ask for (0: none). */
gboolean nz_attach_terminal (NzAgentClient *c, char **command, const char *persistent_id,
                             gint64 heartbeat_ms, GError **error);

/* sessions.c: one call each, its reply printed as JSON. */
gboolean nz_attach_list_sessions (NzAgentClient *c, GError **error);
gboolean nz_attach_start_detached (NzAgentClient *c, const char *session_id, char **command,
                                   GError **error);
gboolean nz_attach_kill_session (NzAgentClient *c, const char *session_id, const char *signame,
                                 GError **error);

/* Sets "command" and "args" in @body from @command (its first element is the program). */
void nz_attach_set_command (JsonObject *body, char **command);

G_END_DECLS
