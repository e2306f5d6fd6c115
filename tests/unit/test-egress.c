/* Unit tests for lib/egress: allowlist grammar, address screen, profiles and their error codes,
 * the port union, Kubernetes translation, proxy config V1/V2; and lib/net's address dump. */
#include <string.h>

#include "nz-address.h"
#include "nz-allowlist.h"
#include "nz-egress-k8s.h"
#include "nz-json.h"
#include "nz-netlink.h"
#include "nz-profile.h"
#include "nz-proxy-config.h"
#include "../nz-test.h"

static gboolean
allowed (const char *host, const char *entry)
{
  const char *list[] = { entry, NULL };

  return nz_allowlist_match (list, host) != NULL;
}

START_TEST (test_allowlist_grammar)
{
  /* exact */
  ck_assert (allowed ("api.example.com", "api.example.com"));
  ck_assert (!allowed ("evil-api.example.com", "api.example.com"));
  ck_assert (!allowed ("api.example.com.evil.net", "api.example.com"));
  ck_assert (!allowed ("api.example.co", "api.example.com"));
  ck_assert (!allowed ("sub.api.example.com", "api.example.com"));
  /* .domain */
  ck_assert (allowed ("a.b.example.com", ".example.com"));
  ck_assert (allowed ("example.com", ".example.com"));
  ck_assert (!allowed ("notexample.com", ".example.com"));
  ck_assert (!allowed ("example.com.evil.net", ".example.com"));
  /* no wildcard, no substring */
  ck_assert (!allowed ("a.example.com", "*.example.com"));
  ck_assert (!allowed ("a.example.com", "*"));
  ck_assert (!allowed ("example", "example.com"));
  /* normalisation */
  ck_assert (allowed ("API.Example.COM", "api.example.com"));
  ck_assert (allowed ("api.example.com.", "API.EXAMPLE.COM"));
  ck_assert (allowed ("api.example.com", "  api.example.com  "));
  ck_assert (!allowed ("api.example.com..", "api.example.com")); /* ONE dot only */
  /* empties */
  ck_assert (nz_allowlist_match ((const char *[]){ NULL }, "a.com") == NULL);
  ck_assert (!allowed ("a.com", ""));
  ck_assert (!allowed ("", ""));
  ck_assert (!allowed ("anything", "."));
}
END_TEST

START_TEST (test_split_authority)
{
  struct
  {
    const char *in, *host;
    int port;
  } rows[] = {
    { "example.com:443", "example.com", 443 },
    { "example.com", "example.com", -1 },
    { "[::1]:8443", "::1", 8443 },
    { "[::1]", "::1", -1 },
    { "example.com:https", "example.com:https", -1 },
    { "example.com:", "example.com", 0 },
    { "[::1", "[::1", -1 },
    { "::1", ":", 1 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    {
      g_autofree char *host = NULL;
      int port;

      nz_allowlist_split_authority (rows[i].in, &host, &port);
      ck_assert_msg (g_str_equal (host, rows[i].host), "%s -> %s", rows[i].in, host);
      ck_assert_int_eq (port, rows[i].port);
    }
}
END_TEST

static const char *
reason (const char *literal)
{
  return nz_address_literal_reason (literal, NULL);
}

START_TEST (test_address_screen)
{
  struct
  {
    const char *addr, *reason;
  } rows[] = {
    { "127.0.0.1", "loopback" },
    { "0.1.2.3", "this-host" },
    { "10.0.0.1", "private" },
    { "172.16.0.0", "private" },
    { "172.31.255.255", "private" },
    { "172.15.255.255", NULL },
    { "172.32.0.0", NULL },
    { "192.168.1.1", "private" },
    { "169.254.169.254", "link-local" },
    { "169.253.255.255", NULL },
    { "100.64.0.0", "shared-address-space" },
    { "100.127.255.255", "shared-address-space" },
    { "100.63.255.255", NULL },
    { "100.128.0.0", NULL },
    { "198.18.0.1", "benchmarking" },
    { "198.19.255.255", "benchmarking" },
    { "198.20.0.0", NULL },
    { "224.0.0.1", "multicast" },
    { "239.255.255.255", "multicast" },
    { "240.0.0.1", "reserved" },
    { "255.255.255.255", "reserved" },
    { "8.8.8.8", NULL },
    { "192.0.0.1", NULL },
    { "203.0.113.5", NULL },
    { "::1", "loopback" },
    { "::", "unspecified" },
    { "fc00::1", "unique-local" },
    { "fdff::1", "unique-local" },
    { "fe80::1", "link-local" },
    { "febf::1", "link-local" },
    { "fec0::1", NULL },
    { "ff02::1", "multicast" },
    { "2001:db8::1", NULL },
    { "64:ff9b::a00:1", NULL },
    { "::ffff:127.0.0.1", "loopback" },
    { "::ffff:7f00:1", "loopback" },
    { "::ffff:10.1.2.3", "private" },
    { "::10.1.2.3", "private" },
    { "0:0:0:0:0:ffff:a9fe:a9fe", "link-local" },
    { "::ffff:8.8.8.8", NULL },
    { "fe80::1%eth0", "link-local" },
    { "[::1]", "loopback" },
    { "[::ffff:169.254.169.254]", "link-local" },
    /* names and malformed literals are left to the resolver */
    { "localhost", NULL },
    { "10.0.0", NULL },
    { "1.2.3.4.5", NULL },
    { "256.1.1.1", NULL },
    { "0x7f.0.0.1", NULL },
    { "1234.1.1.1", NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    ck_assert_msg (g_strcmp0 (reason (rows[i].addr), rows[i].reason) == 0, "%s: got %s want %s",
                   rows[i].addr, reason (rows[i].addr), rows[i].reason);
}
END_TEST

START_TEST (test_address_host_interfaces)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) local = nz_netlink_local_addresses (&error);
  g_autoptr (GPtrArray) fake = g_ptr_array_new_with_free_func (g_object_unref);
  g_autoptr (GInetAddress) pub = g_inet_address_new_from_string ("203.0.113.7");
  gboolean has_lo = FALSE;

  ck_assert_msg (local != NULL, "%s", error != NULL ? error->message : "");
  for (guint i = 0; i < local->len; i++)
    {
      g_autofree char *s = g_inet_address_to_string (local->pdata[i]);

      has_lo |= g_str_equal (s, "127.0.0.1");
    }
  ck_assert_msg (has_lo, "the address dump did not list 127.0.0.1");
  /* An otherwise public address is refused once it is one of the host's own. */
  ck_assert (nz_address_blocked_reason (pub, NULL) == NULL);
  g_ptr_array_add (fake, g_object_ref (pub));
  ck_assert_str_eq (nz_address_blocked_reason (pub, fake), "host-interface");
  ck_assert_str_eq (nz_address_literal_reason ("203.0.113.7", fake), "host-interface");
}
END_TEST

static NzEgressProfile *
profile (const char *json, GError **error)
{
  return nz_egress_profile_parse (json, -1, NULL, error);
}

static void
assert_refused (const char *json, NzEgressErrorCode code, const char *path)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzEgressProfile) p = profile (json, &error);
  g_autofree char *want = g_strdup_printf ("egress profile: %s ", path);

  ck_assert_msg (p == NULL, "accepted %s", json);
  ck_assert_msg (error->domain == NZ_EGRESS_ERROR && error->code == (int)code, "%s: code %s (%s)",
                 json, nz_egress_error_code_name (error), error->message);
  ck_assert_msg (g_str_has_prefix (error->message, want), "%s: %s", json, error->message);
  ck_assert (
      g_str_has_suffix (error->message, ". Refusing rather than applying part of the profile."));
}

START_TEST (test_profile_errors)
{
  const char *bad_names[] = { "\"\"", "\"Upper\"", "\"-lead\"", "\"has.dot\"", "1", "null" };
  const char *bad_hosts[] = { "\"*\"",
                              "\"*.example.com\"",
                              "\"https://example.com\"",
                              "\"example.com/path\"",
                              "\"example.com:443\"",
                              "\":443\"",
                              "\"10.0.0.1\"",
                              "\"[::1]\"",
                              "\".com\"",
                              "\".\"",
                              "\"\"",
                              "\"user:pw@example.com\"",
                              "\"a_b.example.com\"",
                              "42",
                              "\"example.123\"" };
  const char *bad_ports[]
      = { "[0]", "[65536]", "[443, 1.5]", "[443, 443]", "[]", "[\"443\"]", "443" };

  for (guint i = 0; i < G_N_ELEMENTS (bad_names); i++)
    {
      g_autofree char *j = g_strdup_printf ("{\"name\":%s,\"hosts\":[]}", bad_names[i]);

      assert_refused (j, NZ_EGRESS_ERROR_INVALID_NAME, "name");
    }
  {
    g_autofree char *j
        = g_strdup_printf ("{\"name\":\"%s\",\"hosts\":[]}",
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    assert_refused (j, NZ_EGRESS_ERROR_INVALID_NAME, "name");
  }
  assert_refused ("{\"name\":\"p\",\"hosts\":\"x\"}", NZ_EGRESS_ERROR_INVALID_HOST, "hosts");
  assert_refused ("{\"name\":\"p\"}", NZ_EGRESS_ERROR_INVALID_HOST, "hosts");
  for (guint i = 0; i < G_N_ELEMENTS (bad_hosts); i++)
    {
      g_autofree char *j = g_strdup_printf (
          "{\"name\":\"p\",\"hosts\":[{\"host\":\"ok.example\"},{\"host\":%s}]}", bad_hosts[i]);

      assert_refused (j, NZ_EGRESS_ERROR_INVALID_HOST, "hosts[1].host");
    }
  {
    GString *longhost = g_string_new ("");
    g_autofree char *j = NULL;

    while (longhost->len < 260)
      g_string_append (longhost, "abcdefghi.");
    g_string_append (longhost, "com");
    j = g_strdup_printf ("{\"name\":\"p\",\"hosts\":[{\"host\":\"%s\"}]}", longhost->str);
    assert_refused (j, NZ_EGRESS_ERROR_INVALID_HOST, "hosts[0].host");
    g_string_free (longhost, TRUE);
  }
  for (guint i = 0; i < G_N_ELEMENTS (bad_ports); i++)
    {
      g_autofree char *j = g_strdup_printf (
          "{\"name\":\"p\",\"hosts\":[{\"host\":\"a.example\",\"ports\":%s}]}", bad_ports[i]);
      g_autoptr (GError) error = NULL;
      g_autoptr (NzEgressProfile) p = profile (j, &error);

      ck_assert_msg (p == NULL && error->code == NZ_EGRESS_ERROR_INVALID_PORT, "%s", j);
      ck_assert (g_str_has_prefix (error->message, "egress profile: hosts[0].ports"));
    }
  assert_refused ("{\"name\":\"p\",\"hosts\":[{\"host\":\"A.example.\"},{\"host\":\"a.example\"}]}",
                  NZ_EGRESS_ERROR_DUPLICATE_HOST, "hosts[1].host");
}
END_TEST

START_TEST (test_profile_normalised)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (NzEgressProfile) p = profile (
      "{\"name\":\"ci\",\"hosts\":[{\"host\":\" API.Example.com. \",\"ports\":[8443,443]},"
      "{\"host\":\".example.com\"},{\"host\":\"api.example.com.evil\"}]}",
      &error);
  g_autoptr (NzEgressProfile) empty = profile ("{\"name\":\"none\",\"hosts\":[]}", NULL);
  g_autoptr (JsonNode) j = NULL;
  g_autofree char *s = NULL;

  ck_assert_msg (p != NULL, "%s", error != NULL ? error->message : "");
  j = nz_egress_profile_to_json (p);
  s = nz_json_to_string (j, NULL);
  ck_assert_str_eq (s, "{\"name\":\"ci\",\"hosts\":[{\"host\":\"api.example.com\",\"ports\":"
                       "[443,8443]},{\"host\":\".example.com\"},{\"host\":"
                       "\"api.example.com.evil\"}]}");
  ck_assert (nz_egress_profile_has_ports (p));
  ck_assert (empty != NULL && empty->rules->len == 0 && !nz_egress_profile_has_ports (empty));
}
END_TEST

START_TEST (test_port_union_and_cover)
{
  g_autoptr (NzEgressProfile) p
      = profile ("{\"name\":\"u\",\"hosts\":[{\"host\":\"api.example.com\",\"ports\":[443]},"
                 "{\"host\":\".example.com\",\"ports\":[8443]},{\"host\":\"example.org\"},"
                 "{\"host\":\"narrow.example.org\",\"ports\":[22]},{\"host\":\".example.org\"}]}",
                 NULL);
  g_autoptr (GArray) ports = g_array_new (FALSE, FALSE, sizeof (guint16));
  gboolean any;
  struct
  {
    const char *entry;
    gboolean covered;
  } cover[] = {
    { "api.example.com", TRUE },  { "API.example.com.", TRUE }, { "www.example.com", TRUE },
    { ".api.example.com", TRUE }, { "example.org", TRUE },      { "a.b.example.org", TRUE },
    { ".example.org", TRUE },     { ".sub.example.org", TRUE }, { ".org", FALSE },
    { ".xexample.org", FALSE },   { "example.net", FALSE },
  };

  ck_assert (p != NULL);
  ck_assert (nz_egress_rules_ports_for (p->rules, "api.example.com", &any, ports, NULL));
  ck_assert (!any);
  ck_assert_uint_eq (ports->len, 2);
  ck_assert_uint_eq (g_array_index (ports, guint16, 0), 443);
  ck_assert_uint_eq (g_array_index (ports, guint16, 1), 8443);
  ck_assert (nz_egress_rules_allow_port (p->rules, "www.example.com", 8443));
  ck_assert (!nz_egress_rules_allow_port (p->rules, "www.example.com", 443));
  /* a portless matching rule wins over a narrower one */
  ck_assert (nz_egress_rules_allow_port (p->rules, "narrow.example.org", 9999));
  ck_assert (!nz_egress_rules_allow_port (p->rules, "example.net", 443));
  for (guint i = 0; i < G_N_ELEMENTS (cover); i++)
    ck_assert_msg (nz_egress_profile_covers_entry (p, cover[i].entry) == cover[i].covered, "%s",
                   cover[i].entry);
}
END_TEST

START_TEST (test_profile_refusals)
{
  g_autoptr (NzEgressProfile) p
      = profile ("{\"name\":\"api\",\"hosts\":[{\"host\":\"api.example.com\"}]}", NULL);
  const char *ok[] = { "API.example.com", NULL };
  const char *outside[] = { "api.example.com", "www.example.com", NULL };
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;

  ck_assert (nz_egress_profile_check_credentials (p, ok, "bwrap", NULL));
  ck_assert (!nz_egress_profile_check_credentials (p, outside, "bwrap", &e1));
  ck_assert_int_eq (e1->code, NZ_EGRESS_ERROR_CONFLICTING_POLICY);
  ck_assert_str_eq (nz_egress_error_code_name (e1), "conflicting-policy");
  ck_assert (strstr (e1->message, "backend.brokeredCredentials[1].host") != NULL);
  ck_assert (strstr (e1->message, "(backend: bwrap)") != NULL);
  ck_assert (nz_egress_profile_check_narrowing (p, ok, NULL, NULL));
  ck_assert (!nz_egress_profile_check_narrowing (p, outside, NULL, &e2));
  ck_assert_int_eq (e2->code, NZ_EGRESS_ERROR_INVALID_HOST);
  ck_assert (strstr (e2->message, "allowedHosts[1] \"www.example.com\" is outside egress profile "
                                  "\"api\"; setNetworkPolicy may narrow within the profile, not "
                                  "widen past it")
             != NULL);
}
END_TEST

static char *
translate (const char *json, NzEgressK8sEngine engine, GError **error)
{
  g_autoptr (NzEgressProfile) p = profile (json, NULL);
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) out = NULL;

  json_object_set_string_member (sel, "app", "sbx");
  out = nz_egress_k8s_from_profile (p, engine, "pol", "ns", sel, error);
  return out != NULL ? nz_json_to_string (out, NULL) : NULL;
}

START_TEST (test_k8s_translation)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *deny = translate ("{\"name\":\"d\",\"hosts\":[]}", NZ_EGRESS_K8S_CILIUM, NULL);
  g_autofree char *cil = translate (
      "{\"name\":\"c\",\"hosts\":[{\"host\":\"api.example.com\"},{\"host\":\".example.org\"}]}",
      NZ_EGRESS_K8S_CILIUM, NULL);
  g_autofree char *ports
      = translate ("{\"name\":\"c\",\"hosts\":[{\"host\":\".example.org\",\"ports\":[443]},"
                   "{\"host\":\"a.example\"}]}",
                   NZ_EGRESS_K8S_CILIUM, NULL);
  g_autofree char *core = translate ("{\"name\":\"c\",\"hosts\":[{\"host\":\"a.example\"}]}",
                                     NZ_EGRESS_K8S_CORE, &error);
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) allow = nz_egress_k8s_core_policy (TRUE, "pol", "ns", sel);
  g_autofree char *allow_s = nz_json_to_string (allow, NULL);
  const char *dns_rule
      = "{\"toEndpoints\":[{\"matchLabels\":{\"k8s:io.kubernetes.pod.namespace\":\"kube-system\","
        "\"k8s:k8s-app\":\"kube-dns\"}}],\"toPorts\":[{\"ports\":[{\"port\":\"53\",\"protocol\":"
        "\"ANY\"}],\"rules\":{\"dns\":[{\"matchPattern\":\"*\"}]}}]}";
  g_autofree char *want_cil = g_strdup_printf (
      "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{\"name\":"
      "\"pol\",\"namespace\":\"ns\"},\"spec\":{\"endpointSelector\":{\"matchLabels\":{\"app\":"
      "\"sbx\"}},\"egress\":[%s,{\"toFQDNs\":[{\"matchName\":\"api.example.com\"},{\"matchName\":"
      "\"example.org\"},{\"matchPattern\":\"*.example.org\"}]}]}}",
      dns_rule);
  g_autofree char *want_ports = g_strdup_printf (
      "\"egress\":[%s,{\"toFQDNs\":[{\"matchName\":\"example.org\"},{\"matchPattern\":"
      "\"*.example.org\"}],\"toPorts\":[{\"ports\":[{\"port\":\"443\",\"protocol\":\"TCP\"}]}]},"
      "{\"toFQDNs\":[{\"matchName\":\"a.example\"}]}]",
      dns_rule);

  ck_assert_str_eq (deny, "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\","
                          "\"metadata\":{\"name\":\"pol\",\"namespace\":\"ns\"},\"spec\":{"
                          "\"podSelector\":{\"matchLabels\":{\"app\":\"sbx\"}},\"policyTypes\":["
                          "\"Egress\"],\"egress\":[{\"to\":[{\"namespaceSelector\":{\"matchLabels"
                          "\":{\"kubernetes.io/metadata.name\":\"kube-system\"}}}],\"ports\":[{"
                          "\"protocol\":\"UDP\",\"port\":53},{\"protocol\":\"TCP\",\"port\":53}]}"
                          "]}}");
  ck_assert (strstr (allow_s, "\"egress\":[{}]") != NULL);
  ck_assert_str_eq (cil, want_cil);
  ck_assert_msg (strstr (ports, want_ports) != NULL, "%s", ports);
  ck_assert (core == NULL);
  ck_assert_int_eq (error->code, NZ_EGRESS_ERROR_UNSUPPORTED);
}
END_TEST

static char *
k8s_kind (NzEgressK8sKind kind, NzEgressK8sEngine engine, const char *const *cidrs,
          const char *const *hosts, GError **error)
{
  g_autoptr (JsonObject) sel = json_object_new ();
  g_autoptr (JsonNode) out = NULL;

  json_object_set_string_member (sel, "sandbox.namzu.ai/template", "t");
  out = nz_egress_k8s_translate (kind, engine, cidrs, hosts, "t-egress", "ns", sel, error);
  return out != NULL ? nz_json_to_string (out, NULL) : NULL;
}

#define CORE_HEAD                                                                                  \
  "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"name\":"    \
  "\"t-egress\",\"namespace\":\"ns\"},\"spec\":{\"podSelector\":{\"matchLabels\":{"                \
  "\"sandbox.namzu.ai/template\":\"t\"}},\"policyTypes\":[\"Egress\"],\"egress\":"
#define CLUSTER_DNS                                                                                \
  "{\"to\":[{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":"             \
  "\"kube-system\"}}}],\"ports\":[{\"protocol\":\"UDP\",\"port\":53},{\"protocol\":\"TCP\","       \
  "\"port\":53}]}"

/* D.10.2: every kind, byte for byte, in the spec's key order. */
START_TEST (test_k8s_kinds)
{
  const char *cidrs[] = { "203.0.113.0/24", "2001:db8::/32", NULL };
  const char *bad_cidrs[] = { "10.0.0.0/8", "not-a-cidr", NULL };
  const char *hosts[] = { "API.example.com", ".example.org", NULL };
  const char *hostile[] = { "a.example", "b.example\",\"matchPattern\":\"*", NULL };
  g_autoptr (GError) e1 = NULL;
  g_autoptr (GError) e2 = NULL;
  g_autoptr (GError) e3 = NULL;
  g_autofree char *deny = k8s_kind (NZ_EGRESS_K8S_DENY_ALL, NZ_EGRESS_K8S_CILIUM, NULL, NULL, NULL);
  g_autofree char *none = k8s_kind (NZ_EGRESS_K8S_NO_NETWORK, NZ_EGRESS_K8S_CORE, NULL, NULL, NULL);
  g_autofree char *allow
      = k8s_kind (NZ_EGRESS_K8S_ALLOW_ALL, NZ_EGRESS_K8S_CILIUM, NULL, NULL, NULL);
  g_autofree char *pub
      = k8s_kind (NZ_EGRESS_K8S_PUBLIC_INTERNET, NZ_EGRESS_K8S_CORE, cidrs, NULL, NULL);
  g_autofree char *pub_bad
      = k8s_kind (NZ_EGRESS_K8S_PUBLIC_INTERNET, NZ_EGRESS_K8S_CORE, bad_cidrs, NULL, &e1);
  g_autofree char *stat = k8s_kind (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hosts, NULL);
  g_autofree char *stat_core
      = k8s_kind (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CORE, NULL, hosts, &e2);
  g_autofree char *stat_bad
      = k8s_kind (NZ_EGRESS_K8S_STATIC, NZ_EGRESS_K8S_CILIUM, NULL, hostile, &e3);

  ck_assert_str_eq (deny, CORE_HEAD "[" CLUSTER_DNS "]}}");
  ck_assert_str_eq (none, CORE_HEAD "[]}}");
  ck_assert_str_eq (allow, CORE_HEAD "[{}]}}");
  ck_assert_str_eq (
      pub, CORE_HEAD
      "[{\"to\":[{\"namespaceSelector\":{\"matchLabels\":{\"kubernetes.io/metadata.name\":"
      "\"kube-system\"}},\"podSelector\":{\"matchLabels\":{\"k8s-app\":\"kube-dns\"}}}],\"ports\":"
      "[{\"protocol\":\"UDP\",\"port\":53},{\"protocol\":\"TCP\",\"port\":53}]},{\"to\":[{"
      "\"ipBlock\":{\"cidr\":\"0.0.0.0/0\",\"except\":[\"10.0.0.0/8\",\"172.16.0.0/12\","
      "\"192.168.0.0/16\",\"100.64.0.0/10\",\"169.254.0.0/16\",\"127.0.0.0/8\","
      "\"168.63.129.16/32\",\"203.0.113.0/24\"]}},{\"ipBlock\":{\"cidr\":\"::/0\",\"except\":["
      "\"fc00::/7\",\"fe80::/10\",\"::1/128\",\"2001:db8::/32\"]}}]}]}}");
  ck_assert (pub_bad == NULL);
  ck_assert_msg (strstr (e1->message, "exceptCidrs[1] is not a CIDR") != NULL, "%s", e1->message);
  ck_assert_str_eq (
      stat,
      "{\"apiVersion\":\"cilium.io/v2\",\"kind\":\"CiliumNetworkPolicy\",\"metadata\":{\"name\":"
      "\"t-egress\",\"namespace\":\"ns\"},\"spec\":{\"endpointSelector\":{\"matchLabels\":{"
      "\"sandbox.namzu.ai/template\":\"t\"}},\"egress\":[{\"toEndpoints\":[{\"matchLabels\":{"
      "\"k8s:io.kubernetes.pod.namespace\":\"kube-system\",\"k8s:k8s-app\":\"kube-dns\"}}],"
      "\"toPorts\":[{\"ports\":[{\"port\":\"53\",\"protocol\":\"ANY\"}],\"rules\":{\"dns\":[{"
      "\"matchPattern\":\"*\"}]}}]},{\"toFQDNs\":[{\"matchName\":\"API.example.com\"},{"
      "\"matchName\":\"example.org\"},{\"matchPattern\":\"*.example.org\"}]}]}}");
  ck_assert (stat_core == NULL);
  ck_assert_int_eq (e2->code, NZ_EGRESS_ERROR_UNSUPPORTED);
  ck_assert (g_str_has_prefix (e2->message, "KubernetesUnenforceableEgressPolicyError: egress "
                                            "policy kind 'static' needs engine 'cilium'"));
  /* A hostile host never reaches a manifest. */
  ck_assert (stat_bad == NULL);
  ck_assert (g_str_has_prefix (e3->message, "KubernetesNetworkPolicyHostError: host "));
}
END_TEST

/* D.10.4: the host grammar, row by row, and the message's fixed tail. */
START_TEST (test_k8s_host_grammar)
{
  struct
  {
    const char *host, *reason;
  } bad[] = {
    { "", "is empty" },
    { ".", "names no domain after its leading dot" },
    { "*.example.com", "contains '*'" },
    { "a_b.example", "is not a hostname" },
    { "-a.example", "is not a hostname" },
    { "https://a.example", "is not a hostname" },
    { "a.example:443", "is not a hostname" },
    { ".com", "names a whole top-level domain" },
    { "10.0.0.1", "is an IP address" },
    { " a.example", "carries whitespace or a trailing dot" },
    { "a.example.", "carries whitespace or a trailing dot" },
    { "a.example\n", "carries whitespace or a trailing dot" },
  };
  g_autofree char *longh = NULL;
  g_autofree char *ok = nz_egress_k8s_host_check ("API.Example.com", NULL);
  g_autofree char *dom = nz_egress_k8s_host_check (".example.com", NULL);
  g_autoptr (GError) enull = NULL;
  g_autoptr (GError) elong = NULL;
  g_autofree char *rnull = nz_egress_k8s_host_check (NULL, &enull);
  g_autofree char *rlong = NULL;
  GString *l = g_string_new (NULL);

  ck_assert_str_eq (ok, "api.example.com");
  ck_assert_str_eq (dom, ".example.com");
  ck_assert (rnull == NULL && strstr (enull->message, "not a string") != NULL);
  while (l->len < 254)
    g_string_append (l, "abcdefghi.");
  g_string_append (l, "example");
  longh = g_string_free (l, FALSE);
  rlong = nz_egress_k8s_host_check (longh, &elong);
  ck_assert (rlong == NULL && strstr (elong->message, "is longer than 253") != NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *r = nz_egress_k8s_host_check (bad[i].host, &error);

      ck_assert_msg (r == NULL, "%s accepted", bad[i].host);
      ck_assert_int_eq (error->code, NZ_EGRESS_ERROR_INVALID_HOST);
      ck_assert (g_str_has_prefix (error->message, "KubernetesNetworkPolicyHostError: host \""));
      ck_assert_msg (strstr (error->message, bad[i].reason) != NULL, "%s", error->message);
      ck_assert (g_str_has_suffix (error->message,
                                   "Entries are hostnames: 'api.example.com' for one host, "
                                   "'.example.com' for that domain and its subdomains. Nothing "
                                   "was written."));
    }
}
END_TEST

START_TEST (test_k8s_default_name)
{
  g_autofree char *a = nz_egress_k8s_default_policy_name ("tpl", NULL, NULL);
  g_autofree char *b = nz_egress_k8s_default_policy_name ("tpl", "web", NULL);
  g_autofree char *big = g_strnfill (250, 'a');
  g_autoptr (GError) error = NULL;
  g_autofree char *c = nz_egress_k8s_default_policy_name (big, NULL, NULL);
  g_autofree char *d = nz_egress_k8s_default_policy_name (big, "p", &error);
  g_autofree char *fits = g_strnfill (246, 'a');
  g_autofree char *e = nz_egress_k8s_default_policy_name (fits, NULL, NULL);

  ck_assert_str_eq (a, "tpl-egress");
  ck_assert_str_eq (b, "tpl-web-egress");
  ck_assert (c == NULL && d == NULL);
  ck_assert (g_str_has_prefix (error->message, "KubernetesEgressPolicyConfigError: "));
  ck_assert_int_eq (strlen (e), 253);
}
END_TEST

static NzEgressK8sConfig *
k8s_config (const char *json, GError **error)
{
  g_autoptr (JsonParser) p = json_parser_new ();

  ck_assert (json_parser_load_from_data (p, json, -1, NULL));
  return nz_egress_k8s_config_parse (json_parser_get_root (p), error);
}

/* D.10.6: the egress object, its defaults and every refusal naming its field. */
START_TEST (test_k8s_config)
{
  struct
  {
    const char *json, *message;
  } bad[] = {
    { "[]", "KubernetesEgressPolicyConfigError: backend.egress. must be an object" },
    { "{}", "backend.egress.policy must be an object" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"polciy\":1}",
      "backend.egress.polciy is not a known field" },
    { "{\"policy\":{\"kind\":\"resolver\"}}", "backend.egress.policy.kind must be deny-all" },
    { "{\"policy\":{\"kind\":\"deny-all\",\"allowedHosts\":[]}}",
      "backend.egress.policy.allowedHosts is not a known field" },
    { "{\"policy\":{\"kind\":\"static\"}}", "backend.egress.policy.allowedHosts is required" },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"*.a.example\"]}}",
      "KubernetesNetworkPolicyHostError: host \"*.a.example\"" },
    { "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[7]}}",
      "KubernetesNetworkPolicyHostError: the host is not a string" },
    { "{\"policy\":{\"kind\":\"public-internet\",\"exceptCidrs\":[\"10.0.0.300/8\"]}}",
      "backend.egress.policy.exceptCidrs[0] is not a CIDR" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"engine\":\"calico\"}",
      "backend.egress.engine must be 'core' or 'cilium'" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"verify\":\"none\"}",
      "backend.egress.verify must be 'union' or 'named-object-only'" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"networkPolicyName\":\"A_b\"}",
      "backend.egress.networkPolicyName is not a DNS-1123 object name" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"profile\":\"Web\"}",
      "KubernetesEgressProfileConfigError: backend.egress.profile is not a DNS-1123 label" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"profileLabelKey\":\"a b\"}",
      "KubernetesEgressProfileConfigError: backend.egress.profileLabelKey is not a label key" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"profile\":\"web\","
      "\"profileLabelKey\":\"sandbox.namzu.ai/template\"}",
      "backend.egress.profileLabelKey must not be sandbox.namzu.ai/template" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"ciliumNarrowing\":{}}",
      "KubernetesEgressNarrowingUnsupportedError: " },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"admissionPolicyName\":\"f\"}}",
      "KubernetesPerSandboxEgressConfigError: backend.egress.perSandbox.engine must be 'cilium'" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\"}}",
      "KubernetesPerSandboxEgressConfigError: backend.egress.perSandbox.admissionPolicyName is "
      "required" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"f\",\"labelKey\":\"sandbox.namzu.ai/template\"}}",
      "backend.egress.perSandbox.labelKey must not be sandbox.namzu.ai/template" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"f\",\"labelKey\":\"/x\"}}",
      "backend.egress.perSandbox.labelKey is not a label key" },
    { "{\"policy\":{\"kind\":\"deny-all\"},\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"f\",\"extra\":1}}",
      "backend.egress.perSandbox.extra is not a known field" },
  };
  g_autoptr (NzEgressK8sConfig) def = k8s_config ("{\"policy\":{\"kind\":\"deny-all\"}}", NULL);
  g_autoptr (NzEgressK8sConfig) full = k8s_config (
      "{\"policy\":{\"kind\":\"static\",\"allowedHosts\":[\"API.example.com\",\".b.example\"]},"
      "\"engine\":\"cilium\",\"verify\":\"named-object-only\",\"profile\":\"web\","
      "\"networkPolicyName\":\"pol\",\"perSandbox\":{\"engine\":\"cilium\","
      "\"admissionPolicyName\":\"namzu-per-sandbox-egress\"}}",
      NULL);
  g_autoptr (JsonObject) sel = NULL;
  g_autoptr (JsonObject) base = json_object_new ();
  g_autoptr (JsonObject) labels = NULL;
  g_autoptr (GError) collide = NULL;
  g_autoptr (JsonObject) refused = NULL;
  g_autofree char *sel_s = NULL;

  ck_assert (def != NULL);
  ck_assert_int_eq (def->kind, NZ_EGRESS_K8S_DENY_ALL);
  ck_assert_int_eq (def->engine, NZ_EGRESS_K8S_CORE);
  ck_assert (!def->named_object_only && !def->per_sandbox && def->profile == NULL);
  ck_assert_str_eq (def->profile_label_key, "sandbox.namzu.ai/egress-profile");
  ck_assert (full != NULL);
  ck_assert_str_eq (full->allowed_hosts[0], "api.example.com");
  ck_assert_str_eq (full->allowed_hosts[1], ".b.example");
  ck_assert (full->allowed_hosts[2] == NULL);
  ck_assert (full->named_object_only && full->per_sandbox);
  ck_assert_str_eq (full->admission_policy_binding_name, "namzu-per-sandbox-egress-binding");
  ck_assert_str_eq (full->per_sandbox_label_key, "sandbox.namzu.ai/per-sandbox-egress");
  sel = nz_egress_k8s_selector (full, "tpl");
  sel_s = nz_json_object_to_string (sel, NULL);
  ck_assert_str_eq (sel_s, "{\"sandbox.namzu.ai/template\":\"tpl\","
                           "\"sandbox.namzu.ai/egress-profile\":\"web\"}");
  json_object_set_string_member (base, "team", "a");
  labels = nz_egress_k8s_compose_pod_labels (full, base, NULL);
  ck_assert_str_eq (json_object_get_string_member (labels, "sandbox.namzu.ai/egress-profile"),
                    "web");
  json_object_set_string_member (base, "sandbox.namzu.ai/egress-profile", "other");
  refused = nz_egress_k8s_compose_pod_labels (full, base, &collide);
  ck_assert (refused == NULL);
  ck_assert (strstr (collide->message, "collides with a pod label") != NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzEgressK8sConfig) c = k8s_config (bad[i].json, &error);

      ck_assert_msg (c == NULL, "accepted %s", bad[i].json);
      ck_assert_msg (strstr (error->message, bad[i].message) != NULL, "%s: %s", bad[i].json,
                     error->message);
    }
}
END_TEST

START_TEST (test_proxy_config)
{
  struct
  {
    const char *v1, *v2, *message;
  } bad[] = {
    { NULL, NULL, "NAMZU_EGRESS_PROXY_CONFIG is not set; this container has no policy to enforce" },
    { "", NULL, "NAMZU_EGRESS_PROXY_CONFIG is not set" },
    { "{\"allowedHosts\":[\"secret-value\"", NULL, "NAMZU_EGRESS_PROXY_CONFIG is not valid JSON" },
    { "[]", NULL, "NAMZU_EGRESS_PROXY_CONFIG is not a JSON object" },
    { "{}", NULL, "NAMZU_EGRESS_PROXY_CONFIG has no allowedHosts" },
    { "{\"allowedHosts\":\"a\"}", NULL, "NAMZU_EGRESS_PROXY_CONFIG: allowedHosts is not a list" },
    { "{\"allowedHosts\":[\"\"]}", NULL, "NAMZU_EGRESS_PROXY_CONFIG: allowedHosts[0]" },
    { "{\"allowedHosts\":[],\"port\":70000}", NULL, "NAMZU_EGRESS_PROXY_CONFIG: port" },
    { "{\"allowedHosts\":[],\"credentials\":[{\"host\":\"a\",\"header\":\"h\"}]}", NULL,
      "NAMZU_EGRESS_PROXY_CONFIG: credentials[0].value" },
    { "{\"allowedHosts\":[]}", "{\"allowedHosts\":[]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2 has no hostPorts" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[],\"extra\":1}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2 has an unknown field \"extra\"" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[{\"host\":\"a\",\"ports\":[443,443]}]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2: hostPorts[0].ports[1] repeats" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[{\"host\":\"a\",\"ports\":[]}]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2: hostPorts[0].ports" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[{\"host\":\"a\",\"port\":1}]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2: hostPorts[0] has an unknown field \"port\"" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[{\"host\":\"a\",\"ports\":[443.5]}]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2: hostPorts[0].ports[0]" },
    { NULL, "{\"allowedHosts\":[],\"hostPorts\":[{\"host\":\"\"}]}",
      "NAMZU_EGRESS_PROXY_CONFIG_V2: hostPorts[0].host" },
  };
  g_autoptr (NzProxyConfig) v1 = nz_proxy_config_read (
      "{\"allowedHosts\":[\"a.example\"],\"unknown\":1,\"credentials\":[{\"host\":\"a.example\","
      "\"header\":\"Authorization\",\"value\":\"s3cret\"}],\"allowInwardFor\":[\"db.internal\"]}",
      NULL, NULL);
  g_autoptr (NzProxyConfig) v2 = nz_proxy_config_read (
      "{\"allowedHosts\":[\"ignored.example\"]}",
      "{\"allowedHosts\":[\"a.example\"],\"port\":3128,\"hostPorts\":[{\"host\":\"a.example\","
      "\"ports\":[443]}]}",
      NULL);
  g_autoptr (NzEgressProfile) pp = profile ("{\"name\":\"p\",\"hosts\":[{\"host\":\"a.example\","
                                            "\"ports\":[443]},{\"host\":\"b.example\"}]}",
                                            NULL);
  g_autoptr (NzEgressProfile) pn
      = profile ("{\"name\":\"p\",\"hosts\":[{\"host\":\"a.example\"}]}", NULL);
  const char *hosts[] = { "a.example", NULL };
  const char *env = NULL;
  g_autoptr (JsonNode) b1 = nz_proxy_config_build (hosts, pn, NULL, NULL, 2025, &env);
  g_autofree char *s1 = nz_json_to_string (b1, NULL);
  const char *env1 = env;
  g_autoptr (JsonNode) b2 = nz_proxy_config_build (hosts, pp, NULL, NULL, 2025, &env);
  g_autofree char *s2 = nz_json_to_string (b2, NULL);

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzProxyConfig) c = nz_proxy_config_read (bad[i].v1, bad[i].v2, &error);

      ck_assert_msg (c == NULL, "accepted row %u", i);
      ck_assert_msg (g_str_has_prefix (error->message, bad[i].message), "row %u: %s", i,
                     error->message);
      ck_assert (strstr (error->message, "secret-value") == NULL);
    }
  ck_assert (v1 != NULL && v1->port == 2025 && v1->upgrade_to_https && v1->host_ports == NULL);
  ck_assert_uint_eq (v1->credentials->len, 1);
  ck_assert_str_eq (v1->allow_inward_for[0], "db.internal");
  ck_assert (v2 != NULL && v2->port == 3128 && v2->host_ports->len == 1);
  ck_assert_str_eq (v2->allowed_hosts[0], "a.example");
  ck_assert_str_eq (env1, "NAMZU_EGRESS_PROXY_CONFIG");
  ck_assert_str_eq (s1, "{\"port\":2025,\"allowedHosts\":[\"a.example\"],\"credentials\":[],"
                        "\"selfNames\":[\"namzu-egress\"]}");
  ck_assert_str_eq (env, "NAMZU_EGRESS_PROXY_CONFIG_V2");
  ck_assert (strstr (s2, "\"hostPorts\":[{\"host\":\"a.example\",\"ports\":[443]},{\"host\":"
                         "\"b.example\"}]")
             != NULL);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("egress");
  TCase *tc = tcase_create ("egress");

  tcase_add_test (tc, test_allowlist_grammar);
  tcase_add_test (tc, test_split_authority);
  tcase_add_test (tc, test_address_screen);
  tcase_add_test (tc, test_address_host_interfaces);
  tcase_add_test (tc, test_profile_errors);
  tcase_add_test (tc, test_profile_normalised);
  tcase_add_test (tc, test_port_union_and_cover);
  tcase_add_test (tc, test_profile_refusals);
  tcase_add_test (tc, test_k8s_translation);
  tcase_add_test (tc, test_k8s_kinds);
  tcase_add_test (tc, test_k8s_host_grammar);
  tcase_add_test (tc, test_k8s_default_name);
  tcase_add_test (tc, test_k8s_config);
  tcase_add_test (tc, test_proxy_config);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
