/* lib/kube/nz-kube-proxy: HTTPS_PROXY and NO_PROXY read as kubectl (Go's ProxyFromEnvironment)
 * reads them: which requests go through the proxy, which go direct, and which proxy values are
 * refused. Pure function; the client's use of it against a real CONNECT proxy is in
 * test-kube-client. */
#include <string.h>

#include "nz-kube-proxy.h"
#include "../nz-test.h"

static const char P[] = "http://proxy.example:3128";

/* The proxy for @host:@port, or "direct". */
static char *
via (const char *host, guint port, const char *https_proxy, const char *no_proxy)
{
  g_autoptr (GError) error = NULL;
  char *p = nz_kube_proxy_for (host, port, https_proxy, no_proxy, &error);

  ck_assert_msg (error == NULL, "%s", error->message);
  return p != NULL ? p : g_strdup ("direct");
}

static void
assert_via (const char *host, guint port, const char *no_proxy, const char *want)
{
  g_autofree char *got = via (host, port, P, no_proxy);

  ck_assert_msg (g_str_equal (got, want), "%s:%u with NO_PROXY=%s: %s, not %s", host, port,
                 no_proxy ? no_proxy : "(unset)", got, want);
}

START_TEST (test_no_proxy_rules)
{
  /* no NO_PROXY: everything but loopback goes through the proxy */
  assert_via ("api.cluster.example", 443, NULL, P);
  assert_via ("10.0.0.1", 6443, NULL, P);
  assert_via ("localhost", 6443, NULL, "direct");
  assert_via ("LOCALHOST", 6443, NULL, "direct");
  assert_via ("127.0.0.1", 6443, NULL, "direct");
  assert_via ("127.9.9.9", 6443, NULL, "direct");
  assert_via ("::1", 6443, NULL, "direct");
  /* "*" */
  assert_via ("api.cluster.example", 443, "*", "direct");
  assert_via ("api.cluster.example", 443, " foo.example , * ", "direct");
  /* a name: itself and its subdomains, not a name that merely ends the same */
  assert_via ("cluster.example", 443, "cluster.example", "direct");
  assert_via ("api.cluster.example", 443, "cluster.example", "direct");
  assert_via ("API.Cluster.Example", 443, "CLUSTER.example", "direct");
  assert_via ("notcluster.example", 443, "cluster.example", P);
  /* ".name" and "*.name": the subdomains only */
  assert_via ("api.cluster.example", 443, ".cluster.example", "direct");
  assert_via ("cluster.example", 443, ".cluster.example", P);
  assert_via ("api.cluster.example", 443, "*.cluster.example", "direct");
  assert_via ("cluster.example", 443, "*.cluster.example", P);
  /* with a port: that port only */
  assert_via ("api.cluster.example", 6443, "cluster.example:6443", "direct");
  assert_via ("api.cluster.example", 443, "cluster.example:6443", P);
  /* IPs and CIDRs, v4 and v6 */
  assert_via ("10.1.2.3", 443, "10.1.2.3", "direct");
  assert_via ("10.1.2.4", 443, "10.1.2.3", P);
  assert_via ("10.1.2.3", 443, "10.0.0.0/8", "direct");
  assert_via ("11.1.2.3", 443, "10.0.0.0/8", P);
  assert_via ("10.1.2.3", 443, "10.1.2.3:443", "direct");
  assert_via ("10.1.2.3", 6443, "10.1.2.3:443", P);
  assert_via ("fd00::5", 443, "fd00::/8", "direct");
  assert_via ("fd00::5", 443, "fd00::5", "direct");
  assert_via ("fd00::5", 443, "[fd00::5]:443", "direct");
  assert_via ("fd00::6", 443, "[fd00::5]:443", P);
  /* a CIDR never matches a name, a malformed entry matches nothing */
  assert_via ("api.cluster.example", 443, "10.0.0.0/8", P);
  assert_via ("api.cluster.example", 443, ":443,,", P);
}
END_TEST

START_TEST (test_proxy_values)
{
  g_autofree char *plain = via ("api.example", 443, "proxy.example:3128", NULL);
  g_autofree char *empty = via ("api.example", 443, "", NULL);
  g_autofree char *none = via ("api.example", 443, NULL, NULL);
  g_autofree char *socks = via ("api.example", 443, "socks5://127.0.0.1:1080", NULL);
  g_autoptr (GError) error = NULL;
  char *bad;

  /* no scheme: http:// (Go's rule) */
  ck_assert_str_eq (plain, "http://proxy.example:3128");
  ck_assert_str_eq (empty, "direct");
  ck_assert_str_eq (none, "direct");
  ck_assert_str_eq (socks, "socks5://127.0.0.1:1080");
  /* another scheme is refused, and the message does not carry the URL's password */
  bad = nz_kube_proxy_for ("api.example", 443, "ftp://user:secret@proxy.example:21", NULL, &error);
  ck_assert_ptr_null (bad);
  ck_assert_msg (error != NULL && strstr (error->message, "ftp") != NULL,
                 "no refusal naming the scheme");
  ck_assert_msg (strstr (error->message, "secret") == NULL, "the password leaked: %s",
                 error->message);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-proxy");
  TCase *tc = tcase_create ("proxy");

  tcase_add_test (tc, test_no_proxy_rules);
  tcase_add_test (tc, test_proxy_values);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
