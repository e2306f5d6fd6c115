/* Unit tests for lib/core (knobs, errors, JSON helpers) and lib/tls (token compare, uuid). */
#include <string.h>

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
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
