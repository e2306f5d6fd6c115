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
 * (the sandbox handle) and nz-lite-exec (the body, refusals, exit status, cancel). What stays
 * here is the command line, the run loop, signals and the hand-over. */
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

#include "front.h"
#include "nz-host-timing.h"
#include "nz-jsonlite.h"
#include "nz-lite-buf.h"
#include "nz-lite-exec.h"
#include "nz-lite-handle.h"
#include "nz-lite-wire.h"
#include "nz-signame.h"

#define EXIT_NAMZU 125

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
                  i == 0 ? "" : "../libexec/", NZ_EXEC_FULL_NAME);
        if (access (full, X_OK) == 0)
          execv (full, saved_argv);
      }
  execv (NZ_EXEC_FULL_PATH, saved_argv);
  say ("cannot run %s: %s", NZ_EXEC_FULL_PATH, strerror (errno));
  exit (EXIT_NAMZU);
}

/* ---- options -------------------------------------------------------------------------------- */

typedef struct
{
  const char *sandbox, *timeout, *cwd, *endpoint;
  const char **env;
  int n_env;
  char **command;
} Opts;

/* Matches -S VALUE, --LONG VALUE and --LONG=VALUE. Anything fancier goes to GOption. */
static bool
take_value (char **argv, int *i, char short_name, const char *long_name, const char **out)
{
  const char *a = argv[*i];
  size_t n = strlen (long_name);

  if (strncmp (a, "--", 2) == 0 && strncmp (a + 2, long_name, n) == 0 && a[2 + n] == '=')
    {
      *out = a + 3 + n;
      return true;
    }
  if (!((short_name != '\0' && a[1] == short_name && a[2] == '\0')
        || (strncmp (a, "--", 2) == 0 && strcmp (a + 2, long_name) == 0)))
    return false;
  if (argv[*i + 1] == NULL || argv[*i + 1][0] == '-')
    hand_over (NULL);
  *out = argv[++*i];
  return true;
}

static void
parse_options (int argc, char **argv, Opts *o)
{
  int i;

  o->env = calloc ((size_t)argc, sizeof *o->env);
  for (i = 1; i < argc; i++)
    {
      const char *a = argv[i], *env = NULL;

      if (strcmp (a, "--") == 0)
        {
          i++;
          break;
        }
      if (a[0] != '-')
        break;
      if (take_value (argv, &i, 's', "sandbox", &o->sandbox)
          || take_value (argv, &i, 't', "timeout", &o->timeout)
          || take_value (argv, &i, 'C', "cwd", &o->cwd)
          || take_value (argv, &i, '\0', "endpoint", &o->endpoint))
        continue;
      if (take_value (argv, &i, 'e', "env", &env))
        {
          o->env[o->n_env++] = env;
          continue;
        }
      hand_over (NULL); /* -i, --json, --detach, --help, a mistake, ... */
    }
  o->command = argv + i;
  if (o->command[0] == NULL || o->command[0][0] == '\0')
    hand_over (NULL);
  /* GOption's handling of a later "--" is its own; leave such a command line to it. */
  for (char **p = o->command; *p != NULL; p++)
    if (strcmp (*p, "--") == 0)
      hand_over (NULL);
}

/* ---- where to run: nz-state.c's resolution, the plain case only ------------------------- */

/* The sandbox handle's id from -s, $NAMZU_SANDBOX or a handle piped on stdin, loaded from the
 * state dir; the target's name goes to @target. Anything but the plain case is handed over
 * (with the stdin read so far). */
static void
resolve_sandbox (const Opts *o, NzLiteHandle *h, char *target, size_t target_size)
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

static bool
write_all (int fd, const char *data, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          struct pollfd p = { fd, POLLOUT, 0 };

          poll (&p, 1, -1);
          continue;
        }
      if (n <= 0)
        return false;
      data += n;
      len -= (size_t)n;
    }
  return true;
}

typedef struct
{
  char *result; /* the result frame's text */
  char *error_code, *error_message;
  bool broken_output;
} Stream;

/* One frame of the exec stream (lib/client's exec_frame and exec_output_frame). Returns
 * false to stop reading: an error, a refusal, or output that could not be written. */
static bool
stream_frame (Stream *s, const NzJlValue *raw, bool *refused, NzLiteErr *e)
{
  NzJlValue frame, v;
  char *type, *data;
  size_t dlen = 0;

  if (!nz_jl_parse (raw->start, raw->len, &frame) || frame.type != NZ_JL_OBJECT)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream frame: not a JSON "
                              "object", wire.ep.desc);
  if (s->result != NULL || s->error_code != NULL)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream sent a frame after "
                              "its result", wire.ep.desc);
  type = nz_jl_member_string (&frame, "type");
  if ((type == NULL && nz_jl_member (&frame, "ok", &v)) || (type && strcmp (type, "error") == 0))
    {
      /* A reply-shaped refusal (e.g. agent_retiring, spec A.5) ends with no terminator. */
      *refused = type == NULL;
      s->error_code = nz_jl_member_string (&frame, "error");
      s->error_message = nz_jl_member_string (&frame, "message");
      if (s->error_code == NULL)
        s->error_code = strdup ("unknown error");
    }
  else if (type != NULL && strcmp (type, "result") == 0)
    s->result = strndup (raw->start, raw->len);
  else if (type != NULL && (strcmp (type, "stdout_delta") == 0 || strcmp (type, "stderr_delta") == 0)
           && (data = nz_jl_member_string (&frame, "data")) != NULL)
    {
      (void)nz_jl_member (&frame, "data", &v);
      free (data);
      data = nz_jl_string (&v, &dlen);
      if (dlen > 0 && !write_all (type[1] == 't' && type[3] == 'o' ? STDOUT_FILENO : STDERR_FILENO,
                                  data, dlen))
        s->broken_output = true;
      free (data);
    }
  free (type);
  return !s->broken_output;
}

/* execute on its own connection until the terminator. */
static bool
run_stream (const char *request, unsigned long long observation_ms, Stream *s, NzLiteErr *e)
{
  int64_t deadline = nz_lite_wire_now_ms () + (int64_t)observation_ms;
  NzLiteConn k;
  bool ok = false, refused = false;

  if (!nz_lite_wire_request (&wire, &k, "execute", request, true, e))
    {
      nz_lite_wire_close (&k);
      return false;
    }
  for (;;)
    {
      NzJlValue raw;
      NzLiteReadStatus st = nz_lite_wire_read_frame (&wire, &k, deadline, true, &raw, e);

      if (st == NZ_LITE_READ_EOF)
        nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: %s", wire.ep.desc,
                           k.in.len > k.pos ? "exec stream has trailing partial data"
                                            : "socket closed before exec stream terminator");
      else if (st == NZ_LITE_READ_TIMEOUT)
        nz_lite_wire_fail (e, NZ_LITE_ERR_TIMED_OUT, "agent %s: exec stream observation exceeded "
                           "%llums", wire.ep.desc, observation_ms);
      if (st != NZ_LITE_READ_FRAME)
        break;
      if (raw.len == 0)
        {
          ok = nz_lite_wire_expect_close (&wire, &k, "exec stream", false, true, e);
          break;
        }
      if (!stream_frame (s, &raw, &refused, e) || refused)
        {
          ok = refused;
          break;
        }
    }
  nz_lite_wire_close (&k);
  if (ok && s->result == NULL && s->error_code == NULL)
    ok = nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream ended without a "
                            "result event", wire.ep.desc);
  if (ok && s->error_code != NULL)
    ok = (nz_lite_exec_refusal (wire.ep.desc, s->error_code, s->error_message, e), false);
  return ok;
}

/* main.c's finish() for a failure after execute was sent. @target: "sandbox ID" or NULL. */
static int
report (const NzLiteErr *e, const char *command, const char *target)
{
  if (e->kind == NZ_LITE_ERR_NOENT)
    return say ("%s: command not found in the sandbox (%s)", command, e->msg), 127;
  if (e->kind == NZ_LITE_ERR_NOEXEC)
    return say ("%s: cannot execute (%s)", command, e->msg), 126;
  if (e->kind == NZ_LITE_ERR_INVALID || e->kind == NZ_LITE_ERR_PROTOCOL)
    return say ("%s", e->msg), EXIT_NAMZU;
  if (e->kind == NZ_LITE_ERR_DIAL && target == NULL)
    return say ("cannot reach agent %s: %s; is namzu-agent running there? (namzu-ls lists the "
                "sandboxes)", wire.ep.desc, e->msg), EXIT_NAMZU;
  if (e->kind == NZ_LITE_ERR_DIAL)
    return say ("cannot reach %s (agent %s: %s); it may have stopped: check namzu-ls, or create a "
                "new sandbox with namzu-create", target, wire.ep.desc, e->msg), EXIT_NAMZU;
  if (target != NULL)
    return say ("%s; the command's outcome in %s is unknown (check it with namzu-ls)", e->msg,
                target), EXIT_NAMZU;
  return say ("%s", e->msg), EXIT_NAMZU;
}

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

int
main (int argc, char **argv)
{
  /* Static: what is still allocated at exit stays reachable (LeakSanitizer's view). */
  static Opts o;
  static NzLiteHandle h;
  static NzLiteBuf body, request;
  static Stream s;
  static char *reserved, *id;
  NzLiteErr e = { 0 };
  NzJlValue reply;
  char target[64] = "";
  double t = 0;
  unsigned long long observation_ms = NZ_HOST_DEFAULT_EXECUTION_TIMEOUT_MS;
  int status;

  saved_argv = argv;
  /* Only our own hand-over may ask namzu-exec-full to retire a sandbox. */
  unsetenv (NZ_EXEC_RETIRE_ENV);
  parse_options (argc, argv, &o);
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
      && body.len + (wire.token ? 6 * strlen (wire.token) : 0) + 256 > NZ_LITE_WIRE_TCP_PREAUTH_FRAME_LIMIT)
    hand_over (NULL);
  if (o.timeout != NULL)
    t = (double)nz_lite_exec_parse_timeout_ms (o.timeout);
  if (t > 0 && t < 1e15)
    observation_ms = (unsigned long long)t;
  observation_ms += NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS;
  if (observation_ms > INT32_MAX)
    observation_ms = INT32_MAX;

  /* A vanished reader is noticed as a write error (then we cancel), not a silent death. */
  signal (SIGPIPE, SIG_IGN);
  watch_signals ();
  /* No body: the agent mints the id (spec A.3). Any failure here ran nothing. */
  if (!nz_lite_wire_call (&wire, "reserve-execution", NULL, NZ_HOST_READ_IDLE_TIMEOUT_MS, true,
                          &reserved, &reply, &e))
    {
      if (e.kind != NZ_LITE_ERR_CANCELLED)
        hand_over (NULL);
      say ("%s: %s", nz_signame (wire.signo), e.msg);
      return 128 + wire.signo;
    }
  /* The id goes back into JSON unescaped (cancel's body): only the shape agents mint. */
  if (!nz_jl_member_bool (&reply, "ok", false)
      || (id = nz_jl_member_string (&reply, "executionId")) == NULL || strlen (id) > 64
      || id[strspn (id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")] != '\0')
    hand_over (NULL);
  /* A signal while reserving: the record is cancelled too, so it can never start later. */
  if (!nz_lite_wire_signal_pending (&wire))
    {
      nz_lite_buf_add (&request, body.data, body.len);
      nz_lite_buf_str (&request, ",\"executionId\":");
      nz_lite_buf_json_string (&request, id);
      nz_lite_buf_str (&request, "}");
      if (run_stream (request.data, observation_ms, &s, &e))
        {
          status = nz_jl_parse (s.result, strlen (s.result), &reply)
                       ? nz_lite_exec_exit_status (&reply) : -1;
          if (status < 0)
            return say ("the agent reported no usable exit status"), EXIT_NAMZU;
          return status;
        }
      if (e.kind != NZ_LITE_ERR_CANCELLED && !s.broken_output)
        return report (&e, o.command[0], target[0] ? target : NULL);
    }
  /* Whatever the stream was doing, the caller wants the command gone: cancel by id. */
  if (!nz_lite_exec_cancel (&wire, id, &e))
    {
      if (target[0] == '\0')
        return say ("%s; no sandbox to retire with --endpoint: stop that agent yourself", e.msg),
               EXIT_NAMZU;
      hand_over (e.msg);
    }
  if (wire.signo == 0)
    return 128 + SIGPIPE;
  say ("%s: execution %s cancelled; the agent confirmed it stopped", nz_signame (wire.signo), id);
  return 128 + wire.signo;
}
