/* End to end for namzu-port-forward on container:bwrap (real bubblewrap, the real agent, a real
 * python3 HTTP server inside, real curl on the host): a multi-MiB body intact, eight
 * connections at once, the host's half-close reaching the server inside, a port with no listener
 * inside, the loopback-only rule, and a clean exit on SIGTERM. Every case gets its own
 * NAMZU_STATE_DIR. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nz-json.h"
#include "sandbox-harness.h"

static void
setup (void)
{
  harness_begin ("/tmp/nz-pf-e2e-XXXXXX");
  harness_start_reaper (0);
  harness.sandbox = create_sandbox (NULL, NULL);
}

static void
teardown (void)
{
  harness_end ();
}

typedef struct
{
  GPid pid;
  guint port;
  char *err_path;
} Forward;

/* namzu-port-forward --sandbox ID 0:@remote, returned once it printed its listening line. */
static Forward
start_forward (guint remote, const char *heartbeat)
{
  g_autofree char *tool = nz_test_tool ("namzu-port-forward");
  g_autofree char *spec = g_strdup_printf ("0:%u", remote);
  const char *argv[] = { tool, "--sandbox", harness.sandbox, "--heartbeat", heartbeat, spec, NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) line = NULL;
  Forward f = { 0 };
  char buf[512] = { 0 };
  struct pollfd pfd;
  int out, err;

  f.err_path = g_strdup_printf ("%s/pf-%u.stderr", harness.tmp, remote);
  err = open (f.err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ck_assert (err >= 0);
  ck_assert_msg (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   NULL, NULL, -1, -1, err, NULL, NULL, 0, &f.pid,
                                                   NULL, &out, NULL, &error),
                 "%s", error ? error->message : "");
  close (err);
  pfd = (struct pollfd){ .fd = out, .events = POLLIN };
  ck_assert_msg (poll (&pfd, 1, 20000) == 1, "namzu-port-forward printed no listening line");
  ck_assert (read (out, buf, sizeof buf - 1) > 0);
  close (out);
  line = nz_json_parse_object (buf, -1, NULL);
  ck_assert_msg (line != NULL, "%s", buf);
  ck_assert_str_eq (nz_json_get_string (line, "address"), "127.0.0.1");
  ck_assert_str_eq (nz_json_get_string (line, "sandbox"), harness.sandbox);
  ck_assert_int_eq (json_object_get_int_member (line, "remotePort"), remote);
  f.port = (guint)json_object_get_int_member (line, "port");
  ck_assert (f.port > 0);
  return f;
}

/* SIGTERM ends it cleanly; returns what it said on stderr. */
static char *
stop_forward (Forward *f)
{
  char *err = NULL;
  int status;

  ck_assert (kill (f->pid, SIGTERM) == 0);
  ck_assert (waitpid (f->pid, &status, 0) == f->pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "status %d", status);
  ck_assert (g_file_get_contents (f->err_path, &err, NULL, NULL));
  g_free (f->err_path);
  return err;
}

/* Runs @script in the sandbox, detached, and waits until something listens on @port inside. */
static void
serve_inside (const char *name, const char *script, guint port)
{
  g_autofree char *probe = g_strdup_printf (
      "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\","
      " %u))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1",
      port);
  g_autofree char *out = NULL, *err = NULL;
  int rc = run_tool (NULL, &out, &err, "namzu-attach", "--sandbox", harness.sandbox,
                     "--start-detached", name, "--", "sh", "-c", script, NULL);

  ck_assert_msg (rc == 0, "start-detached %s: %s", name, err);
  sh_in_ok (probe);
}

static int
connect_local (guint port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((guint16)port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  ck_assert (fd >= 0);
  ck_assert_msg (connect (fd, (struct sockaddr *)&sa, sizeof sa) == 0, "%s", g_strerror (errno));
  return fd;
}

/* Everything until EOF, bounded by 10 s. */
static GString *
read_to_eof (int fd)
{
  GString *got = g_string_new (NULL);
  char buf[65536];

  for (;;)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      ssize_t n;

      ck_assert_msg (poll (&pfd, 1, 10000) == 1, "no EOF after %zu bytes", got->len);
      n = read (fd, buf, sizeof buf);
      ck_assert (n >= 0);
      if (n == 0)
        return got;
      g_string_append_len (got, buf, n);
    }
}

/* Echoes every connection's bytes and never closes one itself. */
static const char echo_server[]
    = "exec python3 -c '\n"
      "import socket, threading\n"
      "def echo(c):\n"
      "    while True:\n"
      "        b = c.recv(65536)\n"
      "        if not b: break\n"
      "        c.sendall(b)\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind((\"127.0.0.1\", 8200)); s.listen()\n"
      "while True:\n"
      "    threading.Thread(target=echo, args=(s.accept()[0],)).start()\n"
      "'";

/* The host pid of the sandbox's agent: bwrap's child, or that child's child of that name. */
static pid_t
agent_pid (void)
{
  g_autofree char *path = g_build_filename (harness.state, harness.sandbox, "handle.json", NULL);
  g_autofree char *text = NULL;
  g_autoptr (JsonObject) handle = NULL;
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  JsonObject *priv;
  const char *name;
  pid_t child;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  handle = nz_json_parse_object (text, -1, NULL);
  priv = handle != NULL ? nz_json_get_object (handle, "private") : NULL;
  ck_assert_ptr_nonnull (priv);
  child = (pid_t)json_object_get_int_member (priv, "childPid");
  while ((name = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *status_path = g_strdup_printf ("/proc/%s/status", name);
      g_autofree char *status = NULL;
      g_autofree char *want_ppid = g_strdup_printf ("\nPPid:\t%d\n", (int)child);
      pid_t pid = (pid_t)atoi (name);

      if (pid <= 0 || !g_file_get_contents (status_path, &status, NULL, NULL))
        continue;
      if (g_str_has_prefix (status, "Name:\tnamzu-agent\n")
          && (pid == child || strstr (status, want_ppid) != NULL))
        return pid;
    }
  ck_abort_msg ("no namzu-agent below bwrap's child %d", (int)child);
  return -1;
}

/* A frozen agent (SIGSTOP: its socket open, nothing arriving) under an open connection: the
 * heartbeat agreed on tcp-connect ends that connection with the named warning instead of
 * leaving it hanging; the forward itself goes on. */
START_TEST (test_frozen_agent_ends_the_connection)
{
  g_autofree char *err = NULL;
  pid_t agent;
  int fd;
  char c;
  Forward f;

  serve_inside ("echo", echo_server, 8200);
  f = start_forward (8200, "200ms");
  fd = connect_local (f.port);
  /* An echo: the tcp-connect stream is up before the agent is frozen; the server inside keeps
   * the connection open and silent from here on. */
  ck_assert (write (fd, "ping", 4) == 4);
  {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    char buf[16];

    ck_assert_msg (poll (&pfd, 1, 10000) == 1, "no echo through the forward");
    ck_assert_int_eq (read (fd, buf, sizeof buf), 4);
  }
  agent = agent_pid ();
  ck_assert_int_eq (kill (agent, SIGSTOP), 0);
  {
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    int ready = poll (&pfd, 1, 30000);
    ssize_t n = ready == 1 ? read (fd, &c, 1) : 1;

    kill (agent, SIGCONT);
    ck_assert_msg (ready == 1 && n <= 0, "the connection outlived a frozen agent");
  }
  close (fd);
  err = stop_forward (&f);
  ck_assert_msg (strstr (err, "is treated as gone") != NULL, "stderr: %s", err);
}
END_TEST

START_TEST (test_http_through_the_forward)
{
  g_autofree char *want = NULL, *got = NULL, *err = NULL;
  g_autofree char *url = NULL, *script = NULL;
  Forward f;

  want = sh_in_out ("head -c 5000000 /dev/urandom > big.bin && sha256sum < big.bin");
  serve_inside ("web", "exec python3 -m http.server 8000 --bind 127.0.0.1", 8000);
  f = start_forward (8000, "15s");
  url = g_strdup_printf ("http://127.0.0.1:%u/big.bin", f.port);
  got = host_sh ("curl -sSf \"$1\" | sha256sum", url, NULL);
  ck_assert_str_eq (got, want);
  /* Eight at once, each whole. */
  g_free (got);
  script = g_strdup ("for i in 1 2 3 4 5 6 7 8; do (curl -sSf \"$1\" | sha256sum > \"sum.$i\") & "
                     "done; wait; cat sum.* | sort -u");
  got = host_sh (script, url, NULL);
  ck_assert_str_eq (got, want);
  err = stop_forward (&f);
  ck_assert_msg (strstr (err, "connection") == NULL, "%s", err);
}
END_TEST

/* The server inside reads until the host half-closes, then answers with what it counted: the
 * host's end of stream must reach it as a half-close (spec A.6.17: `end` is upstream.end()),
 * with the way back still open. (The other way the spec ends the whole connection: an
 * upstream that ends is destroyed.) */
static const char half_close_server[]
    = "exec python3 -c '\n"
      "import socket, threading\n"
      "def count(c):\n"
      "    n = 0\n"
      "    while True:\n"
      "        b = c.recv(65536)\n"
      "        if not b: break\n"
      "        n += len(b)\n"
      "    c.sendall(b\"got %d\\n\" % n); c.close()\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind((\"127.0.0.1\", 8100)); s.listen()\n"
      "while True:\n"
      "    threading.Thread(target=count, args=(s.accept()[0],)).start()\n"
      "'";

START_TEST (test_half_close_reaches_the_sandbox)
{
  g_autofree char *err = NULL;
  g_autofree char *payload = g_malloc0 (300000);
  Forward f;

  serve_inside ("halves", half_close_server, 8100);
  f = start_forward (8100, "15s");
  /* Twice, the second while the first is still open: connections are independent. */
  {
    int a = connect_local (f.port), b = connect_local (f.port);
    g_autoptr (GString) got_a = NULL, got_b = NULL;

    for (gsize off = 0; off < 300000;)
      {
        ssize_t n = write (a, payload + off, 300000 - off);

        ck_assert_msg (n > 0, "%s", g_strerror (errno));
        off += (gsize)n;
      }
    ck_assert (write (b, "abc", 3) == 3);
    ck_assert (shutdown (b, SHUT_WR) == 0);
    got_b = read_to_eof (b);
    ck_assert_str_eq (got_b->str, "got 3\n");
    ck_assert (shutdown (a, SHUT_WR) == 0);
    got_a = read_to_eof (a);
    ck_assert_str_eq (got_a->str, "got 300000\n");
    close (a);
    close (b);
  }
  err = stop_forward (&f);
  ck_assert_msg (strstr (err, "connection") == NULL, "%s", err);
}
END_TEST

START_TEST (test_nothing_listens_inside)
{
  g_autofree char *err = NULL;
  g_autoptr (GString) got = NULL;
  Forward f = start_forward (8200, "200ms");
  int fd = connect_local (f.port);

  got = read_to_eof (fd);
  ck_assert_uint_eq (got->len, 0);
  close (fd);
  for (int i = 0; i < 100; i++)
    {
      g_autofree char *partial = NULL;

      if (g_file_get_contents (f.err_path, &partial, NULL, NULL)
          && strstr (partial, "nothing listens") != NULL)
        break;
      g_usleep (50 * 1000);
    }
  err = stop_forward (&f);
  ck_assert_msg (strstr (err, "nothing listens on that port inside the sandbox") != NULL, "%s",
                 err);
  ck_assert_msg (strstr (err, "127.0.0.1:8200") != NULL, "%s", err);
}
END_TEST

START_TEST (test_refusals)
{
  static const char *const bad[][2] = {
    { "0.0.0.0:0:80", "loopback only" }, { "10.0.0.1:0:80", "loopback only" },
    { "8080", "[ADDR:]LOCAL:REMOTE" },   { "0:0", "REMOTE 1-65535" },
    { "0:70000", "REMOTE 1-65535" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *out = NULL, *err = NULL;
      int rc = run_tool (NULL, &out, &err, "namzu-port-forward", "--sandbox", harness.sandbox,
                         bad[i][0], NULL);

      ck_assert_msg (rc == 2, "%s: rc %d: %s", bad[i][0], rc, err);
      ck_assert_msg (strstr (err, bad[i][1]) != NULL, "%s: %s", bad[i][0], err);
      ck_assert_str_eq (out, "");
    }
  {
    g_autofree char *out = NULL, *err = NULL;
    int rc = run_tool (NULL, &out, &err, "namzu-port-forward", "--sandbox", "nz-000000000000",
                       "0:80", NULL);

    ck_assert_msg (rc == 1, "rc %d: %s", rc, err);
  }
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("namzu-port-forward");
  TCase *tc = tcase_create ("forward");

  nz_test_require_program ("bwrap", "bubblewrap (bwrap) not installed");
  nz_test_require_program ("curl", "curl not installed");
  nz_test_require (g_file_test ("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE),
                   "python3 not installed");
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, test_http_through_the_forward);
  tcase_add_test (tc, test_half_close_reaches_the_sandbox);
  tcase_add_test (tc, test_nothing_listens_inside);
  tcase_add_test (tc, test_frozen_agent_ends_the_connection);
  tcase_add_test (tc, test_refusals);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
