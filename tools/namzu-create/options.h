/* options.h: namzu-create's option table and its translation into NzCreateOptions. */
#pragma once

#include "nz-backend.h"

G_BEGIN_DECLS

extern const GOptionEntry nz_create_entries[];

/* The config (--config) first, then the flags over it; INVALID_ARGS names the flag. */
gboolean nz_create_build_options (NzCreateOptions *opts, GError **error);

/* sources.c: --config FILE|- read whole; --profile applied (refused beside another egress
 * setting, @egress_given for --egress/--network, or a config's defaultEgress); --credential
 * HOST:HEADER:VAR values taken from this process's environment. */
char *nz_create_read_config (const char *path, gsize *len, GError **error);
gboolean nz_create_apply_profile (NzCreateOptions *opts, const char *profile_path,
                                  const char *config, gboolean egress_given, GError **error);
gboolean nz_create_apply_credentials (NzCreateOptions *opts, char **credentials, GError **error);
/* --env-file FILE... then --env NAME[=VALUE]... over the config's env (the last one wins). */
gboolean nz_create_apply_env (NzCreateOptions *opts, char **files, char **envs, GError **error);

G_END_DECLS
