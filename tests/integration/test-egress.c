/* Integration tests for namzu-egress proxy: real curl through the real proxy to an origin
 * HTTP/HTTPS server in a network namespace this test creates (10.231.x.0/30 on a veth pair that
 * exists only for the test). Nothing is sent anywhere else: names are resolved by the proxy's
 * test-only resolver table (--test-resolve), never by DNS. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdarg.h>
#include <gio/gio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../nz-test.h"

/* The origin: echoes the request line and headers, so a test can see what arrived. */
static const char origin_py[] = "import http.server, ssl, sys, threading\n"
                                "addr, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]\n"
                                "class H(http.server.BaseHTTPRequestHandler):\n"
                                "    def do_GET(self):\n"
                                "        body = ('origin:%s %s\\n' % (self.command, self.path) + "
                                "str(self.headers)).encode()\n"
                                "        self.send_response(200)\n"
                                "        self.send_header('Content-Length', str(len(body)))\n"
                                "        self.end_headers()\n"
                                "        self.wfile.write(body)\n"
                                "    def log_message(self, *a):\n"
                                "        pass\n"
                                "plain = http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H)\n"
                                "tls = http.server.ThreadingHTTPServer(('0.0.0.0', 8443), H)\n"
                                "ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
                                "ctx.load_cert_chain(cert, key)\n"
                                "tls.socket = ctx.wrap_socket(tls.socket, server_side=True)\n"
                                "threading.Thread(target=tls.serve_forever, daemon=True).start()\n"
                                "print('ready', flush=True)\n"
                                "plain.serve_forever()\n";

static char *tmpdir;
static char ns[64];
static char origin_addr[32];
/* A second origin address that no range in the screen covers: RFC 5737 TEST-NET-2, which is
 * never routed on the internet and here exists only on this test's veth pair. */
static char public_addr[32];

static void
die_with_parent (gpointer data)
{
  prctl (PR_SET_PDEATHSIG, SIGKILL);
}

static int
run (const char *cmdline)
{
  int status = 0;
  g_autoptr (GError) error = NULL;

  ck_assert_msg (g_spawn_command_line_sync (cmdline, NULL, NULL, &status, &error), "%s: %s",
                 cmdline, error ? error->message : "");
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128;
}

/* Reads one line from @fd (blocking), up to a bound. */
static char *
read_line (int fd)
{
  GString *s = g_string_new (NULL);
  char c;

  while (s->len < 4096 && read (fd, &c, 1) == 1 && c != '\n')
    g_string_append_c (s, c);
  return g_string_free (s, FALSE);
}

static GPid
spawn (char **argv, char **envp, int *out_fd)
{
  g_autoptr (GError) error = NULL;
  GPid pid = 0;

  ck_assert_msg (g_spawn_async_with_pipes (NULL, argv, envp,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_SEARCH_PATH,
                                           die_with_parent, NULL, &pid, NULL, out_fd, NULL, &error),
                 "spawn %s: %s", argv[0], error ? error->message : "");
  return pid;
}

/* Picks a /30 (10.231.N.0/30 and 198.51.100.N) nobody on this machine uses right now: other
 * runs of this test (other build directories) may be running. A lock file per N, held until
 * this case's process exits, plus a check that no route for it exists (a namespace a failed
 * case left behind until main() removes it). */
static int
pick_net (void)
{
  for (int attempt = 0; attempt < 500; attempt++)
    {
      int n = g_random_int_range (1, 251);
      g_autofree char *lock = g_strdup_printf ("/tmp/nzeg-net-%d.lock", n);
      g_autofree char *probe = g_strdup_printf (
          "sh -c 'test -z \"$(ip -o route show 10.231.%d.0/30; ip -o route show 198.51.100.%d)\"'",
          n, n);
      int fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

      if (fd < 0)
        continue;
      if (flock (fd, LOCK_EX | LOCK_NB) == 0 && run (probe) == 0)
        return n; /* fd stays open: the lock lives as long as this case */
      close (fd);
    }
  ck_abort_msg ("no free 10.231.N.0/30 for the test origin");
  return 0;
}

/* A fresh namespace per case, named after this process so main() can remove them all. */
static void
origin_up (void)
{
  g_autofree char *cmd = NULL;
  g_autofree char *py = g_build_filename (tmpdir, "origin.py", NULL);
  g_autofree char *cert = g_build_filename (tmpdir, "cert.pem", NULL);
  g_autofree char *key = g_build_filename (tmpdir, "key.pem", NULL);
  g_autofree char *line = NULL;
  char vh[16], vn[16];
  int net = pick_net ();
  int out = -1;

  g_snprintf (ns, sizeof ns, "nzeg-%d-%d", getppid (), getpid ());
  g_snprintf (vh, sizeof vh, "nzh%d", getpid ());
  g_snprintf (vn, sizeof vn, "nzn%d", getpid ());
  g_snprintf (origin_addr, sizeof origin_addr, "10.231.%d.2", net);
  cmd = g_strdup_printf ("ip netns add %s", ns);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip link add %s type veth peer name %s netns %s", vh, vn, ns);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip addr add 10.231.%d.1/30 dev %s", net, vh);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip link set %s up", vh);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip -n %s addr add %s/30 dev %s", ns, origin_addr, vn);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip -n %s link set %s up", ns, vn);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  g_snprintf (public_addr, sizeof public_addr, "198.51.100.%d", net);
  cmd = g_strdup_printf ("ip -n %s addr add %s/32 dev %s", ns, public_addr, vn);
  ck_assert_int_eq (run (cmd), 0);
  g_free (cmd);
  cmd = g_strdup_printf ("ip route add %s/32 dev %s", public_addr, vh);
  ck_assert_int_eq (run (cmd), 0);
  {
    char *argv[] = { "ip", "netns", "exec", ns, "python3", py, origin_addr, cert, key, NULL };
    GPid pid = spawn (argv, NULL, &out);

    (void)pid;
    line = read_line (out);
    ck_assert_msg (g_str_equal (line, "ready"), "origin did not start: '%s'", line);
    close (out);
  }
}

typedef struct
{
  GPid pid;
  int port;
  int out;
  char *log;
} Proxy;

/* Set by a test whose proxy makes TLS connections upstream: LeakSanitizer (clang 14) then
 * crashes in its own tracer when the proxy exits ("Tracer caught signal 11"), walking the
 * dynamic TLS of the thread glib-networking ran the GnuTLS handshake on; with LSan's use_tls=0
 * it does not crash, so it is that walk. ASan's other checks stay on for that proxy, and every
 * other test's proxy keeps leak checking. */
static gboolean proxy_without_lsan;

static Proxy
proxy_up (const char *config_env, const char *config, const char *const *extra)
{
  g_autofree char *tool = nz_test_tool ("namzu-egress");
  g_autofree char *cert = g_build_filename (tmpdir, "cert.pem", NULL);
  g_autofree char *resolve = g_strdup_printf (
      "origin.test=%s,other.test=%s,inward.test=127.0.0.1,mixed.test=%s;127.0.0.1,"
      "public.test=%s,stall.test=127.0.0.1",
      origin_addr, origin_addr, public_addr, public_addr);
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) envp = g_get_environ ();
  g_autofree char *line = NULL;
  Proxy p = { 0 };
  char *port_s;

  p.log = g_strdup_printf ("%s/decisions-%d.log", tmpdir, getpid ());
  g_ptr_array_add (argv, g_strdup (tool));
  g_ptr_array_add (argv, g_strdup ("proxy"));
  g_ptr_array_add (argv, g_strdup ("--listen=127.0.0.1"));
  g_ptr_array_add (argv, g_strdup ("--port=0"));
  g_ptr_array_add (argv, g_strdup_printf ("--log=%s", p.log));
  g_ptr_array_add (argv, g_strdup_printf ("--test-resolve=%s", resolve));
  for (; extra != NULL && *extra != NULL; extra++)
    g_ptr_array_add (argv, g_strdup (*extra));
  g_ptr_array_add (argv, NULL);
  envp = g_environ_unsetenv (envp, "NAMZU_EGRESS_PROXY_CONFIG");
  envp = g_environ_unsetenv (envp, "NAMZU_EGRESS_PROXY_CONFIG_V2");
  envp = g_environ_setenv (envp, config_env, config, TRUE);
  envp = g_environ_setenv (envp, "NAMZU_EGRESS_CA_FILE", cert, TRUE);
  /* The proxy dials the addresses it screened itself, never through a proxy its own
   * environment names (nothing listens there). */
  for (const char *const *v
       = (const char *const[]){ "http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                                "HTTPS_PROXY", "ALL_PROXY", NULL };
       *v != NULL; v++)
    envp = g_environ_setenv (envp, *v, "http://127.0.0.1:9", TRUE);
  envp = g_environ_unsetenv (envp, "no_proxy");
  envp = g_environ_unsetenv (envp, "NO_PROXY");
  if (proxy_without_lsan && g_environ_getenv (envp, "ASAN_OPTIONS") != NULL)
    {
      g_autofree char *asan
          = g_strconcat (g_environ_getenv (envp, "ASAN_OPTIONS"), ":detect_leaks=0", NULL);

      envp = g_environ_setenv (envp, "ASAN_OPTIONS", asan, TRUE);
    }
  p.pid = spawn ((char **)argv->pdata, envp, &p.out);
  line = read_line (p.out);
  ck_assert_msg (g_str_has_prefix (line, "namzu-egress-proxy: listening on 127.0.0.1:"), "%s",
                 line);
  port_s = line + strlen ("namzu-egress-proxy: listening on 127.0.0.1:");
  p.port = atoi (port_s);
  ck_assert_int_gt (p.port, 0);
  return p;
}

static void
proxy_down (Proxy *p)
{
  int status = 0;

  kill (p->pid, SIGTERM);
  ck_assert_int_eq (waitpid (p->pid, &status, 0), p->pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "proxy status %d", status);
  close (p->out);
  g_free (p->log);
}

/* curl through the proxy; returns the HTTP status (0 when curl failed), body in *out. */
static int
curl (const Proxy *p, const char *url, const char *const *extra, char **out)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *cert = g_build_filename (tmpdir, "cert.pem", NULL);
  g_autofree char *so = NULL;
  g_autofree char *se = NULL;
  g_autoptr (GError) error = NULL;
  int status = 0;
  char *code;

  g_ptr_array_add (argv, g_strdup ("curl"));
  g_ptr_array_add (argv, g_strdup ("-sS"));
  g_ptr_array_add (argv, g_strdup ("--max-time"));
  g_ptr_array_add (argv, g_strdup ("20"));
  g_ptr_array_add (argv, g_strdup ("--cacert"));
  g_ptr_array_add (argv, g_strdup (cert));
  g_ptr_array_add (argv, g_strdup ("-x"));
  g_ptr_array_add (argv, g_strdup_printf ("http://127.0.0.1:%d", p->port));
  g_ptr_array_add (argv, g_strdup ("-w"));
  g_ptr_array_add (argv, g_strdup ("\n%{http_code}"));
  for (; extra != NULL && *extra != NULL; extra++)
    g_ptr_array_add (argv, g_strdup (*extra));
  g_ptr_array_add (argv, g_strdup (url));
  g_ptr_array_add (argv, NULL);
  ck_assert (g_spawn_sync (NULL, (char **)argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &so,
                           &se, &status, &error));
  code = strrchr (so, '\n');
  ck_assert (code != NULL);
  *code = '\0';
  if (out != NULL)
    *out = g_strdup_printf ("%s%s", so, se);
  return atoi (code + 1);
}

static char *
slurp (const char *path)
{
  char *data = NULL;

  g_file_get_contents (path, &data, NULL, NULL);
  return data != NULL ? data : g_strdup ("");
}

#define V1_PLAIN                                                                                   \
  "{\"allowedHosts\":[\"origin.test\",\"other.test\",\"inward.test\",\"mixed.test\","              \
  "\"public.test\",\"%s\"],"                                                                       \
  "\"upgradeToHttps\":false,\"allowInwardFor\":[\"origin.test\",\"other.test\"]}"

START_TEST (test_allowed_and_denied)
{
  g_autofree char *config = NULL;
  g_autofree char *body = NULL;
  g_autofree char *log = NULL;
  g_autofree char *literal = NULL;
  Proxy p;

  origin_up ();
  config = g_strdup_printf (V1_PLAIN, origin_addr);
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG", config, NULL);
  /* allowed: plain HTTP, and HTTPS through a CONNECT tunnel */
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/hello", NULL, &body), 200);
  ck_assert_msg (strstr (body, "origin:GET /hello") != NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  ck_assert_int_eq (curl (&p, "https://origin.test:8443/tls", NULL, &body), 200);
  ck_assert_msg (strstr (body, "origin:GET /tls") != NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* a host not on the list */
  ck_assert_int_eq (curl (&p, "http://denied.test:8080/", NULL, &body), 403);
  ck_assert_msg (strstr (body, "Egress denied: denied.test is not on this sandbox's allowlist.")
                     != NULL,
                 "%s", body);
  g_clear_pointer (&body, g_free);
  ck_assert_int_eq (curl (&p, "https://denied.test/", NULL, &body), 0);
  ck_assert_msg (strstr (body, "403") != NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* an allowed literal that is a private address; allowInwardFor names origin.test, not it */
  literal = g_strdup_printf ("http://%s:8080/", origin_addr);
  ck_assert_int_eq (curl (&p, literal, NULL, &body), 403);
  ck_assert_msg (strstr (body, "is a private address, which is not reachable from a sandbox.")
                     != NULL,
                 "%s", body);
  g_clear_pointer (&body, g_free);
  /* an allowed name that resolves to loopback, on both paths */
  ck_assert_int_eq (curl (&p, "http://inward.test:8080/", NULL, &body), 403);
  ck_assert_msg (strstr (body, "Egress denied: inward.test resolves to 127.0.0.1, which is a "
                               "loopback address. The host is on the allowlist; the address it "
                               "resolves to is not reachable from a sandbox.")
                     != NULL,
                 "%s", body);
  g_clear_pointer (&body, g_free);
  ck_assert_int_eq (curl (&p, "https://inward.test:8443/", NULL, &body), 0);
  g_clear_pointer (&body, g_free);
  /* a name no exemption covers reaches the origin when its address passes the screen... */
  ck_assert_int_eq (curl (&p, "http://public.test:8080/p", NULL, &body), 200);
  ck_assert_msg (strstr (body, "origin:GET /p") != NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* ...but every answer is screened, not only the first one it would dial */
  ck_assert_int_eq (curl (&p, "http://mixed.test:8080/", NULL, &body), 403);
  ck_assert_msg (strstr (body, "mixed.test resolves to 127.0.0.1") != NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* hop-by-hop headers never reach the origin */
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/h",
                          (const char *const[]){ "-H", "Proxy-Authorization: Basic c2VjcmV0", "-H",
                                                 "Keep-Alive: timeout=5", NULL },
                          &body),
                    200);
  ck_assert_msg (strcasestr (body, "proxy-authorization") == NULL, "%s", body);
  ck_assert_msg (strcasestr (body, "keep-alive") == NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* the loop guard, before the allowlist */
  {
    g_autofree char *self = g_strdup_printf ("http://127.0.0.1:%d/", p.port);

    ck_assert_int_eq (curl (&p, self, NULL, &body), 400);
    ck_assert_msg (g_str_has_prefix (body, "Refusing to proxy a request addressed to the proxy "
                                           "itself"),
                   "%s", body);
    g_clear_pointer (&body, g_free);
  }
  /* neither an absolute URL nor a Host header */
  {
    g_autoptr (GSocketClient) sc = g_socket_client_new ();
    g_autoptr (GSocketConnection) raw
        = g_socket_client_connect_to_host (sc, "127.0.0.1", p.port, NULL, NULL);
    const char req[] = "GET / HTTP/1.1\r\n\r\n";
    char reply[512] = "";
    gsize got = 0;

    ck_assert (raw != NULL);
    ck_assert (g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (raw)), req,
                                          strlen (req), NULL, NULL, NULL));
    g_input_stream_read_all (g_io_stream_get_input_stream (G_IO_STREAM (raw)), reply,
                             sizeof reply - 1, &got, NULL, NULL);
    ck_assert_msg (g_str_has_prefix (reply, "HTTP/1.1 400 "), "%s", reply);
    ck_assert_msg (g_str_has_suffix (reply, "\r\n\r\nMalformed proxy request: no absolute URL "
                                            "and no Host header.\n"),
                   "%s", reply);
  }
  /* the decision log: one JSON line per decision, with host, port, rule, reason */
  log = slurp (p.log);
  ck_assert_msg (strstr (log, "\"decision\":\"allow\",\"method\":\"GET\",\"host\":\"origin.test\","
                              "\"port\":8080,\"rule\":\"origin.test\"")
                     != NULL,
                 "%s", log);
  ck_assert_msg (strstr (log, "\"host\":\"denied.test\",\"port\":8080,\"rule\":\"allowlist\","
                              "\"reason\":\"not on the egress allowlist\"")
                     != NULL,
                 "%s", log);
  ck_assert_msg (strstr (log, "\"rule\":\"address-screen\",\"reason\":\"resolves to a loopback "
                              "address\"")
                     != NULL,
                 "%s", log);
  proxy_down (&p);
}
END_TEST

START_TEST (test_port_rules_v2)
{
  g_autofree char *body = NULL;
  Proxy p;

  origin_up ();
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG_V2",
                "{\"allowedHosts\":[\"origin.test\"],\"upgradeToHttps\":false,"
                "\"allowInwardFor\":[\"origin.test\"],"
                "\"hostPorts\":[{\"host\":\"origin.test\",\"ports\":[8080]}]}",
                NULL);
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/", NULL, &body), 200);
  g_clear_pointer (&body, g_free);
  ck_assert_int_eq (curl (&p, "http://origin.test:8443/", NULL, &body), 403);
  ck_assert_msg (strstr (body, "Egress denied: origin.test:8443 is not an allowed port.") != NULL,
                 "%s", body);
  g_clear_pointer (&body, g_free);
  /* a portless CONNECT is checked on 443 */
  ck_assert_int_eq (curl (&p, "https://origin.test/", NULL, &body), 0);
  g_clear_pointer (&body, g_free);
  proxy_down (&p);
}
END_TEST

START_TEST (test_brokered_credential)
{
  g_autofree char *body = NULL;
  Proxy p;

  origin_up ();
  proxy_without_lsan = TRUE;
  /* upgradeToHttps defaults to true: the sandbox speaks plain HTTP, the secret travels in TLS. */
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG",
                "{\"allowedHosts\":[\"origin.test\",\"other.test\"],"
                "\"allowInwardFor\":[\"origin.test\",\"other.test\"],"
                "\"credentials\":[{\"host\":\"origin.test\",\"header\":\"Authorization\","
                "\"value\":\"Bearer brokered-s3cret\"}]}",
                NULL);
  ck_assert_int_eq (curl (&p, "http://origin.test:8443/api",
                          (const char *const[]){ "-H", "Authorization: Bearer from-sandbox", NULL },
                          &body),
                    200);
  ck_assert_msg (strstr (body, "Authorization: Bearer brokered-s3cret") != NULL, "%s", body);
  ck_assert_msg (strstr (body, "from-sandbox") == NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* only to the host it belongs to */
  ck_assert_int_eq (curl (&p, "http://other.test:8443/api", NULL, &body), 200);
  ck_assert_msg (strstr (body, "brokered-s3cret") == NULL, "%s", body);
  g_clear_pointer (&body, g_free);
  /* plain HTTP to an HTTP-only port fails upstream (the upgrade is not optional) */
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/", NULL, &body), 502);
  ck_assert_msg (g_str_has_prefix (body, "Upstream request failed: "), "%s", body);
  g_clear_pointer (&body, g_free);
  proxy_down (&p);
}
END_TEST

START_TEST (test_bounded)
{
  g_autofree char *config = NULL;
  g_autofree char *body = NULL;
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) hold = NULL;
  g_autoptr (GError) error = NULL;
  const char *extra[] = { "--max-connections=1", "--idle-timeout=2", NULL };
  Proxy p;
  gint64 t0;
  char buf[64];
  GInputStream *in;

  origin_up ();
  config = g_strdup_printf (V1_PLAIN, origin_addr);
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG", config, extra);
  hold = g_socket_client_connect_to_host (client, "127.0.0.1", p.port, NULL, &error);
  ck_assert_msg (hold != NULL, "%s", error ? error->message : "");
  g_usleep (200 * 1000);
  /* the one slot is taken: the next client is answered 503 at once */
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/", NULL, &body), 503);
  /* an idle client (no request head) is closed after the idle timeout */
  t0 = g_get_monotonic_time ();
  in = g_io_stream_get_input_stream (G_IO_STREAM (hold));
  ck_assert_int_le (g_input_stream_read (in, buf, sizeof buf, NULL, NULL), 0);
  ck_assert_int_lt (g_get_monotonic_time () - t0, 5 * G_USEC_PER_SEC);
  g_usleep (200 * 1000);
  g_clear_pointer (&body, g_free);
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/", NULL, &body), 200);
  proxy_down (&p);
}
END_TEST

/* ---- from inside a bwrap sandbox: namzu-create --profile, namzu-exec, namzu-egress set ---- */

static int
tool (char **out, const char *name, ...)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *so = NULL;
  g_autofree char *se = NULL;
  g_autoptr (GError) error = NULL;
  int status = 0;
  va_list ap;
  const char *a;

  g_ptr_array_add (argv, nz_test_tool (name));
  va_start (ap, name);
  while ((a = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, g_strdup (a));
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  ck_assert (
      g_spawn_sync (NULL, (char **)argv->pdata, NULL, 0, NULL, NULL, &so, &se, &status, &error));
  if (out != NULL)
    *out = g_strdup_printf ("%s%s", so, se);
  return WIFEXITED (status) ? WEXITSTATUS (status) : 128;
}

/* Runs a shell line inside the sandbox; returns its exit status, output in *out. */
static int
inside (const char *id, const char *script, char **out)
{
  return tool (out, "namzu-exec", "--sandbox", id, "--", "sh", "-c", script, NULL);
}

static char *
json_id (const char *out)
{
  const char *p = strstr (out, "\"id\":\"");

  ck_assert_msg (p != NULL, "no id in: %s", out);
  return g_strndup (p + 6, strcspn (p + 6, "\""));
}

static long
proxy_pid (const char *id)
{
  g_autofree char *path = g_strdup_printf ("%s/state/%s/handle.json", tmpdir, id);
  g_autofree char *data = slurp (path);
  const char *p = strstr (data, "\"proxyPid\":");

  return p != NULL ? atol (p + strlen ("\"proxyPid\":")) : 0;
}

START_TEST (test_bwrap_sandbox)
{
  g_autofree char *state = g_build_filename (tmpdir, "state", NULL);
  g_autofree char *cert = g_build_filename (tmpdir, "cert.pem", NULL);
  g_autofree char *profile = g_strdup_printf ("%s/profile-%d.json", tmpdir, getpid ());
  g_autofree char *resolve = NULL;
  g_autofree char *out = NULL;
  g_autofree char *id = NULL;
  g_autofree char *script = NULL;
  long pid1, pid2;

  origin_up ();
  resolve = g_strdup_printf ("public.test=%s,origin.test=%s,inward.test=127.0.0.1", public_addr,
                             origin_addr);
  g_mkdir_with_parents (state, 0700);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_setenv ("NAMZU_EGRESS_TEST_RESOLVE", resolve, TRUE);
  g_setenv ("NAMZU_EGRESS_CA_FILE", cert, TRUE);
  g_unsetenv ("NAMZU_SANDBOX");
  g_file_set_contents (profile,
                       "{\"name\":\"t\",\"hosts\":[{\"host\":\"public.test\",\"ports\":[8443]},"
                       "{\"host\":\"origin.test\"},{\"host\":\"inward.test\"}]}",
                       -1, NULL);
  /* The brokered secret is handed over in namzu-create's environment, never on argv. */
  g_setenv ("NZ_TEST_BROKERED", "Bearer brokered-s3cret-bwrap", TRUE);
  ck_assert_int_eq (tool (&out, "namzu-create", "--profile", profile, "--credential",
                          "public.test:Authorization:NZ_TEST_BROKERED", NULL),
                    0);
  g_unsetenv ("NZ_TEST_BROKERED");
  id = json_id (out);
  ck_assert_msg (strstr (out, "\"network\":\"allowlist\"") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);

  /* through the proxy env: plain HTTP leaves the proxy as HTTPS; HTTPS is a CONNECT tunnel */
  ck_assert_int_eq (inside (id, "curl -sS --max-time 20 http://public.test:8443/a", &out), 0);
  ck_assert_msg (strstr (out, "origin:GET /a") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (inside (id, "curl -sSk --max-time 20 https://public.test:8443/b", &out), 0);
  ck_assert_msg (strstr (out, "origin:GET /b") != NULL, "%s", out);
  /* no credential inside a CONNECT tunnel */
  ck_assert_msg (strstr (out, "brokered-s3cret") == NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  /* the brokered header arrives at the origin (over the upgraded, TLS leg)... */
  ck_assert_int_eq (inside (id,
                            "curl -sS --max-time 20 -H 'Authorization: mine' "
                            "http://public.test:8443/cred",
                            &out),
                    0);
  ck_assert_msg (strstr (out, "Authorization: Bearer brokered-s3cret-bwrap") != NULL, "%s", out);
  ck_assert_msg (strstr (out, "Authorization: mine") == NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  /* ...and is nowhere in the sandbox: not in any environment or command line it can read */
  ck_assert_int_eq (inside (id,
                            "(env; cat /proc/*/environ /proc/*/cmdline) 2>/dev/null | "
                            "tr '\\0' '\\n' | grep -c 'brokered-s3[c]ret'; true",
                            &out),
                    0);
  ck_assert_str_eq (g_strstrip (out), "0");
  g_clear_pointer (&out, g_free);
  {
    g_autofree char *cmdline_path = g_strdup_printf ("/proc/%ld/cmdline", proxy_pid (id));
    g_autofree char *cmdline = NULL;
    gsize len = 0;

    /* nor on the proxy's own command line on the host */
    ck_assert (g_file_get_contents (cmdline_path, &cmdline, &len, NULL));
    for (gsize i = 0; i < len; i++)
      if (cmdline[i] == '\0')
        cmdline[i] = ' ';
    ck_assert_msg (strstr (cmdline, "brokered") == NULL, "%s", cmdline);
  }
  /* refused: a host, a port, a name resolving inward, a private literal */
  inside (id, "curl -sS http://denied.test/", &out);
  ck_assert_msg (strstr (out, "Egress denied: denied.test is not on this sandbox's allowlist.")
                     != NULL,
                 "%s", out);
  g_clear_pointer (&out, g_free);
  inside (id, "curl -sS http://public.test:8080/", &out);
  ck_assert_msg (strstr (out, "Egress denied: public.test:8080 is not an allowed port.") != NULL,
                 "%s", out);
  g_clear_pointer (&out, g_free);
  inside (id, "curl -sS http://inward.test:8443/", &out);
  ck_assert_msg (strstr (out, "inward.test resolves to 127.0.0.1, which is a loopback address")
                     != NULL,
                 "%s", out);
  g_clear_pointer (&out, g_free);
  inside (id, "curl -sS http://origin.test:8443/", &out);
  ck_assert_msg (strstr (out, "which is a private address") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  script = g_strdup_printf ("curl -sS http://%s:8443/", origin_addr);
  inside (id, script, &out);
  ck_assert_msg (strstr (out, "Egress denied: ") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&script, g_free);
  /* ignoring the proxy env: nowhere to send anything */
  script = g_strdup_printf ("curl -sS -v --max-time 5 --noproxy '*' http://%s:8443/", public_addr);
  ck_assert_int_ne (inside (id, script, &out), 0);
  ck_assert_msg (strstr (out, "Network is unreachable") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  g_clear_pointer (&script, g_free);
  script = g_strdup_printf ("python3 -c \"import socket; socket.create_connection(('%s', 8080))\"",
                            public_addr);
  ck_assert_int_ne (inside (id, script, &out), 0);
  ck_assert_msg (strstr (out, "Network is unreachable") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (inside (id, "awk -F: 'NR > 2 { print $1 }' /proc/net/dev", &out), 0);
  ck_assert_str_eq (g_strstrip (out), "lo");
  g_clear_pointer (&out, g_free);

  /* live policy: widening past the profile is refused before anything changes */
  ck_assert_int_eq (
      tool (&out, "namzu-egress", "set", "--sandbox", id, "public.test", "other.test", NULL), 1);
  ck_assert_msg (strstr (out, "\"code\":\"invalid-host\"") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  pid1 = proxy_pid (id);
  /* narrowing swaps the proxy and takes effect */
  ck_assert_int_eq (tool (&out, "namzu-egress", "set", "--sandbox", id, "inward.test", NULL), 0);
  ck_assert_msg (strstr (out, "\"changed\":true") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  pid2 = proxy_pid (id);
  ck_assert (pid2 > 0 && pid2 != pid1);
  ck_assert (kill (pid1, 0) != 0);
  inside (id, "curl -sS http://public.test:8443/", &out);
  ck_assert_msg (strstr (out, "Egress denied: public.test is not on this sandbox's allowlist.")
                     != NULL,
                 "%s", out);
  g_clear_pointer (&out, g_free);
  /* the same list again is a no-op */
  ck_assert_int_eq (tool (&out, "namzu-egress", "set", "--sandbox", id, "inward.test", NULL), 0);
  ck_assert_msg (strstr (out, "\"changed\":false") != NULL, "%s", out);
  ck_assert_int_eq (proxy_pid (id), pid2);
  g_clear_pointer (&out, g_free);
  /* a swap whose new proxy cannot start fails closed: the old one is gone, nothing passes */
  g_setenv ("NAMZU_EGRESS_BIN", "/bin/false", TRUE);
  ck_assert_int_eq (tool (&out, "namzu-egress", "set", "--sandbox", id, "public.test", NULL), 1);
  ck_assert_msg (strstr (out, "now has no egress") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  g_unsetenv ("NAMZU_EGRESS_BIN");
  ck_assert (kill (pid2, 0) != 0);
  ck_assert_int_ne (inside (id, "curl -sS --max-time 5 http://public.test:8443/", &out), 0);
  ck_assert_msg (strstr (out, "origin:") == NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  /* ...and the next call swaps */
  ck_assert_int_eq (tool (&out, "namzu-egress", "set", "--sandbox", id, "public.test", NULL), 0);
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (inside (id, "curl -sS --max-time 20 http://public.test:8443/c", &out), 0);
  ck_assert_msg (strstr (out, "origin:GET /c") != NULL, "%s", out);
  /* the replacement proxy brokers the same credential */
  ck_assert_msg (strstr (out, "brokered-s3cret-bwrap") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  /* destroy stops the proxy */
  pid1 = proxy_pid (id);
  ck_assert_int_eq (tool (&out, "namzu-destroy", "--sandbox", id, NULL), 0);
  for (int i = 0; i < 100 && kill (pid1, 0) == 0; i++)
    g_usleep (20 * 1000);
  ck_assert (kill (pid1, 0) != 0);
}
END_TEST

START_TEST (test_bwrap_refusals)
{
  g_autofree char *state = g_build_filename (tmpdir, "state-refusals", NULL);
  g_autofree char *profile = g_strdup_printf ("%s/bad-%d.json", tmpdir, getpid ());
  g_autofree char *out = NULL;
  g_autofree char *ls = NULL;

  g_mkdir_with_parents (state, 0700);
  g_setenv ("NAMZU_STATE_DIR", state, TRUE);
  g_file_set_contents (profile, "{\"name\":\"t\",\"hosts\":[{\"host\":\"a.example\"}]}", -1, NULL);
  /* a profile beside another egress setting is a conflicting policy, refused before any I/O */
  ck_assert_int_eq (
      tool (&out, "namzu-create", "--profile", profile, "--egress", "b.example", NULL), 1);
  ck_assert_msg (strstr (out, "egress profile: defaultEgress cannot be combined") != NULL, "%s",
                 out);
  g_clear_pointer (&out, g_free);
  /* a brokered credential for a host outside the profile */
  g_setenv ("NZ_TEST_BROKERED", "secret", TRUE);
  ck_assert_int_eq (tool (&out, "namzu-create", "--profile", profile, "--credential",
                          "b.example:Authorization:NZ_TEST_BROKERED", NULL),
                    1);
  ck_assert_msg (strstr (out, "egress profile: backend.brokeredCredentials[0].host \"b.example\" "
                              "is outside egress profile \"t\"")
                     != NULL,
                 "%s", out);
  ck_assert_msg (strstr (out, "conflicting-policy") != NULL || strstr (out, "error") != NULL, "%s",
                 out);
  g_clear_pointer (&out, g_free);
  g_file_set_contents (profile, "{\"name\":\"t\",\"hosts\":[{\"host\":\"*.example\"}]}", -1, NULL);
  ck_assert_int_eq (tool (&out, "namzu-create", "--profile", profile, NULL), 1);
  ck_assert_msg (strstr (out, "egress profile: hosts[0].host") != NULL, "%s", out);
  g_clear_pointer (&out, g_free);
  ck_assert_int_eq (tool (&ls, "namzu-ls", NULL), 0);
  ck_assert_msg (strstr (ls, "\"id\"") == NULL, "%s", ls);
}
END_TEST

/* A server that accepts and never reads: the slowest reader there is. */
static gpointer
stall_server (gpointer data)
{
  GSocket *listener = data;
  GSocket *c = g_socket_accept (listener, NULL, NULL);

  g_usleep (60 * G_USEC_PER_SEC);
  g_clear_object (&c);
  return NULL;
}

START_TEST (test_slow_reader_pauses_writer)
{
  g_autoptr (GSocket) listener
      = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  g_autoptr (GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) any = g_inet_socket_address_new (lo, 0);
  g_autoptr (GSocketAddress) bound = NULL;
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autofree char *req = NULL;
  g_autofree char *chunk = g_malloc0 (1024 * 1024);
  GSocket *sock;
  char head[256];
  gssize n;
  guint64 sent = 0;
  long rss0, rss1;
  Proxy p;

  ck_assert (g_socket_bind (listener, any, TRUE, NULL) && g_socket_listen (listener, NULL));
  bound = g_socket_get_local_address (listener, NULL);
  g_thread_unref (g_thread_new ("stall", stall_server, listener));
  origin_up ();
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG",
                "{\"allowedHosts\":[\"stall.test\"],\"allowInwardFor\":[\"stall.test\"]}", NULL);
  rss0 = vm_rss_kib (p.pid);
  conn = g_socket_client_connect_to_host (client, "127.0.0.1", p.port, NULL, NULL);
  ck_assert (conn != NULL);
  sock = g_socket_connection_get_socket (conn);
  req = g_strdup_printf ("CONNECT stall.test:%u HTTP/1.1\r\n\r\n",
                         g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound)));
  ck_assert (g_socket_send (sock, req, strlen (req), NULL, NULL) == (gssize)strlen (req));
  n = g_socket_receive (sock, head, sizeof head - 1, NULL, NULL);
  ck_assert (n > 0);
  head[n] = '\0';
  ck_assert_msg (strstr (head, " 200 ") != NULL, "%s", head);
  /* Push until the tunnel stops taking bytes for two seconds (or 256 MiB went in). */
  g_socket_set_blocking (sock, FALSE);
  while (sent < 256u * 1024 * 1024)
    {
      n = g_socket_send (sock, chunk, 1024 * 1024, NULL, NULL);
      if (n > 0)
        {
          sent += n;
          continue;
        }
      if (!g_socket_condition_timed_wait (sock, G_IO_OUT, 2 * G_USEC_PER_SEC, NULL, NULL))
        break;
    }
  rss1 = vm_rss_kib (p.pid);
  /* Socket buffers on three legs hold a few MiB; a proxy that kept reading would hold it all. */
  ck_assert_msg (sent < 48u * 1024 * 1024, "the proxy took %" G_GUINT64_FORMAT " bytes", sent);
  ck_assert_msg (rss1 - rss0 < 16 * 1024, "proxy RSS grew from %ld to %ld KiB", rss0, rss1);
  proxy_down (&p);
}
END_TEST

/* Sockets the proxy holds open (fds that are sockets). */
static int
proxy_sockets (GPid pid)
{
  g_autofree char *dir = g_strdup_printf ("/proc/%d/fd", (int)pid);
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  int n = 0;

  ck_assert (d != NULL);
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_autofree char *target = g_file_read_link (path, NULL);

      if (target != NULL && g_str_has_prefix (target, "socket:"))
        n++;
    }
  return n;
}

/* The upstream ends a tunnel first (an HTTP/1.0 reply), the client a little later: the
 * proxy closes both sockets and goes on serving. It used to spin on the hung-up upstream
 * socket, which starved the callback that finishes the tunnel: both sockets stayed open
 * forever and later plain requests through the proxy hung. */
START_TEST (test_tunnel_upstream_closes_first)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GString) got = g_string_new (NULL);
  g_autofree char *config = NULL;
  g_autofree char *body = NULL;
  static const char connect_req[] = "CONNECT origin.test:8080 HTTP/1.1\r\n\r\n";
  static const char get_req[] = "GET /first HTTP/1.0\r\nHost: origin.test\r\n\r\n";
  GSocket *sock;
  char buf[4096];
  gssize n;
  int idle_sockets;
  Proxy p;

  origin_up ();
  config = g_strdup_printf (V1_PLAIN, origin_addr);
  p = proxy_up ("NAMZU_EGRESS_PROXY_CONFIG", config, NULL);
  idle_sockets = proxy_sockets (p.pid);
  for (int round = 0; round < 3; round++)
    {
      g_string_truncate (got, 0);
      conn = g_socket_client_connect_to_host (client, "127.0.0.1", p.port, NULL, NULL);
      ck_assert (conn != NULL);
      sock = g_socket_connection_get_socket (conn);
      ck_assert (g_socket_send (sock, connect_req, strlen (connect_req), NULL, NULL)
                 == (gssize)strlen (connect_req));
      n = g_socket_receive (sock, buf, sizeof buf - 1, NULL, NULL);
      ck_assert (n > 0);
      buf[n] = '\0';
      ck_assert_msg (strstr (buf, " 200 ") != NULL, "%s", buf);
      ck_assert (g_socket_send (sock, get_req, strlen (get_req), NULL, NULL)
                 == (gssize)strlen (get_req));
      /* Read the reply to the end: the origin has closed its side. */
      while ((n = g_socket_receive (sock, buf, sizeof buf, NULL, NULL)) > 0)
        g_string_append_len (got, buf, n);
      ck_assert_msg (g_str_has_prefix (got->str, "HTTP/1.0 200"), "%s", got->str);
      g_usleep (200 * 1000);
      g_clear_object (&conn);
    }
  /* Both sockets of every tunnel are closed (a bounded wait, not a timing target). */
  for (int i = 0; i < 100 && proxy_sockets (p.pid) > idle_sockets; i++)
    g_usleep (50 * 1000);
  ck_assert_int_eq (proxy_sockets (p.pid), idle_sockets);
  /* And a plain request goes through. */
  ck_assert_int_eq (curl (&p, "http://origin.test:8080/after", NULL, &body), 200);
  proxy_down (&p);
}
END_TEST

static gboolean
make_cert (void)
{
  g_autofree char *key = g_build_filename (tmpdir, "key.pem", NULL);
  g_autofree char *cert = g_build_filename (tmpdir, "cert.pem", NULL);
  g_autofree char *tmpl = g_build_filename (tmpdir, "cert.cfg", NULL);
  g_autofree char *c1 = g_strdup_printf ("certtool --generate-privkey --key-type=ecdsa "
                                         "--outfile %s",
                                         key);
  g_autofree char *c2 = g_strdup_printf ("certtool --generate-self-signed --load-privkey %s "
                                         "--template %s --outfile %s",
                                         key, tmpl, cert);
  int s1 = 0, s2 = 0;

  g_file_set_contents (
      tmpl,
      "cn = origin.test\ndns_name = origin.test\ndns_name = other.test\ndns_name = public.test\n"
      "ca\ncert_signing_key\ntls_www_server\nexpiration_days = 2\n",
      -1, NULL);
  return g_spawn_command_line_sync (c1, NULL, NULL, &s1, NULL) && s1 == 0
         && g_spawn_command_line_sync (c2, NULL, NULL, &s2, NULL) && s2 == 0;
}

int
main (void)
{
  Suite *s = suite_create ("egress-proxy");
  TCase *tc = tcase_create ("proxy");
  g_autofree char *py = NULL;
  g_autofree char *ip = g_find_program_in_path ("ip");
  g_autofree char *python = g_find_program_in_path ("python3");
  g_autofree char *curl_bin = g_find_program_in_path ("curl");
  g_autofree char *certtool = g_find_program_in_path ("certtool");
  g_autofree char *bwrap = g_find_program_in_path ("bwrap");
  g_autofree char *cleanup = NULL;
  int rc;

  nz_test_require (getuid () == 0, "network namespaces need root");
  nz_test_require (ip != NULL && python != NULL && curl_bin != NULL,
                   "ip, python3 and curl (scripts/install-deps)");
  nz_test_require (certtool != NULL, "certtool (gnutls-bin, scripts/install-deps)");
  nz_test_require (bwrap != NULL, "bubblewrap (scripts/install-deps)");
  nz_test_require (system ("ip netns add nzeg-probe-$$ && ip netns del nzeg-probe-$$") == 0,
                   "ip netns add works here");
  tmpdir = g_dir_make_tmp ("nz-egress-XXXXXX", NULL);
  py = g_build_filename (tmpdir, "origin.py", NULL);
  g_file_set_contents (py, origin_py, -1, NULL);
  if (!make_cert ())
    {
      printf ("1..1\nnot ok 1 - certtool could not make a test certificate\n");
      return 1;
    }
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_allowed_and_denied);
  tcase_add_test (tc, test_port_rules_v2);
  tcase_add_test (tc, test_brokered_credential);
  tcase_add_test (tc, test_bounded);
  tcase_add_test (tc, test_slow_reader_pauses_writer);
  tcase_add_test (tc, test_tunnel_upstream_closes_first);
  suite_add_tcase (s, tc);
  if (bwrap != NULL)
    {
      TCase *tb = tcase_create ("bwrap");

      tcase_set_timeout (tb, 120);
      tcase_add_test (tb, test_bwrap_sandbox);
      tcase_add_test (tb, test_bwrap_refusals);
      suite_add_tcase (s, tb);
    }
  rc = nz_test_run (s);
  /* Every namespace a case made is named nzeg-<this pid>-<case pid>; deleting it also removes
   * the veth pair. */
  /* Sandboxes a failed case left behind. */
  {
    g_autofree char *destroy = g_build_filename (g_getenv ("NZ_TOOLS_DIR"), "namzu-destroy", NULL);
    g_autofree char *leftovers = g_strdup_printf (
        "for d in %s/state/nz-*; do [ -d \"$d\" ] && NAMZU_STATE_DIR=%s/state %s --sandbox "
        "$(basename $d) >/dev/null; done; true",
        tmpdir, tmpdir, destroy);

    if (system (leftovers) != 0)
      rc = 1;
  }
  cleanup
      = g_strdup_printf ("for n in $(ip netns list | awk '/^nzeg-%d-/{print $1}'); do "
                         "ip netns pids $n | xargs -r kill -9; ip netns del $n; done; rm -rf %s",
                         getpid (), tmpdir);
  if (system (cleanup) != 0)
    rc = 1;
  return rc;
}
