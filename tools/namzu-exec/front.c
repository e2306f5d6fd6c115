/* namzu-exec's front: the common case in plain C, without loading GLib.
 *
 * Starting a program that links GLib, GIO and json-glib costs ~200 page faults before main()
 * (measured on this VM), more than the whole round trip to a warm sandbox. So the common case —
 * raw passthrough of one command (options -s, -t, -e, -C, --endpoint) on a unix:, tcp: or
 * http:// endpoint — is served here: reserve-execution then execute exactly as
 * lib/client/nz-agent-client.c does, output written through as it arrives, the result mapped to
 * the exit status as tools/namzu-exec/main.c does, and SIGINT/SIGTERM/SIGHUP or a closed
 * output cancelling the remote execution and waiting for its confirmation.
 *
 * Everything else is handed, with the unchanged argv, to the GLib implementation
 * (namzu-exec-full): other options, --help, usage mistakes, a handle or endpoint that is not
 * the plain case, and every failure before the execute request was sent (nothing ran yet, so
 * the full implementation redoes the work and reports the failure in its own words). Stdin it
 * already read (a handle) is handed over in a memfd, so nothing is lost. After execute was
 * sent, failures are reported here with main.c's words, except an unconfirmed cancellation in
 * a sandbox, which needs the backend's retire hook: main.c does that, told by
 * NZ_EXEC_RETIRE_ENV.
 *
 * The reusable parts are in lib/lite: nz-lite-wire (endpoints, frames, reply ops), nz-lite-handle
 * (the sandbox handle), nz-lite-exec (the body, the exit status), nz-lite-core (the reserve ->
 * execute -> cancel machine lib/client drives too) and nz-lite-stream (its blocking driver).
 * What stays here is the command line, signals, the outcome and the hand-over. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "front-opts.h"
#include "front.h"
#include "nz-host-timing.h"
#include "nz-jsonlite.h"
#include "nz-lite-buf.h"
#include "nz-lite-core.h"
#include "nz-lite-exec.h"
#include "nz-lite-handle.h"
#include "nz-lite-stream.h"
#include "nz-lite-wire.h"

#define EXIT_NAMZU NZ_LITE_EXIT_NAMZU

/* ---- the hand-over to the full implementation --------------------------------------------- */

static char **saved_argv;
static NzLiteBuf stdin_seen; /* what we read of stdin, handed over in a memfd */
static bool stdin_read;
static sigset_t saved_mask;
static bool mask_saved;
static NzLiteWire wire = { .sigfd = -1 };

static void
say (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));

static void
say (const char *fmt, ...)
{
  NzLiteBuf b = { 0 };
  char *msg;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  nz_lite_buf_printf (&b, "namzu-exec: %s\n", msg);
  (void)!write (STDERR_FILENO, b.data, b.len);
  free (msg);
  free (b.data);
}

/* Never returns. @retire_message: an unconfirmed cancellation main.c must retire for. */
static void __attribute__ ((noreturn))
hand_over (const char *retire_message)
{
  char self[PATH_MAX], full[PATH_MAX + 32];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
  char *slash;

  if (stdin_read)
    {
      int fd = memfd_create ("namzu-exec-stdin", MFD_CLOEXEC);

      if (fd < 0 || write (fd, stdin_seen.data ? stdin_seen.data : "", stdin_seen.len)
                        != (ssize_t)stdin_seen.len
          || lseek (fd, 0, SEEK_SET) != 0 || dup2 (fd, STDIN_FILENO) < 0)
        {
          say ("cannot hand the stdin already read to %s: %s", NZ_EXEC_FULL_NAME,
               strerror (errno));
          exit (EXIT_NAMZU);
        }
      close (fd);
    }
  if (retire_message != NULL)
    setenv (NZ_EXEC_RETIRE_ENV, retire_message, 1);
  signal (SIGPIPE, SIG_DFL);
  if (mask_saved)
    sigprocmask (SIG_SETMASK, &saved_mask, NULL);
  /* Next to us in the build tree, in ../libexec of a relocated install, else where meson
   * installed it. */
  if (n > 0 && (self[n] = '\0', slash = strrchr (self, '/')) != NULL)
    for (int i = 0; i < 2; i++)
      {
        snprintf (full, sizeof full, "%.*s/%s%s", (int)(slash - self), self,
                  i == 0 ? "" : "../libexec/namzu/", NZ_EXEC_FULL_NAME);
        if (access (full, X_OK) == 0)
          execv (full, saved_argv);
      }
  execv (NZ_EXEC_FULL_PATH, saved_argv);
  say ("cannot run %s: %s", NZ_EXEC_FULL_PATH, strerror (errno));
  exit (EXIT_NAMZU);
}

/* ---- where to run: nz-state.c's resolution, the plain case only ------------------------- */

/* The sandbox handle's id from -s, $NAMZU_SANDBOX or a handle piped on stdin, loaded from the
 * state dir; the target's name goes to @target. Anything but the plain case is handed over
 * (with the stdin read so far). */
static void
resolve_sandbox (const NzFrontOpts *o, NzLiteHandle *h, char *target, size_t target_size)
{
  const char *env = getenv ("NAMZU_SANDBOX");
  char *sid;

  if (o->sandbox != NULL && *o->sandbox != '\0')
    sid = strdup (o->sandbox);
  else if (env != NULL && *env != '\0')
    sid = strdup (env);
  else if (!isatty (STDIN_FILENO))
    {
      stdin_read = true;
      sid = nz_lite_handle_read_stdin_id (&stdin_seen);
    }
  else
    sid = NULL;
  if (sid == NULL || !nz_lite_handle_load (sid, h))
    hand_over (NULL);
  snprintf (target, target_size, "sandbox %s", h->id);
  free (sid);
}

/* ---- the stream, the status ---------------------------------------------------------------- */

static void
watch_signals (void)
{
  sigset_t set;

  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGHUP);
  /* Blocked and read from a signalfd: a signal ends the current wait, never a write. */
  sigprocmask (SIG_BLOCK, &set, &saved_mask);
  mask_saved = true;
  wire.sigfd = signalfd (-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (wire.sigfd < 0)
    hand_over (NULL);
}

/* The exit status of @core's end, said on stderr when it failed; an unconfirmed cancellation
 * in a sandbox goes to main.c, which can retire it. */
static int
finish (NzLiteCore *core, const char *command, const char *target)
{
  char msg[2048];
  NzJlValue result;
  int status;

  switch (core->end)
    {
    case NZ_LITE_CORE_RESULT:
      status = nz_jl_parse (core->result, strlen (core->result), &result)
                   ? nz_lite_exec_exit_status (&result)
                   : -1;
      if (status < 0)
        return say (NZ_LITE_CORE_NO_STATUS_WORDS), EXIT_NAMZU;
      return status;
    case NZ_LITE_CORE_CANCELLED:
      status = nz_lite_core_cancelled (wire.signo, core->err.msg, msg, sizeof msg);
      if (*msg != '\0')
        say ("%s", msg);
      return status;
    case NZ_LITE_CORE_UNCONFIRMED:
      if (target == NULL)
        return say (NZ_LITE_CORE_NO_RETIRE_FORMAT, core->err.msg), EXIT_NAMZU;
      hand_over (core->err.msg);
    case NZ_LITE_CORE_FAILED:
    case NZ_LITE_CORE_IO_FAILED:
    default:
      status = nz_lite_core_outcome (core->err.kind, core->err.msg,
                                     core->err.kind == NZ_LITE_ERR_DIAL ? wire.ep.desc : NULL,
                                     command, target, true, msg, sizeof msg, NULL);
      return say ("%s", msg), status;
    }
}

int
main (int argc, char **argv)
{
  /* Static: what is still allocated at exit stays reachable (LeakSanitizer's view). */
  static NzFrontOpts o;
  static NzLiteHandle h;
  static NzLiteBuf body;
  static NzLiteCore core;
  static char *reserved;
  NzLiteErr e = { 0 };
  NzJlValue reply;
  NzLiteCoreAction a;
  char target[64] = "";
  double timeout_ms = 0;
  const char *id;

  saved_argv = argv;
  /* Only our own hand-over may ask namzu-exec-full to retire a sandbox. */
  unsetenv (NZ_EXEC_RETIRE_ENV);
  if (!nz_front_parse_options (argc, argv, &o))
    hand_over (NULL);
  if (!nz_lite_exec_build_body (o.command, o.cwd, o.env, o.n_env, o.timeout, &body))
    hand_over (NULL);
  if (o.endpoint != NULL)
    {
      if (!nz_lite_wire_parse_endpoint (o.endpoint, &wire.ep))
        hand_over (NULL);
      wire.token = getenv ("NAMZU_TOKEN");
    }
  else
    {
      resolve_sandbox (&o, &h, target, sizeof target);
      if (!nz_lite_wire_parse_endpoint (h.endpoint, &wire.ep))
        hand_over (NULL);
      wire.token = h.token;
    }
  /* What a token-gated agent would refuse unread goes where that refusal is worded. */
  if (wire.ep.kind == NZ_LITE_EP_TCP
      && body.len + (wire.token ? 6 * strlen (wire.token) : 0) + 256
             > NZ_LITE_WIRE_TCP_PREAUTH_FRAME_LIMIT)
    hand_over (NULL);
  nz_lite_core_init (&core, wire.ep.desc, body.data, body.len);

  /* A vanished reader is noticed as a write error (then we cancel), not a silent death. */
  signal (SIGPIPE, SIG_IGN);
  watch_signals ();
  /* No body: the agent mints the id (spec A.3). Any failure here ran nothing. */
  if (!nz_lite_wire_call (&wire, "reserve-execution", NULL, NZ_HOST_READ_IDLE_TIMEOUT_MS, true,
                          &reserved, &reply, &e))
    {
      char line[sizeof e.msg + 64];
      int status;

      if (e.kind != NZ_LITE_ERR_CANCELLED)
        hand_over (NULL);
      status = nz_lite_core_cancelled (wire.signo, e.msg, line, sizeof line);
      say ("%s", line);
      return status;
    }
  /* A signal while reserving: the record is cancelled too, so it can never start later. */
  if (nz_lite_wire_signal_pending (&wire))
    nz_lite_core_want_cancel (&core);
  a = nz_lite_core_reserved (&core, reserved, strlen (reserved), nz_lite_wire_now_ms ());
  /* Only the id shape agents mint is the plain case. */
  id = core.id;
  if (a == NZ_LITE_CORE_DONE || strlen (id) > 64
      || id[strspn (id, "abcdefghijklmnopqrstuvwxyz" "ABCDEFGHIJKLMNOPQRSTUVWXYZ" "0123456789_-")]
             != '\0')
    hand_over (NULL);
  if (o.timeout != NULL)
    timeout_ms = (double)nz_lite_exec_parse_timeout_ms (o.timeout);
  nz_lite_stream_run (&wire, &core, a, nz_lite_core_observation_ms (timeout_ms));
  return finish (&core, o.command[0], target[0] ? target : NULL);
}
