#include <glib.h>

#include "nz-cli.h"
#include "nz-errors.h"
#include "set.h"

int
nz_egress_cmd_set (int argc, char **argv)
{
  nz_cli_warn ("set: not implemented yet");
  return NZ_EXIT_FAILURE;
}
