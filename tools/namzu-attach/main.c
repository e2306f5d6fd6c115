/* namzu-attach: follow a retained execution or a session from a byte offset, open an
 * interactive terminal, list and kill sessions. Client code lives in lib/client
 * (nz-agent-sessions.h); this file parses options and runs one mode: follow.c (--execution,
 * --session), terminal.c (--terminal), sessions.c (--list, --kill, --start-detached). */
#include <signal.h>
#include <string.h>

#include "attach.h"
#include "nz-agent-sessions.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-lite-exec.h"
#include "nz-state.h"
#include "nz-tools.h"

static char *opt_sandbox, *opt_endpoint, *opt_execution, *opt_session, *opt_kill, *opt_signal;
static char *opt_start, *opt_timeout, *opt_heartbeat;
/* --heartbeat in ms (0: none), parsed once in nz_tool_attach(). */
static gint64 heartbeat_ms;
/* --timeout in ms, parsed once in nz_tool_attach(); the agent's 30 min ceiling by default. */
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
  { "heartbeat", 0, 0, G_OPTION_ARG_STRING, &opt_heartbeat,
    "With --session or --terminal: ask the agent for a heartbeat every MS milliseconds or "
    "DURATION (e.g. 15s); with --execution (whose wire has none): probe the agent with a "
    "healthz after that much silence; off for none (default $NAMZU_STREAM_HEARTBEAT_MS, else "
    "the sandbox's streamHeartbeatMs, else 15 s)",
    "MS|DURATION|off" },
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
  /* Bytes, not the locale's charset (the C locale refuses non-ASCII); checked as UTF-8. */
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_command, NULL, NULL },
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
      "agent (--heartbeat, else $NAMZU_STREAM_HEARTBEAT_MS, else the sandbox's configured\n"
      "streamHeartbeatMs (microvm:kubernetes), else 15 s; off or 0 for none) and\n"
      "gives up on a peer that sends nothing for three beats (\"the peer sent nothing for Nms\n"
      "and is treated as gone\", exit 125), or no ready frame within 60 s. An execution's\n"
      "stream has no heartbeat on the wire: after one silent interval namzu-attach asks the\n"
      "agent for a healthz on a new connection, and a peer that does not answer within the\n"
      "interval is treated as gone (exit 125). An execution ends at its timeout: --timeout\n"
      "says how long it may still run.\n"
      "Exit status: the followed command's (128+N for signal N, 124 on timeout), 0 for --list,\n"
      "--kill and a detached terminal, 125 when namzu itself failed.";

gboolean
nz_tool_attach (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[-- COMMAND [ARGS...]]");
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  int modes;

  g_option_context_set_strict_posix (ctx, TRUE);
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_summary (ctx, "Follow executions and sessions; open terminals.");
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  nz_cli_strip_dashdash (opt_command);
  for (int i = 0; opt_command != NULL && opt_command[i] != NULL; i++)
    if (!nz_cli_check_utf8 (opt_command[i], error, "%s %d", i == 0 ? "COMMAND" : "argument", i))
      return FALSE;
  modes = (opt_execution != NULL) + (opt_session != NULL && !opt_terminal) + opt_terminal + opt_list
          + (opt_kill != NULL) + (opt_start != NULL);
  if (modes != 1)
    return nz_cli_usage (
        error,
        "give exactly one of --execution, --session, --terminal, --list, --kill, --start-detached");
  if (opt_from < 0)
    return nz_cli_usage (error, "--from wants a byte offset >= 0");
  if (opt_timeout != NULL && opt_execution == NULL)
    return nz_cli_usage (error, "--timeout only goes with --execution");
  /* Bounded so that adding the grace cannot overflow what a deadline holds. */
  if (opt_timeout != NULL)
    timeout_ms = nz_lite_exec_parse_timeout_ms (opt_timeout);
  if (timeout_ms < 0 || timeout_ms > (long long)G_MAXINT32)
    return nz_cli_usage (error,
                         "--timeout wants milliseconds or a duration like 30s, 5m, 1h (at most "
                         "%d ms); got \"%s\"",
                         G_MAXINT32, opt_timeout);
  if (!nz_liveness_parse (opt_heartbeat, &heartbeat_ms, error))
    return FALSE;
  if (opt_persistent && (!opt_terminal || opt_session == NULL))
    return nz_cli_usage (error, "--persistent needs --terminal and --session ID");
  if (!opt_terminal && opt_start == NULL && opt_command != NULL && opt_command[0] != NULL)
    return nz_cli_usage (error, "a COMMAND only goes with --terminal or --start-detached");
  if (opt_start != NULL && (opt_command == NULL || opt_command[0] == NULL))
    return nz_cli_usage (error, "--start-detached needs -- COMMAND");
  /* Only the session calls print JSON; the other modes' stdout is the command's output. */
  nz_cli_set_json_errors (opt_list || opt_kill != NULL || opt_start != NULL);

  signal (SIGPIPE, SIG_IGN);
  /* An interactive terminal keeps stdin for the keyboard. */
  client = nz_sandbox_open_client (opt_endpoint, opt_sandbox, !opt_terminal, &handle, error);
  if (client == NULL)
    return FALSE;
  heartbeat_ms = nz_backend_stream_heartbeat_ms (handle, opt_heartbeat, heartbeat_ms);

  if (opt_execution != NULL)
    return nz_attach_follow_execution (client, opt_execution, (guint64)opt_from, timeout_ms,
                                       heartbeat_ms, error);
  if (opt_terminal)
    return nz_attach_terminal (client, opt_command, opt_persistent ? opt_session : NULL,
                               heartbeat_ms, error);
  if (opt_session != NULL)
    return nz_attach_follow_session (client, opt_session, (guint64)opt_from, heartbeat_ms, error);
  if (opt_list)
    return nz_attach_list_sessions (client, error);
  if (opt_start != NULL)
    return nz_attach_start_detached (client, opt_start, opt_command, error);
  return nz_attach_kill_session (client, opt_kill, opt_signal, error);
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-attach", nz_tool_attach, argc, argv);
}
