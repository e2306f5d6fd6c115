/* nz-quiesce.h: stop every workload process while the agent keeps serving (spec C.13): scope,
 * /proc candidates, SIGTERM/grace/SIGKILL rounds under a deadline, then a bounded settle of
 * the registries. Asynchronous on the thread-default main context. */
#pragma once

#include <glib.h>

#include "nz-guest.h"

G_BEGIN_DECLS

typedef struct
{
  gint pid;
  char *command;      /* comm, between the first '(' and the last ')' of /proc/<pid>/stat */
  const char *signal; /* "SIGTERM" or "SIGKILL" (the last one sent) */
} NzQuiesceStopped;

typedef struct
{
  const char *scope; /* "pid-namespace" | "owned-sessions" */
  gint64 grace_ms;
  guint rounds;
  GPtrArray *stopped; /* NzQuiesceStopped *, in first-signalled order */
} NzQuiesceResult;

/* "owned-sessions" when NAMZU_AGENT_QUIESCE_SCOPE says so, else "pid-namespace" when the agent
 * is pid 1 or its parent is (it is, or was started by, its namespace's init), else
 * "owned-sessions". */
const char *nz_quiesce_scope (NzGuest *guest);

/* @result on success, else @error_message (the wire's text). */
typedef void (*NzQuiesceFunc) (const NzQuiesceResult *result, const char *error_message,
                               gpointer user_data);

/* runQuiesce(@grace_ms, {deadlineMs: @deadline_ms, deadlineSource: @deadline_source}). Does not
 * touch the quiesce gate; callers raise and lower it. @func runs exactly once. */
void nz_quiesce_run (NzGuest *guest, gint64 grace_ms, gint64 deadline_ms,
                     const char *deadline_source, NzQuiesceFunc func, gpointer user_data);

G_END_DECLS
