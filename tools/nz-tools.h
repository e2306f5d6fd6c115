/* nz-tools.h: every tool is a builtin under nz_cli_main() (nz-cli.h), which turns its GError
 * into the exit status and the report. Each tool's main() is one line. */
#pragma once

#include "nz-cli.h"

G_BEGIN_DECLS

gboolean nz_tool_agent (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_attach (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_cp (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_fs (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_create (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_destroy (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_egress (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_exec (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_ls (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_port_forward (int argc, char **argv, GCancellable *cancellable,
                               GError **error);
gboolean nz_tool_quiesce (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_suspend (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_resume (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_run (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_seed (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_tool_worker (int argc, char **argv, GCancellable *cancellable, GError **error);

G_END_DECLS
