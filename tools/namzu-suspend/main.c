/* namzu-suspend: the builtin is in tools/namzu-suspend/workspace.c, with namzu-resume's. */
#include "nz-cli.h"
#include "nz-tools.h"

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-suspend", nz_tool_suspend, argc, argv);
}
