#pragma once
/* agent-harness.h: shared scaffolding for the namzu-agent integration tests of the files,
 * pre-auth and quiesce work: start the real agent (unix, or TCP + token), frame requests,
 * collect frames. Every helper asserts with Check. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "nz-json.h"
#include "../nz-test.h"

#include <fcntl.h>

#pragma GCC diagnostic ignored "-Wunused-function"

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

static char **
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
static Agent *
agent_start_ex (gboolean tcp, const char *const *extra, gboolean capture_stderr)
{
  Agent *a = g_new0 (Agent, 1);
  g_autofree char *tool = nz_test_tool ("namzu-agent");
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

static Agent *
agent_start_full (gboolean tcp, const char *const *extra)
{
  return agent_start_ex (tcp, extra, FALSE);
}

static void
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
static void
agent_stop (Agent *a)
{
  int status = 0;

  ck_assert_int_eq (kill (a->pid, SIGTERM), 0);
  ck_assert_int_eq (waitpid (a->pid, &status, 0), a->pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "agent status %d", status);
  agent_free (a);
}

static int
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

static void
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

static void
send_frame (int fd, const char *json)
{
  g_autofree char *header = g_strdup_printf ("%08x\n", (unsigned)strlen (json));

  send_all (fd, header, 9);
  send_all (fd, json, strlen (json));
}

/* Splits @buf into frame payloads (the terminator is ""); all of it must be whole frames. */
static GPtrArray *
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
static GPtrArray *
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
static char *
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

static GPtrArray *
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

static JsonObject *
parse (const char *text)
{
  g_autoptr (GError) error = NULL;
  JsonObject *obj = nz_json_parse_object (text, -1, &error);

  ck_assert_msg (obj != NULL, "not JSON: %s", text);
  return obj;
}

/* A reply op: exactly one frame. */
static JsonObject *
reply (Agent *a, const char *op, const char *body)
{
  g_autoptr (GPtrArray) frames = request (a, op, body);

  ck_assert_msg (frames->len == 1, "%s %s: %u frames", op, body ? body : "", frames->len);
  return parse (frames->pdata[0]);
}

/* {ok:false, error:@error} with no boot id; returns the reply for more checks. */
static JsonObject *
assert_refused (Agent *a, const char *op, const char *body, const char *error)
{
  JsonObject *r = reply (a, op, body);

  ck_assert_msg (!nz_json_get_bool (r, "ok", TRUE), "%s %s: expected %s", op, body, error);
  ck_assert_str_eq (nz_json_get_string (r, "error"), error);
  ck_assert (!json_object_has_member (r, "guestBootId"));
  return r;
}

static void
assert_reply_error (Agent *a, const char *op, const char *body, const char *error)
{
  g_autoptr (JsonObject) r = assert_refused (a, op, body, error);
}

/* A stream op ending in {type:"error", error:@error} + terminator. */
static void
assert_stream_error (Agent *a, const char *op, const char *body, const char *error)
{
  g_autoptr (GPtrArray) frames = request (a, op, body);
  g_autoptr (JsonObject) f = NULL;

  ck_assert_msg (frames->len == 2, "%s %s: %u frames", op, body, frames->len);
  ck_assert_str_eq (frames->pdata[1], "");
  f = parse (frames->pdata[0]);
  ck_assert_str_eq (nz_json_get_string (f, "type"), "error");
  ck_assert_str_eq (nz_json_get_string (f, "error"), error);
}

static gint64
get_int (JsonObject *o, const char *member)
{
  double v = -1;

  ck_assert_msg (nz_json_get_number (o, member, &v), "no number member %s", member);
  return (gint64)v;
}

static char *
ws_path (Agent *a, const char *rel)
{
  return g_build_filename (a->ws, rel, NULL);
}

/* After the agent destroys a socket, our writes fail; after a mere half-close they do not. */
static gboolean
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

static gint64 vm_rss_kib (GPid pid);

/* TRUE in a sanitizer build: RSS then says nothing about our own memory use. */
static gboolean
sanitized_build (void)
{
  const char *s = g_getenv ("NZ_SANITIZE");

  return s != NULL && *s != '\0' && !g_str_equal (s, "none");
}

/* Asserts that @pid grew by less than @limit_kib since @before_kib (plain builds only). */
static void
assert_rss_growth (GPid pid, gint64 before_kib, gint64 limit_kib)
{
  gint64 now = vm_rss_kib (pid);

  if (sanitized_build ())
    return;
  ck_assert_msg (now - before_kib < limit_kib, "agent grew %" G_GINT64_FORMAT " KiB (limit %" G_GINT64_FORMAT ")",
                 now - before_kib, limit_kib);
}

/* VmRSS of @pid in KiB. */
static gint64
vm_rss_kib (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/status", (int)pid);
  g_autofree char *text = NULL;
  const char *p;

  ck_assert (g_file_get_contents (path, &text, NULL, NULL));
  p = strstr (text, "VmRSS:");
  ck_assert_ptr_nonnull (p);
  return g_ascii_strtoll (p + 6, NULL, 10);
}

/* healthz answers ok (never gated). */
static void
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
