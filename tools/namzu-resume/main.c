/* namzu-resume: the builtin is in tools/namzu-suspend/workspace.c, with namzu-suspend's. */
#include "nz-cli.h"
#include "nz-tools.h"

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-resume", nz_tool_resume, argc, argv);
}
