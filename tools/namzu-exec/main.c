/* namzu-exec: run a command in a sandbox, passing its output through and returning its status.
 *
 * The exec runs on a worker thread so the main thread can run a GMainLoop with
 * SIGINT/SIGTERM/SIGHUP sources: a signal cancels the remote execution by id and we wait for the
 * agent's confirmation before exiting 128+signal. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "nz-agent-client.h"
#include "nz-agent-sessions.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-json.h"
#include "nz-lite-exec.h"
#include "nz-state.h"
#include "nz-tools.h"

#include "exec-full.h"
#include "front.h"

/* -i reads at most this much: the wire's stdin is one JSON string inside the first frame, and
 * a TCP agent refuses first frames over 8 MiB before authentication (spec A.4). */
#define STDIN_LIMIT_BYTES (4 * 1024 * 1024)

static char *opt_sandbox, *opt_timeout, *opt_cwd, *opt_endpoint, *opt_id;
static char **opt_env, **opt_command;
static gboolean opt_json, opt_stdin, opt_detach;

static const GOptionEntry entries[] = {
  { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
    "Sandbox to run in (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
  { "json", 0, 0, G_OPTION_ARG_NONE, &opt_json,
    "Write NDJSON events on stdout instead of passing output through", NULL },
  { "timeout", 't', 0, G_OPTION_ARG_STRING, &opt_timeout,
    "Kill the command after MS milliseconds or a DURATION like 30s, 5m, 1h (default: the "
    "agent's, 5m); exit 124",
    "MS|DURATION" },
  /* The command's text is taken as bytes (FILENAME: GOption converts STRING from the locale's
   * charset, which under the C locale refuses every non-ASCII byte) and checked as UTF-8 in
   * build_body, as the front takes it. */
  { "env", 'e', 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_env, "Set K=V in the command's environment",
    "K=V" },
  { "cwd", 'C', 0, G_OPTION_ARG_FILENAME, &opt_cwd,
    "Working directory inside the sandbox workspace (created if missing)", "DIR" },
  { "stdin", 'i', 0, G_OPTION_ARG_NONE, &opt_stdin,
    "Send our stdin to the command (at most 4 MiB of UTF-8 text, read before it starts)", NULL },
  { "endpoint", 0, 0, G_OPTION_ARG_STRING, &opt_endpoint,
    "For testing and direct agent use: talk to the agent at unix:/PATH, tcp:HOST:PORT or "
    "a namzu-worker's http://HOST:PORT instead of a sandbox; the token comes from $NAMZU_TOKEN",
    "ENDPOINT" },
  { "detach", 'd', 0, G_OPTION_ARG_NONE, &opt_detach,
    "Start the command with retained output and return at once, printing "
    "{\"executionId\",\"state\"}; follow it later with namzu-attach --execution ID",
    NULL },
  { "id", 0, 0, G_OPTION_ARG_STRING, &opt_id,
    "With --detach: the execution id to use (exec_<uuid>; default: a new one)", "ID" },
  { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_command, NULL, NULL },
  { NULL }
};

static const char description[]
    = "Runs COMMAND in a sandbox. Its stdout and stderr are passed through as they arrive, or\n"
      "with --json written as NDJSON events: {\"type\":\"stdout\"|\"stderr\",\"data\":...}, "
      "ending\n"
      "in one {\"type\":\"result\",\"exitCode\":...} line ({\"type\":\"error\",...} if it "
      "failed).\n"
      "The result carries \"timing\": {reserveMs, dialMs, executeMs, drainMs, firstFrameMs,\n"
      "totalMs}, the phases of this exec in whole milliseconds.\n"
      "\n"
      "The sandbox is --sandbox ID, else $NAMZU_SANDBOX, else the handle namzu-create printed,\n"
      "read from stdin (not with -i):  namzu-create | namzu-exec -- make\n"
      "\n"
      "Exit status: the command's; 128+N if signal N ended it; 124 on timeout; 126 if it could\n"
      "not be executed, 127 if it was not found; 125 if namzu itself failed. SIGINT, SIGTERM\n"
      "and SIGHUP cancel the command in the sandbox, wait for that to be confirmed, and exit\n"
      "128+N. When the sandbox cannot confirm that the command stopped, the sandbox is retired\n"
      "(torn down, as namzu-destroy would) and namzu-exec exits 125.";

static void
emit_event (const char *type, const char *data)
{
  g_autoptr (JsonObject) ev = json_object_new ();

  json_object_set_string_member (ev, "type", type);
  json_object_set_string_member (ev, "data", data);
  nz_cli_print_object (ev);
}

/* Runs on the worker thread. */
static void
on_output (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  NzExecRun *run = user_data;
  FILE *f = stream == NZ_EXEC_STDOUT || opt_json ? stdout : stderr;
  gboolean ok = TRUE;

  if (opt_json)
    emit_event (stream == NZ_EXEC_STDOUT ? "stdout" : "stderr", data);
  else
    ok = fwrite (data, 1, len, f) == len && fflush (f) == 0;
  if ((!ok || ferror (stdout)) && !run->broken_output)
    {
      run->broken_output = TRUE;
      g_cancellable_cancel (run->cancellable);
    }
}

static gpointer
exec_thread (gpointer user_data)
{
  NzExecRun *run = user_data;

  run->result = nz_agent_client_exec (run->client, run->body, on_output, run, &run->execution_id,
                                      run->cancellable, &run->error);
  return NULL;
}

/* Usage mistakes are G_OPTION_ERROR (exit 2); trouble with our stdin is NZ_ERROR (125). */
static JsonObject *
build_body (GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  JsonArray *args;

  for (int i = 0; opt_command[i] != NULL; i++)
    if (!nz_cli_check_utf8 (opt_command[i], error, "%s %d", i == 0 ? "COMMAND" : "argument", i))
      return NULL;
  for (int i = 0; opt_env != NULL && opt_env[i] != NULL; i++)
    if (!nz_cli_check_utf8 (opt_env[i], error, "--env %d", i + 1))
      return NULL;
  if (!nz_cli_check_utf8 (opt_cwd, error, "--cwd"))
    return NULL;
  json_object_set_string_member (body, "command", opt_command[0]);
  args = json_array_new ();
  for (int i = 1; opt_command[i] != NULL; i++)
    json_array_add_string_element (args, opt_command[i]);
  json_object_set_array_member (body, "args", args);
  if (opt_cwd != NULL)
    json_object_set_string_member (body, "cwd", opt_cwd);
  if (opt_env != NULL)
    {
      JsonObject *env = json_object_new ();

      json_object_set_object_member (body, "env", env);
      for (int i = 0; opt_env[i] != NULL; i++)
        {
          const char *eq = strchr (opt_env[i], '=');
          g_autofree char *key = eq != NULL ? g_strndup (opt_env[i], eq - opt_env[i]) : NULL;

          if (key == NULL || *key == '\0')
            return (g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                                 "--env wants K=V, got \"%s\"", opt_env[i]),
                    NULL);
          json_object_set_string_member (env, key, eq + 1);
        }
    }
  if (opt_timeout != NULL)
    {
      gint64 ms = nz_lite_exec_parse_timeout_ms (opt_timeout);

      if (ms < 0)
        return (g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                             "--timeout wants milliseconds or a duration like 30s, 5m, 1h; got "
                             "\"%s\"",
                             opt_timeout),
                NULL);
      json_object_set_int_member (body, "timeoutMs", ms);
    }
  if (opt_stdin)
    {
      g_autoptr (GString) in = g_string_new (NULL);
      char buf[65536];
      size_t n;

      while ((n = fread (buf, 1, sizeof buf, stdin)) > 0 && in->len <= STDIN_LIMIT_BYTES)
        g_string_append_len (in, buf, n);
      if (ferror (stdin))
        return (nz_throw_errno_prefix (error, "reading stdin"), NULL);
      if (in->len > STDIN_LIMIT_BYTES)
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "-i takes at most %d bytes of stdin; copy larger input in with "
                          "namzu-cp instead",
                          STDIN_LIMIT_BYTES),
                NULL);
      /* The wire carries stdin as a JSON string: text only, and we refuse rather than mangle. */
      if (!g_utf8_validate_len (in->str, in->len, NULL))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "-i sends stdin as text and this input is not UTF-8; copy binary "
                          "input in with namzu-cp instead"),
                NULL);
      json_object_set_string_member (body, "stdin", in->str);
    }
  return g_steal_pointer (&body);
}

/* namzu itself failed (exit 125), before the command was sent: reported, then the status. */
static gboolean
namzu_failed (GError **error, const GError *cause)
{
  return nz_cli_exit_status (
      error, nz_exec_fail (EXIT_NAMZU, nz_error_code_name (cause), "%s", cause->message));
}

gboolean
nz_tool_exec (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("[--] COMMAND [ARGS...]");
  g_autoptr (GError) local = NULL;
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzTransport) transport = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (JsonObject) body = NULL;
  g_autofree char *target = NULL;
  NzExecRun run = { 0 };
  int status;

  /* Set only by the front (front.c), for the one thing it cannot do itself. */
  g_autofree char *retire = g_strdup (g_getenv (NZ_EXEC_RETIRE_ENV));

  g_unsetenv (NZ_EXEC_RETIRE_ENV);
  /* stdout is the command's: every failure is reported here, with --json as an event. */
  nz_cli_set_json_errors (FALSE);
  /* Options end at COMMAND, so `namzu-exec ls -l` passes -l to ls. */
  g_option_context_set_strict_posix (ctx, TRUE);
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  nz_exec_report_json (opt_json);
  nz_cli_strip_dashdash (opt_command);
  if (opt_command == NULL || opt_command[0] == NULL || *opt_command[0] == '\0')
    return nz_cli_usage (error, "no COMMAND given");

  body = build_body (&local);
  if (body == NULL && local->domain == G_OPTION_ERROR)
    return nz_cli_usage (error, "%s", local->message);
  if (body == NULL)
    return namzu_failed (error, local);
  if (opt_id != NULL && !opt_detach)
    return nz_cli_usage (error, "--id only goes with --detach");
  /* With -i our stdin is the command's, so the handle cannot come from it. */
  transport = nz_sandbox_open (opt_endpoint, opt_sandbox, !opt_stdin, &handle, &local);
  if (transport == NULL)
    return namzu_failed (error, local);
  if (opt_detach)
    {
      g_autoptr (JsonObject) started = nz_agent_exec_detach (transport, body, opt_id, &local);

      if (started == NULL)
        return namzu_failed (error, local);
      if (handle != NULL)
        json_object_set_string_member (started, "sandbox", handle->id);
      nz_cli_print_object (started);
      return TRUE;
    }
  client = nz_agent_client_new_for (transport, &local);
  if (client == NULL)
    return namzu_failed (error, local);
  if (handle != NULL)
    target = g_strdup_printf ("sandbox %s", handle->id);
  if (retire != NULL && handle != NULL)
    {
      g_autoptr (GError) unconfirmed
          = g_error_new_literal (NZ_AGENT_ERROR, NZ_AGENT_ERROR_CANCEL_UNCONFIRMED, retire);

      return nz_cli_exit_status (error, nz_exec_retire_unconfirmed (handle, unconfirmed));
    }

  /* A vanished reader is noticed as a write error (then we cancel), not a silent death. */
  signal (SIGPIPE, SIG_IGN);
  run = (NzExecRun){ .client = client, .body = body, .cancellable = cancellable };
  run.signo = nz_cli_run_cancellable ("exec", exec_thread, &run, cancellable);

  status = nz_exec_finish (&run, handle, target, opt_command[0]);
  g_clear_pointer (&run.result, json_object_unref);
  g_clear_error (&run.error);
  g_free (run.execution_id);
  return status == 0 ? TRUE : nz_cli_exit_status (error, status);
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-exec", nz_tool_exec, argc, argv);
}
