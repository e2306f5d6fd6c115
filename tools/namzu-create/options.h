/* options.h: namzu-create's option table and its translation into NzCreateOptions. */
#pragma once

#include "nz-backend.h"

G_BEGIN_DECLS

extern const GOptionEntry nz_create_entries[];

/* The config (--config) first, then the flags over it; INVALID_ARGS names the flag. */
gboolean nz_create_build_options (NzCreateOptions *opts, GError **error);

G_END_DECLS
