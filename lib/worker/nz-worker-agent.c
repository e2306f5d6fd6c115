#include "nz-worker-agent.h"

#include <gio/gio.h>

#include "nz-agent-config.h"
#include "nz-agent-conn.h"
#include "nz-agent-server.h"
#include "nz-envelope.h"

struct _NzWorkerAgent
{
  NzAgentConfig *config;
  NzAgentServer *server;
};

NzWorkerAgent *
nz_worker_agent_new (NzGuest *guest, GError **error)
{
  g_autoptr (NzWorkerAgent) agent = g_new0 (NzWorkerAgent, 1);

  /* The agent's knobs and defaults, read the agent's way; no listen mode (it is handed
   * calls) and no credential (the bearer gate in front authenticated the caller). */
  agent->config = nz_agent_config_new_embedded (error);
  if (agent->config == NULL)
    return NULL;
  agent->server = nz_agent_server_new (agent->config, guest);
  return g_steal_pointer (&agent);
}

void
nz_worker_agent_free (NzWorkerAgent *agent)
{
  if (agent == NULL)
    return;
  g_clear_pointer (&agent->server, nz_agent_server_free);
  g_clear_pointer (&agent->config, nz_agent_config_free);
  g_free (agent);
}

void
nz_worker_agent_accept (NzWorkerAgent *agent, GSocketConnection *connection)
{
  g_return_if_fail (agent != NULL && G_IS_SOCKET_CONNECTION (connection));
  nz_agent_conn_start (agent->server, connection);
}

NzAgentConn *
nz_worker_agent_call (NzWorkerAgent *agent, const char *op, JsonObject *body,
                      const NzAgentSinkFuncs *funcs, gpointer user_data)
{
  g_autoptr (NzEnvelope) env = NULL;

  g_return_val_if_fail (agent != NULL && op != NULL && funcs != NULL, NULL);
  /* The request the HTTP layer already framed, parsed and authenticated, straight into the
   * agent's op dispatch: no socket, no second framing. */
  env = nz_envelope_new (op, body);
  return nz_agent_conn_start_sink (agent->server, env, funcs, user_data);
}
