/* nz-agent-server.h: the namzu-agent wire server (spec A): listener, per-connection state
 * machine (framing, credential gate, refusals) and op dispatch onto the guest engine. */
#pragma once

#include <glib.h>

#include "nz-agent-config.h"
#include "nz-guest.h"
#include "nz-lifetime.h"

G_BEGIN_DECLS

typedef struct _NzAgentServer NzAgentServer;

/* @config and @guest are borrowed and must outlive the server. */
NzAgentServer *nz_agent_server_new (const NzAgentConfig *config, NzGuest *guest);
void nz_agent_server_free (NzAgentServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzAgentServer, nz_agent_server_free)

/* The lifetime (nz-lifetime.h) the server's connections hold while they carry a request;
 * borrowed, it must outlive the server. NULL (the default): nothing is held. */
void nz_agent_server_set_lifetime (NzAgentServer *server, NzLifetime *lifetime);

/* Binds per the configured mode and starts accepting on the thread-default main context. */
gboolean nz_agent_server_listen (NzAgentServer *server, GError **error);

/* "unix:/path", "tcp:0.0.0.0:PORT" (the bound port) or "vsock-fd:3"; valid after listen. */
const char *nz_agent_server_get_address (NzAgentServer *server);

/* SIGUSR1 re-listen: closes the listener and binds again per the configured mode (a unix path
 * is re-created). Open connections are untouched. */
gboolean nz_agent_server_relisten (NzAgentServer *server, GError **error);

/* Stops accepting new connections (and removes the unix socket path). Idempotent. */
void nz_agent_server_stop (NzAgentServer *server);

G_END_DECLS
