/* nz-relay.h: the in-sandbox end of the bwrap egress path. The sandbox has only lo; this relay
 * listens on 127.0.0.1:PORT inside it and forwards each connection, byte for byte, to the
 * proxy's unix socket bound into the sandbox. It makes no policy decision: the proxy does. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Binds @listen (HOST:PORT), then, when @argv is non-empty, forks: the child relays (and dies
 * with its parent), the parent execs @argv, so the relay is ready before the command starts.
 * Without @argv it relays in the foreground until SIGTERM. */
int nz_relay_run (const char *listen, const char *unix_path, char **argv, GError **error);

G_END_DECLS
