#define _GNU_SOURCE
#include "nz-lite-stream.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nz-jsonlite.h"
#include "nz-lite-exec.h"

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

/* One frame of the exec stream (lib/client's exec_frame and exec_output_frame). Returns
 * false to stop reading: an error, a refusal, or output that could not be written. */
static bool
stream_frame (NzLiteWire *w, NzLiteStream *s, const NzJlValue *raw, bool *refused, NzLiteErr *e)
{
  NzJlValue frame, v;
  char *type, *data;
  size_t dlen = 0;

  if (!nz_jl_parse (raw->start, raw->len, &frame) || frame.type != NZ_JL_OBJECT)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream frame: not a JSON "
                              "object", w->ep.desc);
  if (s->result != NULL || s->error_code != NULL)
    return nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream sent a frame after "
                              "its result", w->ep.desc);
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

bool
nz_lite_stream_execute (NzLiteWire *w, const char *request, unsigned long long observation_ms,
                        NzLiteStream *s, NzLiteErr *e)
{
  int64_t deadline = nz_lite_wire_now_ms () + (int64_t)observation_ms;
  NzLiteConn k;
  bool ok = false, refused = false;

  if (!nz_lite_wire_request (w, &k, "execute", request, true, e))
    {
      nz_lite_wire_close (&k);
      return false;
    }
  for (;;)
    {
      NzJlValue raw;
      NzLiteReadStatus st = nz_lite_wire_read_frame (w, &k, deadline, true, &raw, e);

      if (st == NZ_LITE_READ_EOF)
        nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: %s", w->ep.desc,
                           k.in.len > k.pos ? "exec stream has trailing partial data"
                                            : "socket closed before exec stream terminator");
      else if (st == NZ_LITE_READ_TIMEOUT)
        nz_lite_wire_fail (e, NZ_LITE_ERR_TIMED_OUT, "agent %s: exec stream observation exceeded "
                           "%llums", w->ep.desc, observation_ms);
      if (st != NZ_LITE_READ_FRAME)
        break;
      if (raw.len == 0)
        {
          ok = nz_lite_wire_expect_close (w, &k, "exec stream", false, true, e);
          break;
        }
      if (!stream_frame (w, s, &raw, &refused, e) || refused)
        {
          ok = refused;
          break;
        }
    }
  nz_lite_wire_close (&k);
  if (ok && s->result == NULL && s->error_code == NULL)
    ok = nz_lite_wire_fail (e, NZ_LITE_ERR_PROTOCOL, "agent %s: exec stream ended without a "
                            "result event", w->ep.desc);
  if (ok && s->error_code != NULL)
    ok = (nz_lite_exec_refusal (w->ep.desc, s->error_code, s->error_message, e), false);
  return ok;
}

int
nz_lite_stream_outcome (const NzLiteErr *e, const char *desc, const char *command,
                        const char *target, char *msg, size_t msg_size)
{
  if (e->kind == NZ_LITE_ERR_NOENT)
    return snprintf (msg, msg_size, "%s: command not found in the sandbox (%s)", command, e->msg),
           NZ_LITE_EXIT_NOTFOUND;
  if (e->kind == NZ_LITE_ERR_NOEXEC)
    return snprintf (msg, msg_size, "%s: cannot execute (%s)", command, e->msg),
           NZ_LITE_EXIT_NOEXEC;
  if (e->kind == NZ_LITE_ERR_INVALID || e->kind == NZ_LITE_ERR_PROTOCOL)
    return snprintf (msg, msg_size, "%s", e->msg), NZ_LITE_EXIT_NAMZU;
  if (e->kind == NZ_LITE_ERR_DIAL && target == NULL)
    return snprintf (msg, msg_size,
                     "cannot reach agent %s: %s; is namzu-agent running there? (namzu-ls lists "
                     "the sandboxes)", desc, e->msg),
           NZ_LITE_EXIT_NAMZU;
  if (e->kind == NZ_LITE_ERR_DIAL)
    return snprintf (msg, msg_size,
                     "cannot reach %s (agent %s: %s); it may have stopped: check namzu-ls, or "
                     "create a new sandbox with namzu-create", target, desc, e->msg),
           NZ_LITE_EXIT_NAMZU;
  if (target != NULL)
    return snprintf (msg, msg_size,
                     "%s; the command's outcome in %s is unknown (check it with namzu-ls)",
                     e->msg, target),
           NZ_LITE_EXIT_NAMZU;
  return snprintf (msg, msg_size, "%s", e->msg), NZ_LITE_EXIT_NAMZU;
}
