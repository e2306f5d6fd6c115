/* nz-cli.h: the CLI contract in one place (DESIGN.md): option parsing with --version,
 * usage errors -> exit 2 with "Try '--help'", data on stdout, diagnostics on stderr. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <signal.h>

G_BEGIN_DECLS

/* A tool's body: parses its options from @argv (nz_cli_parse_args), does its work, prints its
 * data on stdout. TRUE = exit 0; FALSE with @error set: nz_cli_main() reports it. @cancellable
 * is the tool's own; nz_cli_run_cancellable() turns signals into cancelling it. */
typedef gboolean (*NzToolFunc) (int argc, char **argv, GCancellable *cancellable, GError **error);

/* Every tool's main(): sets the "<tool>: " prefix, runs @func and turns its GError into the
 * exit code and the report, in one place:
 * - NZ_CLI_EXIT: the tool already said what it had to; its code is the exit status (a
 *   command's own status, 0 after --version); a message, if any, goes on stderr;
 * - G_OPTION_ERROR (usage): "<tool>: <message>" and "Try '<tool> --help' ...", exit 2;
 * - anything else: "<tool>: <message>" on stderr and, while nz_cli_set_json_errors() is on,
 *   the {"error":{"code","message"}} object on stdout; nz_error_to_exit_code() (2 for
 *   NZ_ERROR_INVALID_ARGS, with the Try line under nz_cli_set_invalid_is_usage(); 1
 *   otherwise). */
int nz_cli_main (const char *tool, NzToolFunc func, int argc, char **argv);

/* Whether a failure's error object goes on stdout too. On by default (stdout is JSON data); a
 * tool whose stdout carries other bytes (a command's output, a file) turns it off. */
void nz_cli_set_json_errors (gboolean on_stdout);

/* Whether an NZ_ERROR_INVALID_ARGS failure is a refusal of the tool's flags or config (then
 * it gets the Try line, like a usage error) rather than of its input (a handle on stdin, an
 * id). Off by default. */
void nz_cli_set_invalid_is_usage (gboolean is_usage);

/* The error object's "code" for errors of @domain (a tier's own codes, such as the egress
 * profile's spec strings); others use nz_error_code_name(). One extra domain per tool. */
void nz_cli_set_code_names (GQuark domain, const char *(*name) (const GError *error));

#define NZ_CLI_EXIT (nz_cli_exit_quark ())
GQuark nz_cli_exit_quark (void);

/* Ends the tool with exit status @status, said already: FALSE with an NZ_CLI_EXIT error. */
gboolean nz_cli_exit_status (GError **error, int status);

/* A usage mistake (exit 2 with the Try line): FALSE with a G_OPTION_ERROR. */
gboolean nz_cli_usage (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

/* TRUE when @text (may be NULL) is UTF-8; otherwise a usage error "<what> is not UTF-8 text
 * (the wire carries it as a JSON string)", @what formatted from @fmt. For operands taken as
 * bytes (G_OPTION_ARG_FILENAME: no charset conversion) that go on the wire as JSON text. */
gboolean nz_cli_check_utf8 (const char *text, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

/* Parses options, adding --version. A bad option is a G_OPTION_ERROR; --version prints
 * "<tool> <version>" (and the detail line) and fails with NZ_CLI_EXIT 0. */
gboolean nz_cli_parse_args (GOptionContext *ctx, int *argc, char ***argv, GError **error);

/* Sets the program name used as the "namzu-<tool>: " prefix on stderr (nz_cli_main does). */
void nz_cli_init (const char *tool);
const char *nz_cli_tool (void);

/* A second line for --version (what the binary carries that its version alone does not say,
 * e.g. which libsoup serves the API). Call before nz_cli_parse_args(). @line is not copied. */
void nz_cli_set_version_detail (const char *line);

/* "<tool>: <message>" on stderr. */
void nz_cli_warn (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

/* Writes one JSON document and a newline to stdout, flushed (never half a document). */
gboolean nz_cli_print_json (JsonNode *node);
gboolean nz_cli_print_object (JsonObject *obj);

/* A tool that wraps a command (strict POSIX parsing) gets "--" as the remaining arguments'
 * first element when the user wrote one: drops it, so COMMAND is (*@command)[0]. */
void nz_cli_strip_dashdash (char **command);

/* sigaction(@handler, SA_SIGINFO) for SIGINT, SIGTERM and SIGHUP: a tool that must finish
 * something (roll a sandbox back, destroy it) before it exits on them. */
void nz_cli_trap_stop_signals (void (*handler) (int sig, siginfo_t *info, void *ctx));

/* Runs @func (@data) on a worker thread while the calling thread waits in a main loop that turns
 * SIGINT, SIGTERM and SIGHUP into g_cancellable_cancel (@cancellable): @func notices, finishes
 * what a cancel needs (a remote cancel confirmed, say) and returns. A later signal only waits
 * with us. Returns the first signal's number, or 0 when none came. */
int nz_cli_run_cancellable (const char *name, GThreadFunc func, gpointer data,
                            GCancellable *cancellable);

G_END_DECLS
