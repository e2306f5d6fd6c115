/* fuzz-lite-reply: libFuzzer harness for the reply path of namzu-exec's libc-only front
 * (lib/lite): the agent's bytes arrive over a real socket into nz_lite_wire_read_frame, each
 * frame is parsed and read the way the front reads an exec stream (type, data, error,
 * message, the result's exit status, the refusal mapping), then the close is expected. The
 * first byte picks the chunking the peer writes in. Any crash, sanitizer report or leak is a
 * finding. Build: scripts/fuzz (clang, -Dfuzz=true). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nz-lite-core.h"
#include "nz-lite-exec.h"
#include "nz-lite-wire.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
read_frame_like_front (const NzJlValue *raw)
{
  NzJlValue frame, v;
  char *type, *text;
  size_t len = 0;

  if (!nz_jl_parse (raw->start, raw->len, &frame) || frame.type != NZ_JL_OBJECT)
    return;
  type = nz_jl_member_string (&frame, "type");
  if (type != NULL && strcmp (type, "result") == 0)
    (void)nz_lite_exec_exit_status (&frame);
  if (nz_jl_member (&frame, "data", &v) && (text = nz_jl_string (&v, &len)) != NULL)
    {
      /* A decoded string is never longer than its text. */
      if (len > v.len)
        abort ();
      free (text);
    }
  if ((type == NULL && nz_jl_member (&frame, "ok", &v)) || (type && strcmp (type, "error") == 0))
    {
      char *code = nz_jl_member_string (&frame, "error");
      char *message = nz_jl_member_string (&frame, "message");
      NzLiteErr e = { 0 };

      nz_lite_core_refusal ("unix:/fuzz", "execute", code != NULL ? code : "unknown error", message, &e);
      free (code);
      free (message);
    }
  free (type);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  NzLiteWire w = { .sigfd = -1 };
  NzLiteConn k = { .fd = -1 };
  NzLiteErr e = { 0 };
  size_t step;
  int sv[2];

  if (size == 0 || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return 0;
  strcpy (w.ep.desc, "unix:/fuzz");
  step = 16 + (data[0] & 0x3f) * 16;
  /* The whole answer is in the socket before the first read, so no wait ever blocks; the
   * chunking only changes how much each read returns. */
  (void)setsockopt (sv[1], SOL_SOCKET, SO_SNDBUF, &(int){ 4 << 20 }, sizeof (int));
  for (size_t pos = 1; pos < size; pos += step)
    if (send (sv[1], data + pos, size - pos < step ? size - pos : step,
              MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
      break;
  shutdown (sv[1], SHUT_WR);
  k.fd = sv[0];
  for (int frames = 0; frames < 1024; frames++)
    {
      NzJlValue raw;
      NzLiteReadStatus r = nz_lite_wire_read_frame (&w, &k, nz_lite_wire_now_ms () + 1000, false,
                                                   &raw, &e);

      if (r != NZ_LITE_READ_FRAME)
        break;
      if (raw.len == 0)
        {
          (void)nz_lite_wire_expect_close (&w, &k, "exec stream", false, false, &e);
          break;
        }
      read_frame_like_front (&raw);
    }
  nz_lite_wire_close (&k);
  close (sv[1]);
  return 0;
}
