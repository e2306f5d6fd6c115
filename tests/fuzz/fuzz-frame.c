/* fuzz-frame: libFuzzer harness for the agent wire's parsers (spec A.2, A.3): the frame reader
 * (fed in arbitrary chunkings, with a cap change mid-stream like authentication does) and the
 * request envelope parser on every frame it yields. Any crash, sanitizer report, leak or
 * critical is a finding. Build: scripts/fuzz (clang, -Dfuzz=true). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <glib.h>

#include "nz-envelope.h"
#include "nz-frame.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
fatal_log (const char *domain, GLogLevelFlags level, const char *message, gpointer user_data)
{
  /* A critical or warning from a parser is a bug: make it a crash the fuzzer records. */
  abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static gboolean init;
  g_autoptr (NzFrameReader) reader = NULL;
  size_t pos = 1, step;
  guint frames = 0;

  if (!init)
    {
      g_log_set_handler (NULL, G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING, fatal_log, NULL);
      g_log_set_handler ("Json", G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING, fatal_log, NULL);
      init = TRUE;
    }
  if (size == 0)
    return 0;
  /* The first byte picks the cap and the chunk size, so the corpus explores both. */
  reader = nz_frame_reader_new ((data[0] & 0x80) ? 64 : 8 * 1024 * 1024);
  step = 1 + (data[0] & 0x3f);
  while (pos < size)
    {
      size_t n = MIN (step, size - pos);
      gboolean stop = FALSE;

      nz_frame_reader_push (reader, data + pos, n);
      pos += n;
      while (!stop)
        {
          g_autoptr (GBytes) payload = NULL;
          g_autoptr (GError) error = NULL;
          guint64 announced = 0, limit = 0;

          switch (nz_frame_reader_next (reader, &payload, &error))
            {
            case NZ_FRAME_OK:
              {
                g_autoptr (NzEnvelope) env = nz_envelope_parse (payload, NULL);

                frames++;
                /* After the first frame the cap rises, as it does on authentication. */
                if (frames == 1)
                  nz_frame_reader_set_max (reader, 16 * 1024 * 1024);
                (void)env;
              }
              break;
            case NZ_FRAME_OVERFLOW:
              nz_frame_reader_get_overflow (reader, &announced, &limit);
              if (announced <= limit)
                abort ();
              nz_frame_reader_set_max (reader, announced);
              stop = nz_frame_reader_get_max (reader) != announced;
              break;
            case NZ_FRAME_MALFORMED:
              if (error == NULL)
                abort ();
              return 0;
            case NZ_FRAME_NONE:
            default:
              stop = TRUE;
              break;
            }
        }
    }
  return 0;
}
