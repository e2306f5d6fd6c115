/* namzu-attach: follow a retained execution or a session from a byte offset, open an
 * interactive terminal, list and kill sessions. Client code lives in lib/client
 * (nz-agent-sessions.h); this file parses options, calls it and prints. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <glib-unix.h>

#include "nz-agent-client.h"
#include "nz-agent-sessions.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-host-timing.h"
#include "nz-json.h"
#include "nz-lite-exec.h"
#include "nz-state.h"

/* Ctrl-]: detaches an interactive terminal, like telnet. */
#define DETACH_KEY 0x1d

static char *opt_sandbox, *opt_endpoint, *opt_execution, *opt_session, *opt_kill, *opt_signal;
static char *opt_start, *opt_timeout;
/* --timeout in ms, parsed once in main(); the agent's 30 min ceiling by default. */
static long long timeout_ms = 1800000;
static gint64 opt_from;
static gboolean opt_terminal, opt_persistent, opt_list;
static char **opt_command;

static const GOptionEntry entries[] = {
  { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { "execution", 'x', 0, G_OPTION_ARG_STRING, &opt_execution,
    "Follow the retained execution ID (started with namzu-exec --detach)", "ID" },
  { "session", 'S', 0, G_OPTION_ARG_STRING, &opt_session,
    "Follow session ID; with --terminal --persistent, the new session's id", "ID" },
  { "from", 'f', 0, G_OPTION_ARG_INT64, &opt_from, "Replay from byte offset N (default 0)", "N" },
  { "timeout", 0, 0, G_OPTION_ARG_STRING, &opt_timeout,
    "With --execution: the longest it may still run, as ms or 30s, 5m, 1h (default 30m, the "
    "agent's ceiling); namzu-attach gives up 10 s after that",
    "DURATION" },
  { "terminal", 't', 0, G_OPTION_ARG_NONE, &opt_terminal,
    "Open an interactive terminal (default command /bin/sh)", NULL },
  { "persistent", 'p', 0, G_OPTION_ARG_NONE, &opt_persistent,
    "With --terminal: keep it running as session --session ID after we detach", NULL },
  { "list", 'l', 0, G_OPTION_ARG_NONE, &opt_list, "List the sandbox's sessions (JSON)", NULL },
  { "kill", 'k', 0, G_OPTION_ARG_STRING, &opt_kill, "Kill session ID (JSON summary)", "ID" },
  { "start-detached", 0, 0, G_OPTION_ARG_STRING, &opt_start,
    "Start -- COMMAND ARGS... as session ID with no terminal (JSON summary)", "ID" },
  { "signal", 0, 0, G_OPTION_ARG_STRING, &opt_signal,
    "With --kill: SIGTERM, SIGKILL (default), SIGINT or SIGHUP", "SIG" },
  { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
    "For testing and direct agent use: unix:/PATH, tcp:HOST:PORT or a namzu-worker's "
    "http://HOST:PORT instead of a sandbox; the token comes from $NAMZU_TOKEN",
    "ENDPOINT" },
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_command, NULL, NULL },
  { NULL }
};

static const char description[]
    = "One of:\n"
      "  --execution ID [--from N]   output of a retained execution, replayed then followed;\n"
      "                              exit status of the command, like namzu-exec\n"
      "  --session ID [--from N]     output of a session, followed until it exits\n"
      "  --terminal [--persistent --session ID] [-- COMMAND ARGS...]\n"
      "                              an interactive terminal: raw mode on a TTY, resized on\n"
      "                              SIGWINCH; Ctrl-] detaches (a persistent terminal keeps\n"
      "                              running, an ordinary one is killed). When stdin is not a\n"
      "                              TTY it is sent as input; at its end a persistent terminal\n"
      "                              is left running and an ordinary one gets Ctrl-D\n"
      "  --list                      sessions, as JSON\n"
      "  --kill ID [--signal SIG]    kill a session, print its summary (JSON)\n"
      "  --start-detached ID -- COMMAND ARGS...\n"
      "                              start a program as a session (stdout and stderr kept in\n"
      "                              its ring), print its summary (JSON); follow it with\n"
      "                              --session\n"
      "\n"
      "Output bytes that the agent's ring no longer holds are reported on stderr (\"N bytes\n"
      "dropped before offset M\"), never skipped silently.\n"
      "Sessions and terminals may stay quiet for ever: namzu-attach agrees a heartbeat with the\n"
      "agent ($NAMZU_STREAM_HEARTBEAT_MS, default 5000; 0 for none) and gives up on a peer that\n"
      "sends nothing for three beats, or no ready frame within 60 s. An execution ends at its\n"
      "timeout: --timeout says how long it may still run.\n"
      "Exit status: the followed command's (128+N for signal N, 124 on timeout), 0 for --list,\n"
      "--kill and a detached terminal, 125 when namzu itself failed.";

static void
on_output (int stream, const char *data, gsize len, gpointer user_data)
{
  FILE *f = stream == NZ_EXEC_STDERR ? stderr : stdout;

  fwrite (data, 1, len, f);
  fflush (f);
}

static void
on_gap (guint64 dropped, guint64 offset, gpointer user_data)
{
  nz_cli_warn ("%" G_GUINT64_FORMAT " bytes of output were dropped before offset %" G_GUINT64_FORMAT
               " (the agent's ring no longer holds them)",
               dropped, offset);
}

static const NzAttachCallbacks attach_callbacks = { on_output, on_gap };

static int
fail (const GError *error)
{
  nz_cli_warn ("%s", error->message);
  return NZ_EXEC_EXIT_NAMZU;
}

/* An execution ends at its timeout, NAMZU_SANDBOX_MAX_TIMEOUT_MS (30 min) at the most: a
 * stream still open 10 s past the longest it may run is a peer that lies or hangs. */
static guint64
observation_ms (void)
{
  return (guint64)timeout_ms + NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS;
}

static int
follow_execution (NzAgentClient *c)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) end = nz_agent_attach_execution (
      c, opt_execution, (guint64)opt_from, observation_ms (), &attach_callbacks, NULL, NULL,
      &error);
  JsonObject *result;
  int status;

  if (end == NULL)
    return fail (error);
  result = nz_json_get_object (end, "result");
  if (result == NULL)
    {
      nz_cli_warn ("execution %s ended %s without a result: %s", opt_execution,
                   nz_json_get_string (end, "outcome"),
                   nz_json_get_string (end, "error") ? nz_json_get_string (end, "error") : "-");
      return NZ_EXEC_EXIT_NAMZU;
    }
  status = nz_exec_exit_status (result);
  return status >= 0 ? status : NZ_EXEC_EXIT_NAMZU;
}

/* Session exit frames carry a numeric signal. */
static int
session_status (JsonObject *exit_frame)
{
  double code = -1, sig = 0;

  /* The frame is the agent's: only a real signal number or exit status counts. */
  if (nz_json_get_number (exit_frame, "signal", &sig) && sig >= 1 && sig <= 64
      && sig == (int)sig)
    return 128 + (int)sig;
  if (nz_json_get_number (exit_frame, "exitCode", &code) && code >= 0 && code <= 255
      && code == (int)code)
    return (int)code;
  nz_cli_warn ("the agent's exit frame carries no usable exit status");
  return NZ_EXEC_EXIT_NAMZU;
}

static int
follow_session (NzAgentClient *c)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) end = nz_agent_attach_session (c, opt_session, (guint64)opt_from,
                                                        &attach_callbacks, NULL, NULL, &error);

  if (end == NULL)
    return fail (error);
  return session_status (end);
}

static int
print_call (NzAgentClient *c, const char *op, JsonObject *body)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = nz_agent_client_call (c, op, body, NULL, &error);

  if (reply == NULL)
    return nz_cli_fail (error, TRUE);
  if (!nz_json_get_bool (reply, "ok", FALSE))
    {
      g_autoptr (JsonObject) out = json_object_new ();
      JsonObject *inner = json_object_new ();
      const char *code = nz_json_get_string (reply, "error");

      json_object_set_string_member (inner, "code", code != NULL ? code : "failed");
      json_object_set_string_member (inner, "message", code != NULL ? code : "refused");
      json_object_set_object_member (out, "error", inner);
      nz_cli_print_object (out);
      nz_cli_warn ("%s: %s", op, code != NULL ? code : "refused");
      return 1;
    }
  json_object_remove_member (reply, "ok");
  nz_cli_print_object (reply);
  return 0;
}

/* ---- interactive terminal ---- */

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

static int
run_terminal (NzAgentClient *c)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (NzAgentDuplex) d = NULL;
  g_autoptr (GError) error = NULL;
  gboolean tty = isatty (STDIN_FILENO);
  struct termios saved, raw;
  gboolean stdin_open = TRUE, exited = FALSE;
  NzLiveness live;
  int status = 0;
  guint cols, rows;

  terminal_size (&cols, &rows);
  json_object_set_int_member (body, "cols", cols);
  json_object_set_int_member (body, "rows", rows);
  if (opt_command != NULL && opt_command[0] != NULL)
    {
      JsonArray *args = json_array_new ();

      json_object_set_string_member (body, "command", opt_command[0]);
      for (int i = 1; opt_command[i] != NULL; i++)
        json_array_add_string_element (args, opt_command[i]);
      json_object_set_array_member (body, "args", args);
    }
  if (opt_persistent)
    {
      json_object_set_boolean_member (body, "persistent", TRUE);
      json_object_set_string_member (body, "sessionId", opt_session);
    }
  nz_liveness_start (&live, body, nz_liveness_asked_ms ());
  d = nz_agent_duplex_open (c, "terminal", body, &error);
  if (d == NULL)
    return fail (error);
  if (!g_unix_open_pipe (winch_pipe, FD_CLOEXEC, NULL)
      || !g_unix_set_fd_nonblocking (winch_pipe[0], TRUE, NULL)
      || !g_unix_set_fd_nonblocking (winch_pipe[1], TRUE, NULL))
    return NZ_EXEC_EXIT_NAMZU;
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
      if (!nz_liveness_tick (&live, d, "terminal", &error))
        {
          status = fail (error);
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
              if (opt_persistent)
                break;
              json_object_set_string_member (ev, "type", "input");
              json_object_set_string_member (ev, "data", "\x04");
              if (!send_event (d, ev))
                break;
            }
          else if (tty && (key = memchr (buf, DETACH_KEY, (size_t)n)) != NULL)
            {
              if (!opt_persistent)
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

          r = nz_agent_duplex_next (d, may_read, &frame, &error);
          if (r != NZ_DUPLEX_FRAME)
            break;
          type = nz_json_get_string (frame, "type");
          /* Every member is the agent's word: any of them may be missing or mistyped. */
          data = nz_json_get_string (frame, "data");
          if (g_strcmp0 (type, "ready") == 0)
            nz_liveness_ready (&live, frame);
          if (g_strcmp0 (type, "data") == 0 && data != NULL)
            on_output (g_strcmp0 (nz_json_get_string (frame, "stream"), "stderr") == 0
                           ? NZ_EXEC_STDERR
                           : NZ_EXEC_STDOUT,
                       data, strlen (data), NULL);
          else if (g_strcmp0 (type, "exit") == 0)
            {
              status = session_status (frame);
              exited = TRUE;
            }
          else if (g_strcmp0 (type, "error") == 0)
            {
              const char *code = nz_json_get_string (frame, "error");

              nz_cli_warn ("terminal: %s", code != NULL ? code : "the agent sent an error "
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
            status = fail (error);
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
  return status;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[-- COMMAND [ARGS...]]");
  g_autoptr (GError) error = NULL;
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  int modes;

  nz_cli_init ("namzu-attach");
  g_option_context_set_strict_posix (ctx, TRUE);
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, "Follow executions and sessions; open terminals.");
  g_option_context_set_description (ctx, description);
  nz_cli_parse (ctx, &argc, &argv);
  if (opt_command != NULL && opt_command[0] != NULL && g_str_equal (opt_command[0], "--"))
    {
      g_free (opt_command[0]);
      memmove (opt_command, opt_command + 1, g_strv_length (opt_command) * sizeof (char *));
    }
  modes = (opt_execution != NULL) + (opt_session != NULL && !opt_terminal) + opt_terminal + opt_list
          + (opt_kill != NULL) + (opt_start != NULL);
  if (modes != 1)
    nz_cli_usage_error (
        "give exactly one of --execution, --session, --terminal, --list, --kill, --start-detached");
  if (opt_from < 0)
    nz_cli_usage_error ("--from wants a byte offset >= 0");
  if (opt_timeout != NULL && opt_execution == NULL)
    nz_cli_usage_error ("--timeout only goes with --execution");
  /* Bounded so that adding the grace cannot overflow what a deadline holds. */
  if (opt_timeout != NULL)
    timeout_ms = nz_lite_exec_parse_timeout_ms (opt_timeout);
  if (timeout_ms < 0 || timeout_ms > (long long)G_MAXINT32)
    nz_cli_usage_error ("--timeout wants milliseconds or a duration like 30s, 5m, 1h (at most "
                        "%d ms); got \"%s\"", G_MAXINT32, opt_timeout);
  if (opt_persistent && (!opt_terminal || opt_session == NULL))
    nz_cli_usage_error ("--persistent needs --terminal and --session ID");
  if (!opt_terminal && opt_start == NULL && opt_command != NULL && opt_command[0] != NULL)
    nz_cli_usage_error ("a COMMAND only goes with --terminal or --start-detached");
  if (opt_start != NULL && (opt_command == NULL || opt_command[0] == NULL))
    nz_cli_usage_error ("--start-detached needs -- COMMAND");

  signal (SIGPIPE, SIG_IGN);
  if (opt_endpoint != NULL)
    client = nz_agent_client_new (opt_endpoint, g_getenv ("NAMZU_TOKEN"));
  else
    {
      /* An interactive terminal keeps stdin for the keyboard. */
      handle = nz_handle_resolve (opt_sandbox, !opt_terminal, &error);
      if (handle == NULL)
        return nz_cli_fail (error, opt_list || opt_kill != NULL || opt_start != NULL);
      client = nz_agent_client_new (handle->endpoint, handle->token);
    }

  if (opt_execution != NULL)
    return follow_execution (client);
  if (opt_terminal)
    return run_terminal (client);
  if (opt_session != NULL)
    return follow_session (client);
  if (opt_list)
    return print_call (client, "list-sessions", NULL);
  if (opt_start != NULL)
    {
      g_autoptr (JsonObject) body = json_object_new ();
      JsonArray *args = json_array_new ();

      json_object_set_string_member (body, "sessionId", opt_start);
      json_object_set_string_member (body, "command", opt_command[0]);
      for (int i = 1; opt_command[i] != NULL; i++)
        json_array_add_string_element (args, opt_command[i]);
      json_object_set_array_member (body, "args", args);
      return print_call (client, "start-detached", body);
    }
  {
    g_autoptr (JsonObject) body = json_object_new ();

    json_object_set_string_member (body, "sessionId", opt_kill);
    if (opt_signal != NULL)
      json_object_set_string_member (body, "signal", opt_signal);
    return print_call (client, "kill-session", body);
  }
}
