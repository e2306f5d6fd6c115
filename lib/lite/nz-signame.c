#include "nz-signame.h"

#include <signal.h>
#include <stddef.h>
#include <string.h>

static const char *const names[] = {
  [SIGHUP] = "SIGHUP", [SIGINT] = "SIGINT", [SIGQUIT] = "SIGQUIT", [SIGILL] = "SIGILL",
  [SIGTRAP] = "SIGTRAP", [SIGABRT] = "SIGABRT", [SIGBUS] = "SIGBUS", [SIGFPE] = "SIGFPE",
  [SIGKILL] = "SIGKILL", [SIGUSR1] = "SIGUSR1", [SIGSEGV] = "SIGSEGV", [SIGUSR2] = "SIGUSR2",
  [SIGPIPE] = "SIGPIPE", [SIGALRM] = "SIGALRM", [SIGTERM] = "SIGTERM", [SIGSTKFLT] = "SIGSTKFLT",
  [SIGCHLD] = "SIGCHLD", [SIGCONT] = "SIGCONT", [SIGSTOP] = "SIGSTOP", [SIGTSTP] = "SIGTSTP",
  [SIGTTIN] = "SIGTTIN", [SIGTTOU] = "SIGTTOU", [SIGURG] = "SIGURG", [SIGXCPU] = "SIGXCPU",
  [SIGXFSZ] = "SIGXFSZ", [SIGVTALRM] = "SIGVTALRM", [SIGPROF] = "SIGPROF",
  [SIGWINCH] = "SIGWINCH", [SIGIO] = "SIGIO", [SIGPWR] = "SIGPWR", [SIGSYS] = "SIGSYS",
};

const char *
nz_signame (int signo)
{
  if (signo <= 0 || (size_t)signo >= sizeof names / sizeof names[0])
    return NULL;
  return names[signo];
}

int
nz_signame_lookup (const char *name)
{
  if (name == NULL)
    return 0;
  for (size_t i = 1; i < sizeof names / sizeof names[0]; i++)
    if (names[i] != NULL && strcmp (names[i], name) == 0)
      return (int)i;
  return 0;
}
