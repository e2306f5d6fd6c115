/* Unit tests for lib/proto framing and envelopes (spec A.2, A.3). */
#include <string.h>

#include "nz-envelope.h"
#include "nz-errors.h"
#include "nz-frame.h"
#include "nz-json.h"
#include "../nz-test.h"

static NzFrameResult
push_next (NzFrameReader *r, const char *bytes, GBytes **out, GError **error)
{
  nz_frame_reader_push (r, bytes, strlen (bytes));
  return nz_frame_reader_next (r, out, error);
}

START_TEST (test_encode_lowercase)
{
  char payload[42];
  g_autoptr (GBytes) b = NULL;
  gsize len;
  const char *d;

  memset (payload, 'x', sizeof payload);
  b = nz_frame_encode (payload, sizeof payload);
  d = g_bytes_get_data (b, &len);
  ck_assert_uint_eq (len, 9 + 42);
  ck_assert (memcmp (d, "0000002a\n", 9) == 0);
}
END_TEST

START_TEST (test_terminator)
{
  g_autoptr (GBytes) b = nz_frame_encode (NULL, 0);
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (1024);
  g_autoptr (GBytes) out = NULL;
  gsize len;

  ck_assert (memcmp (g_bytes_get_data (b, &len), NZ_FRAME_TERMINATOR, 9) == 0);
  ck_assert_int_eq (push_next (r, NZ_FRAME_TERMINATOR, &out, NULL), NZ_FRAME_OK);
  ck_assert_uint_eq (g_bytes_get_size (out), 0);
}
END_TEST

START_TEST (test_uppercase_and_split)
{
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (1024);
  g_autoptr (GBytes) out = NULL;

  ck_assert_int_eq (push_next (r, "0000000", &out, NULL), NZ_FRAME_NONE);
  ck_assert_int_eq (push_next (r, "A\n{\"op\":\"x", &out, NULL), NZ_FRAME_NONE);
  ck_assert_int_eq (push_next (r, "\"}", &out, NULL), NZ_FRAME_OK);
  ck_assert_uint_eq (g_bytes_get_size (out), 10);
  ck_assert_uint_eq (nz_frame_reader_buffered (r), 0);
}
END_TEST

START_TEST (test_malformed)
{
  g_autoptr (NzFrameReader) r1 = nz_frame_reader_new (1024);
  g_autoptr (NzFrameReader) r2 = nz_frame_reader_new (1024);
  g_autoptr (NzFrameReader) r3 = nz_frame_reader_new (1024);
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL;
  GBytes *out = NULL;

  /* No newline in 9 bytes: refused on the 9th byte. */
  ck_assert_int_eq (push_next (r1, "aaaaaaaa", &out, &e1), NZ_FRAME_NONE);
  ck_assert_int_eq (push_next (r1, "a", &out, &e1), NZ_FRAME_MALFORMED);
  ck_assert_str_eq (e1->message, "malformed frame header (no newline in the first 9 bytes)");
  ck_assert_int_eq (push_next (r2, "00\n", &out, &e2), NZ_FRAME_MALFORMED);
  ck_assert_str_eq (e2->message, "malformed frame header (newline at 2)");
  ck_assert_int_eq (push_next (r3, "0000zz00\n", &out, &e3), NZ_FRAME_MALFORMED);
  ck_assert_str_eq (e3->message, "invalid frame length header \"0000zz00\"");
  ck_assert_ptr_null (out);
}
END_TEST

START_TEST (test_overflow_then_raise)
{
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (8);
  g_autoptr (GBytes) out = NULL;
  guint64 announced, limit;

  ck_assert_int_eq (push_next (r, "00000010\n0123456789abcdef", &out, NULL), NZ_FRAME_OVERFLOW);
  nz_frame_reader_get_overflow (r, &announced, &limit);
  ck_assert_uint_eq (announced, 16);
  ck_assert_uint_eq (limit, 8);
  nz_frame_reader_set_max (r, 64);
  ck_assert_int_eq (nz_frame_reader_next (r, &out, NULL), NZ_FRAME_OK);
  ck_assert_uint_eq (g_bytes_get_size (out), 16);
}
END_TEST

START_TEST (test_overflow_huge)
{
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (8388608);
  GBytes *out = NULL;
  guint64 announced, limit;

  ck_assert_int_eq (push_next (r, "ffffff00\n", &out, NULL), NZ_FRAME_OVERFLOW);
  nz_frame_reader_get_overflow (r, &announced, &limit);
  ck_assert_uint_eq (announced, 4294967040u);
  ck_assert_uint_eq (limit, 8388608);
}
END_TEST

static GBytes *
str_bytes (const char *s)
{
  return g_bytes_new_static (s, strlen (s));
}

START_TEST (test_envelope)
{
  g_autoptr (GBytes) p1 = str_bytes ("{\"op\":\"healthz\",\"token\":7}");
  g_autoptr (GBytes) p2 = str_bytes ("{\"op\":[1,2],\"body\":{\"a\":1}}");
  g_autoptr (GBytes) p3 = str_bytes ("not json");
  g_autoptr (NzEnvelope) e1 = nz_envelope_parse (p1, NULL);
  g_autoptr (NzEnvelope) e2 = nz_envelope_parse (p2, NULL);
  g_autoptr (GError) error = NULL;

  ck_assert_str_eq (e1->op, "healthz");
  ck_assert_str_eq (e1->token, "");
  ck_assert_ptr_null (e1->body);
  ck_assert_str_eq (e2->op, "1,2");
  ck_assert_ptr_nonnull (e2->body);
  ck_assert_ptr_null (nz_envelope_parse (p3, &error));
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_PROTOCOL));
}
END_TEST

/* A fuzz finding: two JSON values in one frame, the last an object. JSON.parse refuses it, and
 * json-glib, which accepts it, leaked the object; it is refused before json-glib sees it. */
START_TEST (test_envelope_fuzz_finding)
{
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (1024);
  g_autoptr (GBytes) out = NULL;
  g_autoptr (NzEnvelope) env = NULL;

  ck_assert_int_eq (push_next (r, "00000010\n0\n{\"op\":\"hethz\"}", &out, NULL), NZ_FRAME_OK);
  env = nz_envelope_parse (out, NULL);
  ck_assert_ptr_null (env);
  ck_assert_ptr_null (nz_json_parse_object ("{\"a\":\"}\"} {}", -1, NULL));
  ck_assert_ptr_null (nz_json_parse_object ("[1]", -1, NULL));
  {
    g_autoptr (JsonObject) ok = nz_json_parse_object (" {\"a\":\"}{\\\"\",\"b\":[{}]}\r\n", -1, NULL);

    ck_assert_ptr_nonnull (ok);
    ck_assert_str_eq (nz_json_get_string (ok, "a"), "}{\"");
  }
}
END_TEST

/* A large frame that arrives in reads of 64 KiB (room is made for it when its header comes),
 * alone in the buffer (its memory is handed over) or followed by another frame (copied out):
 * the payloads are the bytes sent, whichever path. */
/* The gate's peek: op and token read in place, tokens as whole bytes, refusals named. */
static gboolean
peek (const char *json, NzEnvelopePeek *out, GError **error)
{
  g_autoptr (GBytes) b = g_bytes_new (json, strlen (json));

  return nz_envelope_peek (b, out, error);
}

START_TEST (test_envelope_peek)
{
  g_auto (NzEnvelopePeek) p = { 0 };
  g_autoptr (GError) error = NULL;
  g_autofree char *long_token = g_strnfill (NZ_ENVELOPE_MAX_TOKEN_TEXT, 't');
  g_autofree char *long_doc = g_strdup_printf ("{\"op\":\"x\",\"token\":\"%s\"}", long_token);
  g_autofree char *brackets = g_strnfill (100, '[');
  g_autofree char *deep = g_strdup_printf ("{\"op\":\"healthz\",\"body\":%s}", brackets);

  ck_assert (peek (" {\"op\":\"heal\\u0074hz\",\"token\":\"a\\u0000b\"} ", &p, NULL));
  ck_assert (p.healthz);
  ck_assert_uint_eq (p.token_len, 3);
  ck_assert (memcmp (p.token, "a\0b", 4) == 0);
  nz_envelope_peek_clear (&p);
  /* Last member wins, like json-glib; a non-string token is "". */
  ck_assert (peek ("{\"op\":\"healthz\",\"op\":\"execute\",\"token\":5}", &p, NULL));
  ck_assert (!p.healthz);
  ck_assert_str_eq (p.token, "");
  nz_envelope_peek_clear (&p);
  ck_assert (peek ("{\"op\":\"healthz\\u0000\"}", &p, NULL));
  ck_assert (!p.healthz);
  nz_envelope_peek_clear (&p);
  /* A token over the bound is never decoded (and so never matches). */
  ck_assert (peek (long_doc, &p, NULL));
  ck_assert_uint_eq (p.token_len, 0);
  nz_envelope_peek_clear (&p);
  ck_assert (!peek ("[1]", &p, &error));
  ck_assert_str_eq (error->message, "expected exactly one JSON object");
  g_clear_error (&error);
  ck_assert (!peek ("{\"op\":\"healthz\"} {}", &p, &error));
  g_clear_error (&error);
  ck_assert (!peek ("{\"op\":tru}", &p, &error));
  g_clear_error (&error);
  ck_assert (!peek (deep, &p, &error));
  ck_assert (g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ": "));
}
END_TEST

START_TEST (test_large_frames_in_chunks)
{
  gsize len = 300000;
  g_autofree guint8 *payload = g_malloc (len);
  g_autoptr (GBytes) frame = NULL;
  g_autoptr (GByteArray) two = g_byte_array_new ();
  const guint8 *data;
  gsize frame_len = 0;

  for (gsize i = 0; i < len; i++)
    payload[i] = (guint8)('a' + i % 26);
  frame = nz_frame_encode (payload, len);
  data = g_bytes_get_data (frame, &frame_len);
  for (int round = 0; round < 2; round++)
    {
      g_autoptr (NzFrameReader) r = nz_frame_reader_new (1 << 20);
      g_autoptr (GBytes) out = NULL;
      g_autoptr (GBytes) next = NULL;
      g_autoptr (GError) error = NULL;
      const guint8 *all;
      gsize all_len;

      g_byte_array_set_size (two, 0);
      g_byte_array_append (two, data, frame_len);
      if (round == 1)
        nz_frame_append (two, "{}", 2);
      all = two->data;
      all_len = two->len;
      for (gsize off = 0; off < all_len; off += 65536)
        {
          ck_assert_int_eq (nz_frame_reader_next (r, &out, &error), NZ_FRAME_NONE);
          nz_frame_reader_push (r, all + off, MIN (65536, all_len - off));
        }
      ck_assert_int_eq (nz_frame_reader_next (r, &out, &error), NZ_FRAME_OK);
      ck_assert_uint_eq (g_bytes_get_size (out), len);
      ck_assert (memcmp (g_bytes_get_data (out, NULL), payload, len) == 0);
      if (round == 1)
        {
          ck_assert_int_eq (nz_frame_reader_next (r, &next, &error), NZ_FRAME_OK);
          ck_assert_uint_eq (g_bytes_get_size (next), 2);
        }
      ck_assert_int_eq (nz_frame_reader_next (r, &next, &error), NZ_FRAME_NONE);
      ck_assert_uint_eq (nz_frame_reader_buffered (r), 0);
      /* The reader goes on after a handed-over frame. */
      nz_frame_reader_push (r, "00000002\n{}", 11);
      g_clear_pointer (&next, g_bytes_unref);
      ck_assert_int_eq (nz_frame_reader_next (r, &next, &error), NZ_FRAME_OK);
      ck_assert_uint_eq (g_bytes_get_size (next), 2);
    }
  /* Over the cap: no room is made, the overflow is reported as before. */
  {
    g_autoptr (NzFrameReader) r = nz_frame_reader_new (1000);
    g_autoptr (GBytes) out = NULL;
    g_autoptr (GError) error = NULL;

    nz_frame_reader_push (r, data, 65536);
    ck_assert_int_eq (nz_frame_reader_next (r, &out, &error), NZ_FRAME_OVERFLOW);
  }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("frame");
  TCase *tc = tcase_create ("frame");

  tcase_add_test (tc, test_encode_lowercase);
  tcase_add_test (tc, test_terminator);
  tcase_add_test (tc, test_uppercase_and_split);
  tcase_add_test (tc, test_malformed);
  tcase_add_test (tc, test_overflow_then_raise);
  tcase_add_test (tc, test_overflow_huge);
  tcase_add_test (tc, test_envelope);
  tcase_add_test (tc, test_envelope_fuzz_finding);
  tcase_add_test (tc, test_large_frames_in_chunks);
  tcase_add_test (tc, test_envelope_peek);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
