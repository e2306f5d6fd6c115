/* namzu-port-forward: listen on the host's loopback and carry every connection to a port on
 * the sandbox's loopback over the agent's tcp-connect op, like `kubectl port-forward`.
 *
 * The main thread accepts (and waits for SIGINT/SIGTERM/SIGHUP on a signalfd, blocked in every
 * thread); each connection gets a thread of its own that pumps both ways (forward.c). */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-agent-sessions.h"
#include "nz-autofd.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-tools.h"

#include "forward.h"

static char *opt_sandbox, *opt_endpoint, *opt_heartbeat;
static char **opt_spec;

static const GOptionEntry entries[]
    = { { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
          "Sandbox to forward to (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
        { "heartbeat", 0, 0, G_OPTION_ARG_STRING, &opt_heartbeat,
          "Ask the agent for a heartbeat every MS milliseconds or DURATION (e.g. 15s) on each "
          "connection, and end one whose peer stopped answering; 0 or off for none (default: "
          "$NAMZU_STREAM_HEARTBEAT_MS, else the sandbox's streamHeartbeatMs, else the built-in "
          "interval)",
          "MS|DURATION" },
        { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
          "For testing and direct agent use: the agent at unix:/PATH, tcp:HOST:PORT or a "
          "namzu-worker's http://HOST:PORT instead of a sandbox; the token comes from $NAMZU_TOKEN",
          "ENDPOINT" },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_spec, NULL, NULL },
        { NULL } };

static const char description[]
    = "Listens on ADDR:LOCAL on this host (ADDR: 127.0.0.1 by default, any 127.0.0.0/8 address\n"
      "or ::1; never another address, which would open the sandbox's port to the network) and\n"
      "carries each connection to port REMOTE on the sandbox's own loopback, through its agent.\n"
      "LOCAL 0 picks a free port. Once listening it prints one JSON line on stdout:\n"
      "  {\"address\":\"127.0.0.1\",\"port\":N,\"remotePort\":R,\"sandbox\":ID}\n"
      "and runs until SIGINT, SIGTERM or SIGHUP (exit 0). Connections are carried concurrently,\n"
      "half-closes pass through both ways, and one whose sandbox port has no listener is closed\n"
      "with \"nothing listens on that port inside the sandbox\" on stderr.\n"
      "Exit status: 0 stopped by a signal, 1 failure (the sandbox, the listening socket), 2 bad\n"
      "usage.";

typedef struct
{
  const NzForwardTarget *target;
  int fd;
  char *label;
} Job;

static gpointer
connection_thread (gpointer data)
{
  Job *job = data;

  nz_forward_connection (job->target, job->fd, job->label);
  g_free (job->label);
  g_free (job);
  return NULL;
}

/* [ADDR:]LOCAL:REMOTE, ADDR loopback only ("[::1]" for IPv6). */
static gboolean
parse_spec (const char *spec, struct sockaddr_storage *ss, socklen_t *sslen, guint *remote,
            GError **error)
{
  g_autofree char *copy = g_strdup (spec);
  char *last = strrchr (copy, ':'), *local, *addr = NULL;
  guint64 lport = 0, rport = 0;

  if (last == NULL)
    return nz_cli_usage (error, "'%s' is not [ADDR:]LOCAL:REMOTE", spec);
  *last = '\0';
  local = strrchr (copy, ':');
  if (local != NULL)
    *local++ = '\0', addr = copy;
  else
    local = copy;
  if (!g_ascii_string_to_unsigned (local, 10, 0, 65535, &lport, NULL)
      || !g_ascii_string_to_unsigned (last + 1, 10, 1, 65535, &rport, NULL))
    return nz_cli_usage (error, "'%s': LOCAL must be a port 0-65535 and REMOTE 1-65535", spec);
  *remote = (guint)rport;
  memset (ss, 0, sizeof *ss);
  if (addr != NULL && (g_str_equal (addr, "[::1]") || g_str_equal (addr, "::1")))
    {
      struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

      s6->sin6_family = AF_INET6;
      s6->sin6_addr = in6addr_loopback;
      s6->sin6_port = htons ((guint16)lport);
      *sslen = sizeof *s6;
      return TRUE;
    }
  {
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    const char *a = addr == NULL || g_str_equal (addr, "localhost") ? "127.0.0.1" : addr;

    if (inet_pton (AF_INET, a, &s4->sin_addr) != 1 || (ntohl (s4->sin_addr.s_addr) >> 24) != 127)
      return nz_cli_usage (error,
                           "'%s': namzu-port-forward listens on loopback only "
                           "(127.0.0.0/8 or ::1); another address would open the "
                           "sandbox's port to the network",
                           addr);
    s4->sin_family = AF_INET;
    s4->sin_port = htons ((guint16)lport);
    *sslen = sizeof *s4;
  }
  return TRUE;
}

static void
print_listening (int lfd, guint remote, NzHandle *handle)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "";
  g_autoptr (JsonObject) out = json_object_new ();
  guint16 port;

  getsockname (lfd, (struct sockaddr *)&ss, &len);
  if (ss.ss_family == AF_INET6)
    {
      inet_ntop (AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof host);
      port = ntohs (((struct sockaddr_in6 *)&ss)->sin6_port);
    }
  else
    {
      inet_ntop (AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof host);
      port = ntohs (((struct sockaddr_in *)&ss)->sin_port);
    }
  json_object_set_string_member (out, "address", host);
  json_object_set_int_member (out, "port", port);
  json_object_set_int_member (out, "remotePort", remote);
  if (handle != NULL)
    json_object_set_string_member (out, "sandbox", handle->id);
  nz_cli_print_object (out);
}

gboolean
nz_tool_port_forward (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[ADDR:]LOCAL:REMOTE");
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) health = NULL;
  struct sockaddr_storage ss;
  socklen_t sslen = 0;
  NzForwardTarget target = { 0 };
  GMutex open_lock;
  nz_autofd int lfd = -1, sfd = -1;
  sigset_t stop;
  guint serial = 0;
  int one = 1;

  (void)cancellable;
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (opt_spec == NULL || opt_spec[0] == NULL || opt_spec[1] != NULL)
    return nz_cli_usage (error, "wants exactly one [ADDR:]LOCAL:REMOTE");
  if (!parse_spec (opt_spec[0], &ss, &sslen, &target.remote_port, error)
      || !nz_liveness_parse (opt_heartbeat, &target.heartbeat_ms, error))
    return FALSE;
  client = nz_sandbox_open_client (opt_endpoint, opt_sandbox, TRUE, &handle, error);
  /* Fail now, not on the first connection, when the sandbox cannot be reached. */
  if (client == NULL || (health = nz_agent_client_healthz (client, NULL, error)) == NULL)
    return FALSE;
  target.heartbeat_ms
      = nz_backend_stream_heartbeat_ms (handle, opt_heartbeat, target.heartbeat_ms);

  lfd = socket (ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0 || setsockopt (lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
      || bind (lfd, (struct sockaddr *)&ss, sslen) < 0 || listen (lfd, 128) < 0)
    return nz_throw_errno_prefix (error, "listening on %s", opt_spec[0]);
  /* Blocked here, so every connection thread inherits the mask and only the signalfd sees
   * the signals. */
  sigemptyset (&stop);
  sigaddset (&stop, SIGINT);
  sigaddset (&stop, SIGTERM);
  sigaddset (&stop, SIGHUP);
  sigaddset (&stop, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &stop, NULL);
  sigdelset (&stop, SIGPIPE);
  sfd = signalfd (-1, &stop, SFD_CLOEXEC);
  if (sfd < 0)
    return nz_throw_errno_prefix (error, "signalfd");
  g_mutex_init (&open_lock);
  target.client = client;
  target.open_lock = &open_lock;
  print_listening (lfd, target.remote_port, handle);

  for (;;)
    {
      struct pollfd fds[2] = { { .fd = lfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
      struct sockaddr_storage peer;
      socklen_t plen = sizeof peer;
      char host[INET6_ADDRSTRLEN] = "?";
      Job *job;
      int fd;

      if (poll (fds, 2, -1) < 0 && errno != EINTR)
        return nz_throw_errno_prefix (error, "poll");
      if (fds[1].revents != 0)
        return TRUE; /* the connections end with the process */
      if (fds[0].revents == 0)
        continue;
      fd = accept4 (lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
      if (fd < 0)
        continue; /* a peer that went before we took it, or fd exhaustion: keep serving */
      if (peer.ss_family == AF_INET6)
        inet_ntop (AF_INET6, &((struct sockaddr_in6 *)&peer)->sin6_addr, host, sizeof host);
      else
        inet_ntop (AF_INET, &((struct sockaddr_in *)&peer)->sin_addr, host, sizeof host);
      job = g_new0 (Job, 1);
      job->target = &target;
      job->fd = fd;
      job->label = g_strdup_printf ("connection %u from %s", ++serial, host);
      g_thread_unref (g_thread_new ("forward", connection_thread, job));
    }
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-port-forward", nz_tool_port_forward, argc, argv);
}
