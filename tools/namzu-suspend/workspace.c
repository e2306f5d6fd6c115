/* namzu-suspend and namzu-resume: a Kubernetes workspace's disk kept without its pod (spec
 * D.8.5), and woken on a new pod (D.8.6). Both print what was done as JSON. */
#include <stdio.h>

#include "nz-backend.h"
#include "nz-cli.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-state.h"
#include "nz-tools.h"

static char *opt_sandbox, *opt_epoch;
static gboolean opt_quiesce, opt_no_flush;
static gint opt_grace;

static const GOptionEntry suspend_entries[]
    = { { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
          "Sandbox (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
        { "quiesce", 'q', 0, G_OPTION_ARG_NONE, &opt_quiesce,
          "First stop every process in it (refused: nothing is suspended)", NULL },
        { "grace", 'g', 0, G_OPTION_ARG_INT, &opt_grace,
          "With --quiesce: milliseconds between SIGTERM and SIGKILL (default: the agent's)", "MS" },
        { "no-flush", 0, 0, G_OPTION_ARG_NONE, &opt_no_flush,
          "Do not flush the workspace filesystem first (default: flush)", NULL },
        { "epoch", 0, 0, G_OPTION_ARG_STRING, &opt_epoch,
          "Write under holder epoch N (default: the one the handle holds); refused when another "
          "holder has written a higher one",
          "N" },
        { NULL } };

static const GOptionEntry resume_entries[]
    = { { "sandbox", 's', 0, G_OPTION_ARG_STRING, &opt_sandbox,
          "Sandbox (default: $NAMZU_SANDBOX, else the JSON handle on stdin)", "ID" },
        { "epoch", 0, 0, G_OPTION_ARG_STRING, &opt_epoch,
          "Write under holder epoch N (default: the one the handle holds); refused when another "
          "holder has written a higher one",
          "N" },
        { NULL } };

static const char suspend_description[]
    = "A microvm:kubernetes workspace (namzu-create --workspace ID) only. In order: the holder\n"
      "epoch is checked, the workload quiesced (--quiesce), the workspace flushed (unless\n"
      "--no-flush; a flush the agent cannot do is a warning), the Sandbox patched Suspended,\n"
      "and its pod waited for until it is gone. The disk stays; every tool call is refused\n"
      "until namzu-resume. Prints {\"id\",\"workspace\",\"operatingMode\":\"Suspended\",\n"
      "\"alreadySuspended\",\"quiesce\"?,\"flush\"?}.\n"
      "Exit status: 0 suspended, 1 refused or unconfirmed (a refused quiesce or flush patches\n"
      "nothing), 2 bad usage.";

static const char resume_description[]
    = "A microvm:kubernetes workspace (namzu-create --workspace ID) only. Patches the Sandbox\n"
      "Running, waits for its new pod (a new uid: the agent's new token, re-read), the agent's\n"
      "healthz and the privilege probe. A start that fails is suspended again. Prints\n"
      "{\"id\",\"workspace\",\"operatingMode\":\"Running\",\"woke\",\"guestRestart\":\n"
      "\"pod-replaced\"|\"container-restarted\"|null}. On a workspace that is running it only\n"
      "re-binds (and, with an epoch, moves the fence).\n"
      "Exit status: 0 running, 1 refused or failed to start, 2 bad usage.";

/* The options, then the handle and the epoch (-1: none given). */
static NzHandle *
begin (const char *summary, const GOptionEntry *entries, const char *description, int argc,
       char **argv, gint64 *epoch, GError **error)
{
  g_autoptr (GOptionContext) ctx = g_option_context_new (summary);
  guint64 e = 0;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_set_description (ctx, description);
  if (!nz_cli_parse_args (ctx, &argc, &argv, error))
    return NULL;
  if (argc > 1)
    return (nz_cli_usage (error, "unexpected argument '%s'", argv[1]), NULL);
  if (opt_grace < 0 || (opt_grace > 0 && !opt_quiesce))
    return (nz_cli_usage (error, "--grace wants a positive number of milliseconds, with "
                                 "--quiesce"),
            NULL);
  if (opt_epoch != NULL
      && !g_ascii_string_to_unsigned (opt_epoch, 10, 0, 9007199254740991ull, &e, NULL))
    return (nz_cli_usage (error, "--epoch must be a non-negative integer, got '%s'", opt_epoch),
            NULL);
  *epoch = opt_epoch != NULL ? (gint64)e : -1;
  return nz_handle_resolve (opt_sandbox, TRUE, error);
}

static gboolean
finish (JsonObject *report)
{
  nz_cli_print_object (report);
  return TRUE;
}

gboolean
nz_tool_suspend (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) report = json_object_new ();
  NzSuspendOptions o = { .quiesce = FALSE };
  g_autoptr (NzHandle) handle = begin ("- suspend a workspace, keeping its disk", suspend_entries,
                                       suspend_description, argc, argv, &o.epoch, error);

  (void)cancellable;
  o.quiesce = opt_quiesce;
  o.grace_ms = opt_grace;
  o.flush = !opt_no_flush;
  return handle != NULL && nz_backend_suspend (handle, &o, report, error) && finish (report);
}

gboolean
nz_tool_resume (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  g_autoptr (JsonObject) report = json_object_new ();
  gint64 epoch = -1;
  g_autoptr (NzHandle) handle = begin ("- wake a suspended workspace", resume_entries,
                                       resume_description, argc, argv, &epoch, error);

  (void)cancellable;
  return handle != NULL && nz_backend_resume (handle, epoch, report, error) && finish (report);
}
