/* Unit tests for lib/lite/nz-jsonlite: the strict JSON reader of namzu-exec's front. */
#include <stdlib.h>
#include <string.h>

#include "nz-jsonlite.h"
#include "../nz-test.h"

static bool
parses (const char *text)
{
  return nz_jl_parse (text, strlen (text), NULL);
}

START_TEST (test_accepts_json)
{
  const char *good[] = {
    "{}", " [ ] ", "0", "-0", "1.5E-2", "-12e+3", "true", "false", "null", "\"\"",
    "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}\r\n", "[[[]]]", "\"\\u00e9\\ud83d\\ude00\"",
    "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"",
  };

  for (size_t i = 0; i < G_N_ELEMENTS (good); i++)
    ck_assert_msg (parses (good[i]), "refused: %s", good[i]);
}
END_TEST

START_TEST (test_refuses_malformed)
{
  const char *bad[] = {
    "", " ", "{", "}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1,]", "[1 2]", "{a:1}", "{'a':1}",
    "01", "1.", ".5", "+1", "-", "1e", "1e+", "tru", "nul", "True", "\"abc", "\"\\x\"",
    "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"", "\"a\tb\"", "\"\xc3\"",
    "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "{} {}", "[] x",
  };

  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
    ck_assert_msg (!parses (bad[i]), "accepted: %s", bad[i]);
  /* A NUL inside the length is no JSON either. */
  ck_assert (!nz_jl_parse ("{}\0", 3, NULL));
  ck_assert (!nz_jl_parse (NULL, 0, NULL));
}
END_TEST

START_TEST (test_depth_limit)
{
  char deep[2 * (NZ_JL_MAX_DEPTH + 2) + 1];
  size_t n;

  for (n = NZ_JL_MAX_DEPTH + 1; n <= NZ_JL_MAX_DEPTH + 2; n++)
    {
      memset (deep, '[', n);
      memset (deep + n, ']', n);
      ck_assert_int_eq (nz_jl_parse (deep, 2 * n, NULL), n == NZ_JL_MAX_DEPTH + 1);
    }
}
END_TEST

/* Decodes the string at the top of @json. */
static char *
decode (const char *json, size_t *len)
{
  NzJlValue v;

  ck_assert_msg (nz_jl_parse (json, strlen (json), &v), "refused: %s", json);
  return nz_jl_string (&v, len);
}

START_TEST (test_string_escapes)
{
  size_t len = 0;
  char *s;

  s = decode ("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", &len);
  ck_assert_uint_eq (len, 8);
  ck_assert_str_eq (s, "\"\\/\b\f\n\r\t");
  free (s);
  /* \u escapes become UTF-8, a surrogate pair one 4-byte sequence. */
  s = decode ("\"\\u0041\\u00e9\\u20AC\\ud83d\\ude00 raw:\xc3\xa9\"", &len);
  ck_assert_str_eq (s, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 raw:\xc3\xa9");
  ck_assert_uint_eq (len, strlen (s));
  free (s);
  /* A NUL inside is data, counted in the length. */
  s = decode ("\"a\\u0000b\"", &len);
  ck_assert_uint_eq (len, 3);
  ck_assert (memcmp (s, "a\0b", 4) == 0);
  free (s);
}
END_TEST

START_TEST (test_members)
{
  const char *doc = "{\"type\":\"stdout_delta\",\"inner\":{\"id\":\"nested\"},\"id\":\"first\","
                    "\"n\":-2.5e1,\"t\":true,\"f\":false,\"s\":\"x\",\"i\\u0064\":\"last\"}";
  NzJlValue root, v;
  double d = 0;
  char *s;

  ck_assert (nz_jl_parse (doc, strlen (doc), &root));
  ck_assert_int_eq (root.type, NZ_JL_OBJECT);
  /* Top level only, and the last of a repeated name (spelt with an escape here) wins. */
  s = nz_jl_member_string (&root, "id");
  ck_assert_str_eq (s, "last");
  free (s);
  ck_assert (nz_jl_member (&root, "inner", &v));
  ck_assert_int_eq (v.type, NZ_JL_OBJECT);
  ck_assert (!nz_jl_member (&root, "nope", &v));
  ck_assert (!nz_jl_member (&root, "typ", &v));
  ck_assert (nz_jl_member (&root, "n", &v) && nz_jl_number (&v, &d));
  ck_assert (d == -25.0);
  ck_assert (!nz_jl_number (&root, &d));
  ck_assert (nz_jl_member_bool (&root, "t", false));
  ck_assert (!nz_jl_member_bool (&root, "f", true));
  ck_assert (nz_jl_member_bool (&root, "s", true));
  ck_assert (!nz_jl_member_bool (&root, "missing", false));
  ck_assert_ptr_null (nz_jl_member_string (&root, "n"));
  ck_assert (nz_jl_member (&root, "s", &v));
  ck_assert (!nz_jl_member (&v, "s", &v));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("jsonlite");
  TCase *tc = tcase_create ("jsonlite");

  tcase_add_test (tc, test_accepts_json);
  tcase_add_test (tc, test_refuses_malformed);
  tcase_add_test (tc, test_depth_limit);
  tcase_add_test (tc, test_string_escapes);
  tcase_add_test (tc, test_members);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
