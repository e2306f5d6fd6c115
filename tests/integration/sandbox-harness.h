/* sandbox-harness.h: what the end-to-end tests that drive the built tools against a real
 * sandbox share: running a tool with its stdio on files, a shell on the host, a shell in the
 * sandbox through namzu-exec, creating a sandbox, and a reaper that destroys every sandbox of
 * a case however the case ends.
 *
 * One case at a time: each test binary's checked fixture fills `harness` for the case (Check
 * forks every case, so the globals are the case's own). */
#pragma once

#include <gio/gio.h>
#include <stdio.h>
#include <sys/types.h>
#include <json-glib/json-glib.h>

#include "../nz-test.h"

typedef struct
{
  char *tmp;     /* the case's directory: stdio files, and whatever the case writes */
  char *state;   /* the case's NAMZU_STATE_DIR (under tmp) */
  char *sandbox; /* the sandbox sh_in() and friends run in */
  GSubprocess *reaper;
} NzHarness;

extern NzHarness harness;

/* Makes harness.tmp from @templ (a g_mkdtemp() template), points NAMZU_STATE_DIR at
 * harness.state, and forgets $NAMZU_SANDBOX and the bwrap backend's knobs. */
void harness_begin (const char *templ);

/* Runs a built tool with stdin, stdout and stderr on files in harness.tmp (GLib 2.74's
 * communicate() leaks) and returns its exit status (128+N for a signal). @args is
 * NULL-terminated; @out and @err may be NULL. */
int run_toolv (const char *stdin_text, char **out, char **err, const char *tool,
               const char *const *args);
int run_tool (const char *stdin_text, char **out, char **err, const char *tool,
              ...) G_GNUC_NULL_TERMINATED;

/* Runs a built tool with stderr on a new pseudo-terminal (its controlling terminal, 200
 * columns wide so no line is cut), stdin /dev/null and stdout a file in harness.tmp; waits for
 * it to exit, not for the terminal's EOF (a sandbox it started may hold the terminal). Returns
 * the exit status (128+N for a signal); *@out is stdout (@out NULL: stdout is the terminal
 * too), *@tty what it wrote on the terminal (whose "\n" the terminal turned into "\r\n"). */
int run_tool_on_tty (char **out, char **tty, const char *tool, ...) G_GNUC_NULL_TERMINATED;

/* Newlines in @s. */
guint count_lines (const char *s);

/* namzu-create with @first... (NULL-terminated, @first may be NULL), asserting success and the
 * public handle's contract: one line, no token, an nz- id, the backend asked for (--backend,
 * else container:bwrap), tier, createdAt, capabilities. Returns the handle, or its id. */
JsonObject *create_handle (const char *first, ...) G_GNUC_NULL_TERMINATED;
char *create_sandbox (const char *first, ...) G_GNUC_NULL_TERMINATED;
/* namzu-destroy @id, asserting {"id":@id,"destroyed":true}. */
void destroy_ok (const char *id);
/* Sandboxes whose state is still in harness.state ("nz-<id>", not the "nz-<id>.destroyed"
 * tombstones a destroy leaves). */
guint sandboxes_left (void);

/* `sh -c SCRIPT sh ARGS...` on the host in harness.tmp, asserting success; returns stdout,
 * trimmed. */
char *host_sh (const char *script, ...) G_GNUC_NULL_TERMINATED;

/* @script with `sh -c` in sandbox @id (or harness.sandbox) through namzu-exec: its exit status
 * (namzu-exec itself failing is an assertion), the output, success asserted, or the trimmed
 * output. */
int sh_in_sandbox (const char *id, const char *script, char **out);
int sh_in (const char *script, char **out);
void sh_in_ok (const char *script);
char *sh_in_out (const char *script);
/* `test @test_expr` in the sandbox. */
gboolean sandbox_has (const char *test_expr);

/* A local server (@argv; @env NULL: ours) that prints a line with "listening" once bound:
 * started with its stdout on *@out, returned once that line came. */
GPid harness_spawn_listening (const char *const *argv, char **env, FILE **out);
/* A bare namzu-agent (the built one) serving @ws on the unix socket @sock, with
 * NAMZU_AGENT_TEST_HIDE_FEATURES=@hide. */
GPid harness_start_agent (const char *ws, const char *sock, const char *hide, FILE **out);
/* SIGTERM, reap, close. */
void harness_stop (GPid pid, FILE *out);

/* @pid has exited (no /proc entry, or a zombie). */
gboolean pid_gone (pid_t pid);
/* A live process in the host's pid namespace (which sees every sandbox's) whose command line
 * holds @needle. */
gboolean host_process_mentions (const char *needle);

/* Check runs a checked teardown only when the case passed: a failed assertion _exits the
 * forked case. So harness_start_reaper() starts a process in its own session (out of reach of
 * Check's kill of the case's process group) that waits for the case's process to go away, for
 * whatever reason, then destroys every sandbox in harness.state, kills process group
 * @kill_pgid (0: none; a server the case started in a session of its own) and removes
 * harness.tmp. Only the case holds the write end of its stdin (GLib opens it close-on-exec).
 * harness_end(), from a passing case's teardown, lets it run now and waits for it. */
void harness_start_reaper (GPid kill_pgid);
void harness_end (void);
