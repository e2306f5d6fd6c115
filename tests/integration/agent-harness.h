/* agent-harness.h: starting the real namzu-agent (unix, or TCP + token) and talking frames to
 * it, for the agent's integration tests: whole requests (request/reply, read to EOF) and
 * incremental streams (stream_op/stream_next, for ops that stay open). Header-only, like
 * nz-test.h; every helper asserts with Check. */
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "nz-json.h"
#include "../nz-test.h"

#define TOKEN "per-instance-secret"

typedef struct
{
  GPid pid;
  int stdout_fd;
  int stderr_fd; /* -1 unless captured */
  char *dir;
  char *ws;
  char *sock_path; /* unix mode */
  int tcp_port;    /* tcp mode */
  const char *token; /* sent on every request in tcp mode */
} Agent;

static inline char **
agent_env (const char *const *extra)
{
  char **env = g_get_environ ();
  g_auto (GStrv) names = g_listenv ();

  /* Start from a clean slate: no inherited NAMZU_* knob may change what is tested. */
  for (guint i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix (names[i], "NAMZU_"))
      env = g_environ_unsetenv (env, names[i]);
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    {
      g_auto (GStrv) kv = g_strsplit (extra[i], "=", 2);

      env = g_environ_setenv (env, kv[0], kv[1] != NULL ? kv[1] : "", TRUE);
    }
  return env;
}

/* Runs in the agent's child before exec when set (e.g. resource limits); it may read
 * agent_child_dir, the agent's temporary directory (socket and workspace live under it). */
static GSpawnChildSetupFunc agent_child_setup;
static const char *agent_child_dir;

/* Starts the agent with @extra env ("K=V"); unix mode unless @tcp (then with a preset token
 * unless @extra sets a credential). Reads the ready line. @capture_stderr keeps its stderr. */
static inline Agent *
agent_start_ex (gboolean tcp, const char *const *extra, gboolean capture_stderr)
{
  Agent *a = g_new0 (Agent, 1);
  /* agent_child_setup may run it as another uid (nobody). */
  g_autofree char *tool = nz_test_tool_for_others ("namzu-agent");
  const char *argv[] = { tool, NULL };
  g_autoptr (GPtrArray) vars = g_ptr_array_new_with_free_func (g_free);
  g_auto (GStrv) env = NULL;
  g_autoptr (GError) error = NULL;
  gboolean has_credential = FALSE;
  char line[256] = { 0 };
  gsize n = 0;

  a->stderr_fd = -1;
  a->dir = g_dir_make_tmp ("nz-agent-XXXXXX", &error);
  ck_assert_ptr_nonnull (a->dir);
  a->ws = g_build_filename (a->dir, "ws", NULL);
  ck_assert_int_eq (g_mkdir (a->ws, 0755), 0);
  g_ptr_array_add (vars, g_strdup_printf ("NAMZU_SANDBOX_WORKSPACE=%s", a->ws));
  for (guint i = 0; extra != NULL && extra[i] != NULL; i++)
    {
      if (g_str_has_prefix (extra[i], "NAMZU_AGENT_BIND_TOKEN=")
          || g_str_has_prefix (extra[i], "NAMZU_AGENT_REQUIRE_TOKEN="))
        has_credential = TRUE;
      g_ptr_array_add (vars, g_strdup (extra[i]));
    }
  if (tcp)
    {
      g_ptr_array_add (vars, g_strdup ("NAMZU_AGENT_TCP_PORT=0"));
      if (!has_credential)
        g_ptr_array_add (vars, g_strdup ("NAMZU_AGENT_BIND_TOKEN=" TOKEN));
      a->token = TOKEN;
    }
  else
    {
      a->sock_path = g_build_filename (a->dir, "agent.sock", NULL);
      g_ptr_array_add (vars, g_strdup_printf ("NAMZU_AGENT_UNIX_PATH=%s", a->sock_path));
    }
  g_ptr_array_add (vars, NULL);
  env = agent_env ((const char *const *)vars->pdata);

  agent_child_dir = a->dir;
  ck_assert_msg (g_spawn_async_with_pipes (NULL, (char **)argv, env, G_SPAWN_DO_NOT_REAP_CHILD,
                                           agent_child_setup, NULL, &a->pid, NULL, &a->stdout_fd,
                                           capture_stderr ? &a->stderr_fd : NULL, &error),
                 "spawn: %s", error ? error->message : "");
  while (n < sizeof line - 1)
    {
      ssize_t r = read (a->stdout_fd, line + n, 1);

      ck_assert_msg (r == 1, "agent exited before its ready line");
      if (line[n] == '\n')
        break;
      n++;
    }
  line[n] = '\0';
  if (tcp)
    {
      ck_assert_msg (g_str_has_prefix (line, "namzu-agent listening on tcp:0.0.0.0:"), "%s", line);
      a->tcp_port = atoi (line + strlen ("namzu-agent listening on tcp:0.0.0.0:"));
      ck_assert_int_gt (a->tcp_port, 0);
    }
  return a;
}

static inline Agent *
agent_start_full (gboolean tcp, const char *const *extra)
{
  return agent_start_ex (tcp, extra, FALSE);
}

static inline Agent *
agent_start (gboolean tcp)
{
  return agent_start_full (tcp, NULL);
}

static inline void
agent_free (Agent *a)
{
  g_spawn_close_pid (a->pid);
  close (a->stdout_fd);
  if (a->stderr_fd >= 0)
    close (a->stderr_fd);
  g_free (a->dir);
  g_free (a->ws);
  g_free (a->sock_path);
  g_free (a);
}

/* SIGTERM must give a clean exit 0 (and, under ASan, no leaks in the agent). */
static inline void
agent_stop (Agent *a)
{
  int status = 0;

  ck_assert_int_eq (kill (a->pid, SIGTERM), 0);
  ck_assert_int_eq (waitpid (a->pid, &status, 0), a->pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "agent status %d", status);
  agent_free (a);
}

static inline int
agent_connect (Agent *a)
{
  struct timeval tv = { .tv_sec = 30 };
  int fd;

  if (a->sock_path != NULL)
    {
      struct sockaddr_un sun = { .sun_family = AF_UNIX };

      fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      g_strlcpy (sun.sun_path, a->sock_path, sizeof sun.sun_path);
      ck_assert_int_eq (connect (fd, (struct sockaddr *)&sun, sizeof sun), 0);
    }
  else
    {
      struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons (a->tcp_port) };

      sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
      fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ck_assert_int_eq (connect (fd, (struct sockaddr *)&sin, sizeof sin), 0);
    }
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

static inline void
send_all (int fd, const void *data, gsize len)
{
  const char *p = data;

  while (len > 0)
    {
      ssize_t n = send (fd, p, len, MSG_NOSIGNAL);

      ck_assert_msg (n > 0, "send: %s", g_strerror (errno));
      p += n;
      len -= (gsize)n;
    }
}

static inline void
send_frame (int fd, const char *json)
{
  g_autofree char *header = g_strdup_printf ("%08x\n", (unsigned)strlen (json));

  send_all (fd, header, 9);
  send_all (fd, json, strlen (json));
}

/* Splits @buf into frame payloads (the terminator is ""); all of it must be whole frames. */
static inline GPtrArray *
split_frames (GByteArray *buf)
{
  GPtrArray *frames = g_ptr_array_new_with_free_func (g_free);
  gsize pos = 0;

  while (buf->len - pos >= 9)
    {
      char hex[9];
      gsize len;

      memcpy (hex, buf->data + pos, 8);
      hex[8] = '\0';
      ck_assert_int_eq (buf->data[pos + 8], '\n');
      len = g_ascii_strtoull (hex, NULL, 16);
      ck_assert_uint_le (pos + 9 + len, buf->len);
      g_ptr_array_add (frames, g_strndup ((const char *)buf->data + pos + 9, len));
      pos += 9 + len;
    }
  ck_assert_uint_eq (pos, buf->len);
  return frames;
}

/* Reads to EOF and splits into frame payloads. */
static inline GPtrArray *
read_frames (int fd)
{
  g_autoptr (GByteArray) buf = g_byte_array_new ();

  for (;;)
    {
      guint8 chunk[65536];
      ssize_t n = recv (fd, chunk, sizeof chunk, 0);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == ECONNRESET)
        break;
      ck_assert_msg (n >= 0, "recv: %s", g_strerror (errno));
      if (n == 0)
        break;
      g_byte_array_append (buf, chunk, (guint)n);
    }
  return split_frames (buf);
}

/* {"op":@op,"token"?:…,"body"?:@body}; @body is JSON text or NULL. */
static inline char *
envelope (Agent *a, const char *op, const char *body)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "{\"op\":\"%s\"", op);
  if (a->token != NULL)
    g_string_append_printf (s, ",\"token\":\"%s\"", a->token);
  if (body != NULL)
    g_string_append_printf (s, ",\"body\":%s", body);
  g_string_append_c (s, '}');
  return g_string_free (s, FALSE);
}

static inline GPtrArray *
request (Agent *a, const char *op, const char *body)
{
  g_autofree char *json = envelope (a, op, body);
  int fd = agent_connect (a);
  GPtrArray *frames;

  send_frame (fd, json);
  frames = read_frames (fd);
  close (fd);
  return frames;
}

static inline JsonObject *
parse (const char *text)
{
  g_autoptr (GError) error = NULL;
  JsonObject *obj = nz_json_parse_object (text, -1, &error);

  ck_assert_msg (obj != NULL, "not JSON: %s", text);
  return obj;
}

/* A reply op: exactly one frame. */
static inline JsonObject *
reply (Agent *a, const char *op, const char *body)
{
  g_autoptr (GPtrArray) frames = request (a, op, body);

  ck_assert_msg (frames->len == 1, "%s %s: %u frames", op, body ? body : "", frames->len);
  return parse (frames->pdata[0]);
}

/* {ok:false, error:@error} with no boot id; returns the reply for more checks. */
static inline JsonObject *
assert_refused (Agent *a, const char *op, const char *body, const char *error)
{
  JsonObject *r = reply (a, op, body);

  ck_assert_msg (!nz_json_get_bool (r, "ok", TRUE), "%s %s: expected %s", op, body ? body : "",
                 error);
  ck_assert_str_eq (nz_json_get_string (r, "error"), error);
  ck_assert (!json_object_has_member (r, "guestBootId"));
  return r;
}

static inline void
assert_reply_error (Agent *a, const char *op, const char *body, const char *error)
{
  g_autoptr (JsonObject) r = assert_refused (a, op, body, error);
}

/* A stream op ending in {type:"error", error:@error} + terminator. */
static inline void
assert_stream_error (Agent *a, const char *op, const char *body, const char *error)
{
  g_autoptr (GPtrArray) frames = request (a, op, body);
  g_autoptr (JsonObject) f = NULL;

  ck_assert_msg (frames->len == 2, "%s %s: %u frames", op, body ? body : "", frames->len);
  ck_assert_str_eq (frames->pdata[1], "");
  f = parse (frames->pdata[0]);
  ck_assert_str_eq (nz_json_get_string (f, "type"), "error");
  ck_assert_str_eq (nz_json_get_string (f, "error"), error);
}

static inline gint64
member_int (JsonObject *o, const char *member)
{
  double v = -1;

  ck_assert_msg (nz_json_get_number (o, member, &v), "no number member %s", member);
  return (gint64)v;
}

static inline char *
ws_path (Agent *a, const char *rel)
{
  return g_build_filename (a->ws, rel, NULL);
}

/* After the agent destroys a socket, our writes fail; after a mere half-close they do not. */
static inline gboolean
peer_destroyed (int fd)
{
  for (int i = 0; i < 50; i++)
    {
      if (send (fd, "x", 1, MSG_NOSIGNAL) < 0)
        return errno == EPIPE || errno == ECONNRESET;
      g_usleep (20000);
    }
  return FALSE;
}

/* TRUE in a sanitizer build: RSS then says nothing about our own memory use. */
static inline gboolean
sanitized_build (void)
{
  const char *s = g_getenv ("NZ_SANITIZE");

  return s != NULL && *s != '\0' && !g_str_equal (s, "none");
}

/* Asserts that @pid grew by less than @limit_kib since @before_kib (plain builds only). */
static inline void
assert_rss_growth (GPid pid, gint64 before_kib, gint64 limit_kib)
{
  gint64 now = vm_rss_kib (pid);

  if (sanitized_build ())
    return;
  ck_assert_msg (now - before_kib < limit_kib, "agent grew %" G_GINT64_FORMAT " KiB (limit %" G_GINT64_FORMAT ")",
                 now - before_kib, limit_kib);
}

/* healthz answers ok (never gated). */
static inline void
assert_healthy (Agent *a)
{
  int fd = agent_connect (a);
  g_autoptr (GPtrArray) frames = NULL;
  g_autoptr (JsonObject) r = NULL;

  send_frame (fd, "{\"op\":\"healthz\"}");
  frames = read_frames (fd);
  close (fd);
  ck_assert_uint_eq (frames->len, 1);
  r = parse (frames->pdata[0]);
  ck_assert (nz_json_get_bool (r, "ok", FALSE));
}

/* ---- streams: ops that stay open ---- */

/* A connection with the first frame sent. */
static inline int
open_op (Agent *a, const char *op, const char *body)
{
  g_autofree char *json = envelope (a, op, body);
  int fd = agent_connect (a);

  send_frame (fd, json);
  return fd;
}

/* Incremental frame reader. */
typedef struct
{
  int fd;
  GByteArray *buf;
  gboolean eof;
  gboolean lenient; /* a destroyed socket may end mid-frame */
} Stream;

static inline Stream *
stream_new (int fd)
{
  Stream *s = g_new0 (Stream, 1);

  s->fd = fd;
  s->buf = g_byte_array_new ();
  return s;
}

static inline void
stream_free (Stream *s)
{
  if (s->fd >= 0)
    close (s->fd);
  g_byte_array_unref (s->buf);
  g_free (s);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Stream, stream_free)

/* The next frame ("" for the terminator), or NULL at EOF / reset. Fails after @timeout_ms. */
static inline char *
stream_next (Stream *s, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  for (;;)
    {
      if (s->buf->len >= 9)
        {
          char hex[9];
          gsize len;

          memcpy (hex, s->buf->data, 8);
          hex[8] = '\0';
          ck_assert_int_eq (s->buf->data[8], '\n');
          len = g_ascii_strtoull (hex, NULL, 16);
          if (s->buf->len >= 9 + len)
            {
              char *frame = g_strndup ((const char *)s->buf->data + 9, len);

              g_byte_array_remove_range (s->buf, 0, (guint)(9 + len));
              return frame;
            }
        }
      if (s->eof)
        {
          if (!s->lenient)
            ck_assert_uint_eq (s->buf->len, 0);
          return NULL;
        }
      {
        struct pollfd p = { .fd = s->fd, .events = POLLIN };
        gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
        guint8 chunk[65536];
        ssize_t n;

        ck_assert_msg (left > 0, "no frame within %d ms", timeout_ms);
        if (poll (&p, 1, (int)left) <= 0)
          continue;
        n = recv (s->fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR)
          continue;
        if (n <= 0)
          {
            s->eof = TRUE;
            continue;
          }
        g_byte_array_append (s->buf, chunk, (guint)n);
      }
    }
}

/* The next frame as an object; fails at EOF or on the terminator. */
static inline JsonObject *
stream_next_object (Stream *s, int timeout_ms)
{
  g_autofree char *f = stream_next (s, timeout_ms);

  ck_assert_msg (f != NULL, "connection closed, a frame was expected");
  ck_assert_msg (*f != '\0', "terminator, a frame was expected");
  return parse (f);
}

static inline void
stream_expect_terminator (Stream *s)
{
  g_autofree char *f = stream_next (s, 10000);

  ck_assert_msg (f != NULL && *f == '\0', "expected the terminator, got %s", f ? f : "EOF");
}

static inline void
stream_expect_eof (Stream *s, int timeout_ms)
{
  g_autofree char *f = stream_next (s, timeout_ms);

  ck_assert_msg (f == NULL, "expected EOF, got frame '%s'", f);
}

static inline Stream *
stream_op (Agent *a, const char *op, const char *body)
{
  return stream_new (open_op (a, op, body));
}

static inline const char *
member_str (JsonObject *obj, const char *member)
{
  const char *v = nz_json_get_string (obj, member);

  ck_assert_msg (v != NULL, "no string member %s", member);
  return v;
}

static inline void
send_event (Stream *s, const char *json)
{
  send_frame (s->fd, json);
}

/* Polls @pred up to @timeout_ms. */
static inline gboolean
wait_until (gboolean (*pred) (gpointer), gpointer data, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  while (g_get_monotonic_time () < deadline)
    {
      if (pred (data))
        return TRUE;
      g_usleep (20000);
    }
  return pred (data);
}
