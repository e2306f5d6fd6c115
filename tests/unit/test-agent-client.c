/* Unit tests for lib/client/nz-agent-client: endpoint parsing, the request envelope, and the
 * client's handling of wire shapes the real namzu-agent never produces (an old protocol
 * version, a retiring agent, a stream cut before its terminator, extra frames). Those need a
 * peer that misbehaves on purpose: a scripted unix-socket peer in a thread, which says so
 * here. Everything the real agent does is tested against it in tests/integration/test-exec.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-exec-status.h"
#include "nz-json.h"
#include "nz-frame.h"
#include "../nz-test.h"

/* ---- the scripted peer ------------------------------------------------------------------- */

typedef struct
{
  char *dir;
  char *path;
  int listen_fd;
  const char *const *replies; /* one raw byte string per connection; NULL ends the script */
  guint delay_bind_ms;        /* bind only after this long (readiness polling) */
  guint hold_open_ms;         /* keep each connection open this long after replying */
  const char *handshake;      /* vsock: answer the CONNECT line with this (then serve if OK) */
  char *connect_line;         /* vsock: the CONNECT line received */
  GPtrArray *requests;        /* payload of each connection's first frame */
  GThread *thread;
} Peer;

static void
frame_into (GString *s, const char *json)
{
  g_string_append_printf (s, "%08x\n%s", (unsigned)strlen (json), json);
}

/* Reads one request frame from @fd. */
static char *
read_request (int fd)
{
  g_autoptr (NzFrameReader) r = nz_frame_reader_new (1 << 20);
  GBytes *payload = NULL;
  char buf[4096];

  for (;;)
    {
      ssize_t n;

      if (nz_frame_reader_next (r, &payload, NULL) == NZ_FRAME_OK)
        {
          char *s = g_strndup (g_bytes_get_data (payload, NULL), g_bytes_get_size (payload));

          g_bytes_unref (payload);
          return s;
        }
      n = read (fd, buf, sizeof buf);
      if (n <= 0)
        return g_strdup ("");
      nz_frame_reader_push (r, buf, (gsize)n);
    }
}

static int
bind_listen (const char *path)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_strlcpy (sa.sun_path, path, sizeof sa.sun_path);
  ck_assert_int_ge (fd, 0);
  ck_assert_int_eq (bind (fd, (struct sockaddr *)&sa, sizeof sa), 0);
  ck_assert_int_eq (listen (fd, 16), 0);
  return fd;
}

static gpointer
peer_thread (gpointer data)
{
  Peer *p = data;

  if (p->delay_bind_ms > 0)
    {
      g_usleep (p->delay_bind_ms * 1000);
      p->listen_fd = bind_listen (p->path);
    }
  for (guint i = 0; p->replies[i] != NULL; i++)
    {
      int fd = accept (p->listen_fd, NULL, NULL);

      if (fd < 0)
        break;
      if (p->handshake != NULL)
        {
          GString *l = g_string_new (NULL);
          char ch;

          /* Byte by byte: the client sends nothing more before our answer anyway. */
          while (read (fd, &ch, 1) == 1 && ch != '\n')
            g_string_append_c (l, ch);
          g_free (p->connect_line);
          p->connect_line = g_string_free (l, FALSE);
          ck_assert_int_eq (write (fd, p->handshake, strlen (p->handshake)),
                            (ssize_t)strlen (p->handshake));
          if (!g_str_has_prefix (p->handshake, "OK "))
            {
              close (fd);
              continue;
            }
        }
      g_ptr_array_add (p->requests, read_request (fd));
      ck_assert_int_eq (write (fd, p->replies[i], strlen (p->replies[i])),
                        (ssize_t)strlen (p->replies[i]));
      if (p->hold_open_ms > 0)
        g_usleep (p->hold_open_ms * 1000);
      close (fd);
    }
  return NULL;
}

static Peer *
peer_start (const char *const *replies, guint delay_bind_ms)
{
  Peer *p = g_new0 (Peer, 1);

  p->dir = g_dir_make_tmp ("nz-client-XXXXXX", NULL);
  ck_assert_ptr_nonnull (p->dir);
  p->path = g_build_filename (p->dir, "agent.sock", NULL);
  p->replies = replies;
  p->delay_bind_ms = delay_bind_ms;
  p->listen_fd = delay_bind_ms > 0 ? -1 : bind_listen (p->path);
  p->requests = g_ptr_array_new_with_free_func (g_free);
  p->thread = g_thread_new ("peer", peer_thread, p);
  return p;
}

static void
peer_join (Peer *p)
{
  if (p->thread != NULL)
    g_thread_join (g_steal_pointer (&p->thread));
}

static void
peer_free (Peer *p)
{
  peer_join (p);
  if (p->listen_fd >= 0)
    close (p->listen_fd);
  unlink (p->path);
  rmdir (p->dir);
  g_ptr_array_unref (p->requests);
  g_free (p->connect_line);
  g_free (p->path);
  g_free (p->dir);
  g_free (p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Peer, peer_free)

static NzAgentClient *
peer_client (Peer *p, const char *token)
{
  g_autofree char *ep = g_strdup_printf ("unix:%s", p->path);

  return nz_agent_client_new (ep, token);
}

/* ---- http:// endpoints: a scripted worker on loopback TCP --------------------------------- */

typedef struct
{
  GSocket *listener;
  guint16 port;
  const char *const *replies; /* one raw HTTP response per connection */
  GPtrArray *heads;           /* each request's head, as received */
  GPtrArray *frames;          /* after a 101: the agent frame that followed */
  GThread *thread;
} HttpPeer;

static gpointer
http_peer_thread (gpointer data)
{
  HttpPeer *p = data;

  for (guint i = 0; p->replies[i] != NULL; i++)
    {
      g_autoptr (GSocket) s = g_socket_accept (p->listener, NULL, NULL);
      GString *head = g_string_new (NULL);
      char ch;

      if (s == NULL)
        break;
      while (!g_str_has_suffix (head->str, "\r\n\r\n")
             && g_socket_receive (s, &ch, 1, NULL, NULL) == 1)
        g_string_append_c (head, ch);
      g_ptr_array_add (p->heads, g_string_free (head, FALSE));
      g_socket_send (s, p->replies[i], strlen (p->replies[i]), NULL, NULL);
      /* Take the request frame before closing, so the close is not a reset. */
      if (g_str_has_prefix (p->replies[i], "HTTP/1.1 101"))
        {
          int fd = g_socket_get_fd (s);

          /* GSocket keeps its fd non-blocking; read_request() blocks. */
          fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
          g_ptr_array_add (p->frames, read_request (fd));
        }
      g_socket_close (s, NULL);
    }
  return NULL;
}

static HttpPeer *
http_peer_start (const char *const *replies)
{
  HttpPeer *p = g_new0 (HttpPeer, 1);
  g_autoptr (GInetAddress) lo = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  g_autoptr (GSocketAddress) addr = g_inet_socket_address_new (lo, 0);
  g_autoptr (GSocketAddress) bound = NULL;

  p->listener
      = g_socket_new (G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
  ck_assert (g_socket_bind (p->listener, addr, TRUE, NULL) && g_socket_listen (p->listener, NULL));
  bound = g_socket_get_local_address (p->listener, NULL);
  p->port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (bound));
  p->replies = replies;
  p->heads = g_ptr_array_new_with_free_func (g_free);
  p->frames = g_ptr_array_new_with_free_func (g_free);
  p->thread = g_thread_new ("http-peer", http_peer_thread, p);
  return p;
}

static void
http_peer_free (HttpPeer *p)
{
  if (p->thread != NULL)
    g_thread_join (p->thread);
  g_object_unref (p->listener);
  g_ptr_array_unref (p->heads);
  g_ptr_array_unref (p->frames);
  g_free (p);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HttpPeer, http_peer_free)

/* An older namzu-worker listed its features in the body, ... */
#define HEALTHZ_BODY                                                                               \
  "{\"ok\":true,\"protocolVersion\":2,\"features\":[\"sessions\",\"agent-upgrade\"]}"
/* ... today's keeps the reference's exact body and lists them in a header of its own. */
#define HEALTHZ_EXACT                                                                              \
  "HTTP/1.1 200 OK\r\nNamzu-Features: sessions ,agent-upgrade, \r\nContent-Length: 31\r\n\r\n"     \
  "{\"ok\":true,\"protocolVersion\":2}"

/* The upgrade's refusals, mapped to errors a tool can act on, and never the token. */
START_TEST (test_worker_upgrade_refusals)
{
  static const char *const replies[] = {
    HEALTHZ_EXACT,
    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 24\r\n\r\n{\"error\":\"unauthorized\"}",
    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 27\r\n\r\n{\"error\":\"worker_retiring\"}",
    "HTTP/1.1 404 Not Found\r\nContent-Length: 21\r\n\r\n{\"error\":\"not_found\"}",
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n",
    NULL,
  };
  static const struct
  {
    guint code;
    const char *needle;
  } want[] = {
    { NZ_ERROR_PERMISSION_DENIED, "HTTP 401" },
    { NZ_ERROR_FAILED, "worker_retiring" },
    { NZ_ERROR_UNSUPPORTED, "no GET /v1/agent upgrade route" },
    { NZ_ERROR_PROTOCOL, "namzu-agent/2" },
    { NZ_ERROR_FAILED, "HTTP 502" },
  };
  g_autoptr (HttpPeer) p = http_peer_start (replies);
  g_autofree char *ep = g_strdup_printf ("http://127.0.0.1:%u/", p->port);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (ep, "s3cret-tok");
  g_autoptr (JsonObject) h = NULL;
  g_autoptr (GError) error = NULL;

  h = nz_agent_client_healthz (c, NULL, &error);
  ck_assert_msg (h != NULL, "%s", error ? error->message : "");
  ck_assert (nz_agent_client_has_feature (c, "agent-upgrade"));
  ck_assert (nz_agent_client_has_feature (c, "sessions"));
  ck_assert (!nz_agent_client_has_feature (c, ""));
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autoptr (GError) e = NULL;
      g_autoptr (JsonObject) r = nz_agent_client_call (c, "list-sessions", NULL, NULL, &e);

      ck_assert_ptr_null (r);
      ck_assert_msg (g_error_matches (e, NZ_ERROR, (gint)want[i].code), "%zu: %s", i, e->message);
      ck_assert_msg (strstr (e->message, want[i].needle) != NULL, "%zu: %s", i, e->message);
      ck_assert (strstr (e->message, "s3cret") == NULL);
    }
}
END_TEST

/* What goes on the wire: healthz without a credential, the upgrade with the bearer header,
 * and an agent frame without the token member. */
START_TEST (test_worker_upgrade_request)
{
  static const char *const replies[] = {
    "HTTP/1.1 200 OK\r\nContent-Length: 71\r\n\r\n" HEALTHZ_BODY,
    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: namzu-agent/2\r\n\r\n"
    "00000023\n{\"ok\":true,\"sessions\":[],\"extra\":1}",
    NULL,
  };
  g_autoptr (HttpPeer) p = http_peer_start (replies);
  g_autofree char *ep = g_strdup_printf ("http://127.0.0.1:%u", p->port);
  g_autoptr (NzAgentClient) c = nz_agent_client_new (ep, "s3cret-tok");
  g_autoptr (JsonObject) h = NULL;
  g_autoptr (JsonObject) r = NULL;
  g_autoptr (GError) error = NULL;
  const char *upgrade;

  h = nz_agent_client_healthz (c, NULL, &error);
  ck_assert_msg (h != NULL, "%s", error ? error->message : "");
  r = nz_agent_client_call (c, "list-sessions", NULL, NULL, &error);
  ck_assert_msg (r != NULL, "%s", error ? error->message : "");
  ck_assert (nz_json_get_bool (r, "ok", FALSE));
  g_thread_join (g_steal_pointer (&p->thread));
  ck_assert (g_str_has_prefix (p->heads->pdata[0], "GET /healthz HTTP/1.1\r\n"));
  ck_assert (strstr (p->heads->pdata[0], "Authorization") == NULL);
  upgrade = p->heads->pdata[1];
  ck_assert_msg (g_str_has_prefix (upgrade, "GET /v1/agent HTTP/1.1\r\n"), "%s", upgrade);
  ck_assert (strstr (upgrade, "\r\nUpgrade: namzu-agent/2\r\n") != NULL);
  ck_assert (strstr (upgrade, "\r\nAuthorization: Bearer s3cret-tok\r\n") != NULL);
  ck_assert_msg (strstr (upgrade, "\r\nHost: 127.0.0.1:") != NULL, "%s", upgrade);
  /* The bearer header carried the credential; the frame does not. */
  ck_assert_str_eq (p->frames->pdata[0], "{\"op\":\"list-sessions\"}");
}
END_TEST

/* ---- endpoints --------------------------------------------------------------------------- */

START_TEST (test_endpoint_parse)
{
  static const struct
  {
    const char *in;
    const char *describe;
  } good[] = {
    { "unix:/run/namzu/x/agent.sock", "unix:/run/namzu/x/agent.sock" },
    { "tcp:127.0.0.1:8080", "tcp:127.0.0.1:8080" },
    { "tcp:agent.example:1", "tcp:agent.example:1" },
    { "tcp:[::1]:65535", "tcp:[::1]:65535" },
    { "vsock:/srv/fc/v.sock#1024", "vsock:/srv/fc/v.sock#1024" },
    { "http://127.0.0.1:2024", "http://127.0.0.1:2024" },
    { "HTTP://worker.example:80/", "http://worker.example:80" },
    { "http://[::1]:8080", "http://[::1]:8080" },
  };
  static const char *const bad[] = {
    "unix:relative/path",
    "unix:",
    "tcp:127.0.0.1",
    "tcp:127.0.0.1:0",
    "tcp:127.0.0.1:65536",
    "tcp::80",
    "tcp:::1:80",
    "tcp:[::1:80",
    "tcp:host:80x",
    "vsock:3:1024",
    "vsock:/v.sock",
    "vsock:rel#1",
    "vsock:/v.sock#x",
    "/abs/path",
    "",
    "http://127.0.0.1",
    "http://h:80/path",
    "http://u:p@h:80",
    "http://[::1:80",
    "http://h:0",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzAgentEndpoint) ep = nz_agent_endpoint_parse (good[i].in, &error);
      g_autofree char *d = NULL;

      ck_assert_msg (ep != NULL, "%s: %s", good[i].in, error ? error->message : "");
      d = nz_agent_endpoint_describe (ep);
      ck_assert_str_eq (d, good[i].describe);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (NzAgentEndpoint) ep = nz_agent_endpoint_parse (bad[i], &error);

      ck_assert_msg (ep == NULL, "accepted \"%s\"", bad[i]);
      ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
    }
  /* The words, as both namzu-exec programs give them (lib/lite/nz-lite-endpoint.c). */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (NzAgentEndpoint) ep = nz_agent_endpoint_parse ("tcp:127.0.0.1", &error);

    ck_assert (ep == NULL);
    ck_assert_str_eq (error->message, "agent endpoint \"tcp:127.0.0.1\": expected "
                                      "tcp:HOST:PORT with a port in [1, 65535]");
  }
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (NzAgentEndpoint) ep = nz_agent_endpoint_parse ("tcp:::1:80", &error);

    ck_assert (ep == NULL);
    ck_assert_str_eq (error->message, "agent endpoint \"tcp:::1:80\": write an IPv6 host in "
                                      "brackets, [::1]:PORT");
  }
}
END_TEST

START_TEST (test_bad_endpoint_reported_by_call)
{
  g_autoptr (NzAgentClient) c = nz_agent_client_new ("unix:relative", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = nz_agent_client_call (c, "healthz", NULL, NULL, &error);

  ck_assert_ptr_null (reply);
  ck_assert (g_error_matches (error, NZ_ERROR, NZ_ERROR_INVALID_ARGS));
  ck_assert (!nz_agent_client_wait_ready (c, 1000, NULL));
}
END_TEST

/* ---- envelope and admission -------------------------------------------------------------- */

static GString *
framed (const char *const *jsons)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; jsons[i] != NULL; i++)
    frame_into (s, jsons[i]);
  return s;
}

START_TEST (test_envelope_and_features)
{
  g_autoptr (GString) ok1 = framed ((const char *const[]){
      "{\"ok\":true,\"protocolVersion\":2,\"features\":[\"sessions\",7,\"flush\"]}", NULL });
  g_autoptr (GString) ok2 = framed ((const char *const[]){ "{\"ok\":true,\"x\":1}", NULL });
  const char *replies[] = { ok1->str, ok2->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 0);
  g_autoptr (NzAgentClient) c = peer_client (p, "s3cret");
  g_autoptr (NzAgentClient) c2 = peer_client (p, NULL);
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonObject) r1 = NULL, r2 = NULL;
  g_autoptr (GError) error = NULL;

  r1 = nz_agent_client_healthz (c, NULL, &error);
  ck_assert_msg (r1 != NULL, "%s", error ? error->message : "");
  ck_assert (nz_agent_client_has_feature (c, "sessions"));
  ck_assert (nz_agent_client_has_feature (c, "flush"));
  ck_assert_uint_eq (g_strv_length ((char **)nz_agent_client_get_features (c)), 2);
  json_object_set_string_member (body, "path", "a");
  r2 = nz_agent_client_call (c2, "read-file", body, NULL, &error);
  ck_assert_msg (r2 != NULL, "%s", error ? error->message : "");
  peer_join (p);
  /* Key order {op, body, token} is the reference's (spec D.2.4); no token member without one. */
  ck_assert_str_eq (g_ptr_array_index (p->requests, 0),
                    "{\"op\":\"healthz\",\"token\":\"s3cret\"}");
  ck_assert_str_eq (g_ptr_array_index (p->requests, 1),
                    "{\"op\":\"read-file\",\"body\":{\"path\":\"a\"}}");
}
END_TEST

static void
assert_healthz_error (const char *reply_json, NzErrorCode code, const char *needle)
{
  g_autoptr (GString) r = framed ((const char *const[]){ reply_json, NULL });
  const char *replies[] = { r->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 0);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) reply = nz_agent_client_healthz (c, NULL, &error);

  ck_assert_ptr_null (reply);
  ck_assert_msg (g_error_matches (error, NZ_ERROR, code), "%s: code %d", reply_json,
                 error ? error->code : -1);
  ck_assert_msg (strstr (error->message, needle) != NULL, "\"%s\" lacks \"%s\"", error->message,
                 needle);
  peer_join (p);
}

START_TEST (test_healthz_admission)
{
  assert_healthz_error ("{\"ok\":true}", NZ_ERROR_PROTOCOL,
                        "protocol version mismatch: expected 2, received missing.");
  assert_healthz_error ("{\"ok\":true,\"protocolVersion\":\"2\"}", NZ_ERROR_PROTOCOL,
                        "protocol version mismatch: expected 2, received \"2\".");
  assert_healthz_error ("{\"ok\":true,\"protocolVersion\":3}", NZ_ERROR_PROTOCOL,
                        "expected 2, received 3.");
  assert_healthz_error ("{\"ok\":false,\"protocolVersion\":2,\"retiring\":true}", NZ_ERROR_FAILED,
                        "agent is retiring");
}
END_TEST

START_TEST (test_control_reply_shapes)
{
  g_autoptr (GString) two = framed ((const char *const[]){ "{\"ok\":true}", "{}", NULL });
  g_autoptr (GString) partial = framed ((const char *const[]){ "{\"ok\":true}", NULL });
  const char *replies[] = { two->str, NULL, "", NULL };
  g_autoptr (Peer) p = NULL;
  g_autoptr (NzAgentClient) c = NULL;
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL;

  g_string_append (partial, "0000");
  replies[1] = partial->str;
  p = peer_start (replies, 0);
  c = peer_client (p, NULL);
  ck_assert_ptr_null (nz_agent_client_call (c, "list-sessions", NULL, NULL, &e1));
  ck_assert_msg (strstr (e1->message, "control reply emitted multiple frames"), "%s", e1->message);
  ck_assert_ptr_null (nz_agent_client_call (c, "list-sessions", NULL, NULL, &e2));
  ck_assert_msg (strstr (e2->message, "control reply has trailing partial data"), "%s",
                 e2->message);
  ck_assert_ptr_null (nz_agent_client_call (c, "list-sessions", NULL, NULL, &e3));
  ck_assert_msg (strstr (e3->message, "socket closed before reply"), "%s", e3->message);
  ck_assert_msg (strstr (e3->message, p->path) != NULL, "error does not name the endpoint: %s",
                 e3->message);
  peer_join (p);
}
END_TEST

START_TEST (test_control_peer_must_close)
{
  g_autoptr (GString) r = framed ((const char *const[]){ "{\"ok\":true}", NULL });
  const char *replies[] = { r->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 0);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (GError) error = NULL;
  gint64 t0 = g_get_monotonic_time ();

  p->hold_open_ms = 1600;
  ck_assert_ptr_null (nz_agent_client_call (c, "healthz", NULL, NULL, &error));
  ck_assert_msg (strstr (error->message, "control peer did not close after reply"), "%s",
                 error->message);
  /* The 1 s post-response guard (spec A.1), not the 60 s idle timeout. */
  ck_assert_int_lt (g_get_monotonic_time () - t0, 1500 * 1000);
  peer_join (p);
}
END_TEST

/* ---- exec -------------------------------------------------------------------------------- */

#define RESERVED                                                                                   \
  "{\"ok\":true,\"executionId\":\"exec_6f1c1a4e-0f3b-4c2e-9a7d-2b1e8f0c9d11\","                    \
  "\"protocolVersion\":2,\"leaseExpiresAt\":1,\"guestBootId\":\"boot-1\"}"

static void
collect (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  g_string_append_printf (user_data, "%d:%.*s|", stream, (int)len, data);
}

START_TEST (test_exec_stream_cut)
{
  g_autoptr (GString) reserve = framed ((const char *const[]){ RESERVED, NULL });
  g_autoptr (GString) exec
      = framed ((const char *const[]){ "{\"type\":\"stdout_delta\",\"data\":\"hi\"}",
                                       "{\"type\":\"stderr_delta\",\"data\":\"e\"}", NULL });
  const char *replies[] = { reserve->str, exec->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 0);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *id = NULL;

  json_object_set_string_member (body, "command", "true");
  ck_assert_ptr_null (nz_agent_client_exec (c, body, collect, out, &id, NULL, &error));
  ck_assert_msg (strstr (error->message, "socket closed before exec stream terminator"), "%s",
                 error->message);
  ck_assert_str_eq (out->str, "1:hi|2:e|");
  ck_assert_str_eq (id, "exec_6f1c1a4e-0f3b-4c2e-9a7d-2b1e8f0c9d11");
  /* the reserve reply's guestBootId (spec A.10), for a host that tracks guest restarts */
  ck_assert_str_eq (nz_agent_client_get_guest_boot_id (c), "boot-1");
  peer_join (p);
  /* reserve-execution goes with no body (the agent mints the id); execute carries it. */
  ck_assert_str_eq (g_ptr_array_index (p->requests, 0), "{\"op\":\"reserve-execution\"}");
  ck_assert (strstr (g_ptr_array_index (p->requests, 1),
                     "\"executionId\":\"exec_6f1c1a4e-0f3b-4c2e-9a7d-2b1e8f0c9d11\"")
             != NULL);
}
END_TEST

START_TEST (test_exec_error_frames)
{
  g_autoptr (GString) reserve = framed ((const char *const[]){ RESERVED, NULL });
  g_autoptr (GString) noent = framed (
      (const char *const[]){ "{\"type\":\"error\",\"error\":\"spawn nosuch ENOENT\"}", "", NULL });
  g_autoptr (GString) acces = framed (
      (const char *const[]){ "{\"type\":\"error\",\"error\":\"spawn ./x EACCES\"}", "", NULL });
  g_autoptr (GString) noresult = framed ((const char *const[]){ "", NULL });
  g_autoptr (GString) retiring
      = framed ((const char *const[]){ "{\"ok\":false,\"error\":\"agent_retiring\"}", NULL });
  const char *replies[] = { reserve->str, noent->str,    reserve->str,  acces->str,
                            reserve->str, noresult->str, retiring->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 0);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL;

  json_object_set_string_member (body, "command", "nosuch");
  ck_assert_ptr_null (nz_agent_client_exec (c, body, NULL, NULL, NULL, NULL, &e1));
  ck_assert_msg (g_error_matches (e1, G_SPAWN_ERROR, G_SPAWN_ERROR_NOENT), "%s", e1->message);
  ck_assert_ptr_null (nz_agent_client_exec (c, body, NULL, NULL, NULL, NULL, &e2));
  ck_assert_msg (g_error_matches (e2, G_SPAWN_ERROR, G_SPAWN_ERROR_ACCES), "%s", e2->message);
  ck_assert_ptr_null (nz_agent_client_exec (c, body, NULL, NULL, NULL, NULL, &e3));
  ck_assert_msg (strstr (e3->message, "exec stream ended without a result event"), "%s",
                 e3->message);
  ck_assert_ptr_null (nz_agent_client_exec (c, body, NULL, NULL, NULL, NULL, &e4));
  ck_assert_msg (strstr (e4->message, "agent is retiring"), "%s", e4->message);
  peer_join (p);
}
END_TEST

/* ---- readiness --------------------------------------------------------------------------- */

START_TEST (test_wait_ready_polls_until_bound)
{
  g_autoptr (GString) ok = framed (
      (const char *const[]){ "{\"ok\":true,\"protocolVersion\":2,\"features\":[]}", NULL });
  const char *replies[] = { ok->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 150);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (GError) error = NULL;

  ck_assert_msg (nz_agent_client_wait_ready (c, 5000, &error), "%s", error ? error->message : "");
  peer_join (p);
}
END_TEST

START_TEST (test_wait_ready_timeout_and_mismatch)
{
  g_autoptr (GString) old
      = framed ((const char *const[]){ "{\"ok\":true,\"protocolVersion\":1}", NULL });
  const char *replies[] = { old->str, NULL };
  g_autoptr (NzAgentClient) nobody = nz_agent_client_new ("unix:/nonexistent/nz/agent.sock", NULL);
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (Peer) p = NULL;
  g_autoptr (NzAgentClient) c = NULL;

  ck_assert (!nz_agent_client_wait_ready (nobody, 200, &e1));
  ck_assert (g_error_matches (e1, NZ_ERROR, NZ_ERROR_TIMED_OUT));
  ck_assert_msg (strstr (e1->message, "did not become ready within 200ms")
                     && strstr (e1->message, "No such file or directory"),
                 "%s", e1->message);
  ck_assert_int_lt (g_get_monotonic_time () - t0, 1000 * 1000);
  /* A protocol mismatch fails at once instead of waiting out the deadline. */
  p = peer_start (replies, 0);
  c = peer_client (p, NULL);
  t0 = g_get_monotonic_time ();
  ck_assert (!nz_agent_client_wait_ready (c, 10000, &e2));
  ck_assert (g_error_matches (e2, NZ_ERROR, NZ_ERROR_PROTOCOL));
  ck_assert_int_lt (g_get_monotonic_time () - t0, 2000 * 1000);
  peer_join (p);
}
END_TEST

START_TEST (test_tcp_preauth_budget)
{
  /* Nothing listens on this port: the refusal must come before any dial. */
  g_autoptr (NzAgentClient) c = nz_agent_client_new ("tcp:127.0.0.1:9", "tok");
  g_autoptr (JsonObject) body = json_object_new ();
  g_autofree char *big = g_malloc (9 * 1024 * 1024);
  g_autoptr (GError) error = NULL;

  memset (big, 'a', 9 * 1024 * 1024 - 1);
  big[9 * 1024 * 1024 - 1] = '\0';
  json_object_set_string_member (body, "content", big);
  ck_assert_ptr_null (nz_agent_client_call (c, "write-file", body, NULL, &error));
  ck_assert_msg (strstr (error->message, "pre-authentication frame limit"), "%s", error->message);
}
END_TEST

START_TEST (test_dial_retry)
{
  g_autoptr (GString) ok = framed (
      (const char *const[]){ "{\"ok\":true,\"protocolVersion\":2,\"features\":[]}", NULL });
  const char *replies[] = { ok->str, NULL };
  g_autoptr (Peer) p = peer_start (replies, 300);
  g_autoptr (NzAgentClient) c = peer_client (p, NULL);
  g_autoptr (NzAgentClient) quick = peer_client (p, NULL);
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  g_autoptr (JsonObject) h = NULL;

  /* Default: a missing socket fails at once (a CLI reports a dead sandbox immediately). */
  ck_assert_ptr_null (nz_agent_client_healthz (quick, NULL, &e1));
  ck_assert (g_error_matches (e1, NZ_AGENT_ERROR, NZ_AGENT_ERROR_DIAL_FAILED));
  /* With a budget, one call outlasts the agent's late bind. */
  nz_agent_client_set_dial_retry (c, 5000);
  h = nz_agent_client_healthz (c, NULL, &e2);
  ck_assert_msg (h != NULL, "%s", e2 ? e2->message : "");
  peer_join (p);
}
END_TEST

/* ---- Firecracker hybrid vsock ---------------------------------------------------------- */

static Peer *
vsock_peer_start (const char *const *replies, const char *handshake)
{
  Peer *p = peer_start (replies, 0);

  /* Set before the client dials: the peer thread reads it only after accept(). */
  p->handshake = handshake;
  return p;
}

static NzAgentClient *
vsock_client (Peer *p)
{
  g_autofree char *ep = g_strdup_printf ("vsock:%s#1024", p->path);

  return nz_agent_client_new (ep, NULL);
}

START_TEST (test_vsock_handshake)
{
  g_autoptr (GString) ok = framed (
      (const char *const[]){ "{\"ok\":true,\"protocolVersion\":2,\"features\":[]}", NULL });
  const char *replies[] = { ok->str, NULL };
  g_autoptr (Peer) p = vsock_peer_start (replies, "OK 1073741824\n");
  g_autoptr (NzAgentClient) c = vsock_client (p);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonObject) h = nz_agent_client_healthz (c, NULL, &error);

  ck_assert_msg (h != NULL, "%s", error ? error->message : "");
  peer_join (p);
  ck_assert_str_eq (p->connect_line, "CONNECT 1024");
  ck_assert_str_eq (g_ptr_array_index (p->requests, 0), "{\"op\":\"healthz\"}");
}
END_TEST

START_TEST (test_vsock_rejected)
{
  const char *replies[] = { "", NULL };
  g_autoptr (Peer) p = vsock_peer_start (replies, "OKAY\n");
  g_autoptr (NzAgentClient) c = vsock_client (p);
  g_autoptr (GError) error = NULL;

  ck_assert_ptr_null (nz_agent_client_healthz (c, NULL, &error));
  ck_assert_msg (strstr (error->message, "vsock CONNECT 1024 rejected: \"OKAY\""), "%s",
                 error->message);
  ck_assert_msg (strstr (error->message, "vsock:") != NULL, "%s", error->message);
  peer_join (p);
}
END_TEST

/* ---- exit statuses ---------------------------------------------------------------------- */

static int
status_of (const char *json)
{
  g_autoptr (JsonObject) o = nz_json_parse_object (json, -1, NULL);

  ck_assert_ptr_nonnull (o);
  return nz_exec_exit_status (o);
}

START_TEST (test_exit_status)
{
  ck_assert_int_eq (status_of ("{\"exitCode\":0,\"timedOut\":false}"), 0);
  ck_assert_int_eq (status_of ("{\"exitCode\":3}"), 3);
  ck_assert_int_eq (status_of ("{\"exitCode\":-1,\"signal\":\"SIGKILL\"}"), 137);
  ck_assert_int_eq (status_of ("{\"exitCode\":-1,\"signal\":\"SIGTERM\"}"), 143);
  /* A timed-out command was killed by a signal too; the timeout is what the caller asked. */
  ck_assert_int_eq (status_of ("{\"exitCode\":-1,\"signal\":\"SIGTERM\",\"timedOut\":true}"), 124);
  ck_assert_int_eq (status_of ("{\"exitCode\":-1}"), -1);
  ck_assert_int_eq (status_of ("{\"exitCode\":2.5}"), -1);
  ck_assert_int_eq (status_of ("{}"), -1);
  ck_assert_int_eq (nz_signal_from_name ("SIGINT"), 2);
  ck_assert_int_eq (nz_signal_from_name ("SIGNOPE"), 0);
  ck_assert_int_eq (nz_signal_from_name (NULL), 0);
  ck_assert_str_eq (nz_signal_name (15), "SIGTERM");
  ck_assert_ptr_null (nz_signal_name (0));
  ck_assert_ptr_null (nz_signal_name (64));
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("agent-client");
  TCase *tc = tcase_create ("agent-client");

  /* A client that hangs up on the scripted peer must fail an assertion, not kill the test. */
  signal (SIGPIPE, SIG_IGN);
  tcase_set_timeout (tc, 20);
  tcase_add_test (tc, test_endpoint_parse);
  tcase_add_test (tc, test_worker_upgrade_refusals);
  tcase_add_test (tc, test_worker_upgrade_request);
  tcase_add_test (tc, test_bad_endpoint_reported_by_call);
  tcase_add_test (tc, test_envelope_and_features);
  tcase_add_test (tc, test_healthz_admission);
  tcase_add_test (tc, test_control_reply_shapes);
  tcase_add_test (tc, test_control_peer_must_close);
  tcase_add_test (tc, test_exec_stream_cut);
  tcase_add_test (tc, test_exec_error_frames);
  tcase_add_test (tc, test_wait_ready_polls_until_bound);
  tcase_add_test (tc, test_wait_ready_timeout_and_mismatch);
  tcase_add_test (tc, test_tcp_preauth_budget);
  tcase_add_test (tc, test_exit_status);
  tcase_add_test (tc, test_dial_retry);
  tcase_add_test (tc, test_vsock_handshake);
  tcase_add_test (tc, test_vsock_rejected);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
