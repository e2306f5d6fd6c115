/* check.h: `namzu-egress check` (offline dry run) and the helpers main.c shares with it. */
#pragma once

#include "nz-profile.h"

G_BEGIN_DECLS

/* Reads and validates a profile from FILE or "-" (stdin). */
NzEgressProfile *nz_egress_read_profile (const char *path, GError **error);

int nz_egress_cmd_check (int argc, char **argv);

G_END_DECLS
