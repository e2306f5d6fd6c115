/* set.h: `namzu-egress set`, live policy change for a bwrap sandbox. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

int nz_egress_cmd_set (int argc, char **argv);

G_END_DECLS
