/* namzu-seed: make the git repositories of a seed present under a root in a sandbox (spec G).
 *
 * The work runs on a thread so the main thread can turn SIGINT/SIGTERM/SIGHUP into a remote
 * cancel of the command in flight (a clone is stopped in the sandbox, not orphaned there). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-agent-client.h"
#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-progress.h"
#include "nz-seed.h"
#include "nz-state.h"
#include "nz-tools.h"

/* A seed is a short list of repositories; anything this big is not one. */
#define SEED_LIMIT_BYTES (1024 * 1024)
#define EXIT_DRIFT 3

static char *opt_sandbox, *opt_root, *opt_on_drift;
static gint64 opt_timeout_ms;
static char **opt_rest;

static const GOptionEntry entries[]
    = { { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
          "Sandbox to seed (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
        { "root", 'r', 0, G_OPTION_ARG_STRING, &opt_root,
          "Absolute directory in the sandbox the repositories go under (required)", "DIR" },
        { "timeout", 't', 0, G_OPTION_ARG_INT64, &opt_timeout_ms,
          "Bound each step (a clone is one) at MS milliseconds (default: the agent's, 5 minutes)",
          "MS" },
        { "on-drift", 0, 0, G_OPTION_ARG_STRING, &opt_on_drift,
          "refuse (default): change nothing when any repository drifted; report: clone what is "
          "missing and report the drift (still exit 3)",
          "refuse|report" },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_rest, NULL, NULL },
        { NULL } };

static const char description[]
    = "SEED is a JSON file, or - for stdin (the sandbox then comes from --sandbox or\n"
      "$NAMZU_SANDBOX):\n"
      "  {\"name\":\"app\",\"repositories\":[{\"name\":\"api\",\"url\":\"https://host/api.git\",\n"
      "    \"dir\":\"src/api\",\"ref\":\"main\",\"commit\":\"<sha>\",\"depth\":1}]}\n"
      "Each call checks every repository (origin URL, and that its pinned or recorded commit is\n"
      "in HEAD's history) and refuses drift before touching anything; missing repositories are\n"
      "cloned beside their place and renamed into it. URLs must be https:// or http:// without\n"
      "credentials. Prints {seed, digest, root, repositories:[{name, dir, status, commit}]},\n"
      "status present|cloned|drifted|missing. See docs/seed.md.\n"
      "On a terminal, stderr shows each step (check, clone, marker) with its elapsed time\n"
      "($NAMZU_PROGRESS=0: never).\n"
      "\n"
      "Exit status: 0 every repository is present; 1 failure (clone, missing tool, sandbox\n"
      "unreachable); 2 usage or an invalid seed or root; 3 drift; 128+N when signal N\n"
      "cancelled the step in flight.";

typedef struct
{
  NzAgentClient *client;
  const NzSeed *seed;
  NzSeedOptions opts;
  GCancellable *cancellable;
  JsonObject *report;
  GError *error;
  gboolean ok;
  int signo;
} Run;

/* On a terminal, one line per step with its elapsed time, redrawn in place while it runs (a
 * clone can take minutes). The seed thread names the steps; the main thread, whose loop waits
 * for signals meanwhile, draws them: every step named is drawn, however quickly it ended. */
#define STEP_REDRAW_MS 100

G_LOCK_DEFINE_STATIC (steps);
static GPtrArray *pending_steps; /* char *, under the lock */

static void
on_progress (const char *message, gpointer user_data)
{
  G_LOCK (steps);
  g_ptr_array_add (pending_steps, g_strdup_printf ("%s: %s", nz_cli_tool (), message));
  G_UNLOCK (steps);
}

static gboolean
draw_steps (gpointer user_data)
{
  NzProgress *line = user_data;
  g_autoptr (GPtrArray) steps = g_ptr_array_new_with_free_func (g_free);

  G_LOCK (steps);
  g_ptr_array_extend_and_steal (steps, g_steal_pointer (&pending_steps));
  pending_steps = g_ptr_array_new_with_free_func (g_free);
  G_UNLOCK (steps);
  static gboolean started; /* nothing to draw before the first step */

  for (guint i = 0; i < steps->len; i++, started = TRUE)
    {
      nz_progress_finish (line);
      nz_progress_set_label (line, steps->pdata[i]);
      nz_progress_restart (line);
      nz_progress_tick (line);
    }
  if (started)
    nz_progress_tick (line);
  return G_SOURCE_CONTINUE;
}

static gpointer
seed_thread (gpointer user_data)
{
  Run *run = user_data;

  run->ok = nz_seed_ensure (run->client, run->seed, &run->opts, &run->report, run->cancellable,
                            &run->error);
  return NULL;
}

/* One stderr line and one JSON document: the error, plus the report when the check ran. */
static int
fail (const GError *e, JsonObject *report, int status)
{
  g_autoptr (JsonObject) out = report != NULL ? json_object_ref (report) : json_object_new ();
  JsonObject *inner = json_object_new ();
  const char *code = nz_seed_error_code_name (e);

  if (code == NULL && g_error_matches (e, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    code = "cancelled";
  else if (code == NULL && g_error_matches (e, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED))
    code = "unreachable";
  else if (code == NULL)
    code = nz_error_code_name (e);
  nz_cli_warn ("%s", e->message);
  json_object_set_string_member (inner, "code", code);
  json_object_set_string_member (inner, "message", e->message);
  json_object_set_object_member (out, "error", inner);
  nz_cli_print_object (out);
  return status;
}

static char *
read_seed (const char *arg, gsize *len, GError **error)
{
  g_autoptr (GString) in = g_string_new (NULL);
  char buf[65536];
  size_t n;
  char *data = NULL;

  if (strcmp (arg, "-") != 0)
    {
      if (!g_file_get_contents (arg, &data, len, error))
        return (nz_error_convert (error), NULL);
      if (*len > SEED_LIMIT_BYTES)
        return (g_free (data),
                nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "%s: a seed is at most "
                          "%d bytes",
                          arg, SEED_LIMIT_BYTES),
                NULL);
      return data;
    }
  while ((n = fread (buf, 1, sizeof buf, stdin)) > 0 && in->len <= SEED_LIMIT_BYTES)
    g_string_append_len (in, buf, n);
  if (ferror (stdin))
    return (nz_throw_errno_prefix (error, "reading the seed from stdin"), NULL);
  if (in->len > SEED_LIMIT_BYTES)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "a seed is at most %d bytes", SEED_LIMIT_BYTES),
            NULL);
  *len = in->len;
  return g_string_free (g_steal_pointer (&in), FALSE);
}

gboolean
nz_tool_seed (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new ("SEED");
  g_autoptr (GError) local = NULL;
  g_autoptr (NzHandle) handle = NULL;
  g_autoptr (NzAgentClient) client = NULL;
  g_autoptr (NzSeed) seed = NULL;
  g_auto (NzLayout) layout = { 0 };
  g_autofree char *data = NULL;
  const char *seed_arg;
  gsize len = 0;
  Run run = { 0 };
  g_autoptr (NzProgress) line = NULL;
  guint redraw = 0;
  int status;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return FALSE;
  if (opt_rest == NULL || opt_rest[0] == NULL)
    return nz_cli_usage (error, "no SEED given (a file, or - for stdin)");
  if (opt_rest[1] != NULL)
    return nz_cli_usage (error, "one SEED only");
  if (opt_root == NULL)
    return nz_cli_usage (error,
                         "--root DIR is required: where in the sandbox the repositories go");
  if (opt_on_drift != NULL && strcmp (opt_on_drift, "refuse") != 0
      && strcmp (opt_on_drift, "report") != 0)
    return nz_cli_usage (error, "--on-drift is refuse or report");
  if (opt_timeout_ms < 0)
    return nz_cli_usage (error, "--timeout wants a positive number of milliseconds");
  seed_arg = opt_rest[0];

  /* Everything that needs no sandbox first: a bad seed or root is refused before any I/O. */
  data = read_seed (seed_arg, &len, &local);
  if (data == NULL)
    return nz_cli_exit_status (error, fail (local, NULL, nz_error_to_exit_code (local)));
  seed = nz_seed_parse (data, len, &local);
  if (seed == NULL || !nz_seed_check_root (opt_root, &local))
    return nz_cli_exit_status (error, fail (local, NULL, NZ_EXIT_USAGE));

  /* stdin carries the seed or the handle, not both. */
  client
      = nz_sandbox_open_client (NULL, opt_sandbox, strcmp (seed_arg, "-") != 0, &handle, &local);
  if (client == NULL)
    return nz_cli_exit_status (error, fail (local, NULL, nz_error_to_exit_code (local)));
  nz_backend_layout (handle, &layout);
  if (!nz_seed_check_root_layout (opt_root, layout.collected_dir, layout.collected_name, &local))
    return nz_cli_exit_status (error, fail (local, NULL, NZ_EXIT_USAGE));

  signal (SIGPIPE, SIG_IGN);
  run = (Run){ .client = client, .seed = seed, .cancellable = cancellable };
  run.opts.root = opt_root;
  run.opts.timeout_ms = opt_timeout_ms;
  run.opts.report_drift = g_strcmp0 (opt_on_drift, "report") == 0;
  /* Progress is for a person watching; a pipe or a log gets only the result. */
  line = nz_progress_new_wait ("", 0);
  if (line != NULL)
    {
      pending_steps = g_ptr_array_new_with_free_func (g_free);
      run.opts.progress = on_progress;
      redraw = g_timeout_add (STEP_REDRAW_MS, draw_steps, line);
    }
  run.signo = nz_cli_run_cancellable ("seed", seed_thread, &run, cancellable);
  if (line != NULL)
    {
      g_source_remove (redraw);
      draw_steps (line);
      g_clear_pointer (&line, nz_progress_free);
      g_clear_pointer (&pending_steps, g_ptr_array_unref);
    }

  if (run.ok && run.report != NULL)
    {
      JsonArray *repos = nz_json_get_array (run.report, "repositories");
      gboolean drifted = FALSE;

      for (guint i = 0; repos != NULL && i < json_array_get_length (repos); i++)
        drifted
            |= g_strcmp0 (nz_json_get_string (json_array_get_object_element (repos, i), "status"),
                          "drifted")
               == 0;
      nz_cli_print_object (run.report);
      status = drifted ? EXIT_DRIFT : NZ_EXIT_OK;
    }
  else if (g_error_matches (run.error, G_IO_ERROR, G_IO_ERROR_CANCELLED) && run.signo != 0)
    status = fail (run.error, run.report, 128 + run.signo);
  else if (g_error_matches (run.error, NZ_SEED_ERROR, NZ_SEED_ERROR_DRIFT))
    status = fail (run.error, run.report, EXIT_DRIFT);
  else
    status = fail (run.error, run.report, NZ_EXIT_FAILURE);
  g_clear_pointer (&run.report, json_object_unref);
  g_clear_error (&run.error);
  return status == NZ_EXIT_OK ? TRUE : nz_cli_exit_status (error, status);
}

int
main (int argc, char **argv)
{
  return nz_cli_main ("namzu-seed", nz_tool_seed, argc, argv);
}
