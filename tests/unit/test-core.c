/* Unit tests for lib/core (knobs, errors, JSON helpers, base64) and lib/tls (token compare,
 * uuid). */
#include <string.h>

#include "nz-base64.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-token.h"
#include "../nz-test.h"

static gboolean
knob (const char *value, gboolean allow_zero, gint64 *out, GError **error)
{
  if (value == NULL)
    g_unsetenv ("NZ_TEST_KNOB");
  else
    g_setenv ("NZ_TEST_KNOB", value, TRUE);
  return nz_knob_int ("NZ_TEST_KNOB", 42, allow_zero, out, error);
}

START_TEST (test_knobs)
{
  gint64 v = 0;
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL;

  ck_assert (knob (NULL, FALSE, &v, NULL));
  ck_assert_int_eq (v, 42);
  ck_assert (knob ("250", FALSE, &v, NULL));
  ck_assert_int_eq (v, 250);
  ck_assert (knob (" 1e3 ", FALSE, &v, NULL));
  ck_assert_int_eq (v, 1000);
  ck_assert (knob ("0x10", FALSE, &v, NULL));
  ck_assert_int_eq (v, 16);
  ck_assert (knob ("0", TRUE, &v, NULL));
  ck_assert_int_eq (v, 0);
  /* An empty string is not "unset": Number('') is 0. */
  ck_assert (!knob ("", FALSE, &v, &e1));
  ck_assert_str_eq (e1->message, "NZ_TEST_KNOB must be a positive safe integer");
  ck_assert (!knob ("-1", TRUE, &v, &e2));
  ck_assert_str_eq (e2->message, "NZ_TEST_KNOB must be a non-negative safe integer");
  ck_assert (!knob ("1.5", FALSE, &v, &e3));
  ck_assert (!knob ("9007199254740993", FALSE, &v, &e4));
}
END_TEST

START_TEST (test_token_equal)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *t1 = nz_token_mint (&error);
  g_autofree char *t2 = nz_token_mint (&error);

  ck_assert_uint_eq (strlen (t1), 64);
  ck_assert_str_ne (t1, t2);
  ck_assert (nz_token_equal (t1, t1));
  ck_assert (!nz_token_equal (t1, t2));
  ck_assert (!nz_token_equal ("abc", "abcd"));
  ck_assert (!nz_token_equal ("abc", NULL));
  ck_assert (nz_token_equal ("", NULL));
}
END_TEST

START_TEST (test_uuid)
{
  g_autofree char *u = nz_uuid_v4 ();

  ck_assert_uint_eq (strlen (u), 36);
  ck_assert_int_eq (u[14], '4');
  ck_assert (strchr ("89ab", u[19]) != NULL);
}
END_TEST

START_TEST (test_exit_codes)
{
  g_autoptr (GError) usage = g_error_new (NZ_ERROR, NZ_ERROR_INVALID_ARGS, "x");
  g_autoptr (GError) io = g_error_new (G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "y");

  ck_assert_int_eq (nz_error_to_exit_code (NULL), 0);
  ck_assert_int_eq (nz_error_to_exit_code (usage), 2);
  nz_error_convert (&io);
  ck_assert (g_error_matches (io, NZ_ERROR, NZ_ERROR_NOT_FOUND));
  ck_assert_str_eq (nz_error_code_name (io), "not_found");
  ck_assert_int_eq (nz_error_to_exit_code (io), 1);
}
END_TEST

/* Truthiness of member @m of @json as the reference's JavaScript sees it (absent = undefined). */
static gboolean
truthy (const char *json, const char *m)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) obj = nz_json_parse_object (json, -1, &error);

  ck_assert_msg (obj != NULL, "%s: %s", json, error ? error->message : "");
  return nz_json_js_truthy (json_object_has_member (obj, m) ? json_object_get_member (obj, m)
                                                            : NULL);
}

START_TEST (test_js_truthy)
{
  const char *falsy[] = { "{}",          "{\"v\":null}", "{\"v\":false}", "{\"v\":0}",
                          "{\"v\":0.0}", "{\"v\":-0}",   "{\"v\":\"\"}" };
  const char *truthy_[] = { "{\"v\":true}",  "{\"v\":1}",  "{\"v\":-2.5}", "{\"v\":\"0\"}",
                            "{\"v\":\" \"}", "{\"v\":{}}", "{\"v\":[]}" };

  for (gsize i = 0; i < G_N_ELEMENTS (falsy); i++)
    ck_assert_msg (!truthy (falsy[i], "v"), "%s should be falsy", falsy[i]);
  for (gsize i = 0; i < G_N_ELEMENTS (truthy_); i++)
    ck_assert_msg (truthy (truthy_[i], "v"), "%s should be truthy", truthy_[i]);
}
END_TEST

/* The table-driven codec against GLib's on random bytes, every length from 0 to 300 (so every
 * length mod 3 and every tail) and a few large ones. */
START_TEST (test_base64_matches_glib)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (3);
  const gsize big[] = { 65535, 65536, 65537, 262144 };

  for (gsize n = 0; n < 300 + G_N_ELEMENTS (big); n++)
    {
      gsize len = n < 300 ? n : big[n - 300];
      g_autofree guint8 *data = g_malloc (len + 1);
      g_autofree char *want = NULL;
      g_autofree char *got = g_malloc (NZ_BASE64_ENCODED_LEN (len) + 1);
      g_autofree guint8 *back = g_malloc (NZ_BASE64_DECODED_MAX (NZ_BASE64_ENCODED_LEN (len)));
      gsize got_len;
      gssize back_len;

      for (gsize i = 0; i < len; i++)
        data[i] = (guint8)g_rand_int_range (rand, 0, 256);
      want = g_base64_encode (data, len);
      got_len = nz_base64_encode (data, len, got);
      got[got_len] = '\0';
      ck_assert_uint_eq (got_len, NZ_BASE64_ENCODED_LEN (len));
      ck_assert_str_eq (got, want);
      back_len = nz_base64_decode (got, got_len, back);
      ck_assert_int_eq (back_len, (gssize)len);
      ck_assert (len == 0 || memcmp (back, data, len) == 0);
      /* Unpadded tails decode to the same bytes. */
      while (got_len > 0 && got[got_len - 1] == '=')
        got_len--;
      back_len = nz_base64_decode (got, got_len, back);
      ck_assert_int_eq (back_len, (gssize)len);
      ck_assert (len == 0 || memcmp (back, data, len) == 0);
    }
}
END_TEST

/* Anything but plain base64 is refused (-1), so callers can fall back to a lenient decoder. */
START_TEST (test_base64_refuses)
{
  const char *bad[] = { "A",     "AAAAA", "AA=A", "=AAA",  "AAAA====", "A===",
                        "AA\nA", "AA A",  "AA-_", "AAA\"", "====" };
  guint8 out[16];

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (nz_base64_decode (bad[i], strlen (bad[i]), out) == -1, "%s", bad[i]);
  /* One stray character anywhere in a long text, vector loop included. */
  for (guint pos = 0; pos < 100; pos++)
    {
      const char stray[] = { '-', '_', ' ', '=', '\n', (char)0xc3, (char)0x80, '@', '[', '{' };
      char text[101];
      guint8 big[128];

      memset (text, 'Q', 100);
      text[100] = '\0';
      text[pos] = stray[pos % G_N_ELEMENTS (stray)];
      ck_assert_msg (nz_base64_decode (text, 100, big) == -1, "stray at %u", pos);
      text[pos] = 'z';
      ck_assert_int_eq (nz_base64_decode (text, 100, big), 75);
    }
  /* Every byte value, in the vector part (position 5) and the scalar tail (position 70). */
  for (guint b = 0; b < 256; b++)
    for (guint pos = 5; pos < 80; pos += 65)
      {
        char text[73];
        guint8 big[80];
        gboolean valid = g_ascii_isalnum (b) || b == '+' || b == '/';

        memset (text, 'Q', 72);
        text[72] = '\0';
        text[pos] = (char)b;
        ck_assert_msg (nz_base64_decode (text, 72, big) == (valid ? 54 : -1), "byte %u at %u", b,
                       pos);
        if (valid)
          {
            gsize n = 0;
            g_autofree guchar *want = g_base64_decode (text, &n);

            ck_assert_uint_eq (n, 54);
            ck_assert_int_eq (memcmp (big, want, 54), 0);
          }
      }
  ck_assert_int_eq (nz_base64_decode ("aGk=", 4, out), 2);
  ck_assert_int_eq (memcmp (out, "hi", 2), 0);
  ck_assert_int_eq (nz_base64_decode ("", 0, out), 0);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("core");
  TCase *tc = tcase_create ("core");

  tcase_add_test (tc, test_knobs);
  tcase_add_test (tc, test_token_equal);
  tcase_add_test (tc, test_uuid);
  tcase_add_test (tc, test_exit_codes);
  tcase_add_test (tc, test_js_truthy);
  tcase_add_test (tc, test_base64_matches_glib);
  tcase_add_test (tc, test_base64_refuses);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
