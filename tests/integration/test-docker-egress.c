/* The egress boundary on container:docker against the real dockerd (spec B.3, issue #5): real
 * curl inside a docker sandbox on an --internal network this test creates, through the real
 * namzu-egress proxy container, to an origin that exists only on an upstream network this test
 * creates (a container answering as origin.test and other.test, TLS on 8443, logging what
 * arrived to a host directory). Nothing is sent anywhere else. Every network, container and
 * image made here carries this run's prefix and is removed at the end.
 *
 * The proxy screens private addresses, and the origin is on a private docker network: it is
 * reachable only because origin.test is named in allowInwardFor; other.test, the same address
 * under another name, must stay screened. Images: $NAMZU_WORKER_IMAGE / $NAMZU_EGRESS_IMAGE
 * (default the :latest tags scripts/build-images makes). Under CI=true a missing daemon, image,
 * certtool or host python3.11 is a failure. */
#include <arpa/inet.h>
#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-json.h"
#include "../nz-test.h"

#define SECRET "nz-brokered-7f3a9c"

/* The origin: TLS on 8443; each request's head goes to /log/requests.log and only the request
 * line goes back, so the secret a request carried is never echoed into the sandbox. */
static const char origin_py[]
    = "import http.server, ssl\n"
      "class H(http.server.BaseHTTPRequestHandler):\n"
      "    log_message = lambda self, *a: None\n"
      "    def do_GET(self):\n"
      "        with open('/log/requests.log', 'a') as f:\n"
      "            f.write('%s %s\\n%s\\n' % (self.command, self.path, self.headers))\n"
      "        body = ('origin:%s %s\\n' % (self.command, self.path)).encode()\n"
      "        self.send_response(200)\n"
      "        self.send_header('Content-Length', str(len(body)))\n"
      "        self.end_headers()\n"
      "        self.wfile.write(body)\n"
      "s = http.server.ThreadingHTTPServer(('0.0.0.0', 8443), H)\n"
      "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
      "ctx.load_cert_chain('/certs/cert.pem', '/certs/key.pem')\n"
      "s.socket = ctx.wrap_socket(s.socket, server_side=True)\n"
      "s.serve_forever()\n";

/* localhost is listed so that the address screen, not the allowlist, is what refuses it. */
static const char profile_json[] = "{\"name\":\"t\",\"hosts\":[{\"host\":\"origin.test\","
                                   "\"ports\":[8443]},{\"host\":\"other.test\"},"
                                   "{\"host\":\"localhost\"}]}";

static char base[] = "/tmp/nz-docker-egress-XXXXXX";
static char *state, *prefix, *label, *up_net, *int_net, *int2_net, *int3_net, *int4_net;
static char *origin, *created_log;
static char *origin_ip;
static char *worker_image, *egress_image, *test_proxy_image, *profile_path, *log_dir;
static char *shared_id;

#define REQUIRE NZ_TEST_REQUIRE

/* Runs @argv (NULL-terminated) with NAMZU_STATE_DIR and the brokered secret's variable set;
 * stdout in @out (may be NULL), stderr in @err (may be NULL). Returns the exit status. */
static int
run (const char *const *argv, char **out, char **err)
{
  g_auto (GStrv) envp = g_get_environ ();
  g_autoptr (GError) error = NULL;
  g_autofree char *o = NULL, *e = NULL;
  int status = 0;

  envp = g_environ_setenv (envp, "NAMZU_STATE_DIR", state, TRUE);
  envp = g_environ_setenv (envp, "NZ_TEST_SECRET", SECRET, TRUE);
  REQUIRE (g_spawn_sync (NULL, (char **)argv, envp, G_SPAWN_SEARCH_PATH, NULL, NULL, &o, &e,
                         &status, &error),
           "spawn %s: %s", argv[0], error->message);
  if (out != NULL)
    *out = g_steal_pointer (&o);
  if (err != NULL)
    *err = g_steal_pointer (&e);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* `docker ARGS...`: its trimmed stdout, or NULL when it failed. */
static char *docker (const char *first, ...) G_GNUC_NULL_TERMINATED;

static char *
docker (const char *first, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  char *out = NULL;
  va_list ap;

  g_ptr_array_add (argv, (gpointer) "docker");
  va_start (ap, first);
  for (const char *a = first; a != NULL; a = va_arg (ap, const char *))
    g_ptr_array_add (argv, (gpointer)a);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (run ((const char *const *)argv->pdata, &out, NULL) != 0)
    g_clear_pointer (&out, g_free);
  return out != NULL ? g_strstrip (out) : NULL;
}

static char *
tool (const char *name)
{
  return g_build_filename (g_getenv ("NZ_TOOLS_DIR"), name, NULL);
}

static char *
new_outputs (void)
{
  char *dir = g_build_filename (base, "out-XXXXXX", NULL);

  REQUIRE (g_mkdtemp (dir) != NULL && chmod (dir, 0777) == 0, "mkdtemp %s", dir);
  return dir;
}

/* namzu-create on container:docker with @n extra args; the id, or NULL (stderr in @err). */
static char *
create (char **err, int n, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;
  g_autofree char *outputs = new_outputs ();
  g_autoptr (JsonObject) pub = NULL;
  const char *fixed[] = { "--backend", "container:docker", "--image", worker_image, "--outputs",
                          outputs,     "--label",          label };
  va_list ap;

  g_ptr_array_add (argv, tool ("namzu-create"));
  for (gsize i = 0; i < G_N_ELEMENTS (fixed); i++)
    g_ptr_array_add (argv, g_strdup (fixed[i]));
  va_start (ap, n);
  for (int i = 0; i < n; i++)
    g_ptr_array_add (argv, g_strdup (va_arg (ap, const char *)));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  if (run ((const char *const *)argv->pdata, &out, err) != 0)
    return NULL;
  pub = nz_json_parse_object (out, -1, NULL);
  REQUIRE (pub != NULL, "namzu-create printed no handle: %s", out);
  /* Every id this run made, for test_nothing_left_behind (cases fork: a file, not memory). */
  {
    FILE *f = fopen (created_log, "a");

    REQUIRE (f != NULL, "open %s", created_log);
    fprintf (f, "%s\n", nz_json_get_string (pub, "id"));
    fclose (f);
  }
  return g_strdup (nz_json_get_string (pub, "id"));
}

/* The allowlist sandbox every case below uses a variant of, alone on @net. */
static char *
create_allowlist (const char *net, char **err)
{
  return create (err, 14, "--profile", profile_path, "--docker-network", net, "--host-reachability",
                 "container-network", "--egress-proxy-image", test_proxy_image,
                 "--egress-upstream-network", up_net, "--allow-inward-for", "origin.test",
                 "--credential", "origin.test:X-Api-Key:NZ_TEST_SECRET");
}

/* sh -c @script inside sandbox @id; its stdout (and stderr) in *@out. Returns its status. */
static int
sandbox_sh (const char *id, const char *script, char **out)
{
  g_autofree char *exec = tool ("namzu-exec");
  g_autofree char *o = NULL, *e = NULL;
  const char *const argv[] = { exec, "--sandbox", id, "--", "sh", "-c", script, NULL };
  int rc = run (argv, &o, &e);

  /* One line: a Check message with a newline breaks the TAP stream. */
  *out = g_strdelimit (g_strconcat (o, e, NULL), "\n", ' ');
  return rc;
}

/* curl through the proxy env the sandbox was given; "<body> HTTP=<code>" in the result. */
static char *
curl_in (const char *id, const char *args)
{
  g_autofree char *script
      = g_strdup_printf ("curl -sS -m 20 -w ' HTTP=%%{http_code}' %s 2>&1", args);
  char *out = NULL;

  sandbox_sh (id, script, &out);
  return out;
}

static JsonObject *
set_policy (const char *id, int *rc, const char *host)
{
  g_autofree char *bin = tool ("namzu-egress");
  g_autofree char *out = NULL;
  const char *const argv[] = { bin, "set", "--sandbox", id, host, NULL };

  *rc = run (argv, &out, NULL);
  return nz_json_parse_object (out, -1, NULL);
}

static char *
proxy_of (const char *id)
{
  return g_strconcat ("namzu-egress-", id, NULL);
}

static void
destroy_sandbox (const char *id)
{
  g_autofree char *destroy = tool ("namzu-destroy");
  const char *const argv[] = { destroy, "--sandbox", id, NULL };

  ck_assert_int_eq (run (argv, NULL, NULL), 0);
}

/* ---- no way to the host ----------------------------------------------------------------- */

static char *
gateway_of (const char *net)
{
  return docker ("network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", net,
                 NULL);
}

static char *
address_on (const char *container, const char *net)
{
  g_autofree char *fmt
      = g_strdup_printf ("{{(index .NetworkSettings.Networks \"%s\").IPAddress}}", net);

  return docker ("inspect", "--format", fmt, container, NULL);
}

/* A TCP listener on @ip, the host's address on a bridge this run or the backend created, on a
 * port the kernel picks. Nothing accepts: a connection that got through waits in its queue. */
static int
listen_on (const char *ip, guint *port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET };
  socklen_t len = sizeof sa;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  ck_assert_int_ge (fd, 0);
  ck_assert_msg (ip != NULL && inet_pton (AF_INET, ip, &sa.sin_addr) == 1, "address '%s'", ip);
  ck_assert_msg (bind (fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen (fd, 8) == 0,
                 "listen on %s: %s", ip, g_strerror (errno));
  ck_assert_int_eq (getsockname (fd, (struct sockaddr *)&sa, &len), 0);
  *port = ntohs (sa.sin_port);
  return fd;
}

/* A raw TCP connect from inside @id to @ip:@port, no proxy involved, fails (and the host's
 * control connection that carried the command works). */
static void
assert_cannot_connect (const char *id, const char *ip, guint port)
{
  g_autofree char *script = g_strdup_printf ("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%u' 2>&1; "
                                             "echo rc=$?",
                                             ip, port);
  g_autofree char *out = NULL;

  sandbox_sh (id, script, &out);
  ck_assert_msg (strstr (out, "rc=") != NULL && strstr (out, "rc=0") == NULL,
                 "%s reached %s:%u: %s", id, ip, port, out);
}

/* The host's address on the sandbox's own bridge (@net's gateway) and on another bridge
 * (up_net's gateway), each with a listener: both stay unreached. */
static void
assert_no_way_to_the_host (const char *id, const char *net)
{
  g_autofree char *gw = gateway_of (net);
  g_autofree char *up_gw = gateway_of (up_net);
  const char *ips[] = { gw, up_gw };

  for (gsize i = 0; i < G_N_ELEMENTS (ips); i++)
    {
      guint port = 0;
      int fd = listen_on (ips[i], &port);
      int c;

      assert_cannot_connect (id, ips[i], port);
      c = accept (fd, NULL, NULL);
      ck_assert_msg (c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
                     "the host's listener on %s:%u accepted a connection from %s", ips[i], port,
                     id);
      close (fd);
    }
}

/* Neither the shared sandbox's proxy (on either of its networks) nor its worker. */
static void
assert_cannot_reach_the_shared_sandbox (const char *id)
{
  g_autofree char *proxy = proxy_of (shared_id);
  g_autofree char *sbx = g_strconcat ("namzu-sandbox-", shared_id, NULL);
  g_autofree char *p_int = address_on (proxy, int_net);
  g_autofree char *p_up = address_on (proxy, up_net);
  g_autofree char *w_int = address_on (sbx, int_net);

  ck_assert_msg (p_int != NULL && p_up != NULL && w_int != NULL, "shared sandbox addresses");
  assert_cannot_connect (id, p_int, 2025);
  assert_cannot_connect (id, p_up, 2025);
  assert_cannot_connect (id, w_int, 2024);
}

static gboolean
has_guard_rule (const char *id)
{
  g_autofree char *want = g_strconcat ("namzu:", id, NULL);
  const char *bins[] = { "iptables", "ip6tables" };

  for (gsize i = 0; i < G_N_ELEMENTS (bins); i++)
    {
      const char *const argv[] = { bins[i], "-w", "10", "-S", "INPUT", NULL };
      g_autofree char *out = NULL;

      ck_assert_int_eq (run (argv, &out, NULL), 0);
      if (strstr (out, want) != NULL)
        return TRUE;
    }
  return FALSE;
}

/* The sandbox's network is its own: internal, with it (and its proxy) alone on it. */
static void
assert_private_network (const char *id, gboolean with_proxy)
{
  g_autofree char *net = g_strconcat ("namzu-net-", id, NULL);
  g_autofree char *internal = docker ("network", "inspect", "--format", "{{.Internal}}", net,
                                      NULL);
  g_autofree char *members = docker ("network", "inspect", "--format",
                                     "{{range .Containers}}{{.Name}} {{end}}", net, NULL);
  g_autofree char *want = g_strdup_printf ("namzu-sandbox-%s", id);
  g_auto (GStrv) names = g_strsplit (members != NULL ? members : "", " ", -1);

  ck_assert_str_eq (internal, "true");
  ck_assert_int_eq (g_strv_length (names), with_proxy ? 2 : 1);
  ck_assert_msg (strstr (members, want) != NULL, "%s", members);
  ck_assert (has_guard_rule (id));
}

/* Of namzu's containers with this run's label, only the shared sandbox and its proxy. */
static void
assert_only_the_shared_sandbox_runs (void)
{
  g_autofree char *filter = g_strconcat ("label=", label, NULL);
  g_autofree char *left = docker ("ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL);
  g_autofree char *shared_sbx = g_strconcat ("namzu-sandbox-", shared_id, NULL);
  g_autofree char *shared_proxy = proxy_of (shared_id);
  g_auto (GStrv) names = g_strsplit (left != NULL ? left : "", "\n", -1);

  for (char **n = names; *n != NULL; n++)
    ck_assert_msg (**n == '\0' || g_str_equal (*n, shared_sbx) || g_str_equal (*n, shared_proxy)
                       || g_str_has_prefix (*n, "namzu-") == FALSE,
                   "left behind: %s", *n);
}

/* After destroy: the network and the guard are gone too. */
static void
assert_released (const char *id)
{
  g_autofree char *net = g_strconcat ("namzu-net-", id, NULL);
  g_autofree char *left = docker ("network", "inspect", "--format", "{{.Name}}", net, NULL);

  ck_assert_msg (left == NULL, "network %s left behind", net);
  ck_assert_msg (!has_guard_rule (id), "guard rule of %s left behind", id);
}

/* ---- the topology ---------------------------------------------------------------------- */

START_TEST (test_proxy_is_a_dual_homed_hardened_sibling)
{
  g_autofree char *proxy = proxy_of (shared_id);
  g_autofree char *sbx = g_strconcat ("namzu-sandbox-", shared_id, NULL);
  g_autofree char *alias_fmt
      = g_strdup_printf ("{{json (index .NetworkSettings.Networks \"%s\").Aliases}}", int_net);
  g_autofree char *up_fmt
      = g_strdup_printf ("{{(index .NetworkSettings.Networks \"%s\").IPAddress}}", up_net);
  g_autofree char *aliases = docker ("inspect", "--format", alias_fmt, proxy, NULL);
  g_autofree char *up_ip = docker ("inspect", "--format", up_fmt, proxy, NULL);
  g_autofree char *hardening = docker ("inspect", "--format",
                                       "{{.HostConfig.CapDrop}} {{.HostConfig.ReadonlyRootfs}} "
                                       "{{.HostConfig.SecurityOpt}} {{.HostConfig.IpcMode}}",
                                       proxy, NULL);
  g_autofree char *args
      = docker ("inspect", "--format", "{{json .Args}} {{json .Config.Cmd}}", proxy, NULL);
  g_autofree char *sbx_env = docker ("inspect", "--format", "{{json .Config.Env}}", sbx, NULL);
  g_autofree char *sbx_nets
      = docker ("inspect", "--format", "{{json .NetworkSettings.Networks}}", sbx, NULL);

  /* The route out on the upstream network, the alias the sandbox dials on the internal one. */
  ck_assert_msg (aliases != NULL && strstr (aliases, "\"namzu-egress\"") != NULL, "%s", aliases);
  ck_assert_msg (up_ip != NULL && g_hostname_is_ip_address (up_ip), "%s", up_ip);
  ck_assert_str_eq (hardening, "[ALL] true [no-new-privileges] private");
  /* The configuration holds the secret: in the environment docker was handed, never argv. */
  ck_assert_msg (strstr (args, SECRET) == NULL, "%s", args);
  /* The sandbox: only the internal network, the proxy env, no secret. */
  ck_assert_msg (strstr (sbx_nets, int_net) != NULL && strstr (sbx_nets, up_net) == NULL, "%s",
                 sbx_nets);
  ck_assert_ptr_nonnull (strstr (sbx_env, "\"HTTPS_PROXY=http://namzu-egress:2025\""));
  ck_assert_ptr_nonnull (strstr (sbx_env, "\"https_proxy=http://namzu-egress:2025\""));
  ck_assert_ptr_nonnull (strstr (sbx_env, "\"NO_PROXY=localhost,127.0.0.1\""));
  ck_assert_msg (strstr (sbx_env, SECRET) == NULL, "%s", sbx_env);
}
END_TEST

/* ---- the boundary, from inside --------------------------------------------------------- */

START_TEST (test_allowed_host_through_the_tunnel)
{
  g_autofree char *out = curl_in (shared_id, "-k https://origin.test:8443/tunnel");

  ck_assert_msg (strstr (out, "origin:GET /tunnel") != NULL && strstr (out, "HTTP=200") != NULL,
                 "%s", out);
}
END_TEST

START_TEST (test_denied_host_port_and_literal)
{
  g_autofree char *host = curl_in (shared_id, "http://denied.test/");
  g_autofree char *port = curl_in (shared_id, "http://origin.test:9443/");
  g_autofree char *url = g_strdup_printf ("http://%s:8443/", origin_ip);
  g_autofree char *literal = curl_in (shared_id, url);
  g_autofree char *tunnel = curl_in (shared_id, "-k https://denied.test:8443/");

  ck_assert_msg (strstr (host, "Egress denied: denied.test is not on this sandbox's allowlist.")
                     && strstr (host, "HTTP=403"),
                 "%s", host);
  ck_assert_msg (strstr (port, "Egress denied: origin.test:9443 is not an allowed port.")
                     && strstr (port, "HTTP=403"),
                 "%s", port);
  ck_assert_msg (strstr (literal, "Egress denied:") && strstr (literal, "HTTP=403"), "%s", literal);
  ck_assert_msg (strstr (tunnel, "origin:") == NULL && strstr (tunnel, "403") != NULL, "%s",
                 tunnel);
}
END_TEST

/* other.test is the origin's own address under a name allowInwardFor does not list. */
START_TEST (test_only_the_named_host_is_exempt)
{
  g_autofree char *out = curl_in (shared_id, "http://other.test:8443/");
  g_autofree char *want = g_strdup_printf ("Egress denied: other.test resolves to %s, which is a "
                                           "private address.",
                                           origin_ip);

  ck_assert_msg (strstr (out, want) != NULL && strstr (out, "HTTP=403") != NULL, "%s", out);
}
END_TEST

/* The origin's own address, dialled directly: no DNS involved, and no route off the internal
 * network to take. */
START_TEST (test_no_way_around_the_proxy)
{
  g_autofree char *script = g_strdup_printf ("curl -sS -v -m 5 --noproxy '*' http://%s:8443/ 2>&1; "
                                             "echo rc=$?",
                                             origin_ip);
  g_autofree char *out = NULL;

  g_autofree char *raw_script
      = g_strdup_printf ("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/8443' 2>&1; "
                         "echo rc=$?",
                         origin_ip);
  g_autofree char *raw = NULL;

  sandbox_sh (shared_id, script, &out);
  ck_assert_msg (strstr (out, "rc=0") == NULL && strstr (out, "rc=") != NULL
                     && strstr (out, "origin:") == NULL,
                 "%s", out);
  /* Not a timeout: the sandbox has no default route left (the backend's isolate step), so
   * there is nowhere to send anything. */
  ck_assert_msg (strstr (out, "Network is unreachable") != NULL, "%s", out);
  /* A raw socket that never heard of proxies fares no better. */
  sandbox_sh (shared_id, raw_script, &raw);
  ck_assert_msg (strstr (raw, "rc=0") == NULL && strstr (raw, "Network is unreachable") != NULL,
                 "%s", raw);
}
END_TEST

/* A listed name that resolves to loopback is refused by the address screen: the proxy's own
 * loopback is not the sandbox's to reach. (curl itself skips the proxy for localhost, as
 * NO_PROXY says; --noproxy '' makes it ask.) */
START_TEST (test_name_resolving_to_loopback)
{
  g_autofree char *out
      = curl_in (shared_id, "--noproxy '' -x \"$http_proxy\" http://localhost:8080/");

  ck_assert_msg (strstr (out, "Egress denied: localhost resolves to ")
                     && strstr (out, "which is a loopback address.") && strstr (out, "HTTP=403"),
                 "%s", out);
}
END_TEST

/* The proxy upgrades plain http to TLS and stamps the header there; the sandbox never has it. */
START_TEST (test_brokered_header_reaches_only_the_origin)
{
  g_autofree char *out = curl_in (shared_id, "http://origin.test:8443/brokered");
  g_autofree char *logf = g_build_filename (log_dir, "requests.log", NULL);
  g_autofree char *seen = NULL;
  g_autofree char *inside = NULL;

  ck_assert_msg (strstr (out, "origin:GET /brokered") && strstr (out, "HTTP=200"), "%s", out);
  ck_assert_msg (strstr (out, SECRET) == NULL, "%s", out);
  ck_assert (g_file_get_contents (logf, &seen, NULL, NULL));
  g_strdelimit (seen, "\n", ' ');
  ck_assert_msg (strstr (seen, "GET /brokered ") != NULL
                     && strstr (seen, "X-Api-Key: " SECRET) != NULL,
                 "%s", seen);
  sandbox_sh (shared_id,
              "env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
              "tr '\\0' '\\n' < $f; done 2>/dev/null; echo done",
              &inside);
  ck_assert_msg (strstr (inside, "HTTPS_PROXY=") != NULL && strstr (inside, "done") != NULL, "%s",
                 inside);
  ck_assert_msg (strstr (inside, SECRET) == NULL, "the secret is visible inside");
}
END_TEST

/* The shared allowlist sandbox is on a network the test named; the host guard is on its
 * bridge all the same. */
START_TEST (test_allowlist_sandbox_cannot_reach_the_host)
{
  assert_no_way_to_the_host (shared_id, int_net);
}
END_TEST

/* Named no network: deny-all gets an --internal one of its own, reached on it by the host. */
static void
check_private_deny_all (const char *backend)
{
  g_autofree char *err = NULL;
  g_autofree char *id = create (&err, 2, "--backend", backend);
  g_autofree char *net = NULL, *kernel = NULL;

  ck_assert_msg (id != NULL, "create: %s", err);
  net = g_strconcat ("namzu-net-", id, NULL);
  assert_private_network (id, FALSE);
  if (strcmp (backend, "container:runsc") == 0)
    {
      sandbox_sh (id, "dmesg 2>&1 | head -n 1", &kernel);
      ck_assert_msg (strstr (kernel, "gVisor") != NULL, "not gVisor: %s", kernel);
    }
  assert_no_way_to_the_host (id, net);
  /* Another sandbox's proxy and worker are out of reach too. */
  assert_cannot_reach_the_shared_sandbox (id);
  destroy_sandbox (id);
  assert_released (id);
}

START_TEST (test_deny_all_alone_runc)
{
  check_private_deny_all ("container:docker");
}
END_TEST

START_TEST (test_deny_all_alone_runsc)
{
  check_private_deny_all ("container:runsc");
}
END_TEST

/* Even with the default route left in place (an image without namzu-egress, faked here by a
 * docker whose isolate run fails), every host address stays unreached: the guard does not
 * depend on the route being gone. */
START_TEST (test_kept_route_still_no_way_out)
{
  g_autofree char *real = g_find_program_in_path ("docker");
  g_autofree char *fake = g_build_filename (base, "docker-no-isolate", NULL);
  g_autofree char *script = g_strdup_printf ("#!/bin/sh\n[ \"$1\" = run ] && [ \"$2\" = --rm ] "
                                             "&& exit 1\nexec %s \"$@\"\n",
                                             real);
  g_autofree char *err = NULL, *id = NULL, *net = NULL, *handle = NULL, *text = NULL;

  ck_assert (g_file_set_contents (fake, script, -1, NULL) && chmod (fake, 0755) == 0);
  g_setenv ("NAMZU_DOCKER", fake, TRUE);
  id = create (&err, 0);
  g_unsetenv ("NAMZU_DOCKER");
  ck_assert_msg (id != NULL, "create: %s", err);
  handle = g_build_filename (state, id, "handle.json", NULL);
  ck_assert (g_file_get_contents (handle, &text, NULL, NULL));
  ck_assert_msg (strstr (text, "\"defaultRoute\":\"kept\"") != NULL, "%s", text);
  net = g_strconcat ("namzu-net-", id, NULL);
  assert_no_way_to_the_host (id, net);
  assert_cannot_reach_the_shared_sandbox (id);
  destroy_sandbox (id);
  assert_released (id);
}
END_TEST

/* An allowlist sandbox that names no network: its own network, its proxy alone beside it. */
START_TEST (test_allowlist_alone)
{
  g_autofree char *err = NULL;
  g_autofree char *id
      = create (&err, 10, "--profile", profile_path, "--egress-proxy-image", test_proxy_image,
                "--egress-upstream-network", up_net, "--allow-inward-for", "origin.test",
                "--credential", "origin.test:X-Api-Key:NZ_TEST_SECRET");
  g_autofree char *net = NULL, *ok = NULL;

  ck_assert_msg (id != NULL, "create: %s", err);
  net = g_strconcat ("namzu-net-", id, NULL);
  assert_private_network (id, TRUE);
  ok = curl_in (id, "-k https://origin.test:8443/alone");
  ck_assert_msg (strstr (ok, "origin:GET /alone") && strstr (ok, "HTTP=200"), "%s", ok);
  assert_no_way_to_the_host (id, net);
  assert_cannot_reach_the_shared_sandbox (id);
  destroy_sandbox (id);
  assert_released (id);
}
END_TEST

/* A named network takes one sandbox: deny-all is refused beside another sandbox's proxy, and
 * beside another deny-all sandbox. */
START_TEST (test_named_network_is_not_shared)
{
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL;
  g_autofree char *i1 = create (&e1, 4, "--docker-network", int_net, "--host-reachability",
                                "container-network");
  g_autofree char *a = create (&e2, 4, "--docker-network", int4_net, "--host-reachability",
                               "container-network");
  g_autofree char *b = NULL;
  g_autofree char *want = NULL;

  ck_assert_msg (i1 == NULL, "deny-all admitted beside the shared proxy: %s", i1);
  ck_assert_msg (strstr (e1, "already carries another sandbox's egress proxy") != NULL, "%s", e1);
  ck_assert_msg (a != NULL, "create: %s", e2);
  assert_no_way_to_the_host (a, int4_net);
  b = create (&e3, 4, "--docker-network", int4_net, "--host-reachability", "container-network");
  want = g_strdup_printf ("already carries container namzu-sandbox-%s", a);
  ck_assert_msg (b == NULL, "a second sandbox was admitted onto %s", int4_net);
  ck_assert_msg (strstr (e3, want) != NULL, "%s", e3);
  destroy_sandbox (a);
  ck_assert (!has_guard_rule (a));
}
END_TEST

/* No guard, no sandbox: a create that cannot install the rule is refused and leaves nothing. */
START_TEST (test_refused_without_the_guard)
{
  g_autofree char *fake = g_build_filename (base, "iptables-refuses", NULL);
  g_autofree char *e1 = NULL, *e2 = NULL, *nets = NULL;
  g_autofree char *i1 = NULL, *i2 = NULL;
  g_autofree char *filter = g_strconcat ("label=", label, NULL);

  ck_assert (g_file_set_contents (fake, "#!/bin/sh\necho 'iptables: Permission denied' >&2\n"
                                        "exit 4\n",
                                  -1, NULL)
             && chmod (fake, 0755) == 0);
  g_setenv ("NAMZU_IPTABLES", fake, TRUE);
  i1 = create (&e1, 0);
  i2 = create (&e2, 12, "--profile", profile_path, "--egress-proxy-image", test_proxy_image,
               "--egress-upstream-network", up_net, "--allow-inward-for", "origin.test",
               "--docker-network", int4_net, "--host-reachability", "container-network");
  g_unsetenv ("NAMZU_IPTABLES");
  ck_assert_msg (i1 == NULL && strstr (e1, "cannot install the host guard") != NULL, "%s", e1);
  ck_assert_msg (i2 == NULL && strstr (e2, "cannot install the host guard") != NULL, "%s", e2);
  /* Nothing started, no network of the backend's left. */
  assert_only_the_shared_sandbox_runs ();
  nets = docker ("network", "ls", "--filter", filter, "--format", "{{.Name}}", NULL);
  ck_assert_msg (nets != NULL && strstr (nets, "namzu-net-") == NULL, "left behind: %s", nets);
}
END_TEST

/* A create that fails once the guard is in force (here: an image whose entrypoint is no
 * worker, so the container exits during startup) takes the network and the rule with it. */
START_TEST (test_failed_create_leaves_no_guard)
{
  g_autofree char *err = NULL;
  g_autofree char *id = create (&err, 4, "--image", egress_image, "--ready-timeout", "20000");
  const char *at = NULL;
  g_autofree char *failed = NULL;

  ck_assert_msg (id == NULL, "created %s", id);
  at = err != NULL ? strstr (err, "namzu-sandbox-nz-") : NULL;
  ck_assert_msg (at != NULL, "no sandbox named in: %s", err);
  failed = g_strndup (at + strlen ("namzu-sandbox-"), 15);
  assert_released (failed);
}
END_TEST

/* Last: every sandbox this run made is destroyed, and none left a network or a rule. */
START_TEST (test_nothing_left_behind)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  g_autofree char *ids = NULL;
  g_auto (GStrv) lines = NULL;
  const char *n;

  while (d != NULL && (n = g_dir_read_name (d)) != NULL)
    if (!g_str_has_suffix (n, ".destroyed")) /* a tombstone is no sandbox */
      destroy_sandbox (n);
  ck_assert (g_file_get_contents (created_log, &ids, NULL, NULL));
  lines = g_strsplit (ids, "\n", -1);
  ck_assert_int_gt (g_strv_length (lines), 1);
  for (char **id = lines; *id != NULL; id++)
    if (**id != '\0')
      assert_released (*id);
}
END_TEST

/* ---- live policy change --------------------------------------------------------------- */

START_TEST (test_policy_swap)
{
  g_autofree char *err = NULL;
  g_autofree char *id = create_allowlist (int2_net, &err);
  g_autofree char *proxy = NULL, *before = NULL, *after = NULL, *denied = NULL, *ok = NULL;
  g_autofree char *destroy = tool ("namzu-destroy");
  g_autoptr (JsonObject) r1 = NULL;
  g_autoptr (JsonObject) r2 = NULL;
  g_autoptr (JsonObject) r3 = NULL;
  g_autofree char *gone = NULL;
  int rc = 0;

  ck_assert_msg (id != NULL, "create: %s", err);
  proxy = proxy_of (id);
  before = docker ("inspect", "--format", "{{.Id}}", proxy, NULL);
  /* Narrowing within the profile: other.test leaves the list. */
  r1 = set_policy (id, &rc, "origin.test");
  ck_assert_int_eq (rc, 0);
  ck_assert (json_object_get_boolean_member (r1, "changed"));
  after = docker ("inspect", "--format", "{{.Id}}", proxy, NULL);
  ck_assert_msg (after != NULL && g_strcmp0 (before, after) != 0, "the proxy was not replaced");
  denied = curl_in (id, "http://other.test:8443/");
  ck_assert_msg (strstr (denied, "other.test is not on this sandbox's allowlist."), "%s", denied);
  ok = curl_in (id, "-k https://origin.test:8443/after-swap");
  ck_assert_msg (strstr (ok, "origin:GET /after-swap"), "%s", ok);
  /* The same list again changes nothing; a host outside the profile is refused. */
  r2 = set_policy (id, &rc, "origin.test");
  ck_assert_int_eq (rc, 0);
  ck_assert (!json_object_get_boolean_member (r2, "changed"));
  r3 = set_policy (id, &rc, "evil.test");
  ck_assert_int_eq (rc, 1);
  ck_assert_str_eq (nz_json_get_string (json_object_get_object_member (r3, "error"), "code"),
                    "invalid-host");
  /* A replacement that cannot start leaves no proxy (fails closed) and says so; the next
   * call swaps, even to the list that was in force before. */
  {
    g_autofree char *real = g_find_program_in_path ("docker");
    g_autofree char *fake = g_build_filename (base, "docker-fail-run", NULL);
    g_autofree char *script = g_strdup_printf ("#!/bin/sh\n[ \"$1\" = run ] && exit 1\n"
                                               "exec %s \"$@\"\n",
                                               real);
    g_autoptr (JsonObject) r4 = NULL;
    g_autoptr (JsonObject) r5 = NULL;
    g_autofree char *closed = NULL, *back = NULL;

    ck_assert (g_file_set_contents (fake, script, -1, NULL) && chmod (fake, 0755) == 0);
    g_setenv ("NAMZU_DOCKER", fake, TRUE);
    r4 = set_policy (id, &rc, "other.test");
    g_unsetenv ("NAMZU_DOCKER");
    ck_assert_int_eq (rc, 1);
    ck_assert_msg (
        r4 != NULL
            && strstr (nz_json_get_string (json_object_get_object_member (r4, "error"), "message"),
                       "now has no egress")
                   != NULL,
        "no failure reported");
    closed = curl_in (id, "-k https://origin.test:8443/closed");
    ck_assert_msg (strstr (closed, "origin:") == NULL, "%s", closed);
    r5 = set_policy (id, &rc, "origin.test");
    ck_assert_int_eq (rc, 0);
    ck_assert (json_object_get_boolean_member (r5, "changed"));
    back = curl_in (id, "-k https://origin.test:8443/back");
    ck_assert_msg (strstr (back, "origin:GET /back"), "%s", back);
  }
  /* namzu-destroy takes the proxy with it. */
  {
    const char *const argv[] = { destroy, "--sandbox", id, NULL };

    ck_assert_int_eq (run (argv, NULL, NULL), 0);
  }
  gone = docker ("inspect", "--format", "{{.Id}}", proxy, NULL);
  ck_assert_ptr_null (gone);
}
END_TEST

/* ---- the same on gVisor ----------------------------------------------------------------- */

START_TEST (test_runsc_allowlist)
{
  g_autofree char *err = NULL;
  g_autofree char *id = create (
      &err, 14, "--backend", "container:runsc", "--profile", profile_path, "--docker-network",
      int3_net, "--host-reachability", "container-network", "--egress-proxy-image",
      test_proxy_image, "--egress-upstream-network", up_net, "--allow-inward-for", "origin.test");
  g_autofree char *kernel = NULL, *ok = NULL, *denied = NULL, *raw = NULL, *unreachable = NULL;
  g_autofree char *destroy = tool ("namzu-destroy");

  ck_assert_msg (id != NULL, "create: %s", err);
  sandbox_sh (id, "dmesg 2>&1 | head -n 1", &kernel);
  ck_assert_msg (strstr (kernel, "gVisor") != NULL, "not gVisor: %s", kernel);
  ok = curl_in (id, "-k https://origin.test:8443/runsc");
  ck_assert_msg (strstr (ok, "origin:GET /runsc"), "%s", ok);
  denied = curl_in (id, "http://denied.test/");
  ck_assert_msg (strstr (denied, "denied.test is not on this sandbox's allowlist."), "%s", denied);
  /* gVisor uses the network namespace's own stack here: the dropped route holds for it too. */
  raw = g_strdup_printf ("timeout 5 bash -c 'exec 3<>/dev/tcp/%s/8443' 2>&1; echo rc=$?",
                         origin_ip);
  sandbox_sh (id, raw, &unreachable);
  ck_assert_msg (strstr (unreachable, "Network is unreachable") != NULL, "%s", unreachable);
  assert_no_way_to_the_host (id, int3_net);
  {
    const char *const argv[] = { destroy, "--sandbox", id, NULL };

    ck_assert_int_eq (run (argv, NULL, NULL), 0);
  }
}
END_TEST

/* ---- refusals at create --------------------------------------------------------------- */

static void
assert_refused (const char *id, const char *err, const char *want)
{
  ck_assert_msg (id == NULL, "created %s", id);
  ck_assert_msg (strstr (err, want) != NULL, "want '%s' in: %s", want, err);
}

START_TEST (test_create_refusals)
{
  g_autofree char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
  g_autofree char *i1 = create (&e1, 8, "--egress", "origin.test", "--docker-network", up_net,
                                "--host-reachability", "container-network", "--egress-proxy-image",
                                test_proxy_image);
  g_autofree char *i2 = create (&e2, 6, "--egress", "origin.test", "--docker-network", int_net,
                                "--egress-proxy-image", test_proxy_image);
  g_autofree char *i3 = create (&e3, 6, "--egress", "origin.test", "--docker-network", int_net,
                                "--host-reachability", "container-network");
  /* Port rules need a V2 image: the worker image carries no label. */
  g_autofree char *i4
      = create (&e4, 8, "--profile", profile_path, "--docker-network", int_net,
                "--host-reachability", "container-network", "--egress-proxy-image", worker_image);
  /* The shared sandbox's proxy already answers to the alias on int_net. */
  g_autofree char *e5 = NULL;
  g_autofree char *i5 = create (&e5, 8, "--egress", "origin.test", "--docker-network", int_net,
                                "--host-reachability", "container-network", "--egress-proxy-image",
                                test_proxy_image);

  assert_refused (i1, e1, "an egress allowlist needs an --internal docker network");
  assert_refused (i2, e2, "cannot publish the worker's port on network");
  assert_refused (i3, e3, "without an egress proxy");
  assert_refused (i4, e4, "ai.namzu.egress-proxy.config");
  assert_refused (i5, e5, "already carries another sandbox's egress proxy");
  /* Nothing started for any of them. */
  assert_only_the_shared_sandbox_runs ();
}
END_TEST

/* ---- setup ---------------------------------------------------------------------------- */

static gboolean
make_cert (const char *dir)
{
  g_autofree char *key = g_build_filename (dir, "key.pem", NULL);
  g_autofree char *cert = g_build_filename (dir, "cert.pem", NULL);
  g_autofree char *tmpl = g_build_filename (dir, "cert.cfg", NULL);
  const char *const a1[]
      = { "certtool", "--generate-privkey", "--key-type=ecdsa", "--outfile", key, NULL };
  const char *const a2[] = { "certtool",
                             "--generate-self-signed",
                             "--load-privkey",
                             key,
                             "--template",
                             tmpl,
                             "--outfile",
                             cert,
                             NULL };

  g_file_set_contents (tmpl,
                       "cn = origin.test\ndns_name = origin.test\ndns_name = other.test\n"
                       "ca\ncert_signing_key\ntls_www_server\nexpiration_days = 2\n",
                       -1, NULL);
  return run (a1, NULL, NULL) == 0 && run (a2, NULL, NULL) == 0 && chmod (key, 0644) == 0;
}

/* The proxy image plus this run's CA, trusted through NAMZU_EGRESS_CA_FILE; it inherits the
 * config label. */
static gboolean
build_test_proxy_image (const char *certs)
{
  g_autofree char *ctx = g_build_filename (base, "proxy-image", NULL);
  g_autofree char *df = g_build_filename (ctx, "Dockerfile", NULL);
  g_autofree char *src = g_build_filename (certs, "cert.pem", NULL);
  g_autofree char *dst = g_build_filename (ctx, "ca.pem", NULL);
  g_autofree char *ca = NULL;
  g_autofree char *text = g_strdup_printf ("FROM %s\nCOPY ca.pem /etc/namzu-test-ca.pem\n"
                                           "ENV NAMZU_EGRESS_CA_FILE=/etc/namzu-test-ca.pem\n",
                                           egress_image);
  g_autofree char *out = NULL;

  if (g_mkdir (ctx, 0755) != 0 || !g_file_get_contents (src, &ca, NULL, NULL)
      || !g_file_set_contents (dst, ca, -1, NULL) || !g_file_set_contents (df, text, -1, NULL))
    return FALSE;
  g_setenv ("DOCKER_BUILDKIT", "0", TRUE);
  out = docker ("build", "-q", "--label", label, "-t", test_proxy_image, ctx, NULL);
  return out != NULL;
}

static gboolean
setup (void)
{
  g_autofree char *certs = g_build_filename (base, "certs", NULL);
  g_autofree char *certs_arg = NULL, *log_arg = NULL, *ip_fmt = NULL, *r1 = NULL, *r2 = NULL;
  g_autofree char *r3 = NULL, *r4 = NULL, *r5 = NULL, *r6 = NULL;

  state = g_build_filename (base, "state", NULL);
  log_dir = g_build_filename (base, "log", NULL);
  profile_path = g_build_filename (base, "profile.json", NULL);
  REQUIRE (g_mkdir (certs, 0755) == 0 && g_mkdir (log_dir, 0777) == 0 && chmod (log_dir, 0777) == 0,
           "mkdir");
  REQUIRE (g_file_set_contents (profile_path, profile_json, -1, NULL), "profile");
  REQUIRE (make_cert (certs), "certtool could not make a test certificate");
  REQUIRE (build_test_proxy_image (certs), "docker build %s failed", test_proxy_image);
  r1 = docker ("network", "create", "--label", label, up_net, NULL);
  r2 = docker ("network", "create", "--internal", "--label", label, int_net, NULL);
  r4 = docker ("network", "create", "--internal", "--label", label, int2_net, NULL);
  r5 = docker ("network", "create", "--internal", "--label", label, int3_net, NULL);
  r6 = docker ("network", "create", "--internal", "--label", label, int4_net, NULL);
  REQUIRE (r1 != NULL && r2 != NULL && r4 != NULL && r5 != NULL && r6 != NULL,
           "docker network create failed");
  certs_arg = g_strconcat (certs, ":/certs:ro", NULL);
  log_arg = g_strconcat (log_dir, ":/log", NULL);
  /* The image's python3 is minimal; the host's stdlib (the same 3.11) gives it http.server. */
  r3 = docker ("run", "--detach", "--rm", "--name", origin, "--label", label, "--network", up_net,
               "--network-alias", "origin.test", "--network-alias", "other.test", "--volume",
               "/usr/lib/python3.11:/usr/lib/python3.11:ro", "--volume", certs_arg, "--volume",
               log_arg, "--entrypoint", "/usr/bin/python3", worker_image, "-c", origin_py, NULL);
  REQUIRE (r3 != NULL, "the origin container did not start");
  ip_fmt = g_strdup_printf ("{{(index .NetworkSettings.Networks \"%s\").IPAddress}}", up_net);
  origin_ip = docker ("inspect", "--format", ip_fmt, origin, NULL);
  REQUIRE (origin_ip != NULL && g_hostname_is_ip_address (origin_ip), "origin address");
  {
    g_autofree char *err = NULL;

    shared_id = create_allowlist (int_net, &err);
    if (shared_id == NULL)
      fprintf (stderr, "shared sandbox: %s\n", err);
  }
  return shared_id != NULL;
}

static void
teardown (void)
{
  g_autoptr (GDir) d = g_dir_open (state, 0, NULL);
  g_autofree char *destroy = tool ("namzu-destroy");
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", base);
  const char *n;

  while (d != NULL && (n = g_dir_read_name (d)) != NULL)
    {
      const char *const argv[] = { destroy, "--sandbox", n, NULL };

      run (argv, NULL, NULL);
    }
  g_free (docker ("rm", "-f", origin, NULL));
  g_free (docker ("network", "rm", int_net, NULL));
  g_free (docker ("network", "rm", int2_net, NULL));
  g_free (docker ("network", "rm", int3_net, NULL));
  g_free (docker ("network", "rm", int4_net, NULL));
  g_free (docker ("network", "rm", up_net, NULL));
  g_free (docker ("image", "rm", "-f", test_proxy_image, NULL));
  if (system (cmd) != 0)
    fprintf (stderr, "could not remove %s\n", base);
}

static Suite *
suite (void)
{
  Suite *s = suite_create ("docker-egress");
  TCase *tc = tcase_create ("egress");

  tcase_set_timeout (tc, 180);
  tcase_add_test (tc, test_proxy_is_a_dual_homed_hardened_sibling);
  tcase_add_test (tc, test_allowed_host_through_the_tunnel);
  tcase_add_test (tc, test_denied_host_port_and_literal);
  tcase_add_test (tc, test_name_resolving_to_loopback);
  tcase_add_test (tc, test_only_the_named_host_is_exempt);
  tcase_add_test (tc, test_no_way_around_the_proxy);
  tcase_add_test (tc, test_brokered_header_reaches_only_the_origin);
  tcase_add_test (tc, test_allowlist_sandbox_cannot_reach_the_host);
  tcase_add_test (tc, test_deny_all_alone_runc);
  tcase_add_test (tc, test_deny_all_alone_runsc);
  tcase_add_test (tc, test_kept_route_still_no_way_out);
  tcase_add_test (tc, test_allowlist_alone);
  tcase_add_test (tc, test_named_network_is_not_shared);
  tcase_add_test (tc, test_refused_without_the_guard);
  tcase_add_test (tc, test_failed_create_leaves_no_guard);
  tcase_add_test (tc, test_policy_swap);
  tcase_add_test (tc, test_runsc_allowlist);
  tcase_add_test (tc, test_create_refusals);
  tcase_add_test (tc, test_nothing_left_behind);
  suite_add_tcase (s, tc);
  return s;
}

static const char *
env_or (const char *name, const char *fallback)
{
  const char *v = g_getenv (name);

  return v != NULL && *v != '\0' ? v : fallback;
}

int
main (void)
{
  g_autofree char *info = NULL, *img = NULL, *egress = NULL;
  g_autofree char *certtool = g_find_program_in_path ("certtool");
  int rc = 1;

  worker_image = g_strdup (env_or ("NAMZU_WORKER_IMAGE", "namzu-worker:latest"));
  egress_image = g_strdup (env_or ("NAMZU_EGRESS_IMAGE", "namzu-egress-proxy:latest"));
  nz_test_require (g_spawn_command_line_sync ("docker info --format '{{.ServerVersion}}'", &info,
                                              NULL, &rc, NULL)
                       && rc == 0,
                   "a running docker daemon (scripts/start-dockerd)");
  {
    g_autofree char *c1 = g_strdup_printf ("docker image inspect %s", worker_image);
    g_autofree char *c2 = g_strdup_printf ("docker image inspect %s", egress_image);

    nz_test_require (g_spawn_command_line_sync (c1, &img, NULL, &rc, NULL) && rc == 0
                         && g_spawn_command_line_sync (c2, &egress, NULL, &rc, NULL) && rc == 0,
                     "the worker and egress-proxy images (scripts/build-images)");
  }
  nz_test_require (certtool != NULL, "certtool (gnutls-bin, scripts/install-deps)");
  nz_test_require (g_file_test ("/usr/lib/python3.11/http/server.py", G_FILE_TEST_EXISTS)
                       && g_file_test ("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE),
                   "the host's python3.11 standard library (the origin container borrows it)");
  REQUIRE (g_mkdtemp (base) != NULL && chmod (base, 0755) == 0, "mkdtemp");
  prefix = g_strdup_printf ("nzc-egress-%d", (int)getpid ());
  label = g_strdup_printf ("ai.namzu.test=%s", prefix);
  up_net = g_strconcat (prefix, "-up", NULL);
  int_net = g_strconcat (prefix, "-int", NULL);
  int2_net = g_strconcat (prefix, "-int2", NULL);
  int3_net = g_strconcat (prefix, "-int3", NULL);
  int4_net = g_strconcat (prefix, "-int4", NULL);
  created_log = g_build_filename (base, "created", NULL);
  origin = g_strconcat (prefix, "-origin", NULL);
  test_proxy_image = g_strdup_printf ("namzu-egress-proxy:%s", prefix);
  if (!setup ())
    {
      printf ("1..1\nnot ok 1 - the shared docker egress sandbox could not be created\n");
      teardown ();
      return EXIT_FAILURE;
    }
  rc = nz_test_run (suite ());
  teardown ();
  return rc;
}
