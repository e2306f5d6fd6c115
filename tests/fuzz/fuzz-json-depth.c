/* fuzz-json-depth: libFuzzer harness for the nesting bound in front of json-glib
 * (lib/core/nz-json.c) and the credential gate's envelope peek (lib/proto/nz-envelope.c),
 * which together see every unauthenticated agent frame and every worker body. A crash, a
 * stack overflow, a sanitizer report or a leak is a finding, and so is any disagreement:
 * what the depth scan refuses is never parsed, what nz_json_parse_object accepts passes the
 * scan, and a peek that accepts a frame is one json-glib reads as an object too.
 * Build: scripts/fuzz (clang, -Dfuzz=true). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nz-envelope.h"
#include "nz-json.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (GBytes) bytes = g_bytes_new (data, size);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (NzEnvelopePeek) peek = { 0 };
  gboolean shallow = nz_json_check_depth ((const char *)data, (gssize)size, NULL);
  gboolean loaded;

  obj = nz_json_parse_object ((const char *)data, (gssize)size, &error);
  if (obj != NULL && !shallow)
    abort ();
  if (obj == NULL && error == NULL)
    abort ();
  g_clear_error (&error);
  loaded = nz_json_parser_load (parser, (const char *)data, (gssize)size, &error);
  if (loaded && !shallow)
    abort ();
  if (!loaded && !shallow && !g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ": "))
    abort ();
  g_clear_error (&error);
  if (nz_envelope_peek (bytes, &peek, &error))
    {
      /* The peek's reader is strict JSON; json-glib must agree that this is an object. */
      if (!shallow || !loaded || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        abort ();
      if (peek.token == NULL || peek.token[peek.token_len] != '\0')
        abort ();
    }
  else if (error == NULL)
    abort ();
  return 0;
}
