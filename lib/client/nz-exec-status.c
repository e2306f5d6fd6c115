#include "nz-exec-status.h"

#include <signal.h>

#include "nz-json.h"

static const char *const signal_names[] = {
  [SIGHUP] = "SIGHUP", [SIGINT] = "SIGINT", [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",
  [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT", [SIGBUS] = "SIGBUS", [SIGFPE] = "SIGFPE",
  [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
  [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM", [SIGSTKFLT] = "SIGSTKFLT",
  [SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT", [SIGSTOP] = "SIGSTOP", [SIGTSTP] = "SIGTSTP",
  [SIGTTIN] = "SIGTTIN", [SIGTTOU] = "SIGTTOU", [SIGURG] = "SIGURG", [SIGXCPU] = "SIGXCPU",
  [SIGXFSZ] = "SIGXFSZ", [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",
  [SIGWINCH] = "SIGWINCH", [SIGIO] = "SIGIO", [SIGPWR] = "SIGPWR", [SIGSYS] = "SIGSYS",
};

int
nz_signal_from_name (const char *name)
{
  if (name == NULL)
    return 0;
  for (gsize i = 1; i < G_N_ELEMENTS (signal_names); i++)
    if (signal_names[i] != NULL && g_str_equal (signal_names[i], name))
      return (int)i;
  return 0;
}

const char *
nz_signal_name (int signo)
{
  if (signo <= 0 || (gsize)signo >= G_N_ELEMENTS (signal_names))
    return NULL;
  return signal_names[signo];
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
