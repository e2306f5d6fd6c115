#include "nz-relay.h"

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "nz-allowlist.h"
#include "nz-errors.h"
#include "nz-splice.h"

/* A relayed tunnel idle this long is closed (the proxy applies its own limit too). */
#define RELAY_IDLE_S 600
/* Connections a workload may hold open through the relay at once. */
#define RELAY_MAX 256

typedef struct
{
  const char *unix_path;
  guint active;
} Relay;

typedef struct
{
  Relay *relay;
  GIOStream *client, *upstream;
  NzSplice *splice;
} Pair;

static void
on_pair_done (gpointer user_data)
{
  Pair *p = user_data;

  nz_splice_free (p->splice);
  g_io_stream_close (p->client, NULL, NULL);
  g_io_stream_close (p->upstream, NULL, NULL);
  g_object_unref (p->client);
  g_object_unref (p->upstream);
  p->relay->active--;
  g_free (p);
}

static void
on_upstream (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Pair *p = user_data;
  GSocketConnection *up = g_socket_client_connect_finish (G_SOCKET_CLIENT (src), res, NULL);

  if (up == NULL)
    {
      g_io_stream_close (p->client, NULL, NULL);
      g_object_unref (p->client);
      p->relay->active--;
      g_free (p);
      return;
    }
  p->upstream = G_IO_STREAM (up);
  p->splice = nz_splice_start (p->client, p->upstream, NULL, RELAY_IDLE_S, TRUE, on_pair_done, p);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source,
             gpointer user_data)
{
  Relay *r = user_data;
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketAddress) addr = g_unix_socket_address_new (r->unix_path);
  Pair *p;

  if (r->active >= RELAY_MAX)
    {
      g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
      return TRUE;
    }
  r->active++;
  p = g_new0 (Pair, 1);
  p->relay = r;
  p->client = G_IO_STREAM (g_object_ref (connection));
  g_socket_client_connect_async (client, G_SOCKET_CONNECTABLE (addr), NULL, on_upstream, p);
  return TRUE;
}

static gboolean
on_signal (gpointer user_data)
{
  g_main_loop_quit (user_data);
  return G_SOURCE_REMOVE;
}

int
nz_relay_run (const char *listen, const char *unix_path, char **argv, GError **error)
{
  Relay r = { .unix_path = unix_path };
  g_autofree char *host = NULL;
  g_autoptr (GInetAddress) ia = NULL;
  g_autoptr (GSocketAddress) addr = NULL;
  g_autoptr (GSocketService) service = NULL;
  g_autoptr (GMainLoop) loop = NULL;
  int port;
  pid_t parent = getpid ();

  nz_allowlist_split_authority (listen, &host, &port);
  ia = g_inet_address_new_from_string (host);
  if (ia == NULL || port < 0 || port > 65535)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "--listen must be IP:PORT, got '%s'", listen),
            NZ_EXIT_USAGE);
  addr = g_inet_socket_address_new (ia, port);
  service = g_socket_service_new ();
  if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), addr, G_SOCKET_TYPE_STREAM,
                                      G_SOCKET_PROTOCOL_TCP, NULL, NULL, error))
    return NZ_EXIT_FAILURE;
  if (argv != NULL && argv[0] != NULL)
    {
      pid_t pid = fork ();

      if (pid < 0)
        return (nz_throw_errno_prefix (error, "fork"), NZ_EXIT_FAILURE);
      if (pid > 0)
        {
          /* The parent becomes the command; the listener stays bound in the child only. */
          g_socket_listener_close (G_SOCKET_LISTENER (service));
          execvp (argv[0], argv);
          return (nz_throw_errno_prefix (error, "exec '%s'", argv[0]), 127);
        }
      /* The relay must not outlive the command it serves. */
      prctl (PR_SET_PDEATHSIG, SIGKILL);
      /* It runs as the workload's uid and holds the agent's inherited descriptors (its
       * listener): no /proc/<pid>/fd, mem or pidfd_getfd for the workload. */
      prctl (PR_SET_DUMPABLE, 0);
      if (getppid () != parent)
        _exit (0);
    }
  loop = g_main_loop_new (NULL, FALSE);
  g_signal_connect (service, "incoming", G_CALLBACK (on_incoming), &r);
  g_socket_service_start (service);
  g_unix_signal_add (SIGTERM, on_signal, loop);
  g_main_loop_run (loop);
  return NZ_EXIT_OK;
}
