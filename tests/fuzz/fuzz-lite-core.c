/* fuzz-lite-core: libFuzzer harness for the exec core both namzu-exec programs drive
 * (lib/lite/nz-lite-core), fed with no I/O at all: the input is byte 0 (bit 0: cancel is
 * wanted while reserving, bit 1: a failure is fed after the frames), then the agent's reserve
 * reply, stream frames and cancel replies, separated by SEP; the clock moves 700 ms a step.
 * Every action must come from the documented set, the machine must end, and any crash,
 * sanitizer report or leak is a finding. Build: scripts/fuzz (clang, -Dfuzz=true). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nz-lite-core.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define SEP "\n==\n"

/* The next piece of the input into *@p and *@n; false when none is left. */
static bool
next_piece (const char **rest, const char *end, const char **p, size_t *n)
{
  const char *sep;

  if (*rest == NULL || *rest > end)
    return false;
  *p = *rest;
  sep = memmem (*rest, (size_t)(end - *rest), SEP, strlen (SEP));
  *n = sep != NULL ? (size_t)(sep - *rest) : (size_t)(end - *rest);
  *rest = sep != NULL ? sep + strlen (SEP) : NULL;
  return true;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char body[] = "{\"command\":\"true\",\"args\":[]";
  const char *rest = (const char *)data + 1, *end = (const char *)data + size, *p;
  NzLiteCoreAction a;
  NzLiteCore c;
  int64_t now = 0;
  char line[4096];
  size_t n;

  if (size == 0)
    return 0;
  nz_lite_core_init (&c, "unix:/fuzz", body, strlen (body));
  if (data[0] & 1)
    nz_lite_core_want_cancel (&c);
  if (!next_piece (&rest, end, &p, &n))
    p = "", n = 0;
  a = nz_lite_core_reserved (&c, p, n, now);
  for (int steps = 0; a != NZ_LITE_CORE_DONE; steps++, now += 700)
    {
      bool more = next_piece (&rest, end, &p, &n);

      /* 8 s of cancel budget at 700 ms a step ends well within this. */
      if (steps > 100000)
        abort ();
      switch (a)
        {
        case NZ_LITE_CORE_EXECUTE:
        case NZ_LITE_CORE_OUTPUT:
          if (a == NZ_LITE_CORE_OUTPUT
              && (c.out == NULL || c.out_len == 0 || (c.out_stream != 1 && c.out_stream != 2)))
            abort ();
          a = NZ_LITE_CORE_READ;
          break;
        case NZ_LITE_CORE_READ:
          if (more)
            a = nz_lite_core_frame (&c, p, n, now);
          else
            a = nz_lite_core_failed (&c, data[0] & 2 ? NZ_LITE_ERR_CANCELLED : NZ_LITE_ERR_FAILED,
                                     "the input ended", now);
          break;
        case NZ_LITE_CORE_CLOSE:
          a = nz_lite_core_closed (&c);
          break;
        case NZ_LITE_CORE_CANCEL:
          if (more)
            a = nz_lite_core_cancel_reply (&c, p, n, now);
          else
            a = nz_lite_core_failed (&c, NZ_LITE_ERR_DIAL, "refused", now);
          break;
        case NZ_LITE_CORE_PAUSE:
          a = nz_lite_core_tick (&c, now);
          break;
        case NZ_LITE_CORE_DONE:
        default:
          abort ();
        }
    }
  if (c.end == NZ_LITE_CORE_RESULT && c.result == NULL)
    abort ();
  (void)nz_lite_core_outcome (c.err.kind, c.err.msg, NULL, "true", "sandbox nz-0", c.id != NULL,
                              line, sizeof line, NULL);
  nz_lite_core_clear (&c);
  return 0;
}
