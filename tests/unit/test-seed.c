/* Unit tests for lib/seed's seed document (spec G.2): parsing, every refusal row, the digest,
 * and the root rules, including the docker outputs rule read from a handle's layout. */
#include <string.h>

#include "nz-json.h"
#include "nz-seed.h"
#include "../nz-test.h"

/* One repository around @repo_members, e.g. "\"url\":\"...\"". */
static char *
seed_with (const char *repo_members)
{
  return g_strdup_printf ("{\"name\":\"s\",\"repositories\":[{%s}]}", repo_members);
}

/* Refused as `invalid`, the message prefixed and naming @needle. */
static void
assert_refused (const char *doc, const char *needle)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzSeed) seed = nz_seed_parse (doc, -1, &error);

  ck_assert_msg (seed == NULL, "accepted: %s", doc);
  ck_assert (g_error_matches (error, NZ_SEED_ERROR, NZ_SEED_ERROR_INVALID));
  ck_assert_str_eq (nz_seed_error_code_name (error), "invalid");
  ck_assert (g_str_has_prefix (error->message, NZ_SEED_MESSAGE_PREFIX));
  ck_assert_msg (strstr (error->message, needle) != NULL, "'%s' lacks '%s'", error->message,
                 needle);
}

static void
assert_url_refused (const char *url, const char *needle)
{
  g_autofree char *members = g_strdup_printf ("\"name\":\"r\",\"url\":\"%s\"", url);
  g_autofree char *doc = seed_with (members);

  assert_refused (doc, needle);
}

START_TEST (test_parse_full)
{
  const char *doc = "{\"name\":\"app\",\"unknown\":1,\"repositories\":["
                    "{\"name\":\"api\",\"url\":\"https://git.example/api.git\",\"dir\":\"src/api\","
                    "\"ref\":\"release/1.x\",\"depth\":5},"
                    "{\"name\":\"lib\",\"url\":\"http://git.example/lib\","
                    "\"commit\":\"0123456789abcdef0123456789abcdef01234567\"},"
                    "{\"url\":\"https://git.example/tools.git\",\"path\":\"vendor/tools\"}]}";
  g_autoptr (GError) error = NULL;
  g_autoptr (NzSeed) seed = nz_seed_parse (doc, -1, &error);
  NzSeedRepo *r;

  ck_assert_msg (seed != NULL, "%s", error ? error->message : "");
  ck_assert_str_eq (seed->name, "app");
  ck_assert_uint_eq (seed->repos->len, 3);
  r = seed->repos->pdata[0];
  ck_assert_str_eq (r->name, "api");
  ck_assert_str_eq (r->dir, "src/api");
  ck_assert_str_eq (r->ref, "release/1.x");
  ck_assert_int_eq (r->depth, 5);
  ck_assert (r->commit == NULL);
  r = seed->repos->pdata[1];
  ck_assert_str_eq (r->dir, "lib"); /* dir defaults to the name */
  ck_assert_str_eq (r->commit, "0123456789abcdef0123456789abcdef01234567");
  ck_assert_int_eq (r->depth, 0);
  r = seed->repos->pdata[2];
  /* `path` is `dir`; without a name the last segment names it */
  ck_assert_str_eq (r->dir, "vendor/tools");
  ck_assert_str_eq (r->name, "tools");
}
END_TEST

START_TEST (test_url_refusals)
{
  assert_url_refused ("ssh://git@example.com/r.git", "scheme 'ssh:' is refused");
  assert_url_refused ("git@example.com:org/r.git", "scp-style SSH address");
  assert_url_refused ("example.com:org/r.git", "scheme 'example.com:' is refused");
  assert_url_refused ("git://example.com/r.git", "scheme 'git:' is refused");
  assert_url_refused ("file:///srv/r.git", "scheme 'file:' is refused");
  assert_url_refused ("ext::sh -c touch% /tmp/x", "scheme 'ext:' is refused");
  assert_url_refused ("not a url", "is not a URL");
  assert_url_refused ("/srv/r.git", "is not a URL");
  assert_url_refused ("https:example.com/r.git", "absolute https:// URL");
  assert_url_refused ("https://", "names no host");
  assert_url_refused ("https://example.com/r .git", "whitespace");
  assert_url_refused ("https://example.com/r\\t.git", "whitespace");
  assert_url_refused ("", "non-empty");
  assert_refused ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\"}]}", "non-empty");
  assert_refused ("{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":7}]}",
                  "repositories[0].url");
}
END_TEST

/* A refused credential is never echoed: it would land in logs and on stdout. */
START_TEST (test_url_credentials_not_echoed)
{
  static const char *const urls[] = {
    "https://s3cr3t-token@example.com/r.git",
    "https://user:s3cr3t-token@example.com/r.git",
    "http://:s3cr3t-token@example.com/r.git",
    "HTTPS://s3cr3t-token@example.com/r.git",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (urls); i++)
    {
      g_autofree char *members = g_strdup_printf ("\"name\":\"r\",\"url\":\"%s\"", urls[i]);
      g_autofree char *doc = seed_with (members);
      g_autoptr (GError) error = NULL;
      g_autoptr (NzSeed) seed = nz_seed_parse (doc, -1, &error);

      ck_assert_msg (seed == NULL, "accepted %s", urls[i]);
      ck_assert_msg (strstr (error->message, "credentials") != NULL, "%s", error->message);
      ck_assert_msg (strstr (error->message, "s3cr3t") == NULL, "echoed: %s", error->message);
    }
}
END_TEST

START_TEST (test_url_accepted)
{
  static const char *const urls[] = {
    "https://example.com/r.git", "http://example.com/r", "https://example.com:8443/a/b.git",
    "https://seed.test/$(touch${IFS}x)", /* odd but inert: it is only ever an argument */
  };

  for (gsize i = 0; i < G_N_ELEMENTS (urls); i++)
    {
      g_autoptr (GError) error = NULL;

      ck_assert_msg (nz_seed_check_url (urls[i], "url", &error), "%s: %s", urls[i],
                     error ? error->message : "");
    }
}
END_TEST

START_TEST (test_field_refusals)
{
  const char *u = "\"url\":\"https://example.com/r.git\"";
  g_autofree char *d1 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"../escape\"", u);
  g_autofree char *d2 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"/abs\"", u);
  g_autofree char *d3 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"a//b\"", u);
  g_autofree char *d4 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"a/./b\"", u);
  g_autofree char *d5 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"a b\"", u);
  g_autofree char *d6 = g_strdup_printf ("\"name\":\"r\",%s,\"dir\":\"x\",\"path\":\"y\"", u);
  g_autofree char *r1 = g_strdup_printf ("\"name\":\"r\",%s,\"ref\":\"--upload-pack=x\"", u);
  g_autofree char *r2 = g_strdup_printf ("\"name\":\"r\",%s,\"ref\":\"a..b\"", u);
  g_autofree char *r3 = g_strdup_printf ("\"name\":\"r\",%s,\"ref\":\"a;touch\"", u);
  g_autofree char *c1 = g_strdup_printf ("\"name\":\"r\",%s,\"commit\":\"abc\"", u);
  g_autofree char *c2 = g_strdup_printf (
      "\"name\":\"r\",%s,\"commit\":\"0123456789ABCDEF0123456789abcdef01234567\"", u);
  g_autofree char *p0 = g_strdup_printf ("\"name\":\"r\",%s,\"depth\":0", u);
  g_autofree char *p1 = g_strdup_printf ("\"name\":\"r\",%s,\"depth\":1.5", u);
  g_autofree char *p2 = g_strdup_printf ("\"name\":\"r\",%s,\"depth\":\"1\"", u);
  g_autofree char *p3 = g_strdup_printf (
      "\"name\":\"r\",%s,\"depth\":1,\"commit\":\"0123456789abcdef0123456789abcdef01234567\"", u);
  g_autofree char *n1 = g_strdup_printf ("\"name\":\"Bad\",%s", u);
  g_autofree char *n2 = g_strdup_printf ("%s,\"dir\":\"a/Not_A_Label\"", u);
  g_autofree char *doc = NULL;

#define REFUSED(members, needle)                                                                   \
  do                                                                                               \
    {                                                                                              \
      g_free (doc);                                                                                \
      doc = seed_with (members);                                                                   \
      assert_refused (doc, needle);                                                                \
    }                                                                                              \
  while (0)
  REFUSED (d1, "repositories[0].dir");
  REFUSED (d2, "relative path");
  REFUSED (d3, "repositories[0].dir");
  REFUSED (d4, "repositories[0].dir");
  REFUSED (d5, "repositories[0].dir");
  REFUSED (d6, "dir or path, not both");
  REFUSED (r1, "repositories[0].ref");
  REFUSED (r2, "repositories[0].ref");
  REFUSED (r3, "repositories[0].ref");
  REFUSED (c1, "repositories[0].commit");
  REFUSED (c2, "repositories[0].commit");
  REFUSED (p0, "repositories[0].depth");
  REFUSED (p1, "repositories[0].depth");
  REFUSED (p2, "repositories[0].depth");
  REFUSED (p3, "beside commit");
  REFUSED (n1, "repositories[0].name");
  REFUSED (n2, "repositories[0].name");
#undef REFUSED
  assert_refused ("{\"name\":\"Seed\",\"repositories\":[]}", "name:");
  assert_refused ("{\"repositories\":[]}", "name:");
  assert_refused ("{\"name\":\"s\",\"repositories\":[]}", "repositories: must be a non-empty");
  assert_refused ("{\"name\":\"s\"}", "repositories: must be a non-empty");
  assert_refused ("{\"name\":\"s\",\"repositories\":[1]}", "repositories[0]: must be an object");
  assert_refused ("[]", "not a JSON object");
  assert_refused ("{", "not a JSON object");
}
END_TEST

static void
assert_pair_refused (const char *dir_a, const char *dir_b, const char *needle)
{
  g_autofree char *doc = g_strdup_printf (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"a\",\"url\":\"https://h.example/a\","
      "\"dir\":\"%s\"},{\"name\":\"b\",\"url\":\"https://h.example/b\",\"dir\":\"%s\"}]}",
      dir_a, dir_b);

  assert_refused (doc, needle);
}

START_TEST (test_reserved_and_nested_dirs)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzSeed) ok = NULL;

  assert_pair_refused ("vendor", "vendor/lib", "overlaps");
  assert_pair_refused ("vendor/lib", "vendor", "overlaps");
  assert_pair_refused ("same", "same", "overlaps");
  assert_url_refused ("https://h.example/a\",\"dir\":\".namzu/app", ".namzu is reserved");
  assert_url_refused ("https://h.example/a\",\"dir\":\".namzu", ".namzu is reserved");
  assert_url_refused ("https://h.example/a\",\"dir\":\"app.namzu-partial-x", "reserved for "
                                                                             "clones in progress");
  assert_url_refused ("https://h.example/a\",\"dir\":\"x/app.namzu-partial-0a0a0a0a0a0a",
                      "reserved for clones in progress");
  assert_refused ("{\"name\":\"s\",\"repositories\":[{\"name\":\"a\",\"url\":\"https://h/a\"},"
                  "{\"name\":\"a\",\"url\":\"https://h/b\",\"dir\":\"b\"}]}",
                  "'a' is already used");
  /* Siblings that share a prefix are not nested. */
  ok = nz_seed_parse ("{\"name\":\"s\",\"repositories\":[{\"name\":\"a\",\"url\":\"https://h/a\","
                      "\"dir\":\"vendor\"},{\"name\":\"b\",\"url\":\"https://h/b\",\"dir\":"
                      "\"vendor-lib\"},{\"name\":\"c\",\"url\":\"https://h/c\",\"dir\":"
                      "\"vendor.d/x\"}]}",
                      -1, &error);
  ck_assert_msg (ok != NULL, "%s", error ? error->message : "");
}
END_TEST

START_TEST (test_digest)
{
  g_autoptr (NzSeed) a = nz_seed_parse (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"https://h.example/r.git\"},"
      "{\"name\":\"x\",\"url\":\"http://h.example/x\",\"ref\":\"main\",\"dir\":\"sub/x\","
      "\"depth\":3}]}",
      -1, NULL);
  g_autoptr (NzSeed) b = nz_seed_parse (
      "{\"repositories\":[{\"url\":\"https://h.example/r.git\",\"name\":\"r\"},"
      "{\"depth\":3,\"dir\":\"sub/x\",\"ref\":\"main\",\"url\":\"http://h.example/x\","
      "\"name\":\"x\"}],\"name\":\"s\"}",
      -1, NULL);
  g_autoptr (NzSeed) c = nz_seed_parse (
      "{\"name\":\"s\",\"repositories\":[{\"name\":\"r\",\"url\":\"https://h.example/r.git\"},"
      "{\"name\":\"x\",\"url\":\"http://h.example/x\",\"ref\":\"main\",\"dir\":\"sub/x\","
      "\"depth\":4}]}",
      -1, NULL);
  g_autofree char *da = NULL, *db = NULL, *dc = NULL;

  ck_assert (a != NULL && b != NULL && c != NULL);
  da = nz_seed_digest (a);
  db = nz_seed_digest (b);
  dc = nz_seed_digest (c);
  /* sha256 of {"name":"s","repositories":[["r","https://h.example/r.git",null,null,"r",null],
   * ["x","http://h.example/x","main",null,"sub/x",3]]}, as the reference's JSON.stringify
   * writes it. */
  ck_assert_str_eq (da, "432b4af40f8053c51c31dfc53bd1c49cc89aedb0f69cbad3f9a34a9ce6c2747a");
  ck_assert_str_eq (da, db);
  ck_assert_str_ne (da, dc);
}
END_TEST

START_TEST (test_root)
{
  static const char *const bad[] = { "relative", "", "/a/../b", "/a/..", "/a b", "/a\tb", "/a\nb" };
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_clear_error (&error);
      ck_assert_msg (!nz_seed_check_root (bad[i], &error), "accepted '%s'", bad[i]);
      ck_assert (g_error_matches (error, NZ_SEED_ERROR, NZ_SEED_ERROR_INVALID));
      ck_assert (g_str_has_prefix (error->message, "sandbox seed: root "));
    }
  g_clear_error (&error);
  ck_assert (!nz_seed_check_root (NULL, &error));
  ck_assert (nz_seed_check_root ("/", NULL));
  ck_assert (nz_seed_check_root ("/home/namzu/src/", NULL));
  ck_assert (nz_seed_check_root ("/a/..b/c...", NULL));
}
END_TEST

/* The layout rule against the directory the backend's layout says the host collects (docker's
 * outputs bind at its default and at a custom path, however the root is spelt); which
 * directory that is for a given handle is test-docker-argv's test_layout. */
START_TEST (test_root_on_docker_outputs)
{
  static const char *const on_outputs[]
      = { "/mnt/user-data/outputs", "/mnt/user-data/outputs/", "/mnt/user-data/outputs/seed",
          "//mnt//user-data/outputs/a/b", "/mnt/user-data/./outputs/seed",
          "/./mnt/user-data/outputs/." };
  static const char *const collected_default[]
      = { "/mnt/user-data/outputs", "/mnt/user-data/outputs/", "//mnt/user-data/./outputs" };
  const char *bind = "docker outputs bind";
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (on_outputs); i++)
    for (gsize k = 0; k < G_N_ELEMENTS (collected_default); k++)
      {
        g_clear_error (&error);
        ck_assert_msg (!nz_seed_check_root_layout (on_outputs[i], collected_default[k], bind,
                                                   &error),
                       "accepted %s (%zu)", on_outputs[i], k);
        ck_assert (g_error_matches (error, NZ_SEED_ERROR, NZ_SEED_ERROR_INVALID));
        ck_assert_msg (strstr (error->message, "docker outputs bind (/mnt/user-data/outputs)")
                           != NULL,
                       "%s", error->message);
      }
  g_clear_error (&error);
  ck_assert (!nz_seed_check_root_layout ("/data/out/repos", "/data/out/", bind, &error));
  g_clear_error (&error);
  ck_assert (!nz_seed_check_root_layout ("/data/out/repos", "/data/out", bind, &error));
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data/outputs", "/data/out/", bind, NULL));
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data/outputs", "/data/out", bind, NULL));
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data/scratch/seed", "/mnt/user-data/outputs",
                                        bind, NULL));
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data/outputs-x", "/mnt/user-data/outputs",
                                        bind, NULL));
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data", "/mnt/user-data/outputs", bind, NULL));
  /* Nothing collected (bwrap's outputs is the host's own directory): no rule. */
  ck_assert (nz_seed_check_root_layout ("/mnt/user-data/outputs", NULL, NULL, NULL));
}
END_TEST

START_TEST (test_error_code_names)
{
  g_autoptr (GError) e = g_error_new_literal (NZ_SEED_ERROR, NZ_SEED_ERROR_DRIFT, "x");
  g_autoptr (GError) f = g_error_new_literal (NZ_SEED_ERROR, NZ_SEED_ERROR_CLONE_FAILED, "x");
  g_autoptr (GError) t = g_error_new_literal (NZ_SEED_ERROR, NZ_SEED_ERROR_TOOL_MISSING, "x");
  g_autoptr (GError) o = g_error_new_literal (G_IO_ERROR, G_IO_ERROR_FAILED, "x");

  ck_assert_str_eq (nz_seed_error_code_name (e), "drift");
  ck_assert_str_eq (nz_seed_error_code_name (f), "clone-failed");
  ck_assert_str_eq (nz_seed_error_code_name (t), "tool-missing");
  ck_assert (nz_seed_error_code_name (o) == NULL);
  ck_assert (nz_seed_is_commit_id ("0123456789abcdef0123456789abcdef01234567"));
  ck_assert (
      nz_seed_is_commit_id ("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
  ck_assert (!nz_seed_is_commit_id ("0123456789abcdef0123456789abcdef0123456"));
  ck_assert (!nz_seed_is_commit_id ("-123456789abcdef0123456789abcdef01234567"));
  ck_assert (!nz_seed_is_commit_id (NULL));
}
END_TEST

static Suite *
seed_suite (void)
{
  Suite *s = suite_create ("seed");
  TCase *tc = tcase_create ("document");

  tcase_add_test (tc, test_parse_full);
  tcase_add_test (tc, test_url_refusals);
  tcase_add_test (tc, test_url_credentials_not_echoed);
  tcase_add_test (tc, test_url_accepted);
  tcase_add_test (tc, test_field_refusals);
  tcase_add_test (tc, test_reserved_and_nested_dirs);
  tcase_add_test (tc, test_digest);
  tcase_add_test (tc, test_root);
  tcase_add_test (tc, test_root_on_docker_outputs);
  tcase_add_test (tc, test_error_code_names);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return nz_test_run (seed_suite ());
}
