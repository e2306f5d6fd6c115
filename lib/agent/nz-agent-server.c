#include "nz-agent-server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>

#include "nz-agent-conn.h"
#include "nz-errors.h"
#include "nz-preauth.h"
#include "nz-token.h"

/* Seconds before the first TCP keepalive probe (TCP_KEEPALIVE_INITIAL_DELAY_MS = 15000). */
#define TCP_KEEPALIVE_IDLE_S 15

struct _NzAgentServer
{
  const NzAgentConfig *config;
  NzGuest *guest;
  GSocketService *service;
  char *address;
  char *bound_token; /* trust-on-first-use binding, for the life of the process */
  gsize bound_token_len; /* its bytes: it may hold a NUL */
  NzPreauthPool *preauth; /* gated modes only */
  NzLifetime *lifetime;   /* borrowed, or NULL */
  gboolean stopped;
};

void
nz_agent_server_set_lifetime (NzAgentServer *server, NzLifetime *lifetime)
{
  server->lifetime = lifetime;
}

void
nz_agent_server_hold (NzAgentServer *server)
{
  if (server->lifetime != NULL)
    nz_lifetime_hold (server->lifetime);
}

void
nz_agent_server_release (NzAgentServer *server)
{
  if (server->lifetime != NULL)
    nz_lifetime_release (server->lifetime);
}

NzAgentServer *
nz_agent_server_new (const NzAgentConfig *config, NzGuest *guest)
{
  NzAgentServer *server;

  g_return_val_if_fail (config != NULL && guest != NULL, NULL);
  server = g_new0 (NzAgentServer, 1);
  server->config = config;
  server->guest = guest;
  if (nz_agent_config_is_gated (config))
    server->preauth = nz_preauth_pool_new ((guint64)config->max_preauth_connections,
                                           (guint64)config->max_preauth_buffer_bytes);
  return server;
}

void
nz_agent_server_free (NzAgentServer *server)
{
  if (server == NULL)
    return;
  nz_agent_server_stop (server);
  g_clear_object (&server->service);
  g_free (server->address);
  g_free (server->bound_token);
  nz_preauth_pool_free (server->preauth);
  g_free (server);
}

const char *
nz_agent_server_get_address (NzAgentServer *server)
{
  return server->address;
}

void
nz_agent_server_stop (NzAgentServer *server)
{
  if (server->stopped || server->service == NULL)
    return;
  server->stopped = TRUE;
  g_socket_service_stop (server->service);
  g_socket_listener_close (G_SOCKET_LISTENER (server->service));
  if (server->config->listen_mode == NZ_AGENT_LISTEN_UNIX)
    unlink (server->config->unix_path);
}

const NzAgentConfig *
nz_agent_server_get_config (NzAgentServer *server)
{
  return server->config;
}

struct _NzPreauthPool *
nz_agent_server_get_preauth_pool (NzAgentServer *server)
{
  return server->preauth;
}

NzGuest *
nz_agent_server_get_guest (NzAgentServer *server)
{
  return server->guest;
}

gboolean
nz_agent_server_authorize (NzAgentServer *server, const char *token, gsize token_len)
{
  const NzAgentConfig *config = server->config;

  /* Whole byte strings: a presented token with bytes after an embedded NUL is another token. */
  if (config->bind_token != NULL)
    return nz_token_equal_len (config->bind_token, strlen (config->bind_token), token, token_len);
  /* Trust on first use: a missing or empty token never binds, and a refused intruder never
   * unseats the binding. */
  if (token == NULL || token_len == 0)
    return FALSE;
  if (server->bound_token == NULL)
    {
      server->bound_token = g_memdup2 (token, token_len + 1);
      server->bound_token_len = token_len;
      return TRUE;
    }
  return nz_token_equal_len (server->bound_token, server->bound_token_len, token, token_len);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source_object,
             gpointer user_data)
{
  NzAgentServer *server = user_data;
  GSocket *sock = g_socket_connection_get_socket (connection);

  if (server->config->listen_mode == NZ_AGENT_LISTEN_TCP)
    {
      g_socket_set_keepalive (sock, TRUE);
      g_socket_set_option (sock, IPPROTO_TCP, TCP_KEEPIDLE, TCP_KEEPALIVE_IDLE_S, NULL);
    }
  nz_agent_conn_start (server, connection);
  return TRUE;
}

static gboolean
listen_unix (NzAgentServer *server, GError **error)
{
  const char *path = server->config->unix_path;
  g_autoptr (GSocketAddress) addr = NULL;

  /* rm -f first: a stale socket from a previous agent must not block the bind. */
  if (unlink (path) != 0 && errno != ENOENT)
    return nz_throw_errno_prefix (error, "agent: cannot remove '%s'", path);
  addr = g_unix_socket_address_new (path);
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (server->service), addr,
                                      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL,
                                      error))
    return FALSE;
  server->address = g_strdup_printf ("unix:%s", path);
  return TRUE;
}

/* A listener handed over as a descriptor: the vsock bridge's fd 3, or NAMZU_AGENT_LISTEN_FD
 * (the host bound the socket where the workload cannot see it). @address names it. */
static gboolean
listen_inherited (NzAgentServer *server, int fd, const char *knob, const char *address,
                  GError **error)
{
  g_autoptr (GSocket) sock = g_socket_new_from_fd (fd, error);

  if (sock == NULL)
    return nz_prefix_error (error, "agent: %s: fd %d", knob, fd);
  /* The bridge hands over a bound socket; listen() again is harmless if it already listens. */
  if (!g_socket_listen (sock, error))
    return FALSE;
  if (!g_socket_listener_add_socket (G_SOCKET_LISTENER (server->service), sock, NULL, error))
    return FALSE;
  server->address = g_strdup_printf ("%s:%d", address, fd);
  return TRUE;
}

static gboolean
listen_tcp (NzAgentServer *server, GError **error)
{
  g_autoptr (GInetAddress) any = g_inet_address_new_any (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) addr = g_inet_socket_address_new (any, server->config->tcp_port);
  g_autoptr (GSocketAddress) effective = NULL;

  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (server->service), addr,
                                      G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL, &effective,
                                      error))
    return FALSE;
  server->address = g_strdup_printf (
      "tcp:0.0.0.0:%u", g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective)));
  return TRUE;
}

gboolean
nz_agent_server_listen (NzAgentServer *server, GError **error)
{
  gboolean ok = FALSE;

  g_return_val_if_fail (server != NULL && server->service == NULL, FALSE);
  server->service = g_socket_service_new ();
  g_signal_connect (server->service, "incoming", G_CALLBACK (on_incoming), server);
  switch (server->config->listen_mode)
    {
    case NZ_AGENT_LISTEN_UNIX:
      ok = listen_unix (server, error);
      break;
    case NZ_AGENT_LISTEN_VSOCK_FD:
      ok = listen_inherited (server, NZ_AGENT_VSOCK_FD, "NAMZU_AGENT_VSOCK_PORT", "vsock-fd",
                             error);
      break;
    case NZ_AGENT_LISTEN_TCP:
      ok = listen_tcp (server, error);
      break;
    case NZ_AGENT_LISTEN_FD:
      ok = listen_inherited (server, server->config->listen_fd, "NAMZU_AGENT_LISTEN_FD", "fd",
                             error);
      break;
    case NZ_AGENT_LISTEN_EMBEDDED:
    default:
      /* Handed its calls by the server it is embedded in; it has nothing to listen on. */
      ok = nz_throw (error, NZ_ERROR_INVALID_ARGS, "agent: an embedded agent server never listens");
      break;
    }
  if (!ok)
    {
      nz_error_convert (error);
      return FALSE;
    }
  g_socket_service_start (server->service);
  return TRUE;
}

gboolean
nz_agent_server_relisten (NzAgentServer *server, GError **error)
{
  g_return_val_if_fail (server != NULL, FALSE);
  /* An inherited fd was handed over once and cannot be re-opened: the listener stays. */
  if ((server->config->listen_mode == NZ_AGENT_LISTEN_VSOCK_FD
       || server->config->listen_mode == NZ_AGENT_LISTEN_FD)
      && server->service != NULL)
    return TRUE;
  if (server->service != NULL)
    {
      g_socket_service_stop (server->service);
      g_socket_listener_close (G_SOCKET_LISTENER (server->service));
      g_clear_object (&server->service);
    }
  g_clear_pointer (&server->address, g_free);
  server->stopped = FALSE;
  return nz_agent_server_listen (server, error);
}
