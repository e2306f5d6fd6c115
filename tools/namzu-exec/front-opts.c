/* namzu-exec's front: its command line, the plain case only (front.c). */
#include <stdlib.h>
#include <string.h>

#include "front-opts.h"
#include "front.h"

/* Matches -S VALUE, --LONG VALUE and --LONG=VALUE; *@other for a flag without its value.
 * Anything fancier goes to GOption. */
static bool
take_value (char **argv, int *i, char short_name, const char *long_name, const char **out,
            bool *other)
{
  const char *a = argv[*i];
  size_t n = strlen (long_name);

  if (strncmp (a, "--", 2) == 0 && strncmp (a + 2, long_name, n) == 0 && a[2 + n] == '=')
    {
      *out = a + 3 + n;
      return true;
    }
  if (!((short_name != '\0' && a[1] == short_name && a[2] == '\0')
        || (strncmp (a, "--", 2) == 0 && strcmp (a + 2, long_name) == 0)))
    return false;
  if (argv[*i + 1] == NULL || argv[*i + 1][0] == '-')
    return (*other = true);
  *out = argv[++*i];
  return true;
}

bool
nz_front_parse_options (int argc, char **argv, NzFrontOpts *o)
{
  bool other = false;
  int i;

  o->env = calloc ((size_t)argc, sizeof *o->env);
  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i], *env = NULL;

      if (strcmp (a, "--") == 0)
        {
          i++;
          break;
        }
      if (a[0] != '-')
        break;
      if (take_value (argv, &i, 's', "sandbox", &o->sandbox, &other)
          || take_value (argv, &i, 't', "timeout", &o->timeout, &other)
          || take_value (argv, &i, 'C', "cwd", &o->cwd, &other)
          || take_value (argv, &i, '\0', "endpoint", &o->endpoint, &other))
        {
          if (other)
            return false;
          continue;
        }
      if (take_value (argv, &i, 'e', "env", &env, &other))
        {
          if (other)
            return false;
          o->env[o->n_env++] = env;
          continue;
        }
      return false; /* -i, --json, --detach, --help, a mistake, ... */
    }
  o->command = argv + i;
  if (o->command[0] == NULL || o->command[0][0] == '\0')
    return false;
  /* GOption's handling of a later "--" is its own; leave such a command line to it. */
  for (char **p = o->command; *p != NULL; p++)
    if (strcmp (*p, "--") == 0)
      return false;
  return true;
}
