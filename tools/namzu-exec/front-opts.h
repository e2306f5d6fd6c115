/* front-opts.h: namzu-exec's front's command line (front-opts.c). */
#pragma once

#include <stdbool.h>

/* The plain case's options (front-opts.c): -s, -t, -C, --endpoint, -e, then the command. */
typedef struct
{
  const char *sandbox, *timeout, *cwd, *endpoint;
  const char **env;
  int n_env;
  char **command;
} NzFrontOpts;

/* False for anything the front leaves to namzu-exec-full: another option, --help, a flag
 * without its value, no command, a later "--". */
bool nz_front_parse_options (int argc, char **argv, NzFrontOpts *o);
