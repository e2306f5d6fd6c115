/* Unit tests for the retained output ring (spec C.5 OutputLog), with the spec's examples. */
#include <string.h>

#include "nz-output-log.h"
#include "../nz-test.h"

/* Concatenates the chunks' bytes. */
static char *
joined (GArray *chunks)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < chunks->len; i++)
    {
      gsize len = 0;
      const char *d = g_bytes_get_data (g_array_index (chunks, NzOutputChunk, i).data, &len);

      g_string_append_len (s, d, (gssize)len);
    }
  return g_string_free (s, FALSE);
}

/* Ring 4, append 0123456789 -> keeps 6789, droppedBytes 6, startOffset 6, endOffset 10. */
START_TEST (test_oversized_chunk_keeps_tail)
{
  g_autoptr (NzOutputLog) log = nz_output_log_new (4);
  g_autoptr (GArray) chunks = NULL;
  g_autofree char *data = NULL;
  guint64 dropped = 99, from = 99;

  ck_assert_uint_eq (nz_output_log_append (log, 0, "0123456789", 10), 0);
  ck_assert_uint_eq (nz_output_log_dropped_bytes (log), 6);
  ck_assert_uint_eq (nz_output_log_start_offset (log), 6);
  ck_assert_uint_eq (nz_output_log_end_offset (log), 10);
  ck_assert (nz_output_log_read (log, 0, &chunks, &dropped, &from));
  data = joined (chunks);
  ck_assert_str_eq (data, "6789");
  ck_assert_uint_eq (dropped, 6);
  ck_assert_uint_eq (from, 6);
  ck_assert_uint_eq (g_array_index (chunks, NzOutputChunk, 0).offset, 6);
}
END_TEST

/* Ring 8, aaaa bbbb cccc: read(0) -> dropped 4, from 4, next 12, bbbbcccc; read(12) -> none. */
START_TEST (test_read_examples)
{
  g_autoptr (NzOutputLog) log = nz_output_log_new (8);
  g_autoptr (GArray) chunks = NULL;
  g_autoptr (GArray) none = NULL;
  g_autofree char *data = NULL;
  guint64 dropped = 0, from = 0;

  ck_assert_uint_eq (nz_output_log_append (log, 0, "aaaa", 4), 0);
  ck_assert_uint_eq (nz_output_log_append (log, 1, "bbbb", 4), 4);
  ck_assert_uint_eq (nz_output_log_append (log, 0, "cccc", 4), 8);
  ck_assert (nz_output_log_read (log, 0, &chunks, &dropped, &from));
  data = joined (chunks);
  ck_assert_str_eq (data, "bbbbcccc");
  ck_assert_uint_eq (dropped, 4);
  ck_assert_uint_eq (from, 4);
  ck_assert_uint_eq (nz_output_log_end_offset (log), 12);
  /* The stream tags survive: one interleaved space for stdout and stderr. */
  ck_assert_int_eq (g_array_index (chunks, NzOutputChunk, 0).stream, 1);
  ck_assert_int_eq (g_array_index (chunks, NzOutputChunk, 1).stream, 0);
  ck_assert (nz_output_log_read (log, 12, &none, &dropped, &from));
  ck_assert_uint_eq (none->len, 0);
  ck_assert_uint_eq (dropped, 0);
  ck_assert_uint_eq (from, 12);
}
END_TEST

START_TEST (test_read_inside_chunk_and_beyond_end)
{
  g_autoptr (NzOutputLog) log = nz_output_log_new (100);
  g_autoptr (GArray) chunks = NULL;
  g_autoptr (GArray) bad = NULL;
  g_autofree char *data = NULL;
  guint64 dropped = 1, from = 0;

  nz_output_log_append (log, 0, "hello", 5);
  nz_output_log_append (log, 1, "world", 5);
  /* An empty chunk is not stored and returns the current end. */
  ck_assert_uint_eq (nz_output_log_append (log, 0, "", 0), 10);
  ck_assert (nz_output_log_read (log, 3, &chunks, &dropped, &from));
  data = joined (chunks);
  ck_assert_str_eq (data, "loworld");
  ck_assert_uint_eq (dropped, 0);
  ck_assert_uint_eq (from, 3);
  ck_assert_uint_eq (g_array_index (chunks, NzOutputChunk, 0).offset, 3);
  ck_assert (!nz_output_log_read (log, 11, &bad, NULL, NULL));
}
END_TEST

/* A straddling head chunk is sliced, and every removed byte counts as dropped. */
START_TEST (test_trim_slices_head)
{
  g_autoptr (NzOutputLog) log = nz_output_log_new (6);

  nz_output_log_append (log, 0, "abcd", 4);
  nz_output_log_append (log, 0, "efgh", 4);
  ck_assert_uint_eq (nz_output_log_held_bytes (log), 6);
  ck_assert_uint_eq (nz_output_log_start_offset (log), 2);
  ck_assert_uint_eq (nz_output_log_dropped_bytes (log), 2);
}
END_TEST

/* discard() = trim(0): start = end, everything dropped; reads still work and report it. */
START_TEST (test_discard)
{
  g_autoptr (NzOutputLog) log = nz_output_log_new (64);
  g_autoptr (GArray) chunks = NULL;
  guint64 dropped = 0, from = 0;

  nz_output_log_append (log, 0, "0123456789", 10);
  ck_assert (!nz_output_log_is_discarded (log));
  nz_output_log_discard (log);
  ck_assert (nz_output_log_is_discarded (log));
  ck_assert_uint_eq (nz_output_log_start_offset (log), 10);
  ck_assert_uint_eq (nz_output_log_dropped_bytes (log), 10);
  ck_assert (nz_output_log_read (log, 0, &chunks, &dropped, &from));
  ck_assert_uint_eq (chunks->len, 0);
  ck_assert_uint_eq (dropped, 10);
  ck_assert_uint_eq (from, 10);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("output-log");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, test_oversized_chunk_keeps_tail);
  tcase_add_test (tc, test_read_examples);
  tcase_add_test (tc, test_read_inside_chunk_and_beyond_end);
  tcase_add_test (tc, test_trim_slices_head);
  tcase_add_test (tc, test_discard);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
