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
  int signo;

  g_return_val_if_fail (result != NULL, -1);
  /* Timeout first: a timed-out command also carries the signal that ended it. */
  if (nz_json_get_bool (result, "timedOut", FALSE))
    return NZ_EXEC_EXIT_TIMEOUT;
  signo = nz_signal_from_name (nz_json_get_string (result, "signal"));
  if (signo > 0)
    return 128 + signo;
  if (nz_json_get_number (result, "exitCode", &code) && code >= 0 && code <= 255
      && code == (int)code)
    return (int)code;
  return -1;
}
