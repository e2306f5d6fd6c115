/* nz-lite-core: see nz-lite-core.h. */
#define _GNU_SOURCE
#include "nz-lite-core.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nz-host-timing.h"
#include "nz-jsonlite.h"
#include "nz-lite-exec.h"
#include "nz-signame.h"

/* The guest agent protocol this host speaks (lib/client's NZ_AGENT_PROTOCOL_VERSION). */
#define PROTOCOL_VERSION 2

void
nz_lite_core_init (NzLiteCore *c, const char *desc, const char *body, size_t len)
{
  *c = (NzLiteCore){ .desc = desc };
  /* A stream the caller started (nz_lite_core_stream) has no body. */
  if (body != NULL)
    nz_lite_buf_add (&c->body, body, len);
}

void
nz_lite_core_clear (NzLiteCore *c)
{
  free (c->id);
  free (c->body.data);
  free (c->request.data);
  free (c->cancel_body.data);
  free (c->out);
  free (c->result);
  free (c->error_code);
  free (c->error_message);
  *c = (NzLiteCore){ 0 };
}

static NzLiteCoreAction
done (NzLiteCore *c, NzLiteCoreEnd end)
{
  c->end = end;
  return NZ_LITE_CORE_DONE;
}

static NzLiteCoreAction fail (NzLiteCore *c, NzLiteErrKind kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static NzLiteCoreAction
fail (NzLiteCore *c, NzLiteErrKind kind, const char *fmt, ...)
{
  char msg[sizeof c->err.msg];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  nz_lite_wire_fail (&c->err, kind, "agent %s: %s", c->desc, msg);
  return done (c, NZ_LITE_CORE_FAILED);
}

/* Whether @s (of length @n) ends in @suffix and has more before it. */
static bool
ends_with (const char *s, size_t n, const char *suffix)
{
  size_t sl = strlen (suffix);

  return n > sl && memcmp (s + n - sl, suffix, sl) == 0;
}

void
nz_lite_core_refusal (const char *desc, const char *context, const char *code, const char *message,
                      NzLiteErr *e)
{
  char text[768];
  size_t n = strlen (code);

  if (message != NULL && *message != '\0')
    snprintf (text, sizeof text, "%s (%s)", code, message);
  else
    snprintf (text, sizeof text, "%s", code);
  if (strncmp (code, "spawn ", 6) == 0 && ends_with (code, n, " ENOENT"))
    nz_lite_wire_fail (e, NZ_LITE_ERR_NOENT, "%s", text);
  else if (strncmp (code, "spawn ", 6) == 0
           && (ends_with (code, n, " EACCES") || ends_with (code, n, " EPERM")
               || ends_with (code, n, " ENOEXEC")))
    nz_lite_wire_fail (e, NZ_LITE_ERR_NOEXEC, "%s", text);
  else if (strcmp (code, "agent_retiring") == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED,
                       "agent %s: agent is retiring: it fenced itself after a process-group "
                       "shutdown could not be confirmed, so the sandbox must be recreated",
                       desc);
  else if (strncmp (code, "unknown_op:", 11) == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL,
                       "agent %s: the agent does not implement guest agent protocol %d (%s); "
                       "run a namzu-agent from the same namzu release as this host",
                       desc, PROTOCOL_VERSION, code);
  else if (strncmp (code, "invalid_", 8) == 0 || strcmp (code, "missing_command") == 0)
    nz_lite_wire_fail (e, NZ_LITE_ERR_INVALID, "%s refused: %s", context, text);
  else
    nz_lite_wire_fail (e, NZ_LITE_ERR_FAILED, "%s refused: %s", context, text);
}

unsigned long long
nz_lite_core_observation_ms (double timeout_ms)
{
  unsigned long long ms = NZ_HOST_DEFAULT_EXECUTION_TIMEOUT_MS;

  if (timeout_ms > 0 && timeout_ms < 1e15)
    ms = (unsigned long long)timeout_ms;
  ms += NZ_HOST_EXECUTION_TRANSPORT_GRACE_MS;
  return ms > INT32_MAX ? INT32_MAX : ms;
}

/* ---- reserve ------------------------------------------------------------------------------ */

static NzLiteCoreAction
start_cancel (NzLiteCore *c, int64_t now_ms)
{
  c->cancelling = true;
  c->cancel_deadline = now_ms + NZ_HOST_CANCEL_CONFIRM_BUDGET_MS;
  snprintf (c->last, sizeof c->last, "no attempt");
  return nz_lite_core_tick (c, now_ms);
}

NzLiteCoreAction
nz_lite_core_reserved (NzLiteCore *c, const char *reply, size_t len, int64_t now_ms)
{
  NzJlValue obj;
  char *code, *message;
  size_t n = c->body.len;

  if (!nz_jl_parse (reply, len, &obj) || obj.type != NZ_JL_OBJECT)
    return fail (c, NZ_LITE_ERR_PROTOCOL, "reserve-execution reply: not a JSON object");
  if (!nz_jl_member_bool (&obj, "ok", false))
    {
      code = nz_jl_member_string (&obj, "error");
      message = nz_jl_member_string (&obj, "message");
      nz_lite_core_refusal (c->desc, "reserve-execution", code ? code : "unknown error", message,
                            &c->err);
      free (code);
      free (message);
      return done (c, NZ_LITE_CORE_FAILED);
    }
  c->id = nz_jl_member_string (&obj, "executionId");
  if (c->id == NULL)
    return fail (c, NZ_LITE_ERR_PROTOCOL, "reserve-execution reply has no executionId");
  /* Like the reference host (spec D.2.5): the id is always the one reserved here. */
  nz_lite_buf_add (&c->request, c->body.data ?: "", c->body.len);
  while (n > 0 && c->body.data[n - 1] == ' ')
    n--;
  /* The id closes the body: after a comma unless the body has no member yet. */
  nz_lite_buf_str (&c->request,
                   n > 0 && c->body.data[n - 1] != '{' ? ",\"executionId\":" : "\"executionId\":");
  nz_lite_buf_json_string (&c->request, c->id);
  nz_lite_buf_str (&c->request, "}");
  nz_lite_buf_str (&c->cancel_body, "{\"executionId\":");
  nz_lite_buf_json_string (&c->cancel_body, c->id);
  nz_lite_buf_str (&c->cancel_body, "}");
  c->streaming = true;
  if (c->cancel_wanted)
    return start_cancel (c, now_ms);
  return NZ_LITE_CORE_EXECUTE;
}

void
nz_lite_core_stream (NzLiteCore *c)
{
  c->streaming = true;
}

void
nz_lite_core_want_cancel (NzLiteCore *c)
{
  c->cancel_wanted = true;
}

/* ---- the stream --------------------------------------------------------------------------- */

NzLiteCoreAction
nz_lite_core_frame (NzLiteCore *c, const char *text, size_t len, int64_t now_ms)
{
  NzJlValue frame, v;
  char *type;
  NzLiteCoreAction next = NZ_LITE_CORE_READ;

  (void)now_ms;
  free (c->out);
  c->out = NULL;
  c->out_len = 0;
  if (len == 0)
    return NZ_LITE_CORE_CLOSE;
  if (!nz_jl_parse (text, len, &frame) || frame.type != NZ_JL_OBJECT)
    {
      c->bad_frame = true;
      return fail (c, NZ_LITE_ERR_PROTOCOL, "exec stream frame: not a JSON object");
    }
  if (c->result != NULL || c->error_code != NULL)
    return fail (c, NZ_LITE_ERR_PROTOCOL, "exec stream sent a frame after its result");
  type = nz_jl_member_string (&frame, "type");
  if ((type == NULL && nz_jl_member (&frame, "ok", &v)) || (type && strcmp (type, "error") == 0))
    {
      c->error_code = nz_jl_member_string (&frame, "error");
      c->error_message = nz_jl_member_string (&frame, "message");
      if (c->error_code == NULL)
        c->error_code = strdup ("unknown error");
      /* A reply-shaped refusal (e.g. agent_retiring, spec A.5) ends with no terminator. */
      if (type == NULL)
        next = nz_lite_core_closed (c);
    }
  else if (type != NULL && strcmp (type, "result") == 0)
    c->result = strndup (text, len);
  else if (type != NULL
           && (strcmp (type, "stdout_delta") == 0 || strcmp (type, "stderr_delta") == 0)
           && nz_jl_member (&frame, "data", &v) && v.type == NZ_JL_STRING)
    {
      c->out = nz_jl_string (&v, &c->out_len);
      c->out_stream = type[3] == 'o' ? 1 : 2;
      /* Unknown frame types, and empty output, are passed over like unknown members. */
      if (c->out != NULL && c->out_len > 0)
        next = NZ_LITE_CORE_OUTPUT;
    }
  free (type);
  return next;
}

NzLiteCoreAction
nz_lite_core_closed (NzLiteCore *c)
{
  if (c->error_code != NULL)
    {
      nz_lite_core_refusal (c->desc, "execute", c->error_code, c->error_message, &c->err);
      return done (c, NZ_LITE_CORE_FAILED);
    }
  if (c->result == NULL)
    return fail (c, NZ_LITE_ERR_PROTOCOL, "exec stream ended without a result event");
  return done (c, NZ_LITE_CORE_RESULT);
}

NzLiteCoreAction
nz_lite_core_failed (NzLiteCore *c, NzLiteErrKind kind, const char *msg, int64_t now_ms)
{
  if (c->cancelling)
    {
      snprintf (c->last, sizeof c->last, "%s", msg);
      return NZ_LITE_CORE_PAUSE;
    }
  nz_lite_wire_fail (&c->err, kind, "%s", msg);
  if (c->id != NULL && (c->cancel_wanted || kind == NZ_LITE_ERR_CANCELLED))
    return start_cancel (c, now_ms);
  return done (c, NZ_LITE_CORE_IO_FAILED);
}

/* ---- cancel ------------------------------------------------------------------------------- */

NzLiteCoreAction
nz_lite_core_cancel_reply (NzLiteCore *c, const char *reply, size_t len, int64_t now_ms)
{
  NzJlValue obj;
  char *err, *msg;

  (void)now_ms;
  if (!nz_jl_parse (reply, len, &obj) || obj.type != NZ_JL_OBJECT)
    {
      snprintf (c->last, sizeof c->last, "agent %s: cancel-execution reply: not a JSON object",
                c->desc);
      return NZ_LITE_CORE_PAUSE;
    }
  if (nz_jl_member_bool (&obj, "ok", false))
    {
      nz_lite_wire_fail (&c->err, NZ_LITE_ERR_CANCELLED,
                         "execution %s cancelled; the agent confirmed it stopped", c->id);
      return done (c, NZ_LITE_CORE_CANCELLED);
    }
  /* The agent answered: whatever it said will not change by asking again. */
  err = nz_jl_member_string (&obj, "error");
  msg = nz_jl_member_string (&obj, "message");
  nz_lite_wire_fail (&c->err, NZ_LITE_ERR_FAILED,
                     "agent %s: could not confirm that execution %s stopped (%s%s%s); treat the "
                     "sandbox as unusable and recreate it",
                     c->desc, c->id, err ? err : "unknown error", msg ? ": " : "", msg ? msg : "");
  free (err);
  free (msg);
  return done (c, NZ_LITE_CORE_UNCONFIRMED);
}

NzLiteCoreAction
nz_lite_core_tick (NzLiteCore *c, int64_t now_ms)
{
  int64_t left = c->cancel_deadline - now_ms;

  if (left <= 0)
    {
      nz_lite_wire_fail (&c->err, NZ_LITE_ERR_FAILED,
                         "could not confirm that execution %s stopped within %ums: %s", c->id,
                         NZ_HOST_CANCEL_CONFIRM_BUDGET_MS, c->last);
      return done (c, NZ_LITE_CORE_UNCONFIRMED);
    }
  c->attempt_ms
      = (unsigned)(left < NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS ? left
                                                            : NZ_HOST_CANCEL_ATTEMPT_TIMEOUT_MS);
  return NZ_LITE_CORE_CANCEL;
}

/* ---- the outcome -------------------------------------------------------------------------- */

int
nz_lite_core_outcome (NzLiteErrKind kind, const char *what, const char *desc, const char *command,
                      const char *target, bool reserved, char *msg, size_t msg_size,
                      const char **code)
{
  char named[sizeof ((NzLiteErr *)0)->msg + 320];
  const char *agent = what, *dummy;

  if (code == NULL)
    code = &dummy;
  *code = NULL;
  if (desc != NULL)
    {
      snprintf (named, sizeof named, "agent %s: %s", desc, what);
      agent = named;
    }
  switch (kind)
    {
    case NZ_LITE_ERR_NOENT:
      *code = "not_found";
      snprintf (msg, msg_size, "%s: command not found in the sandbox (%s)", command, what);
      return NZ_LITE_EXIT_NOTFOUND;
    case NZ_LITE_ERR_NOEXEC:
      *code = "permission_denied";
      snprintf (msg, msg_size, "%s: cannot execute (%s)", command, what);
      return NZ_LITE_EXIT_NOEXEC;
    case NZ_LITE_ERR_INVALID:
    case NZ_LITE_ERR_PROTOCOL:
      *code = kind == NZ_LITE_ERR_INVALID ? "invalid_args" : "protocol";
      snprintf (msg, msg_size, "%s", what);
      return NZ_LITE_EXIT_NAMZU;
    case NZ_LITE_ERR_DIAL:
      *code = "unreachable";
      if (target == NULL)
        snprintf (msg, msg_size,
                  "cannot reach %s; is namzu-agent running there? (namzu-ls lists the "
                  "sandboxes)",
                  agent);
      else
        snprintf (msg, msg_size,
                  "cannot reach %s (%s); it may have stopped: check namzu-ls, or create a "
                  "new sandbox with namzu-create",
                  target, agent);
      return NZ_LITE_EXIT_NAMZU;
    default:
      break;
    }
  /* Reserved, so it may have run: say the outcome is unknown and where to look. */
  if (reserved && target != NULL)
    snprintf (msg, msg_size, "%s; the command's outcome in %s is unknown (check it with namzu-ls)",
              what, target);
  else if (target != NULL)
    snprintf (msg, msg_size, "%s (%s; check it with namzu-ls)", what, target);
  else
    snprintf (msg, msg_size, "%s", what);
  return NZ_LITE_EXIT_NAMZU;
}

int
nz_lite_core_cancelled (int signo, const char *what, char *msg, size_t msg_size)
{
  const char *name = nz_signame (signo);

  if (signo == 0)
    {
      snprintf (msg, msg_size, "%s", "");
      return 128 + SIGPIPE;
    }
  snprintf (msg, msg_size, "%s: %s", name != NULL ? name : "signal", what);
  return 128 + signo;
}
