/* commands.h: namzu-egress's commands, one function each, dispatched by main.c. */
#pragma once

#include <gio/gio.h>

#include "nz-profile.h"

G_BEGIN_DECLS

/* The command summary --help prints (main.c). */
extern const char nz_egress_summary[];

/* Reads and validates a profile from FILE or "-" (stdin). */
NzEgressProfile *nz_egress_read_profile (const char *path, GError **error);

gboolean nz_egress_cmd_profile (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_egress_cmd_check (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_egress_cmd_proxy (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_egress_cmd_relay (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_egress_cmd_set (int argc, char **argv, GCancellable *cancellable, GError **error);
gboolean nz_egress_cmd_isolate (int argc, char **argv, GCancellable *cancellable, GError **error);

G_END_DECLS
