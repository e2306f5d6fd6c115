/* Unit tests for lib/core (knobs, errors, JSON helpers, base64) and lib/tls (token compare,
 * uuid). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-base64.h"
#include "nz-cli.h"
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
  /* Whole byte strings: nothing after an embedded NUL is ignored, the length counts. */
  ck_assert (nz_token_equal_len ("abc", 3, "abc\0x", 3));
  ck_assert (!nz_token_equal_len ("abc", 3, "abc\0x", 5));
  ck_assert (!nz_token_equal_len ("abc", 3, "abc\0", 4));
  ck_assert (!nz_token_equal_len ("ab\0c", 4, "ab\0d", 4));
  ck_assert (nz_token_equal_len ("ab\0c", 4, "ab\0c", 4));
  ck_assert (nz_token_equal_len (NULL, 0, "", 0));
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

/* ---- long plain strings: nz-json swaps them for placeholders around json-glib ---- */

static char *
glib_generate (JsonNode *node)
{
  g_autoptr (JsonGenerator) gen = json_generator_new ();

  json_generator_set_root (gen, node);
  return json_generator_to_data (gen, NULL);
}

/* nz_json_parse_object() must give what json-glib alone gives: compared through json-glib's
 * own serialisation of both trees. */
static void
assert_parses_like_glib (const char *doc)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) ours = nz_json_parse_object (doc, -1, &error);
  g_autoptr (JsonNode) ours_node = json_node_new (JSON_NODE_OBJECT);
  g_autofree char *want = NULL, *got = NULL;

  ck_assert_msg (ours != NULL, "%s", error != NULL ? error->message : "");
  ck_assert (json_parser_load_from_data (parser, doc, -1, NULL));
  want = glib_generate (json_parser_get_root (parser));
  json_node_set_object (ours_node, ours);
  got = glib_generate (ours_node);
  ck_assert_uint_eq (strlen (got), strlen (want));
  ck_assert (strcmp (got, want) == 0);
}

static char *
filled (gsize len, char c)
{
  char *s = g_malloc (len + 1);

  memset (s, c, len);
  s[len] = '\0';
  return s;
}

START_TEST (test_json_long_strings)
{
  g_autofree char *b64 = NULL, *other = NULL, *small = filled (4095, 'x');
  g_autofree char *raw = filled (300000, 0x5a);
  g_autofree char *doc = NULL;

  b64 = g_base64_encode ((const guint8 *)raw, 300000);
  other = filled (5000, 'q');
  /* One, several (more than the four it elides), nested in arrays and objects, beside short
   * strings, numbers, booleans and nulls; a key as long as a value. */
  guint before = nz_json_elided_count ();

  doc = g_strdup_printf ("{\"op\":\"write-file\",\"body\":{\"path\":\"/w/a\",\"content\":\"%s\","
                         "\"encoding\":\"base64\",\"part\":{\"offset\":262144,\"final\":true}}}",
                         b64);
  assert_parses_like_glib (doc);
  /* That took the long-string path (and did not fall back to the whole parse). */
  ck_assert_uint_eq (nz_json_elided_count (), before + 1);
  g_free (doc);
  doc = g_strdup_printf ("{\"a\":[\"%s\",\"%s\",{\"b\":\"%s\"}],\"c\":\"%s\",\"d\":\"%s\","
                         "\"%s\":1.5,\"e\":null,\"f\":false,\"g\":\"%s\"}",
                         other, b64, other, small, b64, other, other);
  assert_parses_like_glib (doc);
  g_free (doc);
  /* Not plain: an escape, a non-ASCII character, a control character escaped. */
  doc = g_strdup_printf ("{\"a\":\"%s\\\"%s\",\"b\":\"%s\xc3\xa9\",\"c\":\"%s\\u0001\"}", other,
                         other, other, other);
  assert_parses_like_glib (doc);
  g_free (doc);
  /* The same placeholder text a caller could send is just a string. */
  doc = g_strdup_printf ("{\"a\":\"nz-elided-00000000000000000000000000000\",\"b\":\"%s\"}", other);
  assert_parses_like_glib (doc);
}
END_TEST

/* Nesting: a document exactly NZ_JSON_MAX_DEPTH deep parses; one level more is refused by
 * name before json-glib (which recurses) sees it, on every entry point; brackets inside
 * strings do not count. */
static char *
nested (int depth, const char *open, const char *close)
{
  GString *s = g_string_new ("{\"a\":");

  for (int i = 1; i < depth; i++)
    g_string_append (s, open);
  g_string_append (s, "1");
  for (int i = 1; i < depth; i++)
    g_string_append (s, close);
  g_string_append (s, "}");
  return g_string_free (s, FALSE);
}

START_TEST (test_json_depth_bound)
{
  g_autofree char *at = nested (NZ_JSON_MAX_DEPTH, "[", "]");
  g_autofree char *over = nested (NZ_JSON_MAX_DEPTH + 1, "[", "]");
  g_autofree char *obj_over = nested (NZ_JSON_MAX_DEPTH + 1, "{\"k\":", "}");
  g_autofree char *in_string = g_strnfill (100000, '[');
  g_autofree char *quoted = g_strdup_printf ("{\"a\":\"%s\\\"\"}", in_string);
  g_autoptr (JsonObject) ok = NULL, ok2 = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) error = NULL;

  ok = nz_json_parse_object (at, -1, &error);
  ck_assert_msg (ok != NULL, "%s", error != NULL ? error->message : "");
  ck_assert (nz_json_parse_object (over, -1, &error) == NULL);
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_PROTOCOL));
  ck_assert_str_eq (error->message, "json_too_deep: nesting deeper than 64 levels");
  g_clear_error (&error);
  ck_assert (nz_json_parse_object (obj_over, -1, &error) == NULL);
  ck_assert (g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ": "));
  g_clear_error (&error);
  ok2 = nz_json_parse_object (quoted, -1, &error);
  ck_assert_msg (ok2 != NULL, "%s", error != NULL ? error->message : "");
  /* The generic loader, for documents that need not be objects. */
  ck_assert (nz_json_check_depth (at, -1, NULL));
  ck_assert (nz_json_check_depth (quoted, -1, NULL));
  ck_assert (nz_json_parser_load (parser, at, -1, &error));
  ck_assert (!nz_json_check_depth (over, -1, NULL));
  /* over + 5 is its array alone: NZ_JSON_MAX_DEPTH deep, the limit itself. */
  ck_assert (nz_json_parser_load (parser, over + 5, (gssize)strlen (over + 5) - 1, &error));
  ck_assert (!nz_json_parser_load (parser, obj_over, -1, &error));
  ck_assert (g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ": "));
  g_clear_error (&error);
  /* What crashed the agent and the worker: half a MiB of '['. */
  {
    g_autofree char *flood = g_strnfill (512 * 1024, '[');

    ck_assert (!nz_json_parser_load (parser, flood, -1, &error));
    ck_assert (g_str_has_prefix (error->message, NZ_JSON_TOO_DEEP_CODE ": "));
  }
}
END_TEST

/* Text json-glib would refuse through one of its leaking error paths (a value after the root,
 * a broken escape) is refused before json-glib (the ASan build's leak check fails this test without
 * the refusal); a lone scalar and an object still load, and brackets inside a string do not count.
 */
START_TEST (test_json_scalar_then_container)
{
  static const char *const refused[]
      = { "2{\"a\":\"b\"}", "1 {\"a\":[1]}", " null[1,2]",      "\"s\"{\"k\":{\"x\":0}}",
          "\t{\t}{}",       "[1] [2]",       "{\"a\":\"}\"} x", "{\"\\uDA\"\\u!exttecop" };

  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      g_autoptr (GError) error = NULL;

      ck_assert_msg (!nz_json_parser_load (parser, refused[i], -1, &error), "%s", refused[i]);
      ck_assert_str_eq (error->message, "invalid JSON: not RFC 8259 JSON");
    }
  {
    g_autoptr (JsonParser) parser = json_parser_new ();

    ck_assert (nz_json_parser_load (parser, " 42 ", -1, NULL));
    ck_assert (nz_json_parser_load (parser, "\"a{b\"", -1, NULL));
    ck_assert (nz_json_parser_load (parser, "{\"a\":[1]}", -1, NULL));
    ck_assert (nz_json_parser_load (parser, " {\"a\":\"}{\"}\n", -1, NULL));
  }
}
END_TEST

START_TEST (test_json_long_strings_errors)
{
  g_autofree char *other = filled (8000, 'q');
  g_autofree char *bad = NULL;
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autoptr (GError) glib_error = NULL, error = NULL;
  g_autoptr (JsonObject) obj = NULL;
  g_autofree char *want = NULL;

  /* A mistake after a long string is refused by the strict reader before json-glib (whose
   * error paths leak), with the same refusal as without the long string. */
  bad = g_strdup_printf ("{\"a\":\"%s\",\"b\":tru}", other);
  ck_assert (!json_parser_load_from_data (parser, bad, -1, &glib_error));
  obj = nz_json_parse_object (bad, -1, &error);
  ck_assert (obj == NULL);
  want = g_strdup ("invalid JSON: not RFC 8259 JSON");
  ck_assert_str_eq (error->message, want);
  g_clear_error (&error);
  g_free (bad);
  /* Unterminated, and a trailing value, as before. */
  bad = g_strdup_printf ("{\"a\":\"%s", other);
  ck_assert (nz_json_parse_object (bad, -1, &error) == NULL);
  ck_assert (g_str_has_prefix (error->message, "invalid JSON: "));
  g_clear_error (&error);
  g_free (bad);
  bad = g_strdup_printf ("{\"a\":\"%s\"} 1", other);
  ck_assert (nz_json_parse_object (bad, -1, &error) == NULL);
  ck_assert_str_eq (error->message, "expected exactly one JSON object");
  g_clear_error (&error);
  g_free (bad);
  bad = g_strdup_printf ("{\"a\":\"%s\\", other);
  ck_assert (nz_json_parse_object (bad, -1, &error) == NULL);
  ck_assert (g_str_has_prefix (error->message, "invalid JSON: "));
}
END_TEST

START_TEST (test_json_long_strings_generate)
{
  g_autofree char *raw = filled (200000, 0x33);
  g_autofree char *b64 = g_base64_encode ((const guint8 *)raw, 200000);
  g_autofree char *other = filled (6000, 'r');
  g_autoptr (JsonObject) env = json_object_new ();
  JsonObject *body = json_object_new ();
  JsonArray *list = json_array_new ();
  g_autoptr (JsonNode) root = json_node_new (JSON_NODE_OBJECT);
  g_autoptr (JsonObject) sealed = NULL;
  g_autofree char *sealed_doc = NULL;
  g_autofree char *want = NULL, *got = NULL, *again = NULL;
  gsize len = 0;
  guint before;

  json_array_add_string_element (list, other);
  json_array_add_string_element (list, "short");
  json_array_add_string_element (list, b64);
  json_object_set_string_member (body, "content", b64);
  json_object_set_string_member (body, "escaped", "\"quoted\"\n");
  json_object_set_array_member (body, "list", list);
  json_object_set_string_member (env, "op", "write-file");
  json_object_set_object_member (env, "body", body);
  json_node_set_object (root, env);
  want = glib_generate (root);
  before = nz_json_elided_count ();
  got = nz_json_to_string (root, &len);
  ck_assert_uint_eq (nz_json_elided_count (), before + 1);
  ck_assert_uint_eq (len, strlen (want));
  ck_assert (strcmp (got, want) == 0);
  /* The caller's tree is as it was. */
  ck_assert_str_eq (json_object_get_string_member (body, "content"), b64);
  ck_assert_str_eq (json_array_get_string_element (list, 0), other);
  again = glib_generate (root);
  ck_assert (strcmp (again, want) == 0);

  /* One node in two places (a reference added twice): the output is json-glib's and the
   * node keeps its text. */
  {
    g_autoptr (JsonNode) shared = json_node_new (JSON_NODE_VALUE);
    g_autoptr (JsonNode) tree = json_node_new (JSON_NODE_OBJECT);
    JsonObject *o = json_object_new ();
    JsonArray *a = json_array_new ();
    g_autofree char *w = NULL, *g = NULL;

    json_node_set_string (shared, other);
    json_object_set_member (o, "x", json_node_ref (shared));
    json_array_add_element (a, json_node_ref (shared));
    json_object_set_array_member (o, "y", a);
    json_node_take_object (tree, o);
    w = glib_generate (tree);
    g = nz_json_to_string (tree, NULL);
    ck_assert (strcmp (g, w) == 0);
    ck_assert_str_eq (json_node_get_string (shared), other);
  }

  /* A sealed subtree (as parsed) inside a new envelope: serialised as it is. */
  sealed_doc = g_strdup_printf ("{\"content\":\"%s\"}", b64);
  sealed = nz_json_parse_object (sealed_doc, -1, NULL);
  ck_assert (sealed != NULL);
  json_object_set_object_member (env, "sealed", json_object_ref (sealed));
  g_free (want);
  g_free (got);
  want = glib_generate (root);
  got = nz_json_to_string (root, NULL);
  ck_assert (strcmp (got, want) == 0);
}
END_TEST

/* ---- nz_cli_main: the one place a tool's GError becomes its report and exit status ---- */

static GError *cli_case_error; /* what the tool under test fails with; NULL: it succeeds */

static gboolean
cli_case_tool (int argc, char **argv, GCancellable *cancellable, GError **error)
{
  ck_assert (G_IS_CANCELLABLE (cancellable));
  if (cli_case_error == NULL)
    return TRUE;
  g_propagate_error (error, g_steal_pointer (&cli_case_error));
  return FALSE;
}

static const char *
cli_case_code_name (const GError *error)
{
  return error->code == 7 ? "seven" : "other";
}

/* Runs nz_cli_main on @e in a child with stdout and stderr captured. */
static int
cli_case (GError *e, gboolean json, gboolean invalid_is_usage, char **out, char **err)
{
  char out_path[] = "/tmp/nz-cli-out-XXXXXX", err_path[] = "/tmp/nz-cli-err-XXXXXX";
  int ofd = mkstemp (out_path), efd = mkstemp (err_path), status = -1;
  pid_t pid;

  ck_assert (ofd >= 0 && efd >= 0);
  pid = fork ();
  ck_assert (pid >= 0);
  if (pid == 0)
    {
      char *argv[] = { (char *)"namzu-test", NULL };

      dup2 (ofd, STDOUT_FILENO);
      dup2 (efd, STDERR_FILENO);
      cli_case_error = e;
      nz_cli_set_json_errors (json);
      nz_cli_set_invalid_is_usage (invalid_is_usage);
      nz_cli_set_code_names (g_quark_from_static_string ("nz-test-domain"), cli_case_code_name);
      fflush (NULL);
      _exit (nz_cli_main ("namzu-test", cli_case_tool, 1, argv));
    }
  ck_assert_int_eq (waitpid (pid, &status, 0), pid);
  if (e != NULL)
    g_error_free (e);
  ck_assert (g_file_get_contents (out_path, out, NULL, NULL));
  ck_assert (g_file_get_contents (err_path, err, NULL, NULL));
  unlink (out_path);
  unlink (err_path);
  close (ofd);
  close (efd);
  ck_assert (WIFEXITED (status));
  return WEXITSTATUS (status);
}

START_TEST (test_cli_main_report)
{
  GQuark test_domain = g_quark_from_static_string ("nz-test-domain");
  g_autofree char *o1 = NULL, *e1 = NULL, *o2 = NULL, *e2 = NULL, *o3 = NULL, *e3 = NULL;
  g_autofree char *o4 = NULL, *e4 = NULL, *o5 = NULL, *e5 = NULL, *o6 = NULL, *e6 = NULL;
  g_autofree char *o7 = NULL, *e7 = NULL, *o8 = NULL, *e8 = NULL;

  ck_assert_int_eq (cli_case (NULL, TRUE, FALSE, &o1, &e1), 0);
  ck_assert_str_eq (o1, "");
  ck_assert_str_eq (e1, "");
  /* A status the tool already explained (a command's own): nothing more is said. */
  ck_assert_int_eq (cli_case (g_error_new_literal (NZ_CLI_EXIT, 124, ""), TRUE, FALSE, &o2, &e2),
                    124);
  ck_assert_str_eq (o2, "");
  ck_assert_str_eq (e2, "");
  /* A usage mistake: the line and the Try line, never an error object. */
  ck_assert_int_eq (cli_case (g_error_new_literal (G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                                                   "--x wants a number"),
                              TRUE, FALSE, &o3, &e3),
                    2);
  ck_assert_str_eq (o3, "");
  ck_assert_str_eq (e3, "namzu-test: --x wants a number\n"
                        "Try 'namzu-test --help' for more information.\n");
  /* A failure: the line, and the error object on stdout while JSON errors are on. */
  ck_assert_int_eq (cli_case (g_error_new_literal (NZ_ERROR, NZ_ERROR_NOT_FOUND, "no such sandbox"),
                              TRUE, FALSE, &o4, &e4),
                    1);
  ck_assert_str_eq (o4, "{\"error\":{\"code\":\"not_found\",\"message\":\"no such sandbox\"}}\n");
  ck_assert_str_eq (e4, "namzu-test: no such sandbox\n");
  ck_assert_int_eq (
      cli_case (g_error_new_literal (NZ_ERROR, NZ_ERROR_NOT_FOUND, "gone"), FALSE, FALSE, &o5, &e5),
      1);
  ck_assert_str_eq (o5, "");
  ck_assert_str_eq (e5, "namzu-test: gone\n");
  /* INVALID_ARGS exits 2; the Try line only where the refusal is of the flags or config. */
  ck_assert_int_eq (cli_case (g_error_new_literal (NZ_ERROR, NZ_ERROR_INVALID_ARGS, "bad handle"),
                              TRUE, FALSE, &o6, &e6),
                    2);
  ck_assert_str_eq (e6, "namzu-test: bad handle\n");
  ck_assert (strstr (o6, "\"invalid_args\"") != NULL);
  ck_assert_int_eq (cli_case (g_error_new_literal (NZ_ERROR, NZ_ERROR_INVALID_ARGS, "--cpus: no"),
                              TRUE, TRUE, &o7, &e7),
                    2);
  ck_assert_str_eq (e7, "namzu-test: --cpus: no\nTry 'namzu-test --help' for more information.\n");
  /* A tier's own codes reach the error object. */
  ck_assert_int_eq (
      cli_case (g_error_new_literal (test_domain, 7, "policy"), TRUE, FALSE, &o8, &e8), 1);
  ck_assert_str_eq (o8, "{\"error\":{\"code\":\"seven\",\"message\":\"policy\"}}\n");
}
END_TEST

/* Every control character leaves as an escape, U+001F included (json-glib 1.6 writes that one
 * raw, which a strict peer refuses: namzu-exec-full's requests were dropped by the agent),
 * also beside a long string the serialiser splices in, and it comes back as it went. */
START_TEST (test_json_escapes_every_control)
{
  for (int c = 1; c < 0x20; c++)
    for (int with_long = 0; with_long < (c == 0x1f ? 2 : 1); with_long++)
      {
        char s[] = { 'q', (char)c, 'z', 0 };
        g_autoptr (JsonObject) o = json_object_new ();
        g_autoptr (JsonObject) back = NULL;
        g_autofree char *text = NULL, *long_value = g_strnfill (8192, 'x');
        gsize len = 0;

        json_object_set_string_member (o, "a", s);
        if (with_long)
          json_object_set_string_member (o, "long", long_value);
        text = nz_json_object_to_string (o, &len);
        ck_assert_uint_eq (strlen (text), len);
        for (gsize i = 0; i < len; i++)
          ck_assert_msg ((guchar)text[i] >= 0x20, "raw 0x%02x in %.40s", (guchar)text[i], text);
        back = nz_json_parse_object (text, (gssize)len, NULL);
        ck_assert (back != NULL);
        ck_assert_str_eq (nz_json_get_string (back, "a"), s);
      }
}
END_TEST

/* nz_json_pick: what a tool relays of an untrusted reply is its schema's members, typed. */
START_TEST (test_json_pick)
{
  static const NzJsonPick inner[] = { { "n", NZ_JSON_PICK_INT }, { NULL } };
  static const NzJsonPick schema[] = {
    { "s", NZ_JSON_PICK_STRING },
    { "i", NZ_JSON_PICK_INT },
    { "b", NZ_JSON_PICK_BOOL },
    { "strs", NZ_JSON_PICK_STRINGS },
    { "objs", NZ_JSON_PICK_OBJECTS, inner },
    { "big", NZ_JSON_PICK_INT },
    { "frac", NZ_JSON_PICK_INT },
    { "istr", NZ_JSON_PICK_INT },
    { "bstr", NZ_JSON_PICK_BOOL },
    { "snum", NZ_JSON_PICK_STRING },
    { "missing", NZ_JSON_PICK_STRING },
    { NULL },
  };
  g_autoptr (JsonObject) in = nz_json_parse_object (
      "{\"s\":\"x\",\"i\":-3,\"b\":true,\"strs\":[\"a\",5,null,\"b\"],"
      "\"objs\":[{\"n\":1,\"evil\":2},7,{\"n\":\"x\"}],\"big\":1e300,\"frac\":1.5,"
      "\"istr\":\"4\",\"bstr\":\"true\",\"snum\":5,\"evil\":\"pwned\"}",
      -1, NULL);
  g_autoptr (JsonObject) out = nz_json_pick (in, schema);
  g_autofree char *text = nz_json_object_to_string (out, NULL);

  ck_assert_str_eq (text, "{\"s\":\"x\",\"i\":-3,\"b\":true,\"strs\":[\"a\",\"b\"],"
                          "\"objs\":[{\"n\":1},{}]}");
  /* Numbers no integer type holds are neither cast (UB) nor taken: the fuzzer's {"op":1e35}. */
  {
    g_autoptr (JsonObject) huge
        = nz_json_parse_object ("{\"op\":1e35,\"n\":-1e300,\"i\":9.3e18}", -1, NULL);
    g_autofree char *op = nz_json_js_string (nz_json_member (huge, "op"));
    g_autofree char *n = nz_json_js_string (nz_json_member (huge, "n"));
    static const NzJsonPick ints[] = { { "i", NZ_JSON_PICK_INT }, { NULL } };
    g_autoptr (JsonObject) picked = nz_json_pick (huge, ints);

    ck_assert (strstr (op, "e+3") != NULL);
    ck_assert (g_str_has_prefix (n, "-1"));
    ck_assert_uint_eq (json_object_get_size (picked), 0);
  }
  {
    g_autoptr (JsonObject) none = nz_json_pick (NULL, schema);

    ck_assert_uint_eq (json_object_get_size (none), 0);
  }
}
END_TEST

START_TEST (test_json_unknown_member)
{
  static const char *const known[] = { "a", "b", NULL };
  g_autoptr (JsonObject) ok = nz_json_parse_object ("{\"b\":1,\"a\":null}", -1, NULL);
  g_autoptr (JsonObject) other = nz_json_parse_object ("{\"a\":1,\"c\":2}", -1, NULL);
  g_autoptr (JsonObject) empty = nz_json_parse_object ("{}", -1, NULL);

  ck_assert_ptr_null (nz_json_unknown_member (ok, known));
  ck_assert_str_eq (nz_json_unknown_member (other, known), "c");
  ck_assert_ptr_null (nz_json_unknown_member (empty, known));
  ck_assert_ptr_null (nz_json_unknown_member (NULL, known));
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
  tcase_add_test (tc, test_cli_main_report);
  tcase_add_test (tc, test_js_truthy);
  tcase_add_test (tc, test_base64_matches_glib);
  tcase_add_test (tc, test_base64_refuses);
  tcase_add_test (tc, test_json_long_strings);
  tcase_add_test (tc, test_json_long_strings_errors);
  tcase_add_test (tc, test_json_depth_bound);
  tcase_add_test (tc, test_json_scalar_then_container);
  tcase_add_test (tc, test_json_long_strings_generate);
  tcase_add_test (tc, test_json_escapes_every_control);
  tcase_add_test (tc, test_json_pick);
  tcase_add_test (tc, test_json_unknown_member);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
