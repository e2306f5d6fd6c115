/* forward.h: one forwarded connection of namzu-port-forward, carried over the agent's
 * tcp-connect op (spec A.6.17) on a thread of its own. */
#pragma once

#include "nz-agent-client.h"

G_BEGIN_DECLS

typedef struct
{
  NzAgentClient *client; /* shared; opens are serialised by the caller's lock */
  GMutex *open_lock;
  guint remote_port;
  gint64 heartbeat_ms; /* asked in the open body; 0 for none */
} NzForwardTarget;

/* Carries @fd (an accepted local connection, closed when done) to @target's port on the
 * sandbox's loopback until both directions ended or either side failed. Each side's
 * end-of-stream is passed on as a half-close. Failures are reported on stderr, named after
 * @label ("connection N from ADDR"). */
void nz_forward_connection (const NzForwardTarget *target, int fd, const char *label);

G_END_DECLS
