/* Integration tests for tcp-connect (spec A.6.17, C.12): a loopback service the test starts,
 * reached through the real agent over unix and over TCP + token. */
#include "agent-harness.h"

/* An echo service on 127.0.0.1 (or ::1): echoes until EOF, then closes. Records how many
 * bytes it saw. */
typedef struct
{
  int listen_fd;
  int port;
  GThread *thread;
  gsize seen;
  gboolean saw_eof;
} Echo;

static gpointer
echo_main (gpointer data)
{
  Echo *e = data;
  int fd = accept (e->listen_fd, NULL, NULL);
  char buf[65536];

  if (fd < 0)
    return NULL;
  for (;;)
    {
      ssize_t n = recv (fd, buf, sizeof buf, 0);

      if (n <= 0)
        {
          e->saw_eof = n == 0;
          break;
        }
      e->seen += (gsize)n;
      send_all (fd, buf, (gsize)n);
    }
  close (fd);
  return NULL;
}

static Echo *
echo_start (gboolean v6)
{
  Echo *e = g_new0 (Echo, 1);
  struct sockaddr_storage ss = { 0 };
  socklen_t len;
  int one = 1;

  e->listen_fd = socket (v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  setsockopt (e->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6)
    {
      struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

      s6->sin6_family = AF_INET6;
      s6->sin6_addr = in6addr_loopback;
      len = sizeof *s6;
    }
  else
    {
      struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

      s4->sin_family = AF_INET;
      s4->sin_addr.s_addr = htonl (INADDR_LOOPBACK);
      len = sizeof *s4;
    }
  if (bind (e->listen_fd, (struct sockaddr *)&ss, len) != 0)
    {
      close (e->listen_fd);
      g_free (e);
      return NULL;
    }
  ck_assert_int_eq (listen (e->listen_fd, 4), 0);
  ck_assert_int_eq (getsockname (e->listen_fd, (struct sockaddr *)&ss, &len), 0);
  e->port = ntohs (v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                      : ((struct sockaddr_in *)&ss)->sin_port);
  e->thread = g_thread_new ("echo", echo_main, e);
  return e;
}

/* Joins the service and returns how many bytes it received. */
static gsize
echo_stop (Echo *e)
{
  gsize seen;

  g_thread_join (e->thread);
  close (e->listen_fd);
  seen = e->seen;
  g_free (e);
  return seen;
}

static void
send_data (Stream *s, const guint8 *data, gsize len)
{
  g_autofree char *b64 = g_base64_encode (data, len);
  g_autofree char *frame = g_strdup_printf ("{\"type\":\"data\",\"data\":\"%s\"}", b64);

  send_frame (s->fd, frame);
}

/* Reads data frames until @want bytes came back; every frame is base64 data. */
static GByteArray *
read_data (Stream *s, gsize want)
{
  GByteArray *got = g_byte_array_new ();

  while (got->len < want)
    {
      g_autoptr (JsonObject) f = stream_next_object (s, 20000);
      g_autofree guchar *bytes = NULL;
      gsize len = 0;

      if (strcmp (member_str (f, "type"), "heartbeat") == 0)
        continue;
      ck_assert_str_eq (member_str (f, "type"), "data");
      bytes = g_base64_decode (member_str (f, "data"), &len);
      g_byte_array_append (got, bytes, (guint)len);
    }
  return got;
}

static void
check_echo (gboolean tcp, gboolean v6)
{
  Agent *a = agent_start (tcp);
  Echo *e = echo_start (v6);
  g_autofree char *body = NULL;
  g_autoptr (Stream) s = NULL;
  g_autoptr (JsonObject) ready = NULL;
  g_autoptr (JsonObject) end = NULL;
  g_autoptr (GByteArray) small = NULL;
  g_autoptr (GByteArray) big_back = NULL;
  g_autofree guint8 *big = g_malloc (3 * 1024 * 1024);

  if (e == NULL)
    {
      /* No IPv6 loopback on this host: nothing to forward to. */
      agent_stop (a);
      return;
    }
  body = g_strdup_printf ("{\"host\":\"%s\",\"port\":%d,\"heartbeatMs\":1000}",
                          v6 ? "::1" : "127.0.0.1", e->port);
  s = stream_op (a, "tcp-connect", body);
  ready = stream_next_object (s, 10000);
  ck_assert_str_eq (member_str (ready, "type"), "ready");
  ck_assert_ptr_nonnull (nz_json_get_string (ready, "guestBootId"));
  ck_assert_int_eq (member_int (ready, "heartbeatMs"), 1000);
  send_data (s, (const guint8 *)"hello", 5);
  small = read_data (s, 5);
  ck_assert_int_eq (memcmp (small->data, "hello", 5), 0);
  /* 3 MiB in 1 MiB chunks, echoed back whole: backpressure both ways, no loss. */
  for (gsize i = 0; i < 3 * 1024 * 1024; i++)
    big[i] = (guint8)(i * 7 + 3);
  for (int i = 0; i < 3; i++)
    send_data (s, big + i * 1024 * 1024, 1024 * 1024);
  big_back = read_data (s, 3 * 1024 * 1024);
  ck_assert_uint_eq (big_back->len, 3 * 1024 * 1024);
  ck_assert_int_eq (memcmp (big_back->data, big, big_back->len), 0);
  /* Half-close: the service sees EOF, closes, and the agent reports the end; no terminator. */
  send_frame (s->fd, "{\"type\":\"end\"}");
  for (;;)
    {
      end = stream_next_object (s, 10000);
      if (strcmp (member_str (end, "type"), "heartbeat") != 0)
        break;
      g_clear_pointer (&end, json_object_unref);
    }
  ck_assert_str_eq (member_str (end, "type"), "end");
  stream_expect_eof (s, 5000);
  ck_assert_uint_eq (echo_stop (e), 5 + 3 * 1024 * 1024);
  agent_stop (a);
}

START_TEST (test_echo_unix)
{
  check_echo (FALSE, FALSE);
}
END_TEST

START_TEST (test_echo_tcp)
{
  check_echo (TRUE, FALSE);
}
END_TEST

START_TEST (test_echo_ipv6)
{
  check_echo (FALSE, TRUE);
}
END_TEST

static void
assert_invalid_target (Agent *a, const char *body)
{
  g_autoptr (Stream) s = stream_op (a, "tcp-connect", body);
  g_autoptr (JsonObject) f = stream_next_object (s, 10000);

  ck_assert_str_eq (member_str (f, "type"), "error");
  ck_assert_str_eq (member_str (f, "error"), "invalid_loopback_target");
  /* Never a terminator on this stream. */
  stream_expect_eof (s, 5000);
}

START_TEST (test_refusals)
{
  Agent *a = agent_start (FALSE);
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sin = { .sin_family = AF_INET };
  socklen_t len = sizeof sin;
  int closed_port;

  assert_invalid_target (a, "{\"host\":\"10.0.0.1\",\"port\":80}");
  assert_invalid_target (a, "{\"host\":\"localhost\",\"port\":80}");
  assert_invalid_target (a, "{\"port\":0}");
  assert_invalid_target (a, "{\"port\":65536}");
  assert_invalid_target (a, "{\"port\":\"80\"}");
  assert_invalid_target (a, "{\"port\":8.5}");
  assert_invalid_target (a, "{}");
  /* A port nobody listens on: the connect error, then the end. */
  sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  ck_assert_int_eq (bind (fd, (struct sockaddr *)&sin, sizeof sin), 0);
  ck_assert_int_eq (getsockname (fd, (struct sockaddr *)&sin, &len), 0);
  closed_port = ntohs (sin.sin_port);
  close (fd);
  {
    g_autofree char *body = g_strdup_printf ("{\"port\":%d}", closed_port);
    g_autofree char *want = g_strdup_printf ("connect ECONNREFUSED 127.0.0.1:%d", closed_port);
    g_autoptr (Stream) s = stream_op (a, "tcp-connect", body);
    g_autoptr (JsonObject) f = stream_next_object (s, 10000);

    ck_assert_str_eq (member_str (f, "type"), "error");
    ck_assert_str_eq (member_str (f, "error"), want);
    stream_expect_eof (s, 5000);
  }
  agent_stop (a);
}
END_TEST

/* A host->guest chunk above 8 MiB decoded is dropped silently; the stream goes on. `destroy`
 * finishes with no event. */
START_TEST (test_oversized_chunk_dropped)
{
  Agent *a = agent_start (FALSE);
  Echo *e = echo_start (FALSE);
  g_autofree char *body = g_strdup_printf ("{\"port\":%d}", e->port);
  g_autoptr (Stream) s = stream_op (a, "tcp-connect", body);
  g_autoptr (JsonObject) ready = stream_next_object (s, 10000);
  g_autofree guint8 *huge = g_malloc0 (8 * 1024 * 1024 + 1);
  g_autoptr (GByteArray) back = NULL;

  ck_assert (!json_object_has_member (ready, "heartbeatMs"));
  send_data (s, huge, 8 * 1024 * 1024 + 1);
  send_data (s, (const guint8 *)"after", 5);
  back = read_data (s, 5);
  ck_assert_uint_eq (back->len, 5);
  ck_assert_int_eq (memcmp (back->data, "after", 5), 0);
  send_frame (s->fd, "{\"type\":\"heartbeat\"}");
  send_frame (s->fd, "{\"type\":\"destroy\"}");
  stream_expect_eof (s, 5000);
  /* The dropped chunk never reached the service. */
  ck_assert_uint_eq (echo_stop (e), 5);
  agent_stop (a);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-tcp");
  TCase *tc = tcase_create ("tcp-connect");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_echo_unix);
  tcase_add_test (tc, test_echo_tcp);
  tcase_add_test (tc, test_echo_ipv6);
  tcase_add_test (tc, test_refusals);
  tcase_add_test (tc, test_oversized_chunk_dropped);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
