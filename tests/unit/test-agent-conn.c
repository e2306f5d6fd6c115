/* Unit tests for one agent connection (lib/agent/nz-agent-conn.c) on a socket pair, for what
 * the real agent cannot be driven into from outside: the refusal backstop (spec A.4.3). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "nz-agent-conn.h"
#include "nz-agent-server.h"
#include "../nz-test.h"

/* A refused peer that never reads is destroyed after NAMZU_AGENT_REFUSAL_FLUSH_GRACE_MS even
 * though the refusal never flushed. A refusal is the first thing a connection could send, so
 * it always fits in the kernel; here the agent's end starts with a full send buffer (filled
 * by the test) to stand for a peer that stopped reading. Without the backstop the connection
 * would wait for writability forever. */
START_TEST (test_refusal_backstop)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("nz-conn-XXXXXX", &error);
  g_autofree char *sock = g_build_filename (dir, "unused.sock", NULL);
  g_autoptr (NzAgentConfig) config = NULL;
  g_autoptr (NzGuest) guest = NULL;
  g_autoptr (NzAgentServer) server = NULL;
  g_autoptr (GSocket) gsock = NULL;
  g_autoptr (GSocketConnection) connection = NULL;
  char junk[4096];
  gsize filled = 0, got = 0;
  int sv[2], small = 1;
  gboolean hup = FALSE;
  gint64 deadline;

  ck_assert_ptr_nonnull (dir);
  g_setenv ("NAMZU_SANDBOX_WORKSPACE", dir, TRUE);
  g_setenv ("NAMZU_AGENT_UNIX_PATH", sock, TRUE);
  g_setenv ("NAMZU_AGENT_REFUSAL_FLUSH_GRACE_MS", "200", TRUE);
  config = nz_agent_config_new_from_env (&error);
  ck_assert_msg (config != NULL, "%s", error ? error->message : "");
  guest = nz_guest_new (&config->limits, config->workspace, config->read_roots,
                        config->write_roots);
  server = nz_agent_server_new (config, guest);

  ck_assert_int_eq (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  ck_assert_int_eq (fcntl (sv[0], F_SETFL, O_NONBLOCK), 0);
  memset (junk, 'j', sizeof junk);
  for (;;)
    {
      ssize_t n = send (sv[0], junk, sizeof junk, MSG_NOSIGNAL);

      if (n < 0)
        {
          ck_assert_int_eq (errno, EAGAIN);
          break;
        }
      filled += (gsize)n;
    }
  gsock = g_socket_new_from_fd (sv[0], &error);
  ck_assert_ptr_nonnull (gsock);
  connection = g_socket_connection_factory_create_connection (gsock);
  nz_agent_conn_start (server, connection);

  /* Over the 256 MiB cap: refused with frame_too_large, which cannot be written. */
  ck_assert_int_eq (write (sv[1], "ffffffff\n", 9), 9);
  deadline = g_get_monotonic_time () + 10 * G_TIME_SPAN_SECOND;
  while (!hup && g_get_monotonic_time () < deadline)
    {
      struct pollfd p = { .fd = sv[1], .events = POLLRDHUP };

      g_main_context_iteration (NULL, FALSE);
      hup = poll (&p, 1, 10) > 0 && (p.revents & (POLLHUP | POLLRDHUP));
    }
  ck_assert_msg (hup, "the refused connection was never destroyed");
  /* What we read is what we put there: the refusal was dropped with the connection. */
  for (;;)
    {
      ssize_t n = read (sv[1], junk, sizeof junk);

      ck_assert_int_ge (n, 0);
      if (n == 0)
        break;
      ck_assert_int_eq (junk[n - 1], 'j');
      got += (gsize)n;
    }
  ck_assert_uint_eq (got, filled);
  close (sv[1]);
  g_unsetenv ("NAMZU_AGENT_REFUSAL_FLUSH_GRACE_MS");
  g_rmdir (dir);
}
END_TEST

/* The worker's embedded agent server reads the agent's knobs and nothing that decides how an
 * agent is reached: no listen mode is needed (none is set here, which the agent refuses), no
 * credential is taken (the worker's bearer gate is in front). */
START_TEST (test_embedded_config)
{
  g_autoptr (NzAgentConfig) agent = NULL, embedded = NULL;
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL;

  g_unsetenv ("NAMZU_AGENT_UNIX_PATH");
  g_unsetenv ("NAMZU_AGENT_VSOCK_PORT");
  g_unsetenv ("NAMZU_AGENT_TCP_PORT");
  g_unsetenv ("NAMZU_AGENT_LISTEN_FD");
  g_setenv ("NAMZU_AGENT_BIND_TOKEN", "agent-only-secret", TRUE);
  g_setenv ("NAMZU_AGENT_MAX_TRACKED_EXECUTIONS", "12345", TRUE);
  agent = nz_agent_config_new_from_env (&e1);
  ck_assert (agent == NULL && strstr (e1->message, "none of NAMZU_AGENT_UNIX_PATH") != NULL);
  embedded = nz_agent_config_new_embedded (&e2);
  ck_assert_msg (embedded != NULL, "%s", e2 ? e2->message : "");
  ck_assert_int_eq (embedded->listen_mode, NZ_AGENT_LISTEN_EMBEDDED);
  ck_assert (embedded->bind_token == NULL && !embedded->require_token);
  ck_assert (!nz_agent_config_is_gated (embedded));
  ck_assert_int_eq (embedded->limits.max_tracked_executions, 12345);
  /* A knob the agent refuses is refused here too. */
  g_setenv ("NAMZU_AGENT_MAX_TRACKED_EXECUTIONS", "lots", TRUE);
  ck_assert (nz_agent_config_new_embedded (&e3) == NULL);
  g_unsetenv ("NAMZU_AGENT_MAX_TRACKED_EXECUTIONS");
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-conn");
  TCase *tc = tcase_create ("conn");

  tcase_set_timeout (tc, 30);
  tcase_add_test (tc, test_refusal_backstop);
  tcase_add_test (tc, test_embedded_config);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
