/* nz-lite-stream: see nz-lite-stream.h. */
#define _GNU_SOURCE
#include "nz-lite-stream.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nz-host-timing.h"

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

/* The next frame of the stream on @k fed to @core, or the failure that ended the read. */
static NzLiteCoreAction
read_next (NzLiteWire *w, NzLiteConn *k, NzLiteCore *core, int64_t deadline,
           unsigned long long observation_ms)
{
  NzLiteErr e = { 0 };
  NzJlValue raw;
  NzLiteReadStatus st = nz_lite_wire_read_frame (w, k, deadline, true, &raw, &e);

  if (st == NZ_LITE_READ_FRAME)
    return nz_lite_core_frame (core, raw.start, raw.len, nz_lite_wire_now_ms ());
  nz_lite_wire_read_failed (w, k, NZ_LITE_AWAIT_FRAME, st, "exec stream", observation_ms, &e);
  return nz_lite_core_failed (core, e.kind, e.msg, nz_lite_wire_now_ms ());
}

/* One cancel-execution attempt; signals are not watched (one already came). */
static NzLiteCoreAction
cancel_once (NzLiteWire *w, NzLiteCore *core)
{
  NzLiteErr e = { 0 };
  char *text = NULL;
  NzJlValue reply;
  NzLiteCoreAction a;

  if (nz_lite_wire_call (w, "cancel-execution", core->cancel_body.data, core->attempt_ms, false,
                         &text, &reply, &e))
    a = nz_lite_core_cancel_reply (core, text, strlen (text), nz_lite_wire_now_ms ());
  else
    a = nz_lite_core_failed (core, e.kind, e.msg, nz_lite_wire_now_ms ());
  free (text);
  return a;
}

void
nz_lite_stream_run (NzLiteWire *w, NzLiteCore *core, NzLiteCoreAction a,
                    unsigned long long observation_ms)
{
  int64_t deadline = nz_lite_wire_now_ms () + (int64_t)observation_ms;
  NzLiteConn k = { .fd = -1 };
  NzLiteErr e = { 0 };

  while (a != NZ_LITE_CORE_DONE)
    switch (a)
      {
      case NZ_LITE_CORE_EXECUTE:
        if (nz_lite_wire_request (w, &k, "execute", core->request.data, true, &e))
          a = NZ_LITE_CORE_READ;
        else
          a = nz_lite_core_failed (core, e.kind, e.msg, nz_lite_wire_now_ms ());
        break;
      case NZ_LITE_CORE_READ:
        a = read_next (w, &k, core, deadline, observation_ms);
        break;
      case NZ_LITE_CORE_OUTPUT:
        if (write_all (core->out_stream == 1 ? STDOUT_FILENO : STDERR_FILENO, core->out,
                       core->out_len))
          a = NZ_LITE_CORE_READ;
        else
          {
            /* Like SIGPIPE would, but the command is cancelled rather than left running. */
            nz_lite_core_want_cancel (core);
            a = nz_lite_core_failed (core, NZ_LITE_ERR_FAILED, "output closed",
                                     nz_lite_wire_now_ms ());
          }
        break;
      case NZ_LITE_CORE_CLOSE:
        if (nz_lite_wire_expect_close (w, &k, "exec stream", false, true, &e))
          a = nz_lite_core_closed (core);
        else
          a = nz_lite_core_failed (core, e.kind, e.msg, nz_lite_wire_now_ms ());
        break;
      case NZ_LITE_CORE_CANCEL:
        nz_lite_wire_close (&k);
        a = cancel_once (w, core);
        break;
      case NZ_LITE_CORE_PAUSE:
        usleep (NZ_HOST_CANCEL_RETRY_INTERVAL_MS * 1000);
        a = nz_lite_core_tick (core, nz_lite_wire_now_ms ());
        break;
      case NZ_LITE_CORE_DONE:
      default:
        break;
      }
  nz_lite_wire_close (&k);
}
