/* nz-cli.h: the CLI contract in one place (DESIGN.md): option parsing with --version,
 * usage errors -> exit 2 with "Try '--help'", data on stdout, diagnostics on stderr. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Sets the program name used as the "namzu-<tool>: " prefix on stderr. Call first in main(). */
void nz_cli_init (const char *tool);
const char *nz_cli_tool (void);

/* Parses options. Adds --version (prints "<tool> <version>" and exits 0). On a bad option frees
 * @ctx (exit() runs no scope cleanups) and prints
 * "<tool>: <message>\nTry '<tool> --help' for more information." and exits 2. */
void nz_cli_parse (GOptionContext *ctx, int *argc, char ***argv);

/* A second line for --version (what the binary carries that its version alone does not say,
 * e.g. a statically linked library). Call before nz_cli_parse(). @line is not copied. */
void nz_cli_set_version_detail (const char *line);

/* "<tool>: <message>" on stderr. */
void nz_cli_warn (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

/* Exits 2 after a usage message on stderr. */
G_NORETURN void nz_cli_usage_error (const char *fmt, ...) G_GNUC_PRINTF (1, 2);

/* Writes one JSON document and a newline to stdout, flushed (never half a document). */
gboolean nz_cli_print_json (JsonNode *node);
gboolean nz_cli_print_object (JsonObject *obj);

/* Reports @error: stderr line always; on stdout the `{"error":{"code","message"}}` object when
 * @json_on_stdout. Returns the exit code from nz_error_to_exit_code(). */
int nz_cli_fail (const GError *error, gboolean json_on_stdout);
/* nz_cli_fail (@error, TRUE) for a data tool whose flags or config were refused: an INVALID_ARGS
 * error also gets the "Try '<tool> --help'" line of a usage error (and exits 2 through it). */
int nz_cli_fail_usage (const GError *error);

/* Runs @func (@data) on a worker thread while the calling thread waits in a main loop that turns
 * SIGINT, SIGTERM and SIGHUP into g_cancellable_cancel (@cancellable): @func notices, finishes
 * what a cancel needs (a remote cancel confirmed, say) and returns. A later signal only waits
 * with us. Returns the first signal's number, or 0 when none came. */
int nz_cli_run_cancellable (const char *name, GThreadFunc func, gpointer data,
                            GCancellable *cancellable);

G_END_DECLS
