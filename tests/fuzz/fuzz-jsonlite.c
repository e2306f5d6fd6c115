/* fuzz-jsonlite: libFuzzer harness for lib/lite/nz-jsonlite, the JSON reader namzu-exec's
 * front runs on every frame and handle. Whatever parses is walked the way the front walks it
 * (member lookups, string decoding, numbers); a crash, sanitizer report or leak is a finding,
 * and so is a decoded string longer than its text or an accepted document whose members cannot
 * be read back. Build: scripts/fuzz (clang, -Dfuzz=true). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nz-jsonlite.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
check_string (const NzJlValue *v)
{
  size_t len = 0;
  char *s = nz_jl_string (v, &len);

  /* A string that parsed always decodes, and decoding never grows it. */
  if (s == NULL || len + 2 > v->len || s[len] != '\0')
    abort ();
  free (s);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const char *const names[] = { "type", "data", "id", "ok", "error", "exitCode", "" };
  NzJlValue root, v;
  double d;

  if (!nz_jl_parse ((const char *)data, size, &root))
    return 0;
  if (root.start < (const char *)data || root.start + root.len > (const char *)data + size)
    abort ();
  if (root.type == NZ_JL_STRING)
    check_string (&root);
  if (root.type == NZ_JL_NUMBER && !nz_jl_number (&root, &d))
    abort ();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
      char *s = nz_jl_member_string (&root, names[i]);

      free (s);
      (void)nz_jl_member_bool (&root, names[i], false);
      if (nz_jl_member (&root, names[i], &v))
        {
          /* A member of a valid document is itself a valid document. */
          if (!nz_jl_parse (v.start, v.len, NULL))
            abort ();
          if (v.type == NZ_JL_STRING)
            check_string (&v);
          if (v.type == NZ_JL_NUMBER && !nz_jl_number (&v, &d))
            abort ();
        }
    }
  return 0;
}
