/* fuzz-worker-request: libFuzzer harness for namzu-worker's request decoding, the part of
 * lib/worker that reads what an HTTP client sent before any route acts on it: the
 * Authorization header's bearer token (nz_worker_presented_token) and the JSON body
 * (nz_worker_body_parse: size cap, nesting bound, NUL refusal, readBody's shapes). The input
 * is split at its first newline: the header value before it, the body after it. The whole
 * input is also a raw request head for the check libsoup does not make (nz_worker_head_check).
 * A crash, a sanitizer report or a leak is a finding, and so is a refusal without a status
 * and code, a body with a \u0000 escape that is accepted, a token that is not a suffix of its
 * header, a head length past the input, or an accepted head holding a NUL, a bare CR or a
 * folded line.
 * Build: scripts/fuzz (clang, -Dfuzz=true, the worker enabled). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nz-agent-ops.h"
#include "nz-worker-body.h"
#include "nz-worker-config.h"
#include "nz-worker-head.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  const char *nl = memchr (text, '\n', size);
  gsize header_len = nl != NULL ? (gsize)(nl - text) : size;
  g_autofree char *header = g_strndup (text, header_len);
  const char *body = nl != NULL ? nl + 1 : "";
  gsize body_len = nl != NULL ? size - header_len - 1 : 0;
  g_autofree char *token = nz_worker_presented_token (header);
  g_auto (NzWorkerBodyRefusal) refusal = { 0 };
  g_autoptr (JsonObject) obj = NULL;

  /* The token is what follows "Bearer " in the (trimmed) header: never longer than it. */
  if (token != NULL && (strlen (token) == 0 || strstr (header, token) == NULL))
    abort ();
  /* A small cap too, so the size refusal is reached. */
  obj = nz_worker_body_parse (body, body_len, size % 2 ? 8388608 : 64, &refusal);
  if (obj == NULL && (refusal.status < 400 || refusal.code == NULL))
    abort ();
  if (obj != NULL && nz_agent_ops_has_nul_escape (body, body_len))
    abort ();
  {
    gsize head = nz_worker_head_length (text, size);
    const char *why = NULL;

    if (head > size)
      abort ();
    if (head > 0 && nz_worker_head_check (text, head, &why))
      for (gsize i = 0; i < head; i++)
        if (text[i] == '\0' || (text[i] == '\r' && (i + 1 == head || text[i + 1] != '\n'))
            || (text[i] == '\n' && i + 1 < head && (text[i + 1] == ' ' || text[i + 1] == '\t')))
          abort ();
  }
  return 0;
}
