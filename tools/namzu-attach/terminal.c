/* terminal.c: namzu-attach --terminal: an interactive terminal over a duplex stream. Raw mode
 * on a TTY, resized on SIGWINCH, Ctrl-] detaches; stdin that is not a TTY is sent as input. */
#include "attach.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-agent-sessions.h"
#include "nz-cli.h"
#include "nz-exec-status.h"
#include "nz-json.h"

/* Ctrl-]: detaches an interactive terminal, like telnet. */
#define DETACH_KEY 0x1d

static int winch_pipe[2] = { -1, -1 };

static void
on_winch (int signo)
{
  int errsv = errno;
  ssize_t r G_GNUC_UNUSED = write (winch_pipe[1], "w", 1);

  errno = errsv;
}

static void
terminal_size (guint *cols, guint *rows)
{
  struct winsize ws = { 0 };

  *cols = 80;
  *rows = 24;
  if (ioctl (STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
    {
      *cols = MIN (ws.ws_col, 1000);
      *rows = MIN (ws.ws_row, 1000);
    }
}

static gboolean
send_event (NzAgentDuplex *d, JsonObject *ev)
{
  g_autoptr (GError) error = NULL;

  if (!nz_agent_duplex_send (d, ev, &error))
    {
      nz_cli_warn ("%s", error->message);
      return FALSE;
    }
  return TRUE;
}

gboolean
nz_attach_terminal (NzAgentClient *c, char **command, const char *persistent_id,
                    gint64 heartbeat_ms, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (NzAgentDuplex) d = NULL;
  g_autoptr (GError) local_error = NULL;
  gboolean tty = isatty (STDIN_FILENO);
  gboolean persistent = persistent_id != NULL;
  struct termios saved, raw;
  gboolean stdin_open = TRUE, exited = FALSE;
  NzLiveness live;
  int status = 0;
  guint cols, rows;

  terminal_size (&cols, &rows);
  json_object_set_int_member (body, "cols", cols);
  json_object_set_int_member (body, "rows", rows);
  if (command != NULL && command[0] != NULL)
    nz_attach_set_command (body, command);
  if (persistent)
    {
      json_object_set_boolean_member (body, "persistent", TRUE);
      json_object_set_string_member (body, "sessionId", persistent_id);
    }
  nz_liveness_start (&live, body, heartbeat_ms);
  d = nz_agent_duplex_open (c, "terminal", body, &local_error);
  if (d == NULL)
    return nz_attach_exit_status (error, nz_attach_fail (local_error));
  if (!g_unix_open_pipe (winch_pipe, FD_CLOEXEC, NULL)
      || !g_unix_set_fd_nonblocking (winch_pipe[0], TRUE, NULL)
      || !g_unix_set_fd_nonblocking (winch_pipe[1], TRUE, NULL))
    return nz_cli_exit_status (error, NZ_EXEC_EXIT_NAMZU);
  signal (SIGWINCH, on_winch);
  if (tty)
    {
      tcgetattr (STDIN_FILENO, &saved);
      raw = saved;
      cfmakeraw (&raw);
      tcsetattr (STDIN_FILENO, TCSANOW, &raw);
    }
  for (;;)
    {
      struct pollfd fds[3] = {
        { .fd = nz_agent_duplex_get_fd (d), .events = POLLIN },
        { .fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN },
        { .fd = winch_pipe[0], .events = POLLIN },
      };
      JsonObject *frame = NULL;
      NzDuplexResult r;

      if (poll (fds, 3, nz_liveness_poll_ms (&live)) < 0 && errno != EINTR)
        break;
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
        nz_liveness_seen (&live);
      /* A quiet terminal is fine; a peer that stopped answering heartbeats is gone. */
      if (!nz_liveness_tick (&live, d, "terminal", &local_error))
        {
          status = nz_attach_fail (local_error);
          break;
        }
      if (fds[2].revents & POLLIN)
        {
          g_autoptr (JsonObject) ev = json_object_new ();
          char buf[64];

          while (read (winch_pipe[0], buf, sizeof buf) > 0)
            ;
          terminal_size (&cols, &rows);
          json_object_set_string_member (ev, "type", "resize");
          json_object_set_int_member (ev, "cols", cols);
          json_object_set_int_member (ev, "rows", rows);
          send_event (d, ev);
        }
      if (fds[1].revents & (POLLIN | POLLHUP))
        {
          char buf[4096];
          ssize_t n = read (STDIN_FILENO, buf, sizeof buf);
          g_autoptr (JsonObject) ev = json_object_new ();
          char *key;

          if (n <= 0)
            {
              /* End of input: a session is left running; a terminal gets the EOF key, as
               * if typed, so a shell reading it exits. */
              stdin_open = FALSE;
              if (persistent)
                break;
              json_object_set_string_member (ev, "type", "input");
              json_object_set_string_member (ev, "data", "\x04");
              if (!send_event (d, ev))
                break;
            }
          else if (tty && (key = memchr (buf, DETACH_KEY, (size_t)n)) != NULL)
            {
              if (!persistent)
                nz_cli_warn ("detached; the terminal is closed with the connection");
              break;
            }
          else
            {
              g_autofree char *text = g_utf8_make_valid (buf, n);

              json_object_set_string_member (ev, "type", "input");
              json_object_set_string_member (ev, "data", text);
              if (!send_event (d, ev))
                break;
            }
        }
      if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      for (gboolean may_read = TRUE;; may_read = FALSE)
        {
          const char *type, *data;

          r = nz_agent_duplex_next (d, may_read, &frame, &local_error);
          if (r != NZ_DUPLEX_FRAME)
            break;
          type = nz_json_get_string (frame, "type");
          /* Every member is the agent's word: any of them may be missing or mistyped. */
          data = nz_json_get_string (frame, "data");
          if (g_strcmp0 (type, "ready") == 0)
            nz_liveness_ready (&live, frame);
          if (g_strcmp0 (type, "data") == 0 && data != NULL)
            nz_attach_write_output (g_strcmp0 (nz_json_get_string (frame, "stream"), "stderr") == 0
                                        ? NZ_EXEC_STDERR
                                        : NZ_EXEC_STDOUT,
                                    data, strlen (data), NULL);
          else if (g_strcmp0 (type, "exit") == 0)
            {
              status = nz_attach_session_status (frame);
              exited = TRUE;
            }
          else if (g_strcmp0 (type, "error") == 0)
            {
              const char *code = nz_json_get_string (frame, "error");

              nz_cli_warn ("terminal: %s", code != NULL ? code
                                                        : "the agent sent an error "
                                                          "frame with no error code");
              status = NZ_EXEC_EXIT_NAMZU;
              exited = TRUE;
            }
          else if (g_strcmp0 (type, "detached") == 0)
            {
              const char *reason = nz_json_get_string (frame, "reason");

              nz_cli_warn ("detached: %s", reason != NULL ? reason : "no reason given");
            }
          json_object_unref (frame);
        }
      if (r == NZ_DUPLEX_EOF || r == NZ_DUPLEX_TERMINATOR || r == NZ_DUPLEX_ERROR)
        {
          if (r == NZ_DUPLEX_ERROR)
            status = nz_attach_fail (local_error);
          else if (!exited)
            {
              /* A terminal that ends without its exit frame did not report a status (spec
               * D.2.9: "terminal socket closed before exit"). */
              nz_cli_warn ("terminal socket closed before exit%s",
                           nz_agent_duplex_buffered (d) > 0 ? " (with a partial frame)" : "");
              status = NZ_EXEC_EXIT_NAMZU;
            }
          break;
        }
    }
  if (tty)
    tcsetattr (STDIN_FILENO, TCSANOW, &saved);
  return nz_attach_exit_status (error, status);
}
