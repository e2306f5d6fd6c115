#include "nz-exec-status.h"

#include <signal.h>

#include "nz-json.h"
#include "nz-signame.h"

int
nz_signal_from_name (const char *name)
{
  return nz_signame_lookup (name);
}

const char *
nz_signal_name (int signo)
{
  return nz_signame (signo);
}

int
nz_exec_exit_status (JsonObject *result)
{
  double code = -1;
  gboolean has_code;

  g_return_val_if_fail (result != NULL, -1);
  has_code = nz_json_get_number (result, "exitCode", &code);
  return nz_lite_exit_status (nz_json_get_bool (result, "timedOut", FALSE),
                              nz_signal_from_name (nz_json_get_string (result, "signal")),
                              has_code, code);
}
