#include "nz-cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <glib-unix.h>

#include "nz-config.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-progress.h"

static const char *cli_tool = "namzu";
static gboolean cli_version;
static const char *cli_version_detail;
static gboolean cli_json_errors = TRUE;
static gboolean cli_invalid_is_usage;
static GQuark cli_names_domain;
static const char *(*cli_names) (const GError *error);

void
nz_cli_init (const char *tool)
{
  cli_tool = tool;
  g_set_prgname (tool);
}

const char *
nz_cli_tool (void)
{
  return cli_tool;
}

void
nz_cli_warn (const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  /* Not in the middle of a progress line. */
  nz_progress_make_room ();
  fprintf (stderr, "%s: %s\n", cli_tool, msg);
  fflush (stderr);
}

G_DEFINE_QUARK (nz-cli-exit-quark, nz_cli_exit)

gboolean
nz_cli_exit_status (GError **error, int status)
{
  g_set_error_literal (error, NZ_CLI_EXIT, status, "");
  return FALSE;
}

gboolean
nz_cli_usage (GError **error, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_propagate_error (error, g_error_new_valist (G_OPTION_ERROR, G_OPTION_ERROR_FAILED, fmt, ap));
  va_end (ap);
  return FALSE;
}

gboolean
nz_cli_check_utf8 (const char *text, GError **error, const char *fmt, ...)
{
  g_autofree char *what = NULL;
  va_list ap;

  if (text == NULL || g_utf8_validate (text, -1, NULL))
    return TRUE;
  va_start (ap, fmt);
  what = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return nz_cli_usage (error, "%s is not UTF-8 text (the wire carries it as a JSON string)", what);
}

gboolean
nz_cli_parse_args (GOptionContext *ctx, int *argc, char ***argv, GError **error)
{
  static const GOptionEntry version_entries[] = {
    { "version", 0, 0, G_OPTION_ARG_NONE, &cli_version, "Print the version and exit", NULL },
    { NULL }
  };
  g_autoptr (GError) local = NULL;

  g_option_context_add_main_entries (ctx, version_entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, &local))
    {
      /* Whatever GOption refused (a charset conversion included) is a usage mistake. */
      if (local->domain != G_OPTION_ERROR)
        return nz_cli_usage (error, "%s", local->message);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (cli_version)
    {
      printf ("%s %s\n", cli_tool, NZ_VERSION);
      if (cli_version_detail != NULL)
        printf ("%s\n", cli_version_detail);
      fflush (stdout);
      return nz_cli_exit_status (error, NZ_EXIT_OK);
    }
  return TRUE;
}

void
nz_cli_set_version_detail (const char *line)
{
  cli_version_detail = line;
}

gboolean
nz_cli_print_json (JsonNode *node)
{
  gsize len = 0;
  g_autofree char *text = nz_json_to_string (node, &len);

  if (fwrite (text, 1, len, stdout) != len || fputc ('\n', stdout) == EOF || fflush (stdout) != 0)
    return FALSE;
  return TRUE;
}

gboolean
nz_cli_print_object (JsonObject *obj)
{
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, obj);
  return nz_cli_print_json (node);
}

void
nz_cli_set_json_errors (gboolean on_stdout)
{
  cli_json_errors = on_stdout;
}

void
nz_cli_set_invalid_is_usage (gboolean is_usage)
{
  cli_invalid_is_usage = is_usage;
}

void
nz_cli_set_code_names (GQuark domain, const char *(*name) (const GError *error))
{
  cli_names_domain = domain;
  cli_names = name;
}

static void
print_error_object (const GError *error)
{
  g_autoptr (JsonObject) outer = json_object_new ();
  JsonObject *inner = json_object_new ();
  gboolean own = cli_names != NULL && error->domain == cli_names_domain;

  json_object_set_string_member (inner, "code",
                                 own ? cli_names (error) : nz_error_code_name (error));
  json_object_set_string_member (inner, "message", error->message);
  json_object_set_object_member (outer, "error", inner);
  nz_cli_print_object (outer);
}

static void
print_try_line (void)
{
  fprintf (stderr, "Try '%s --help' for more information.\n", cli_tool);
  fflush (stderr);
}

/* The one place a tool's failure becomes its report and its exit status. */
static int
report (const GError *error)
{
  int code;

  if (error == NULL)
    {
      nz_cli_warn ("failed without saying why");
      return NZ_EXIT_FAILURE;
    }
  if (error->domain == NZ_CLI_EXIT)
    {
      if (error->message[0] != '\0')
        nz_cli_warn ("%s", error->message);
      return error->code;
    }
  nz_cli_warn ("%s", error->message);
  if (error->domain == G_OPTION_ERROR)
    {
      print_try_line ();
      return NZ_EXIT_USAGE;
    }
  if (cli_json_errors)
    print_error_object (error);
  code = nz_error_to_exit_code (error);
  if (code == NZ_EXIT_USAGE && cli_invalid_is_usage)
    print_try_line ();
  return code;
}

int
nz_cli_main (const char *tool, NzToolFunc func, int argc, char **argv)
{
  g_autoptr (GCancellable) cancellable = g_cancellable_new ();
  g_autoptr (GError) error = NULL;

  nz_cli_init (tool);
  if (func (argc, argv, cancellable, &error))
    return NZ_EXIT_OK;
  return report (error);
}

typedef struct
{
  GThreadFunc func;
  gpointer data;
  GCancellable *cancellable;
  GMainLoop *loop;
  int signo;
} CancellableRun;

static gboolean
run_quit (gpointer user_data)
{
  g_main_loop_quit (((CancellableRun *)user_data)->loop);
  return G_SOURCE_REMOVE;
}

static gpointer
run_thread (gpointer user_data)
{
  CancellableRun *run = user_data;

  run->func (run->data);
  g_idle_add (run_quit, run);
  return NULL;
}

static gboolean
run_signal (CancellableRun *run, int signo)
{
  if (run->signo == 0)
    run->signo = signo;
  g_cancellable_cancel (run->cancellable);
  return G_SOURCE_CONTINUE;
}

static gboolean
run_sigint (gpointer user_data)
{
  return run_signal (user_data, SIGINT);
}

static gboolean
run_sigterm (gpointer user_data)
{
  return run_signal (user_data, SIGTERM);
}

/* A closed terminal ends a shell's foreground job; it ends the remote work too. */
static gboolean
run_sighup (gpointer user_data)
{
  return run_signal (user_data, SIGHUP);
}

int
nz_cli_run_cancellable (const char *name, GThreadFunc func, gpointer data,
                        GCancellable *cancellable)
{
  g_autoptr (GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  CancellableRun run = { func, data, cancellable, loop, 0 };
  guint ids[3];
  GThread *thread;

  g_return_val_if_fail (func != NULL && G_IS_CANCELLABLE (cancellable), 0);
  ids[0] = g_unix_signal_add (SIGINT, run_sigint, &run);
  ids[1] = g_unix_signal_add (SIGTERM, run_sigterm, &run);
  ids[2] = g_unix_signal_add (SIGHUP, run_sighup, &run);
  thread = g_thread_new (name, run_thread, &run);
  g_main_loop_run (loop);
  g_thread_join (thread);
  for (gsize i = 0; i < G_N_ELEMENTS (ids); i++)
    g_source_remove (ids[i]);
  return run.signo;
}

void
nz_cli_strip_dashdash (char **command)
{
  if (command != NULL && command[0] != NULL && strcmp (command[0], "--") == 0)
    {
      g_free (command[0]);
      memmove (command, command + 1, g_strv_length (command) * sizeof (char *));
    }
}

void
nz_cli_trap_stop_signals (void (*handler) (int sig, siginfo_t *info, void *ctx))
{
  struct sigaction sa = { 0 };
  const int sigs[] = { SIGINT, SIGTERM, SIGHUP };

  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset (&sa.sa_mask);
  for (gsize i = 0; i < G_N_ELEMENTS (sigs); i++)
    sigaction (sigs[i], &sa, NULL);
}
