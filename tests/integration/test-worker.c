/* test-worker: the real namzu-worker, driven over raw loopback HTTP: routes and shapes, the
 * auth gate, the startup table, limits, cancellation, poisoning, env scrub, idle exit, and
 * namzu-exec against it through the client's http:// transport. */
#define _GNU_SOURCE /* renameat2 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gio/gio.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "nz-config.h"
#include "nz-test.h"

#define TOKEN "w0rker-t0ken-9f8e7d"
#define AUTH "Authorization: Bearer " TOKEN "\r\n"

typedef struct
{
  GPid pid;
  int out_fd;
  int err_fd;
  guint16 port;
  char *workspace;
  char *listen_line;
} Worker;

/* The worker's environment: ours minus every NAMZU_* plus @extra (NULL-terminated K, V
 * pairs; a NULL V unsets). */
static char **
worker_env (const char *const *extra)
{
  char **env = g_get_environ ();
  char **names = g_listenv ();

  for (guint i = 0; names[i] != NULL; i++)
    if (g_str_has_prefix (names[i], "NAMZU_"))
      env = g_environ_unsetenv (env, names[i]);
  g_strfreev (names);
  for (guint i = 0; extra != NULL && extra[i] != NULL; i += 2)
    env = extra[i + 1] != NULL ? g_environ_setenv (env, extra[i], extra[i + 1], TRUE)
                               : g_environ_unsetenv (env, extra[i]);
  return env;
}

static char *
read_line (int fd)
{
  GString *s = g_string_new (NULL);
  char c;

  while (read (fd, &c, 1) == 1 && c != '\n')
    g_string_append_c (s, c);
  return g_string_free (s, FALSE);
}

static char *
read_all_fd (int fd)
{
  GString *s = g_string_new (NULL);
  char buf[4096];
  ssize_t n;

  while ((n = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (s, buf, n);
  return g_string_free (s, FALSE);
}

/* Starts the worker bound to 127.0.0.1:0 with a fresh workspace and the token, plus @extra. */
static Worker *
worker_start (const char *const *extra)
{
  g_autofree char *tool = nz_test_tool ("namzu-worker");
  Worker *w = g_new0 (Worker, 1);
  const char *base[] = { "NAMZU_SANDBOX_PORT", "0", "NAMZU_SANDBOX_BIND", "127.0.0.1",
                         "NAMZU_SANDBOX_TOKEN", TOKEN, NULL };
  char *argv[] = { tool, NULL };
  g_auto (GStrv) env = NULL;
  g_autoptr (GError) error = NULL;
  const char *colon;

  w->workspace = g_dir_make_tmp ("nz-worker-ws-XXXXXX", &error);
  g_assert_no_error (error);
  env = worker_env (base);
  env = g_environ_setenv (env, "NAMZU_SANDBOX_WORKSPACE", w->workspace, TRUE);
  for (guint i = 0; extra != NULL && extra[i] != NULL; i += 2)
    env = extra[i + 1] != NULL ? g_environ_setenv (env, extra[i], extra[i + 1], TRUE)
                               : g_environ_unsetenv (env, extra[i]);
  ck_assert (g_spawn_async_with_pipes (NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                       &w->pid, NULL, &w->out_fd, &w->err_fd, &error));
  w->listen_line = read_line (w->out_fd);
  ck_assert_msg (g_str_has_prefix (w->listen_line, "[namzu-sandbox-worker] listening on 127.0.0.1:"),
                 "listening line: %s", w->listen_line);
  colon = strchr (w->listen_line + strlen ("[namzu-sandbox-worker] listening on "), ':');
  w->port = (guint16)atoi (colon + 1);
  ck_assert (w->port > 0);
  return w;
}

/* Waits for the worker to exit; returns the wait status and its stderr. */
static int
worker_wait (Worker *w, char **err)
{
  int status = 0;

  ck_assert (waitpid (w->pid, &status, 0) == w->pid);
  w->pid = 0;
  if (err != NULL)
    *err = read_all_fd (w->err_fd);
  return status;
}

static void
worker_stop (Worker *w)
{
  if (w->pid > 0)
    {
      g_autofree char *err = NULL;
      int status;

      /* SIGTERM is a clean exit 0 (under ASan this also catches the worker's own leaks). */
      kill (w->pid, SIGTERM);
      status = worker_wait (w, &err);
      ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "worker exit %d: %s",
                     status, err);
    }
  close (w->out_fd);
  close (w->err_fd);
  g_free (w->workspace);
  g_free (w->listen_line);
  g_free (w);
}

/* ---- raw HTTP ---- */

typedef struct
{
  int status;
  char *head; /* status line + headers */
  char *body; /* de-chunked */
} Reply;

static void
reply_free (Reply *r)
{
  g_free (r->head);
  g_free (r->body);
  g_free (r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Reply, reply_free)

static GSocketConnection *
dial (guint16 port)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GError) error = NULL;
  GSocketConnection *conn = g_socket_client_connect_to_host (client, "127.0.0.1", port, NULL, &error);

  g_assert_no_error (error);
  return conn;
}

static void
send_raw (GSocketConnection *conn, const char *data, gsize len)
{
  g_autoptr (GError) error = NULL;

  g_output_stream_write_all (g_io_stream_get_output_stream (G_IO_STREAM (conn)), data, len, NULL,
                             NULL, &error);
  g_assert_no_error (error);
}

static char *
dechunk (const char *p)
{
  GString *out = g_string_new (NULL);

  for (;;)
    {
      char *end;
      long n = strtol (p, &end, 16);

      if (end == p || n <= 0)
        break;
      p = strstr (end, "\r\n");
      if (p == NULL)
        break;
      p += 2;
      g_string_append_len (out, p, n);
      p += n + 2;
    }
  return g_string_free (out, FALSE);
}

/* Reads one whole response (the worker closes after it: we send Connection: close). */
/* The response on @conn, read to its end; with @may_end_empty, NULL when the peer closed
 * without a byte (a worker that exits first). */
static Reply *
read_reply_full (GSocketConnection *conn, gboolean may_end_empty)
{
  GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
  g_autoptr (GString) raw = g_string_new (NULL);
  Reply *r = g_new0 (Reply, 1);
  char buf[65536];
  gssize n;
  const char *sep;

  while ((n = g_input_stream_read (in, buf, sizeof buf, NULL, NULL)) > 0)
    g_string_append_len (raw, buf, n);
  sep = strstr (raw->str, "\r\n\r\n");
  if (sep == NULL && may_end_empty && raw->len == 0)
    return (g_free (r), NULL);
  ck_assert_msg (sep != NULL, "no HTTP response: '%s'", raw->str);
  r->head = g_strndup (raw->str, sep - raw->str);
  r->status = atoi (raw->str + strlen ("HTTP/1.1 "));
  if (strstr (r->head, "Transfer-Encoding: chunked") != NULL)
    r->body = dechunk (sep + 4);
  else
    r->body = g_strdup (sep + 4);
  return r;
}

static Reply *
read_reply (GSocketConnection *conn)
{
  return read_reply_full (conn, FALSE);
}

/* @headers: extra header lines, each ending in \r\n. */
static Reply *
http_full (guint16 port, const char *method, const char *target, const char *headers,
           const char *body, gboolean may_end_empty)
{
  g_autoptr (GSocketConnection) conn = dial (port);
  g_autofree char *length = body != NULL ? g_strdup_printf ("Content-Type: application/json\r\n"
                                                            "Content-Length: %zu\r\n",
                                                            strlen (body))
                                         : g_strdup ("");
  g_autofree char *req = g_strdup_printf (
      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s\r\n%s", method, target,
      headers != NULL ? headers : "", length, body != NULL ? body : "");

  send_raw (conn, req, strlen (req));
  return read_reply_full (conn, may_end_empty);
}

static Reply *
http (guint16 port, const char *method, const char *target, const char *headers, const char *body)
{
  return http_full (port, method, target, headers, body, FALSE);
}

static JsonObject *
parse (const char *json)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  g_autoptr (GError) error = NULL;

  json_parser_load_from_data (p, json, -1, &error);
  ck_assert_msg (error == NULL, "not JSON: '%s'", json);
  ck_assert (JSON_NODE_HOLDS_OBJECT (json_parser_get_root (p)));
  return json_object_ref (json_node_get_object (json_parser_get_root (p)));
}

static const char *
str (JsonObject *o, const char *m)
{
  return json_object_has_member (o, m) ? json_object_get_string_member (o, m) : NULL;
}

static char *
reserve (guint16 port)
{
  g_autoptr (Reply) r = http (port, "POST", "/executions/reserve", AUTH, NULL);
  g_autoptr (JsonObject) o = NULL;

  ck_assert_int_eq (r->status, 201);
  o = parse (r->body);
  ck_assert (json_object_get_boolean_member (o, "ok"));
  ck_assert_int_eq (json_object_get_int_member (o, "protocolVersion"), 2);
  ck_assert (json_object_get_int_member (o, "leaseExpiresAt") > 0);
  ck_assert (g_str_has_prefix (str (o, "executionId"), "exec_"));
  return g_strdup (str (o, "executionId"));
}

/* The NDJSON events of an execute reply; the last one is returned in *@last. */
static GPtrArray *
events (const char *body)
{
  g_auto (GStrv) lines = g_strsplit (body, "\n", -1);
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify)json_object_unref);

  for (guint i = 0; lines[i] != NULL; i++)
    if (*lines[i] != '\0')
      g_ptr_array_add (out, parse (lines[i]));
  return out;
}

static char *
joined (GPtrArray *evs, const char *type)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < evs->len; i++)
    if (g_strcmp0 (str (evs->pdata[i], "type"), type) == 0)
      g_string_append (s, str (evs->pdata[i], "data"));
  return g_string_free (s, FALSE);
}

static void
assert_error (Reply *r, int status, const char *code)
{
  g_autoptr (JsonObject) o = NULL;

  ck_assert_msg (r->status == status, "want %d %s, got %d %s", status, code, r->status, r->body);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "error"), code);
}

static void
assert_unauthorized (Reply *r)
{
  ck_assert_msg (r->status == 401, "want 401, got %d %s", r->status, r->body);
  ck_assert_str_eq (r->body, "{\"error\":\"unauthorized\"}");
  ck_assert_msg (strstr (r->head, "\r\nWWW-Authenticate: Bearer realm=\"namzu-sandbox-worker\"")
                     != NULL,
                 "%s", r->head);
  ck_assert_msg (strstr (r->head, "\r\nContent-Type: application/json; charset=utf-8") != NULL,
                 "%s", r->head);
  ck_assert (strstr (r->body, TOKEN) == NULL && strstr (r->head, TOKEN) == NULL);
}

/* ---- routes and shapes ---- */

START_TEST (test_routes)
{
  Worker *w = worker_start (NULL);
  g_autofree char *id = reserve (w->port);
  g_autofree char *body = NULL;
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *path = NULL, *content = NULL;
  g_autoptr (Reply) r = NULL;
  g_autoptr (JsonObject) o = NULL;
  g_autoptr (GPtrArray) evs = NULL;
  JsonObject *last;

  r = http (w->port, "GET", "/healthz", NULL, NULL);
  ck_assert_int_eq (r->status, 200);
  o = parse (r->body);
  ck_assert (json_object_get_boolean_member (o, "ok"));
  ck_assert_int_eq (json_object_get_int_member (o, "protocolVersion"), 2);
  g_clear_pointer (&r, reply_free);

  /* A tracked execute: NDJSON deltas then exactly one result. */
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"command\":\"sh\",\"args\":[\"-c\","
                          "\"printf out; printf err >&2; pwd; exit 3\"],\"cwd\":\"sub/dir\"}",
                          id);
  r = http (w->port, "POST", "/execute", AUTH, body);
  ck_assert_int_eq (r->status, 200);
  ck_assert (strstr (r->head, "Content-Type: application/x-ndjson; charset=utf-8") != NULL);
  ck_assert (strstr (r->head, "Cache-Control: no-store") != NULL);
  evs = events (r->body);
  last = evs->pdata[evs->len - 1];
  ck_assert_str_eq (str (last, "type"), "result");
  ck_assert_int_eq (json_object_get_int_member (last, "exitCode"), 3);
  ck_assert (!json_object_get_boolean_member (last, "timedOut"));
  ck_assert (json_object_has_member (last, "durationMs"));
  ck_assert (!json_object_get_boolean_member (last, "stdoutTruncated"));
  ck_assert (!json_object_has_member (last, "signal"));
  out = joined (evs, "stdout_delta");
  err = joined (evs, "stderr_delta");
  path = g_strdup_printf ("out%s/sub/dir\n", w->workspace);
  ck_assert_str_eq (out, path);
  ck_assert_str_eq (err, "err");
  g_clear_pointer (&r, reply_free);

  /* The same id again: 409 with the outcome; cancel of a terminal id is idempotent. */
  r = http (w->port, "POST", "/execute", AUTH, body);
  assert_error (r, 409, "execution_not_reserved");
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "state"), "completed");
  g_clear_pointer (&r, reply_free);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  r = http (w->port, "POST", "/cancel", AUTH, body);
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "state"), "completed");
  ck_assert (json_object_get_boolean_member (o, "started"));
  ck_assert_int_eq (json_object_get_int_member (json_object_get_object_member (o, "result"),
                                                "exitCode"),
                    3);
  g_clear_pointer (&r, reply_free);

  /* Cancel before admission: cancelled, never started, and never admitted later (409). */
  g_free (id);
  id = reserve (w->port);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  r = http (w->port, "POST", "/cancel", AUTH, body);
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "state"), "cancelled");
  ck_assert (!json_object_get_boolean_member (o, "started"));
  ck_assert_int_eq (json_object_get_int_member (json_object_get_object_member (o, "result"),
                                                "exitCode"),
                    1);
  g_clear_pointer (&r, reply_free);
  g_free (body);
  body = g_strdup_printf ("{\"executionId\":\"%s\",\"command\":\"true\"}", id);
  r = http (w->port, "POST", "/execute", AUTH, body);
  assert_error (r, 409, "execution_not_reserved");
  g_clear_pointer (&r, reply_free);

  /* Refusals before the 200. */
  r = http (w->port, "POST", "/execute", AUTH, "{\"args\":[]}");
  assert_error (r, 400, "missing_command");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/execute", AUTH, "{\"command\":\"true\",\"executionId\":\"x\"}");
  assert_error (r, 400, "invalid_execution_id");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/execute", AUTH,
            "{\"command\":\"true\",\"executionId\":\"exec_00000000-0000-4000-8000-000000000000\"}");
  assert_error (r, 404, "unknown_execution");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/execute", AUTH, "{\"command\":\"true\",\"cwd\":\"../x\"}");
  assert_error (r, 400, "invalid_cwd");
  ck_assert (strstr (r->body, "path escapes the workspace") != NULL);
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/execute", AUTH, "{not json");
  assert_error (r, 400, "invalid_body");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/cancel", AUTH, "{\"executionId\":\"nope\"}");
  assert_error (r, 400, "invalid_execution_id");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/cancel", AUTH,
            "{\"executionId\":\"exec_00000000-0000-4000-8000-000000000000\"}");
  assert_error (r, 404, "unknown_execution");
  g_clear_pointer (&r, reply_free);

  /* A missing binary is a stream error event after the 200, like the reference. */
  r = http (w->port, "POST", "/execute", AUTH, "{\"command\":\"/nonexistent/nope\"}");
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&evs, g_ptr_array_unref);
  evs = events (r->body);
  ck_assert_int_eq (evs->len, 1);
  ck_assert_str_eq (str (evs->pdata[0], "type"), "error");
  ck_assert (g_str_has_suffix (str (evs->pdata[0], "error"), "ENOENT"));
  g_clear_pointer (&r, reply_free);

  /* Files. */
  r = http (w->port, "POST", "/write-file", AUTH, "{\"path\":\"d/f.txt\",\"content\":\"hello\"}");
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert_int_eq (json_object_get_int_member (o, "bytesWritten"), 5);
  g_clear_pointer (&r, reply_free);
  g_free (path);
  path = g_build_filename (w->workspace, "d", "f.txt", NULL);
  ck_assert (g_file_get_contents (path, &content, NULL, NULL));
  ck_assert_str_eq (content, "hello");
  r = http (w->port, "POST", "/read-file", AUTH, "{\"path\":\"d/f.txt\",\"encoding\":\"base64\"}");
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "content"), "aGVsbG8=");
  ck_assert_str_eq (str (o, "encoding"), "base64");
  ck_assert_int_eq (json_object_get_int_member (o, "sizeBytes"), 5);
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/read-file", AUTH, "{\"path\":\"/etc/passwd\"}");
  ck_assert_int_eq (r->status, 400);
  g_clear_pointer (&o, json_object_unref);
  o = parse (r->body);
  ck_assert (!json_object_get_boolean_member (o, "ok"));
  ck_assert_str_eq (str (o, "error"), "path escapes the workspace");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/read-file", AUTH, "{}");
  assert_error (r, 400, "missing_path");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/write-file", AUTH, "{\"path\":\"x\"}");
  assert_error (r, 400, "missing_path_or_content");
  g_clear_pointer (&r, reply_free);

  /* With the token, an unknown route is a 404. */
  r = http (w->port, "POST", "/healthz", AUTH, NULL);
  assert_error (r, 404, "not_found");
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "GET", "/healthz?x=1", AUTH, NULL);
  assert_error (r, 404, "not_found");
  worker_stop (w);
}
END_TEST

/* ---- the auth gate ---- */

START_TEST (test_auth_gate)
{
  Worker *w = worker_start (NULL);
  static const char *const bad_headers[] = {
    "",
    "Authorization: Bearer wrong\r\n",
    "Authorization: " TOKEN "\r\n",
    "Authorization: Bearer \r\n",
    "Authorization: Basic " TOKEN "\r\n",
    "Authorization: Bearer\t" TOKEN "\r\n",
    "Authorization: Bearer " TOKEN "x\r\n",
    NULL,
  };
  static const char *const targets[][2] = {
    { "POST", "/execute" }, { "POST", "/executions/reserve" }, { "POST", "/cancel" },
    { "POST", "/read-file" }, { "POST", "/write-file" }, { "POST", "/nope" },
    { "GET", "/nope" }, { "POST", "/healthz" }, { "GET", "/healthz?x=1" },
    { "GET", "/healthz/" }, { "PUT", "/healthz" }, { "DELETE", "/execute" },
  };
  g_autofree char *victim = g_build_filename (w->workspace, "victim.txt", NULL);
  g_autoptr (Reply) r = NULL;

  for (guint h = 0; bad_headers[h] != NULL; h++)
    for (guint t = 0; t < G_N_ELEMENTS (targets); t++)
      {
        g_autoptr (Reply) rr = http (w->port, targets[t][0], targets[t][1], bad_headers[h],
                                     g_str_equal (targets[t][0], "GET") ? NULL : "{}");

        assert_unauthorized (rr);
      }
  /* Exactly GET /healthz is exempt. */
  r = http (w->port, "GET", "/healthz", NULL, NULL);
  ck_assert_int_eq (r->status, 200);
  g_clear_pointer (&r, reply_free);
  /* Any case of the scheme, several spaces, surrounding whitespace. */
  r = http (w->port, "POST", "/nope", "Authorization:   bEaReR    " TOKEN "  \r\n", NULL);
  assert_error (r, 404, "not_found");
  g_clear_pointer (&r, reply_free);
  /* The first of two Authorization headers wins, whichever order. */
  r = http (w->port, "POST", "/nope", "Authorization: Bearer wrong\r\n" AUTH, NULL);
  assert_unauthorized (r);
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/nope", AUTH "Authorization: Bearer wrong\r\n", NULL);
  assert_error (r, 404, "not_found");
  g_clear_pointer (&r, reply_free);

  /* A refused /write-file writes nothing. */
  r = http (w->port, "POST", "/write-file", "Authorization: Bearer wrong\r\n",
            "{\"path\":\"victim.txt\",\"content\":\"pwned\"}");
  assert_unauthorized (r);
  ck_assert (!g_file_test (victim, G_FILE_TEST_EXISTS));
  g_clear_pointer (&r, reply_free);

  /* The body of a refused request is never read: the 401 comes while the body we announced
   * has not been sent. */
  {
    g_autoptr (GSocketConnection) conn = dial (w->port);
    const char *head = "POST /write-file HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n"
                       "{\"path\":\"victim.txt\",";
    GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
    char buf[512] = { 0 };
    gssize n;
    gint64 t0 = g_get_monotonic_time ();

    send_raw (conn, head, strlen (head));
    n = g_input_stream_read (in, buf, sizeof buf - 1, NULL, NULL);
    ck_assert_msg (n > 0 && g_str_has_prefix (buf, "HTTP/1.1 401 "), "got '%s'", buf);
    ck_assert_msg (g_get_monotonic_time () - t0 < 1500 * 1000, "the 401 waited for the body");
    ck_assert (strstr (buf, "{\"error\":\"unauthorized\"}") != NULL);
    ck_assert (strstr (buf, "WWW-Authenticate: Bearer realm=\"namzu-sandbox-worker\"") != NULL);
  }
  ck_assert (!g_file_test (victim, G_FILE_TEST_EXISTS));
  worker_stop (w);
}
END_TEST

/* ---- the startup table ---- */

typedef struct
{
  const char *token;    /* NULL: unset */
  const char *bind;     /* NULL: unset (0.0.0.0) */
  const char *escape;   /* NULL: unset */
  gboolean starts;
  const char *auth;     /* "bearer" / "none" when it starts; else the refusal's start */
  const char *policy;   /* NAMZU_SANDBOX_NORMAL_EXIT_POLICY; NULL: unset */
} StartupRow;

static const StartupRow startup_rows[] = {
  { TOKEN, "127.0.0.1", NULL, TRUE, "bearer" },
  { TOKEN, "0.0.0.0", NULL, TRUE, "bearer" },
  { NULL, "127.0.0.1", NULL, TRUE, "none" },
  { NULL, "localhost", NULL, TRUE, "none" },
  { NULL, "127.0.0.2", NULL, TRUE, "none" },
  { NULL, NULL, NULL, FALSE, "no NAMZU_SANDBOX_TOKEN is configured and NAMZU_SANDBOX_BIND=0.0.0.0" },
  { NULL, "0.0.0.0", NULL, FALSE, "no NAMZU_SANDBOX_TOKEN is configured" },
  { NULL, "::", NULL, FALSE, "no NAMZU_SANDBOX_TOKEN is configured" },
  { NULL, "[::ffff:127.0.0.1]", NULL, FALSE, "no NAMZU_SANDBOX_TOKEN is configured" },
  { "", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN is set but is empty after trimming" },
  { " ", "127.0.0.1", "1", FALSE, "NAMZU_SANDBOX_TOKEN is set but is empty after trimming" },
  { "\t", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN is set but is empty after trimming" },
  { " pAdDeD-x", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN is set but is empty" },
  { "padded\xc2\xa0", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN is set but is empty" },
  { "\xe2\x82\xac-token", "127.0.0.1", NULL, FALSE,
    "NAMZU_SANDBOX_TOKEN carries a character that cannot be presented" },
  { "\xf0\x9f\x94\x91", "127.0.0.1", "1", FALSE, "NAMZU_SANDBOX_TOKEN carries a character" },
  { "a\x01" "b", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN carries a character" },
  { "a\x7f" "b", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN carries a character" },
  { "a\nb", "127.0.0.1", NULL, FALSE, "NAMZU_SANDBOX_TOKEN carries a character" },
  { "\xc3\xa9-token", "0.0.0.0", NULL, TRUE, "bearer" },
  { "\xc3\xbf-token", "0.0.0.0", NULL, TRUE, "bearer" },
  { "with space", "0.0.0.0", NULL, TRUE, "bearer" },
  { "tab\tinside", "0.0.0.0", NULL, TRUE, "bearer" },
  { NULL, "0.0.0.0", "1", TRUE, "none" },
  { NULL, "0.0.0.0", "true", TRUE, "none" },
  { NULL, "0.0.0.0", "TRUE", TRUE, "none" },
  { NULL, "0.0.0.0", "yes", TRUE, "none" },
  { NULL, "0.0.0.0", "Yes", TRUE, "none" },
  { NULL, "0.0.0.0", "ON", TRUE, "none" },
  { NULL, "0.0.0.0", "0", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "false", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "no", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "off", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", " yes ", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "yes ", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", " on", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { NULL, "0.0.0.0", "TRUE ", FALSE, "no NAMZU_SANDBOX_TOKEN" },
  { TOKEN, "0.0.0.0", "1", TRUE, "bearer" },
  /* Step 0, before the token: the normal-exit policy, exact strings only; computer-lifetime
   * is named and refused (docs/worker.md), never run as strict. */
  { TOKEN, "0.0.0.0", NULL, TRUE, "bearer", "strict" },
  { TOKEN, "0.0.0.0", NULL, FALSE,
    "NAMZU_SANDBOX_NORMAL_EXIT_POLICY=computer-lifetime is not supported", "computer-lifetime" },
  { TOKEN, "0.0.0.0", NULL, FALSE, "NAMZU_SANDBOX_NORMAL_EXIT_POLICY must be exactly", "Strict" },
  { NULL, "0.0.0.0", NULL, FALSE, "NAMZU_SANDBOX_NORMAL_EXIT_POLICY must be exactly", " strict" },
};

START_TEST (test_startup_table)
{
  const StartupRow *row = &startup_rows[_i];
  g_autofree char *tool = nz_test_tool ("namzu-worker");
  g_autofree char *ws = g_dir_make_tmp ("nz-worker-ws-XXXXXX", NULL);
  const char *extra[] = { "NAMZU_SANDBOX_PORT", "0", "NAMZU_SANDBOX_WORKSPACE", ws,
                          "NAMZU_SANDBOX_TOKEN", row->token, "NAMZU_SANDBOX_BIND", row->bind,
                          "NAMZU_SANDBOX_ALLOW_UNAUTHENTICATED", row->escape,
                          "NAMZU_SANDBOX_NORMAL_EXIT_POLICY", row->policy, NULL };
  g_auto (GStrv) env = worker_env (extra);
  char *argv[] = { tool, NULL };
  GPid pid;
  int out_fd, err_fd, status = 0;
  g_autoptr (GError) error = NULL;
  g_autofree char *line = NULL;

  ck_assert (g_spawn_async_with_pipes (NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                       &pid, NULL, &out_fd, &err_fd, &error));
  line = read_line (out_fd);
  if (row->starts)
    {
      g_autofree char *want = g_strdup_printf (" auth=%s", row->auth);

      ck_assert_msg (g_str_has_prefix (line, "[namzu-sandbox-worker] listening on ")
                         && g_str_has_suffix (line, want),
                     "row %d: '%s'", _i, line);
      kill (pid, SIGTERM);
      ck_assert (waitpid (pid, &status, 0) == pid);
      ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 0, "SIGTERM: exit 0");
    }
  else
    {
      g_autofree char *err = NULL;
      g_autofree char *want = g_strdup_printf ("[namzu-sandbox-worker] refusing to start: %s",
                                               row->auth);

      /* Refused before any socket exists: no listening line at all. */
      ck_assert_msg (*line == '\0', "row %d started: '%s'", _i, line);
      ck_assert (waitpid (pid, &status, 0) == pid);
      err = read_all_fd (err_fd);
      ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 1, "row %d: exit 1", _i);
      ck_assert_msg (g_str_has_prefix (err, want), "row %d stderr: '%s'", _i, err);
      /* Never the token itself. */
      if (row->token != NULL && strlen (row->token) > 3)
        ck_assert (strstr (err, row->token) == NULL);
    }
  close (out_fd);
  close (err_fd);
  g_rmdir (ws);
}
END_TEST

/* ---- limits ---- */

START_TEST (test_timeout_ceiling)
{
  const char *extra[] = { "NAMZU_SANDBOX_MAX_TIMEOUT_MS", "1000", NULL };
  Worker *w = worker_start (extra);
  static const char *const bad[] = { "1001", "0", "-1", "\"nonsense\"", "null", NULL };

  for (guint i = 0; bad[i] != NULL; i++)
    {
      g_autofree char *body = g_strdup_printf ("{\"command\":\"true\",\"timeoutMs\":%s}", bad[i]);
      g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH, body);
      g_autoptr (JsonObject) o = NULL;

      assert_error (r, 400, "invalid_timeout");
      o = parse (r->body);
      ck_assert_str_eq (str (o, "message"), "timeoutMs must be a finite number in (0, 1000]");
    }
  {
    /* At the ceiling runs; a timeout kills and says so. */
    g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH,
                                "{\"command\":\"sleep\",\"args\":[\"5\"],\"timeoutMs\":1000}");
    g_autoptr (GPtrArray) evs = events (r->body);
    JsonObject *last = evs->pdata[evs->len - 1];

    ck_assert_int_eq (r->status, 200);
    ck_assert_str_eq (str (last, "type"), "result");
    ck_assert (json_object_get_boolean_member (last, "timedOut"));
    ck_assert_int_eq (json_object_get_int_member (last, "exitCode"), -1);
    ck_assert_str_eq (str (last, "signal"), "SIGTERM");
  }
  worker_stop (w);
}
END_TEST

START_TEST (test_body_and_output_caps)
{
  const char *extra[] = { "NAMZU_SANDBOX_MAX_BODY_BYTES", "200", NULL };
  Worker *w = worker_start (extra);
  g_autofree char *big = g_strnfill (300, 'x');
  g_autofree char *body = g_strdup_printf ("{\"path\":\"big.txt\",\"content\":\"%s\"}", big);
  g_autofree char *file = g_build_filename (w->workspace, "big.txt", NULL);
  g_autoptr (Reply) r = http (w->port, "POST", "/write-file", AUTH, body);
  g_autoptr (JsonObject) o = NULL;
  g_autoptr (GPtrArray) evs = NULL;
  g_autofree char *out = NULL, *err = NULL;
  JsonObject *last;

  assert_error (r, 400, "invalid_body");
  o = parse (r->body);
  ck_assert_str_eq (str (o, "message"), "request body exceeds 200 bytes");
  ck_assert (!g_file_test (file, G_FILE_TEST_EXISTS));
  g_clear_pointer (&r, reply_free);

  /* Per-stream cap: clipped to maxOutputBytes, then silence, flagged in the result. */
  r = http (w->port, "POST", "/execute", AUTH,
            "{\"command\":\"sh\",\"args\":[\"-c\",\"printf %05000d 0; printf 12345 >&2\"],"
            "\"maxOutputBytes\":10}");
  ck_assert_int_eq (r->status, 200);
  evs = events (r->body);
  out = joined (evs, "stdout_delta");
  err = joined (evs, "stderr_delta");
  ck_assert_str_eq (out, "0000000000");
  ck_assert_str_eq (err, "12345");
  last = evs->pdata[evs->len - 1];
  ck_assert (json_object_get_boolean_member (last, "stdoutTruncated"));
  ck_assert (!json_object_get_boolean_member (last, "stderrTruncated"));
  worker_stop (w);
}
END_TEST

/* ---- cancellation ---- */

typedef struct
{
  guint16 port;
  char *body;
  Reply *reply;
  const char *path; /* NULL: /execute */
  gboolean may_end_empty; /* the worker may exit before it wrote the stream's head */
} ExecJob;

static gpointer
exec_thread (gpointer data)
{
  ExecJob *job = data;

  job->reply = http_full (job->port, "POST", job->path != NULL ? job->path : "/execute", AUTH,
                          job->body, job->may_end_empty);
  return NULL;
}

START_TEST (test_cancel_sigterm_ignoring)
{
  Worker *w = worker_start (NULL);
  g_autofree char *id = reserve (w->port);
  g_autofree char *marker = g_build_filename (w->workspace, "started", NULL);
  g_autofree char *cancel = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  ExecJob job = { w->port, NULL, NULL };
  g_autoptr (Reply) r = NULL;
  g_autoptr (JsonObject) o = NULL;
  g_autoptr (GPtrArray) evs = NULL;
  GThread *t;
  gint64 t0, elapsed_ms;
  JsonObject *last;

  /* Ignores SIGTERM (the disposition survives exec into its sleeps), so only the KILL after
   * NAMZU_SANDBOX_CANCEL_GRACE_MS (production default, 250 ms) ends it. */
  job.body = g_strdup_printf ("{\"executionId\":\"%s\",\"command\":\"sh\",\"args\":[\"-c\","
                              "\"trap '' TERM; touch started; while :; do sleep 0.05; done\"]}",
                              id);
  t = g_thread_new ("exec", exec_thread, &job);
  for (int i = 0; i < 500 && !g_file_test (marker, G_FILE_TEST_EXISTS); i++)
    g_usleep (10000);
  ck_assert (g_file_test (marker, G_FILE_TEST_EXISTS));
  t0 = g_get_monotonic_time ();
  r = http (w->port, "POST", "/cancel", AUTH, cancel);
  elapsed_ms = (g_get_monotonic_time () - t0) / 1000;
  ck_assert_int_eq (r->status, 200);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "state"), "cancelled");
  ck_assert (json_object_get_boolean_member (o, "started"));
  ck_assert_msg (elapsed_ms >= 240 && elapsed_ms < 2000, "cancel took %" G_GINT64_FORMAT "ms",
                 elapsed_ms);
  g_thread_join (t);
  ck_assert_int_eq (job.reply->status, 200);
  evs = events (job.reply->body);
  last = evs->pdata[evs->len - 1];
  ck_assert_str_eq (str (last, "type"), "result");
  ck_assert_int_eq (json_object_get_int_member (last, "exitCode"), -1);
  ck_assert_str_eq (str (last, "signal"), "SIGKILL");
  ck_assert (!json_object_get_boolean_member (last, "timedOut"));
  reply_free (job.reply);
  g_free (job.body);
  /* The worker is still serving. */
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "GET", "/healthz", NULL, NULL);
  ck_assert_int_eq (r->status, 200);
  worker_stop (w);
}
END_TEST

/* Ranged reads and the capability probe (spec C.5, post-23.0.0): authenticated like every
 * route, exactly the bytes asked with the range served, every malformed range refused with a
 * 400 (never the whole file), a remainder over 32 MiB bounded, whole-file reads unchanged. */
static JsonObject *
read_file (Worker *w, const char *body, int want_status)
{
  g_autoptr (Reply) r = http (w->port, "POST", "/read-file", AUTH, body);

  ck_assert_msg (r->status == want_status, "%s: %d %s", body, r->status, r->body);
  return parse (r->body);
}

START_TEST (test_read_file_ranges)
{
  Worker *w = worker_start (NULL);
  g_autofree char *path = g_build_filename (w->workspace, "r.txt", NULL);
  g_autofree char *sparse = g_build_filename (w->workspace, "big", NULL);
  g_autofree char *dir = g_build_filename (w->workspace, "dir", NULL);
  static const char *const bad[] = {
    "{\"path\":\"r.txt\",\"range\":null}",
    "{\"path\":\"r.txt\",\"range\":[]}",
    "{\"path\":\"r.txt\",\"range\":{\"version\":2}}",
    "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"offset\":-1}}",
    "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"offset\":1.5}}",
    "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"length\":-1}}",
    "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"length\":33554433}}",
    /* The remainder of a 32 MiB + 1 file, with no length: bounded, not sent whole. */
    "{\"path\":\"big\",\"range\":{\"version\":1}}",
    "{\"path\":\"dir\",\"range\":{\"version\":1,\"length\":1}}",
  };
  g_autoptr (Reply) r = NULL;
  JsonObject *o, *range;
  int fd;

  ck_assert (g_file_set_contents (path, "0123456789", -1, NULL));
  fd = open (sparse, O_CREAT | O_WRONLY, 0644);
  ck_assert (fd >= 0 && ftruncate (fd, 33554433) == 0);
  close (fd);
  ck_assert (g_mkdir (dir, 0755) == 0);

  r = http (w->port, "POST", "/read-file", NULL, "{\"capabilitiesOnly\":true}");
  assert_unauthorized (r);
  o = read_file (w, "{\"capabilitiesOnly\":true}", 200);
  ck_assert (json_object_get_boolean_member (o, "ok"));
  range = json_object_get_object_member (o, "readFileRanges");
  ck_assert_int_eq (json_object_get_int_member (range, "version"), 1);
  ck_assert_int_eq (json_object_get_int_member (range, "maxBytes"), 33554432);
  json_object_unref (o);

  o = read_file (w, "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"offset\":2,\"length\":3}}",
                 200);
  ck_assert_str_eq (str (o, "content"), "234");
  ck_assert_str_eq (str (o, "encoding"), "utf8");
  ck_assert_int_eq (json_object_get_int_member (o, "sizeBytes"), 3);
  range = json_object_get_object_member (o, "range");
  ck_assert_int_eq (json_object_get_int_member (range, "version"), 1);
  ck_assert_int_eq (json_object_get_int_member (range, "offset"), 2);
  ck_assert_int_eq (json_object_get_int_member (range, "length"), 3);
  json_object_unref (o);
  o = read_file (w, "{\"path\":\"r.txt\",\"encoding\":\"base64\",\"range\":{\"version\":1,"
                    "\"offset\":8}}",
                 200);
  ck_assert_str_eq (str (o, "content"), "ODk=");
  ck_assert (json_node_is_null (
      json_object_get_member (json_object_get_object_member (o, "range"), "length")));
  json_object_unref (o);
  /* Past EOF: empty. */
  o = read_file (w, "{\"path\":\"r.txt\",\"range\":{\"version\":1,\"offset\":99,\"length\":4}}",
                 200);
  ck_assert_str_eq (str (o, "content"), "");
  ck_assert_int_eq (json_object_get_int_member (o, "sizeBytes"), 0);
  json_object_unref (o);
  /* A range inside the big file is fine; only its unbounded remainder is refused. */
  o = read_file (w, "{\"path\":\"big\",\"range\":{\"version\":1,\"offset\":33554430}}", 200);
  ck_assert_int_eq (json_object_get_int_member (o, "sizeBytes"), 3);
  json_object_unref (o);

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      o = read_file (w, bad[i], 400);
      ck_assert (!json_object_get_boolean_member (o, "ok"));
      ck_assert_msg (str (o, "content") == NULL && str (o, "error") != NULL, "%s", bad[i]);
      json_object_unref (o);
    }
  /* The whole-file read is what it was. */
  o = read_file (w, "{\"path\":\"r.txt\"}", 200);
  ck_assert_str_eq (str (o, "content"), "0123456789");
  ck_assert (!json_object_has_member (o, "range"));
  json_object_unref (o);
  g_unlink (path);
  g_unlink (sparse);
  g_rmdir (dir);
  worker_stop (w);
}
END_TEST

/* A connection is closed after one response, and every response says so first (RFC 9112 9.6),
 * so a pooled client never reuses one that is going away; the requests here ask to keep it. */
START_TEST (test_connection_close_is_announced)
{
  Worker *w = worker_start (NULL);
  static const char *const requests[] = {
    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
    "POST /nope HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n",
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n\r\n",
    "POST /execute HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 2\r\n\r\n{}",
  };
  static const int want[] = { 200, 200, 201, 404, 401, 400 };

  for (gsize i = 0; i < G_N_ELEMENTS (requests); i++)
    {
      g_autoptr (GSocketConnection) conn = dial (w->port);
      g_autoptr (Reply) r = NULL;

      send_raw (conn, requests[i], strlen (requests[i]));
      /* read_reply reads to the end: the worker closes after this one response. */
      r = read_reply (conn);
      ck_assert_msg (r->status == want[i], "request %zu: %d %s", i, r->status, r->body);
      ck_assert_msg (strstr (r->head, "\r\nConnection: close\r\n") != NULL
                         || g_str_has_suffix (r->head, "\r\nConnection: close"),
                     "request %zu: %s", i, r->head);
    }
  worker_stop (w);
}
END_TEST

/* The request heads RFC 9112 says a server must refuse, and the reference's parser refuses,
 * refused before libsoup (which unfolds, blanks a bare CR and drops NULs) parses them: raw
 * sockets, since a client would normalise them. A folded Authorization never authorises. */
START_TEST (test_smuggling_heads_refused)
{
  Worker *w = worker_start (NULL);
  static const char *const bad[] = {
    /* obs-fold: a folded credential, and any other folded header */
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n " TOKEN "\r\n\r\n",
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n" AUTH "X-A: 1\r\n\t2\r\n\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\n y\r\n\r\n",
    /* framing */
    "POST /execute HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
    "POST /execute HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: 2\r\n"
    "Transfer-Encoding: chunked\r\n\r\n{}",
    "POST /execute HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: +2\r\n\r\n{}",
    /* a bare CR, a line with no name, a name with whitespace */
    "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\nGarbage\r\n\r\n",
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\nAuthorization : Bearer " TOKEN "\r\n\r\n",
  };
  /* What stays accepted: one value twice, a head that trickles in, a body right behind it. */
  static const char *const good[] = {
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n" AUTH
    "Content-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n" AUTH "X-Tab:\tv\r\n\r\n",
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad) + 1; i++)
    {
      g_autoptr (GSocketConnection) conn = dial (w->port);
      GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
      g_autoptr (GString) got = g_string_new (NULL);
      char buf[4096];
      gssize n;

      if (i < G_N_ELEMENTS (bad))
        send_raw (conn, bad[i], strlen (bad[i]));
      else
        {
          /* Over libsoup's 64 KiB head bound, with no end. */
          g_autofree char *big = g_strnfill (70000, 'a');
          g_autofree char *req = g_strdup_printf ("GET /healthz HTTP/1.1\r\nX-Big: %s", big);

          send_raw (conn, req, strlen (req));
        }
      while ((n = g_input_stream_read (in, buf, sizeof buf, NULL, NULL)) > 0)
        g_string_append_len (got, buf, n);
      ck_assert_msg (g_str_equal (got->str, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"),
                     "request %zu answered: %s", i, got->str);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (good); i++)
    {
      g_autoptr (GSocketConnection) conn = dial (w->port);
      g_autoptr (Reply) r = NULL;

      send_raw (conn, good[i], strlen (good[i]));
      r = read_reply (conn);
      ck_assert_msg (r->status == 201, "good %zu: %d %s", i, r->status, r->body);
    }
  {
    const char *req = "POST /write-file HTTP/1.1\r\nHost: x\r\n" AUTH
                      "Content-Length: 31\r\n\r\n{\"path\":\"t.txt\",\"content\":\"ok\"}";
    g_autoptr (GSocketConnection) conn = dial (w->port);
    g_autoptr (Reply) r = NULL;
    gsize len = strlen (req);

    for (gsize off = 0; off < len; off += 7)
      {
        send_raw (conn, req + off, MIN (7, len - off));
        g_usleep (2000);
      }
    r = read_reply (conn);
    ck_assert_msg (r->status == 200, "trickled: %d %s", r->status, r->body);
  }
  worker_stop (w);
}
END_TEST

/* ---- poisoning ---- */

/* Retirement when termination cannot be confirmed, every time (spec C.4's terminateAndConfirm):
 * with NAMZU_SANDBOX_CANCEL_CONFIRM_TIMEOUT_MS=0 the group is checked right after SIGTERM and
 * again right after SIGKILL, before anything is reaped, so a command that dies of the first
 * SIGTERM still counts as live: 504 cancellation_unconfirmed and the worker exits 1. A race, so
 * it runs many rounds: reaping before the check confirmed a quick death in some of them. */
#define RETIRE_ROUNDS 200

typedef enum
{
  RETIRE_BY_CANCEL, /* POST /cancel */
  RETIRE_BY_AGENT,  /* POST /v1/agent/cancel-execution */
  RETIRE_BY_TIMEOUT,
} RetireBy;

/* One round on a fresh worker: a running `exec sleep 100` (no handler: the first SIGTERM ends
 * it at once) ended @by, which the worker cannot confirm: it must refuse and exit 1. */
static void
retire_round (RetireBy by, int round)
{
  /* The reference's 50 ms until exit can pass before a loaded machine flushed the refusal
   * (the test is about the decision, not that delay): 200 ms. */
  const char *extra[] = { "NAMZU_SANDBOX_CANCEL_CONFIRM_TIMEOUT_MS", "0",
                          "NAMZU_SANDBOX_POISON_EXIT_DELAY_MS", "200", NULL };
  Worker *w = worker_start (extra);
  g_autofree char *id = NULL;
  g_autofree char *marker = g_build_filename (w->workspace, "started", NULL);
  g_autofree char *cancel = NULL;
  g_autofree char *err = NULL;
  ExecJob job = { w->port, NULL, NULL, by == RETIRE_BY_AGENT ? "/v1/agent/execute" : NULL,
                  TRUE };
  g_autoptr (Reply) r = NULL;
  GThread *t;
  int status;

  if (by == RETIRE_BY_AGENT)
    {
      g_autoptr (Reply) res = http (w->port, "POST", "/v1/agent/reserve-execution", AUTH, "{}");
      g_autoptr (JsonObject) o = (g_strchomp (res->body), parse (res->body));

      id = g_strdup (str (o, "executionId"));
    }
  else
    id = reserve (w->port);
  cancel = g_strdup_printf ("{\"executionId\":\"%s\"}", id);
  job.body = g_strdup_printf ("{\"executionId\":\"%s\",\"command\":\"sh\",\"args\":[\"-c\","
                              "\"touch started; exec sleep 100\"]%s}",
                              id, by == RETIRE_BY_TIMEOUT ? ",\"timeoutMs\":50" : "");
  t = g_thread_new ("exec", exec_thread, &job);
  if (by != RETIRE_BY_TIMEOUT)
    {
      for (int i = 0; i < 1000 && !g_file_test (marker, G_FILE_TEST_EXISTS); i++)
        g_usleep (2000);
      ck_assert (g_file_test (marker, G_FILE_TEST_EXISTS));
      /* The shell has exec'd sleep once the marker exists and sleep's image is in place. */
      g_usleep (2000);
      r = http (w->port, "POST", by == RETIRE_BY_AGENT ? "/v1/agent/cancel-execution" : "/cancel",
                AUTH, cancel);
      ck_assert_msg (strstr (r->body, "\"error\":\"cancellation_unconfirmed\"") != NULL,
                     "round %d (%d): cancel answered %d %s", round, by, r->status, r->body);
      if (by == RETIRE_BY_CANCEL)
        assert_error (r, 504, "cancellation_unconfirmed");
    }
  status = worker_wait (w, &err);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 1,
                 "round %d (%d): a retiring worker exits 1 (status %d): %s", round, by, status,
                 err);
  ck_assert_msg (strstr (err, "termination could not be confirmed; retiring worker: ") != NULL,
                 "round %d (%d): %s", round, by, err);
  /* The execute stream ends with the worker (the reference may still settle it first). */
  g_thread_join (t);
  if (job.reply != NULL)
    reply_free (job.reply);
  g_free (job.body);
  g_unlink (marker);
  g_rmdir (w->workspace);
  worker_stop (w);
}

START_TEST (test_unconfirmed_retires_every_time)
{
  for (int round = 0; round < RETIRE_ROUNDS; round++)
    retire_round (RETIRE_BY_CANCEL, round);
  /* The agent's ops through POST /v1/agent/<op> share the termination, and a timeout takes the
   * same path. */
  for (int round = 0; round < RETIRE_ROUNDS / 10; round++)
    {
      retire_round (RETIRE_BY_AGENT, round);
      retire_round (RETIRE_BY_TIMEOUT, round);
    }
}
END_TEST

START_TEST (test_poison_on_leftover_descendant)
{
  /* A longer poison delay than the reference's 50 ms, so the test can observe the window. */
  const char *extra[] = { "NAMZU_SANDBOX_POISON_EXIT_DELAY_MS", "4000", NULL };
  Worker *w = worker_start (extra);
  GSocketConnection *pre[5];
  static const char *const requests[] = {
    /* /healthz answers the drain signal without a token ... */
    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    /* ... but everything else is still gated first ... */
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    /* ... and with the token every route is 503. */
    "POST /executions/reserve HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" AUTH "\r\n",
    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" AUTH "\r\n",
    /* The agent upgrade too: a poisoned worker hands out no agent connection. */
    "GET /v1/agent HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\n"
    "Upgrade: namzu-agent/2\r\n" AUTH "\r\n",
  };
  static const int want[] = { 503, 401, 503, 503, 503 };
  g_autoptr (Reply) r = NULL;
  g_autofree char *err = NULL;
  int status;

  /* Connections opened before the poisoning keep being served; new ones are refused. */
  for (guint i = 0; i < G_N_ELEMENTS (pre); i++)
    pre[i] = dial (w->port);
  {
    /* The leader exits 0 but leaves a member of its group behind (stdio detached). */
    g_autoptr (GSocketConnection) conn = dial (w->port);
    const char *body = "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep 3 >/dev/null 2>&1 & exit 0\"]}";
    g_autofree char *req = g_strdup_printf (
        "POST /execute HTTP/1.1\r\nHost: x\r\n" AUTH "Content-Length: %zu\r\n\r\n%s",
        strlen (body), body);
    char buf[4096] = { 0 };
    gsize got = 0;
    GInputStream *in = g_io_stream_get_input_stream (G_IO_STREAM (conn));

    send_raw (conn, req, strlen (req));
    g_usleep (500 * 1000);
    for (guint i = 0; i < G_N_ELEMENTS (pre); i++)
      {
        g_autoptr (Reply) rr = NULL;

        send_raw (pre[i], requests[i], strlen (requests[i]));
        rr = read_reply (pre[i]);
        ck_assert_msg (rr->status == want[i], "request %u: %d %s", i, rr->status, rr->body);
        if (want[i] == 503)
          assert_error (rr, 503, "worker_retiring");
        else
          assert_unauthorized (rr);
        g_object_unref (pre[i]);
      }
    /* The execute stream never carries a result: it just ends with the process. */
    while (got < sizeof buf - 1)
      {
        gssize n = g_input_stream_read (in, buf + got, sizeof buf - 1 - got, NULL, NULL);

        if (n <= 0)
          break;
        got += n;
      }
    ck_assert_msg (strstr (buf, "\"result\"") == NULL, "a result was sent: %s", buf);
  }
  status = worker_wait (w, &err);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 1, "poisoned worker exits 1");
  ck_assert_msg (strstr (err, "[namzu-sandbox-worker] termination could not be confirmed; "
                              "retiring worker: ")
                     != NULL,
                 "stderr: %s", err);
  worker_stop (w);
}
END_TEST

/* ---- env scrub, idle exit ---- */

START_TEST (test_env_scrub)
{
  const char *extra[] = { "NAMZU_SANDBOX_SOMETHING_NEW", "layout-secret", "NZ_TEST_KEEP", "kept",
                          "HTTPS_PROXY", "http://proxy.invalid:3128", NULL };
  Worker *w = worker_start (extra);
  g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH,
                              "{\"command\":\"env\",\"env\":{\"NAMZU_SANDBOX_EXPLICIT\":\"1\"}}");
  g_autoptr (GPtrArray) evs = events (r->body);
  g_autofree char *out = joined (evs, "stdout_delta");

  ck_assert_int_eq (r->status, 200);
  ck_assert_msg (strstr (out, TOKEN) == NULL, "the token reached the command");
  ck_assert (strstr (out, "NAMZU_SANDBOX_TOKEN") == NULL);
  ck_assert (strstr (out, "NAMZU_SANDBOX_WORKSPACE") == NULL);
  ck_assert (strstr (out, "NAMZU_SANDBOX_SOMETHING_NEW") == NULL);
  ck_assert (strstr (out, "\nNZ_TEST_KEEP=kept\n") != NULL || g_str_has_prefix (out, "NZ_TEST_KEEP=kept\n"));
  ck_assert (strstr (out, "HTTPS_PROXY=http://proxy.invalid:3128") != NULL);
  ck_assert (strstr (out, "PATH=") != NULL);
  /* An explicit per-call value gets through, prefixed or not. */
  ck_assert (strstr (out, "NAMZU_SANDBOX_EXPLICIT=1") != NULL);
  worker_stop (w);
}
END_TEST

/* The worker links Debian's shared libsoup 3 (the archive's security updates reach it without a
 * rebuild), the running worker maps it, and --version says which libsoup serves the API. */
START_TEST (test_libsoup_linkage)
{
  g_autofree char *tool = nz_test_tool ("namzu-worker");
  Worker *w = worker_start (NULL);
  g_autofree char *maps_path = g_strdup_printf ("/proc/%d/maps", (int)w->pid);
  g_autofree char *maps = NULL;
  g_autofree char *out = NULL;
  const char *argv[] = { tool, "--version", NULL };
  int status = -1;

  ck_assert_msg (g_str_has_suffix (NZ_LIBSOUP_LINKAGE, ", shared"), "%s", NZ_LIBSOUP_LINKAGE);
  ck_assert (g_file_get_contents (maps_path, &maps, NULL, NULL));
  ck_assert_msg (strstr (maps, "/libsoup-3.0.so") != NULL, "the worker maps no shared libsoup");
  worker_stop (w);

  ck_assert (g_spawn_sync (NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out,
                           NULL, &status, NULL));
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_msg (g_str_has_prefix (out, "namzu-worker ")
                     && strstr (out, "\n" NZ_LIBSOUP_LINKAGE "\n"),
                 "--version: %s", out);
  ck_assert (g_str_has_prefix (NZ_LIBSOUP_LINKAGE, "libsoup 3."));
}
END_TEST

START_TEST (test_idle_exit)
{
  const char *extra[] = { "NAMZU_SANDBOX_IDLE_TIMEOUT_MS", "600", NULL };
  Worker *w = worker_start (extra);
  g_autoptr (Reply) r = NULL;
  g_autofree char *err = NULL;
  gint64 t0 = g_get_monotonic_time ();
  int status;

  ck_assert (strstr (w->listen_line, " idleTimeoutMs=600 ") != NULL);
  /* A command that outlives the idle timeout keeps the worker alive. */
  r = http (w->port, "POST", "/execute", AUTH, "{\"command\":\"sleep\",\"args\":[\"1\"]}");
  ck_assert_int_eq (r->status, 200);
  ck_assert ((g_get_monotonic_time () - t0) / 1000 >= 1000);
  status = worker_wait (w, &err);
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  ck_assert_msg (strstr (err, "[namzu-sandbox-worker] idle for 600ms") != NULL, "%s", err);
  ck_assert ((g_get_monotonic_time () - t0) / 1000 >= 1500);
  worker_stop (w);
}
END_TEST

/* ---- namzu-exec --endpoint http://... through the client's worker transport ---- */

typedef struct
{
  int status;
  char *out;
  char *err;
} ExecRun;

static void
exec_run_clear (ExecRun *r)
{
  g_free (r->out);
  g_free (r->err);
}

static void
run_namzu_exec (Worker *w, const char *token, const char *const *args, ExecRun *run)
{
  g_autofree char *tool = nz_test_tool ("namzu-exec");
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u", w->port);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  const char *extra[] = { "NAMZU_TOKEN", token, NULL };
  g_auto (GStrv) env = worker_env (extra);
  g_autoptr (GError) error = NULL;

  g_ptr_array_add (argv, tool);
  g_ptr_array_add (argv, "--endpoint");
  g_ptr_array_add (argv, endpoint);
  g_ptr_array_add (argv, "--");
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  ck_assert (g_spawn_sync (NULL, (char **)argv->pdata, env, G_SPAWN_DEFAULT, NULL, NULL,
                           &run->out, &run->err, &run->status, &error));
}

START_TEST (test_namzu_exec)
{
  Worker *w = worker_start (NULL);
  const char *ok_args[] = { "sh", "-c", "printf out; printf err >&2; exit 7", NULL };
  const char *missing[] = { "/nonexistent/cmd", NULL };
  ExecRun run = { 0 };
  g_autofree char *cmdline = NULL;
  g_autofree char *proc = g_strdup_printf ("/proc/%d/cmdline", w->pid);
  gsize len = 0;

  run_namzu_exec (w, TOKEN, ok_args, &run);
  ck_assert_msg (WIFEXITED (run.status) && WEXITSTATUS (run.status) == 7, "status %d: %s",
                 run.status, run.err);
  ck_assert_str_eq (run.out, "out");
  ck_assert_str_eq (run.err, "err");
  exec_run_clear (&run);

  run_namzu_exec (w, "not-the-token", ok_args, &run);
  ck_assert_msg (WIFEXITED (run.status) && WEXITSTATUS (run.status) == 125, "bad token: %s",
                 run.err);
  ck_assert_msg (strstr (run.err, "HTTP 401") != NULL, "%s", run.err);
  ck_assert (strstr (run.err, "not-the-token") == NULL && strstr (run.err, TOKEN) == NULL);
  ck_assert_str_eq (run.out, "");
  exec_run_clear (&run);

  run_namzu_exec (w, TOKEN, missing, &run);
  ck_assert_msg (WIFEXITED (run.status) && WEXITSTATUS (run.status) == 127, "missing: %s",
                 run.err);
  exec_run_clear (&run);

  /* The token is in no argv: not the worker's (nor namzu-exec's, which takes NAMZU_TOKEN). */
  ck_assert (g_file_get_contents (proc, &cmdline, &len, NULL));
  ck_assert (g_strstr_len (cmdline, len, TOKEN) == NULL);
  worker_stop (w);
}
END_TEST

START_TEST (test_namzu_exec_sigint_cancels)
{
  Worker *w = worker_start (NULL);
  g_autofree char *tool = nz_test_tool ("namzu-exec");
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u", w->port);
  g_autofree char *pidfile = g_build_filename (w->workspace, "pid", NULL);
  g_autofree char *pidtext = NULL;
  const char *extra[] = { "NAMZU_TOKEN", TOKEN, NULL };
  g_auto (GStrv) env = worker_env (extra);
  char *argv[] = { tool, "--endpoint", endpoint, "--", "sh", "-c",
                   "echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 30", NULL };
  g_autoptr (GError) error = NULL;
  GPid pid;
  int status = 0;
  pid_t remote;

  ck_assert (g_spawn_async (NULL, argv, env, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid, &error));
  for (int i = 0; i < 500 && !g_file_test (pidfile, G_FILE_TEST_EXISTS); i++)
    g_usleep (10000);
  ck_assert (g_file_get_contents (pidfile, &pidtext, NULL, NULL));
  remote = atoi (pidtext);
  ck_assert (remote > 0 && kill (remote, 0) == 0);
  kill (pid, SIGINT);
  ck_assert (waitpid (pid, &status, 0) == pid);
  ck_assert_msg (WIFEXITED (status) && WEXITSTATUS (status) == 130, "status %d", status);
  /* Cancelled in the worker (and reaped by it, its subreaper), not just abandoned. */
  ck_assert_msg (kill (remote, 0) != 0 && errno == ESRCH, "the remote command still runs");
  worker_stop (w);
}
END_TEST

/* ---- the additive route POST /v1/agent/<op> ---- */

START_TEST (test_agent_route)
{
  Worker *w = worker_start (NULL);
  g_autofree char *file = g_build_filename (w->workspace, "r.txt", NULL);
  g_autoptr (Reply) r = NULL;
  g_autoptr (GPtrArray) evs = NULL;
  JsonObject *frame;

  /* Gated like every route. */
  r = http (w->port, "POST", "/v1/agent/healthz", NULL, "{}");
  assert_unauthorized (r);
  g_clear_pointer (&r, reply_free);

  /* The agent's own op dispatch answers, one frame per NDJSON line. */
  r = http (w->port, "POST", "/v1/agent/healthz", AUTH, "{}");
  ck_assert_int_eq (r->status, 200);
  ck_assert (strstr (r->head, "Content-Type: application/x-ndjson; charset=utf-8") != NULL);
  evs = events (r->body);
  ck_assert_int_eq (evs->len, 1);
  frame = evs->pdata[0];
  ck_assert (json_object_get_boolean_member (frame, "ok"));
  ck_assert (json_object_has_member (frame, "features"));
  g_clear_pointer (&r, reply_free);
  g_clear_pointer (&evs, g_ptr_array_unref);

  /* A ranged read, which the reference route does not have. */
  ck_assert (g_file_set_contents (file, "hello world", -1, NULL));
  r = http (w->port, "POST", "/v1/agent/read-file", AUTH,
            "{\"path\":\"r.txt\",\"offset\":6,\"length\":5,\"encoding\":\"base64\"}");
  ck_assert_int_eq (r->status, 200);
  evs = events (r->body);
  frame = evs->pdata[0];
  ck_assert_msg (json_object_get_boolean_member (frame, "ok"), "%s", r->body);
  ck_assert_str_eq (str (frame, "content"), "d29ybGQ=");
  g_clear_pointer (&r, reply_free);
  g_clear_pointer (&evs, g_ptr_array_unref);

  /* A stream op: frames then the end of the response (the terminator). */
  r = http (w->port, "POST", "/v1/agent/read-file-stream", AUTH, "{\"path\":\"r.txt\"}");
  ck_assert_int_eq (r->status, 200);
  evs = events (r->body);
  ck_assert_str_eq (str (evs->pdata[evs->len - 1], "type"), "end");
  g_clear_pointer (&r, reply_free);

  /* Unknown ops are the agent's refusal; the route is exact. */
  r = http (w->port, "POST", "/v1/agent/nope", AUTH, "{}");
  ck_assert_int_eq (r->status, 200);
  ck_assert (strstr (r->body, "unknown_op: nope") != NULL);
  g_clear_pointer (&r, reply_free);
  r = http (w->port, "POST", "/v1/agent/", AUTH, "{}");
  assert_error (r, 404, "not_found");
  worker_stop (w);
}
END_TEST

/* A bulk stream through POST /v1/agent/<op> keeps the agent's bounded memory: read-file-stream
 * reads its next chunk only once the HTTP peer took the last, so a peer that reads nothing
 * for a while costs the worker a few chunks, not the file; then every byte arrives, in order. */
START_TEST (test_agent_route_stream_backpressure)
{
  Worker *w = worker_start (NULL);
  const gsize size = 64 * 1024 * 1024;
  g_autofree char *file = g_build_filename (w->workspace, "big.bin", NULL);
  g_autofree guchar *data = g_malloc (size);
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (Reply) r = NULL;
  g_autoptr (GPtrArray) evs = NULL;
  g_autoptr (GString) got = g_string_new (NULL);
  const char *body = "{\"path\":\"big.bin\"}";
  g_autofree char *req = NULL;
  gint64 before, stalled;

  for (gsize i = 0; i < size; i++)
    data[i] = (guchar)(i * 2654435761u >> 13);
  ck_assert (g_file_set_contents (file, (const char *)data, (gssize)size, NULL));
  before = vm_rss_kib (w->pid);
  conn = dial (w->port);
  req = g_strdup_printf ("POST /v1/agent/read-file-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Connection: close\r\n" AUTH "Content-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         strlen (body), body);
  send_raw (conn, req, strlen (req));
  /* Long enough for the whole file to be read and encoded if nothing held it back. */
  g_usleep (2 * G_USEC_PER_SEC);
  stalled = vm_rss_kib (w->pid);
  ck_assert_msg (stalled - before < 32 * 1024,
                 "a stalled peer cost the worker %" G_GINT64_FORMAT " KiB of a 64 MiB file",
                 stalled - before);
  r = read_reply (conn);
  ck_assert_int_eq (r->status, 200);
  evs = events (r->body);
  ck_assert_uint_ge (evs->len, 3);
  ck_assert_str_eq (str (evs->pdata[0], "type"), "meta");
  for (guint i = 1; i + 1 < evs->len; i++)
    {
      gsize n = 0;
      g_autofree guchar *chunk = NULL;

      ck_assert_str_eq (str (evs->pdata[i], "type"), "data");
      chunk = g_base64_decode (str (evs->pdata[i], "data"), &n);
      g_string_append_len (got, (const char *)chunk, (gssize)n);
    }
  ck_assert_str_eq (str (evs->pdata[evs->len - 1], "type"), "end");
  ck_assert_uint_eq (got->len, size);
  ck_assert (memcmp (got->str, data, size) == 0);
  g_clear_object (&conn);
  g_clear_pointer (&r, reply_free);

  /* A peer that leaves mid-stream: the stream stops like one whose host hung up, and the
   * worker goes on serving. */
  conn = dial (w->port);
  send_raw (conn, req, strlen (req));
  g_usleep (G_USEC_PER_SEC / 2);
  g_io_stream_close (G_IO_STREAM (conn), NULL, NULL);
  g_clear_object (&conn);
  g_usleep (G_USEC_PER_SEC / 2);
  r = http (w->port, "POST", "/v1/agent/healthz", AUTH, "{}");
  ck_assert_int_eq (r->status, 200);
  ck_assert_msg (strstr (r->body, "\"ok\":true") != NULL, "%s", r->body);
  worker_stop (w);
}
END_TEST

/* ---- the additive upgrade GET /v1/agent -> namzu-agent/2 ---- */

#define UPGRADE "Connection: Upgrade\r\nUpgrade: namzu-agent/2\r\n"

/* One agent frame's payload (empty for the terminator), NULL at EOF. */
static char *
read_frame (GInputStream *in)
{
  char header[10] = { 0 };
  gsize got = 0;
  char *payload;
  unsigned long len;

  if (!g_input_stream_read_all (in, header, 9, &got, NULL, NULL) || got == 0)
    return NULL;
  ck_assert_int_eq (got, 9);
  ck_assert_int_eq (header[8], '\n');
  len = strtoul (header, NULL, 16);
  payload = g_malloc0 (len + 1);
  ck_assert (g_input_stream_read_all (in, payload, len, &got, NULL, NULL) && got == len);
  return payload;
}

START_TEST (test_agent_upgrade)
{
  Worker *w = worker_start (NULL);
  g_autoptr (Reply) r = NULL;
  g_autoptr (JsonObject) o = NULL;
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GString) head = g_string_new (NULL);
  g_autoptr (GString) out = g_string_new (NULL);
  const char *frame = "{\"op\":\"execute\",\"body\":{\"command\":\"sh\",\"args\":[\"-c\","
                      "\"echo via-upgrade; exit 4\"]}}";
  g_autofree char *req = NULL;
  GInputStream *in;
  const char *features_line;
  double code = -1;
  char *payload;
  char c;

  /* /healthz's body is exactly the reference's (a strict host compares it); what the worker
   * serves through the upgrade is listed in its own header, in the agent's order. */
  r = http (w->port, "GET", "/healthz", NULL, NULL);
  ck_assert_str_eq (r->body, "{\"ok\":true,\"protocolVersion\":2}");
  features_line = strstr (r->head, "\r\nNamzu-Features: ");
  ck_assert_msg (features_line != NULL, "%s", r->head);
  ck_assert_msg (g_str_has_prefix (features_line, "\r\nNamzu-Features: write-file-parts, "),
                 "%s", features_line);
  ck_assert_msg (strstr (features_line, ", agent-upgrade\r\n") != NULL
                     || g_str_has_suffix (features_line, ", agent-upgrade"),
                 "%s", features_line);
  g_clear_pointer (&r, reply_free);

  /* The gate first, like every route: a wrong token is the plain 401. */
  r = http (w->port, "GET", "/v1/agent", UPGRADE "Authorization: Bearer nope\r\n", NULL);
  assert_unauthorized (r);
  g_clear_pointer (&r, reply_free);
  /* Authenticated but not asking for the protocol. */
  r = http (w->port, "GET", "/v1/agent", AUTH, NULL);
  assert_error (r, 426, "upgrade_required");
  ck_assert_msg (strstr (r->head, "\r\nUpgrade: namzu-agent/2") != NULL, "%s", r->head);
  g_clear_pointer (&r, reply_free);

  /* 101, then the agent's framing: an execute stream up to its terminator. */
  conn = dial (w->port);
  in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
  req = g_strdup_printf ("GET /v1/agent HTTP/1.1\r\nHost: 127.0.0.1\r\n" UPGRADE AUTH "\r\n");
  send_raw (conn, req, strlen (req));
  while (!g_str_has_suffix (head->str, "\r\n\r\n")
         && g_input_stream_read (in, &c, 1, NULL, NULL) == 1)
    g_string_append_c (head, c);
  ck_assert_msg (g_str_has_prefix (head->str, "HTTP/1.1 101"), "%s", head->str);
  ck_assert_msg (strstr (head->str, "\r\nUpgrade: namzu-agent/2\r\n") != NULL, "%s", head->str);
  g_free (req);
  req = g_strdup_printf ("%08zx\n%s", strlen (frame), frame);
  send_raw (conn, req, strlen (req));
  while ((payload = read_frame (in)) != NULL && *payload != '\0')
    {
      g_autoptr (JsonObject) ev = parse (payload);

      if (g_strcmp0 (str (ev, "type"), "stdout_delta") == 0)
        g_string_append (out, str (ev, "data"));
      if (g_strcmp0 (str (ev, "type"), "result") == 0)
        code = json_object_get_double_member (ev, "exitCode");
      g_free (payload);
    }
  ck_assert_msg (payload != NULL, "the stream ended without its terminator");
  g_free (payload);
  ck_assert_str_eq (out->str, "via-upgrade\n");
  ck_assert (code == 4);
  /* One request per connection: the agent closes after the terminator. */
  ck_assert_ptr_null (read_frame (in));
  worker_stop (w);
}
END_TEST

/* A duplex op through namzu-attach over the upgrade: a terminal, input from our stdin. */
START_TEST (test_terminal_over_worker)
{
  Worker *w = worker_start (NULL);
  g_autofree char *tool = nz_test_tool ("namzu-attach");
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u", w->port);
  g_autofree char *in_path = g_build_filename (w->workspace, "stdin.txt", NULL);
  g_autofree char *out_path = g_build_filename (w->workspace, "stdout.txt", NULL);
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  g_autoptr (GSubprocess) p = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *out = NULL;

  ck_assert (g_file_set_contents (in_path, "echo in-the-$((6*7)); exit 5\n", -1, NULL));
  /* Files, not pipes: GLib 2.74's g_subprocess_communicate() leaks. */
  g_subprocess_launcher_set_stdin_file_path (l, in_path);
  g_subprocess_launcher_set_stdout_file_path (l, out_path);
  g_subprocess_launcher_setenv (l, "NAMZU_TOKEN", TOKEN, TRUE);
  p = g_subprocess_launcher_spawn (l, &error, tool, "--endpoint", endpoint, "--terminal", NULL);
  ck_assert_msg (p != NULL, "%s", error ? error->message : "");
  ck_assert (g_subprocess_wait (p, NULL, &error));
  ck_assert (g_file_get_contents (out_path, &out, NULL, NULL));
  ck_assert_msg (g_subprocess_get_if_exited (p) && g_subprocess_get_exit_status (p) == 5,
                 "terminal: %s", out);
  ck_assert_msg (strstr (out, "in-the-42") != NULL, "%s", out);
  worker_stop (w);
}
END_TEST

/* namzu-exec --detach and namzu-attach over the worker: retained output across requests. */
START_TEST (test_detach_attach_over_worker)
{
  Worker *w = worker_start (NULL);
  g_autofree char *exec_tool = nz_test_tool ("namzu-exec");
  g_autofree char *attach_tool = nz_test_tool ("namzu-attach");
  g_autofree char *endpoint = g_strdup_printf ("http://127.0.0.1:%u", w->port);
  const char *extra[] = { "NAMZU_TOKEN", TOKEN, NULL };
  g_auto (GStrv) env = worker_env (extra);
  char *dargv[] = { exec_tool, "--endpoint", endpoint, "--detach", "--", "sh", "-c",
                    "echo one; sleep 0.3; echo two", NULL };
  g_autofree char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
  g_autoptr (JsonObject) started = NULL;
  g_autoptr (GError) error = NULL;
  int status = 0;

  ck_assert (g_spawn_sync (NULL, dargv, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status,
                           &error));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "detach: %s", err);
  started = parse (out);
  {
    char *aargv[] = { attach_tool, "--endpoint", endpoint, "--execution",
                      (char *)str (started, "executionId"), NULL };

    ck_assert (g_spawn_sync (NULL, aargv, env, G_SPAWN_DEFAULT, NULL, NULL, &out2, &err2,
                             &status, &error));
  }
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "attach: %s", err2);
  ck_assert_str_eq (out2, "one\ntwo\n");
  worker_stop (w);
}
END_TEST

/* The worker's file routes share the guest's race-free jail: a FIFO is refused at once (no
 * hang), and read-file / write-file raced by a workload swapping a symlink to outside in and
 * out (RENAME_EXCHANGE, a child process here) never reach outside. */
START_TEST (test_jail_fifo_and_race)
{
  Worker *w = worker_start (NULL);
  g_autofree char *outside = g_dir_make_tmp ("nz-worker-out-XXXXXX", NULL);
  g_autofree char *secret = g_build_filename (outside, "f", NULL);
  g_autofree char *fifo = g_build_filename (w->workspace, "p", NULL);
  g_autofree char *sw = g_build_filename (w->workspace, "sw", NULL);
  g_autofree char *inner = g_build_filename (sw, "f", NULL);
  g_autofree char *swl = g_build_filename (w->workspace, "swl", NULL);
  g_autofree char *want = g_strdup_printf ("not_a_regular_file: '%s'", fifo);
  g_autoptr (Reply) r = NULL;
  g_autoptr (JsonObject) o = NULL;
  g_autoptr (GDir) d = NULL;
  const char *sanitize = g_getenv ("NZ_SANITIZE");
  /* A tenth in a sanitized build, to stay within the case's timeout. */
  guint n = (g_getenv ("NZ_RACE_TRIES") != NULL ? (guint)atoi (g_getenv ("NZ_RACE_TRIES")) : 2000)
            / (sanitize != NULL && *sanitize != '\0' && strcmp (sanitize, "none") != 0 ? 10 : 1);
  guint leaks = 0, inside = 0, made = 0;
  pid_t racer;

  ck_assert_int_eq (mkfifo (fifo, 0644), 0);
  alarm (20);
  r = http (w->port, "POST", "/read-file", AUTH, "{\"path\":\"p\"}");
  alarm (0);
  ck_assert_int_eq (r->status, 400);
  o = parse (r->body);
  ck_assert_str_eq (str (o, "error"), want);
  g_clear_pointer (&r, reply_free);

  ck_assert (g_file_set_contents (secret, "OUTSIDE-SECRET", -1, NULL));
  ck_assert_int_eq (g_mkdir (sw, 0755), 0);
  ck_assert (g_file_set_contents (inner, "inside", -1, NULL));
  ck_assert_int_eq (symlink (outside, swl), 0);
  racer = fork ();
  ck_assert_int_ge (racer, 0);
  if (racer == 0)
    {
      int dfd = open (w->workspace, O_RDONLY | O_DIRECTORY);

      for (;;)
        renameat2 (dfd, "sw", dfd, "swl", RENAME_EXCHANGE);
    }
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *body = g_strdup_printf ("{\"path\":\"sw/w%u\",\"content\":\"x\"}", i);

      r = http (w->port, "POST", "/read-file", AUTH, "{\"path\":\"sw/f\"}");
      if (strstr (r->body, "OUTSIDE-SECRET") != NULL)
        leaks++;
      if (strstr (r->body, "\"inside\"") != NULL)
        inside++;
      g_clear_pointer (&r, reply_free);
      r = http (w->port, "POST", "/write-file", AUTH, body);
      g_clear_pointer (&r, reply_free);
    }
  kill (racer, SIGKILL);
  waitpid (racer, NULL, 0);
  d = g_dir_open (outside, 0, NULL);
  while (g_dir_read_name (d) != NULL)
    made++;
  fprintf (stderr, "worker race: %u tries, %u reads leaked, %u inside reads, %u files made outside\n",
           n, leaks, inside, made - 1);
  ck_assert_uint_gt (inside, 0);
  ck_assert_uint_eq (leaks, 0);
  ck_assert_uint_eq (made, 1);
  worker_stop (w);
}
END_TEST

/* ---- bounds before authentication ---- */

/* A raw loopback TCP connection to @port, or -1. */
static int
dial_fd (guint16 port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  sa.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (fd >= 0 && connect (fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    {
      close (fd);
      return -1;
    }
  return fd;
}

/* Sends @req on a fresh connection and reads to EOF, giving up after @timeout_s: NULL then
 * (a worker that never answers must fail the test, not hang it). */
static char *
http_timed (guint16 port, const char *req, gsize len, int timeout_s)
{
  struct timeval tv = { .tv_sec = timeout_s };
  GString *out = g_string_new (NULL);
  int fd = dial_fd (port);
  char buf[65536];
  ssize_t n;

  if (fd < 0)
    return g_string_free (out, TRUE);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (send (fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
    n = -1;
  else
    while ((n = recv (fd, buf, sizeof buf, 0)) > 0)
      g_string_append_len (out, buf, n);
  close (fd);
  if (n < 0 && out->len == 0)
    return g_string_free (out, TRUE);
  return g_string_free (out, FALSE);
}

/* Seconds until the worker closes a connection that sent @partial (then trickles a byte of
 * it every 200 ms when @trickle), or -1 after @limit_s. */
static double
seconds_until_closed (guint16 port, const char *partial, gboolean trickle, double limit_s)
{
  int fd = dial_fd (port);
  gint64 t0 = g_get_monotonic_time ();
  double took = -1;

  ck_assert_int_ge (fd, 0);
  send (fd, partial, strlen (partial), MSG_NOSIGNAL);
  while ((g_get_monotonic_time () - t0) / 1e6 < limit_s)
    {
      struct pollfd pfd = { .fd = fd, .events = POLLIN };
      char c;

      if (poll (&pfd, 1, 200) > 0 && recv (fd, &c, 1, MSG_DONTWAIT) <= 0)
        {
          took = (g_get_monotonic_time () - t0) / 1e6;
          break;
        }
      if (trickle)
        send (fd, "X", 1, MSG_NOSIGNAL);
    }
  close (fd);
  return took;
}

static guint
count_fds (GPid pid)
{
  g_autofree char *path = g_strdup_printf ("/proc/%d/fd", (int)pid);
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  ck_assert (dir != NULL);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

/* A few thousand idle connections left the worker unreachable (no cap, no header deadline,
 * and its fds ran out). Now the oldest unauthenticated ones are evicted past the cap, a real
 * request is served in the middle of the flood, and a partial header is closed at the header
 * deadline however it trickles, a silent one too; an authenticated one is not. */
START_TEST (test_preauth_bounds)
{
  /* Started before the limit is raised: the worker keeps the usual 1024 soft fd limit. */
  Worker *w = worker_start ((const char *const[]){ "NAMZU_SANDBOX_PREAUTH_DEADLINE_MS", "1500",
                                                   NULL });
  const char *reserve_req = "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n" AUTH
                            "Connection: close\r\n\r\n";
  struct rlimit rl;
  enum { FLOOD = 3000 };
  int *fds = g_new (int, FLOOD);
  guint opened = 0;
  double took;

  ck_assert (getrlimit (RLIMIT_NOFILE, &rl) == 0);
  rl.rlim_cur = MIN (rl.rlim_max, (rlim_t)FLOOD + 256);
  ck_assert_msg (rl.rlim_cur >= (rlim_t)FLOOD + 64, "fd hard limit %lu too low",
                 (unsigned long)rl.rlim_max);
  ck_assert (setrlimit (RLIMIT_NOFILE, &rl) == 0);
  for (guint i = 0; i < FLOOD; i++)
    if ((fds[i] = dial_fd (w->port)) >= 0)
      opened++;
  ck_assert_uint_ge (opened, FLOOD - 16);
  {
    /* Behind what the backlog holds: a sanitizer build takes seconds to work through it. */
    g_autofree char *out = http_timed (w->port, reserve_req, strlen (reserve_req), 20);

    ck_assert_msg (out != NULL && g_str_has_prefix (out, "HTTP/1.1 201"),
                   "reserve during the flood: %s", out != NULL ? out : "(no answer)");
  }
  /* The pool's 64 and what libsoup holds: nowhere near the flood. */
  ck_assert_uint_lt (count_fds (w->pid), 300);
  for (guint i = 0; i < FLOOD; i++)
    if (fds[i] >= 0)
      close (fds[i]);
  g_free (fds);
  /* Header deadline (1.5 s) from accept, whatever trickles in. */
  took = seconds_until_closed (w->port, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", TRUE, 6);
  ck_assert_msg (took >= 1.2 && took < 4, "partial header closed after %.2f s", took);
  /* And a silent one. */
  took = seconds_until_closed (w->port, "GET /healthz HTTP/1.1\r\n", FALSE, 6);
  ck_assert_msg (took >= 1.2 && took < 4, "silent connection closed after %.2f s", took);
  /* With an idle timeout below the deadline, silence ends a connection early; bytes trickling
   * in keep it until the deadline. */
  {
    Worker *idle = worker_start ((const char *const[]){ "NAMZU_SANDBOX_PREAUTH_DEADLINE_MS",
                                                        "3000",
                                                        "NAMZU_SANDBOX_PREAUTH_IDLE_TIMEOUT_MS",
                                                        "600", NULL });

    took = seconds_until_closed (idle->port, "GET /healthz HTTP/1.1\r\n", FALSE, 6);
    ck_assert_msg (took >= 0.4 && took < 2, "silent connection closed after %.2f s", took);
    took = seconds_until_closed (idle->port, "GET /healthz HTTP/1.1\r\nX-Slow: ", TRUE, 6);
    ck_assert_msg (took >= 2.5 && took < 5.5, "trickling connection closed after %.2f s", took);
    worker_stop (idle);
  }
  /* An authorised request is no longer bound: a response that streams past the deadline
   * runs to its end. */
  {
    g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH,
                                "{\"command\":\"sh\",\"args\":[\"-c\",\"sleep 2.5; echo done\"]}");

    ck_assert_int_eq (r->status, 200);
    ck_assert_msg (strstr (r->body, "done") != NULL && strstr (r->body, "\"exitCode\":0") != NULL,
                   "%s", r->body);
  }
  worker_stop (w);
}
END_TEST

/* ~512 KiB of '[' in a body overflowed json-glib's recursion and killed the worker; now a
 * 400 with a JSON body names it, and the worker serves the next request. A NUL in a command
 * (argv, cwd, env) is refused with the agent's words instead of truncated. */
START_TEST (test_body_nesting_and_nul)
{
  Worker *w = worker_start (NULL);
  g_autofree char *flood = g_strnfill (512 * 1024, '[');
  g_autofree char *inner = g_strdup_printf ("{\"command\":\"true\",\"args\":%s}", flood);
  const char *bodies[] = { flood, inner };
  const char *nul_bodies[] = {
    "{\"command\":\"echo\",\"args\":[\"a\\u0000b\"]}",
    "{\"command\":\"ech\\u0000o\",\"args\":[\"x\"]}",
    "{\"command\":\"pwd\",\"cwd\":\".\\u0000/x\"}",
    "{\"command\":\"env\",\"env\":{\"A\":\"1\\u0000B=2\"}}",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bodies); i++)
    {
      g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH, bodies[i]);
      g_autoptr (Reply) h = http (w->port, "GET", "/healthz", NULL, NULL);
      g_autoptr (JsonObject) o = NULL;

      assert_error (r, 400, "invalid_body");
      o = parse (r->body);
      ck_assert (g_str_has_prefix (str (o, "message"), "json_too_deep: "));
      ck_assert_int_eq (h->status, 200);
    }
  /* Unauthenticated, the body is not even read. */
  {
    g_autoptr (Reply) r = http (w->port, "POST", "/execute", NULL, inner);

    assert_unauthorized (r);
  }
  for (guint i = 0; i < G_N_ELEMENTS (nul_bodies); i++)
    {
      g_autoptr (Reply) r = http (w->port, "POST", "/execute", AUTH, nul_bodies[i]);
      g_autoptr (JsonObject) o = NULL;

      assert_error (r, 400, "json_nul_unsupported");
      o = parse (r->body);
      ck_assert_str_eq (str (o, "message"),
                        "json_nul_unsupported: a JSON string holding U+0000 cannot be "
                        "represented by this agent; send binary data base64-encoded");
    }
  worker_stop (w);
}
END_TEST

/* The bearer token compares as a whole byte string: not a prefix, not with a byte more, and
 * not with anything after an embedded NUL. */
START_TEST (test_token_whole_bytes)
{
  Worker *w = worker_start (NULL);
  const char *wrong[] = { "Authorization: Bearer " TOKEN "x\r\n",
                          "Authorization: Bearer w0rker-t0ken\r\n",
                          "Authorization: Bearer " TOKEN "\\0\r\n" };
  static const char nul_header[] = "POST /executions/reserve HTTP/1.1\r\nHost: x\r\n"
                                   "Authorization: Bearer " TOKEN "\0x\r\n"
                                   "Connection: close\r\n\r\n";
  g_autofree char *out = NULL;

  for (guint i = 0; i < G_N_ELEMENTS (wrong); i++)
    {
      g_autoptr (Reply) r = http (w->port, "POST", "/executions/reserve", wrong[i], NULL);

      assert_unauthorized (r);
    }
  /* A raw NUL in the header: never a success, whoever refuses it. */
  out = http_timed (w->port, nul_header, sizeof nul_header - 1, 5);
  ck_assert_msg (out != NULL && !g_str_has_prefix (out, "HTTP/1.1 2"), "NUL token: %s",
                 out != NULL ? out : "(no answer)");
  {
    g_autofree char *id = reserve (w->port);
  }
  worker_stop (w);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("worker");
  TCase *tc = tcase_create ("worker");

  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_routes);
  tcase_add_test (tc, test_auth_gate);
  tcase_add_loop_test (tc, test_startup_table, 0, G_N_ELEMENTS (startup_rows));
  tcase_add_test (tc, test_timeout_ceiling);
  tcase_add_test (tc, test_body_and_output_caps);
  tcase_add_test (tc, test_cancel_sigterm_ignoring);
  tcase_add_test (tc, test_poison_on_leftover_descendant);
  tcase_add_test (tc, test_env_scrub);
  tcase_add_test (tc, test_idle_exit);
  tcase_add_test (tc, test_libsoup_linkage);
  tcase_add_test (tc, test_namzu_exec);
  tcase_add_test (tc, test_namzu_exec_sigint_cancels);
  tcase_add_test (tc, test_agent_route);
  tcase_add_test (tc, test_agent_route_stream_backpressure);
  tcase_add_test (tc, test_agent_upgrade);
  tcase_add_test (tc, test_terminal_over_worker);
  tcase_add_test (tc, test_detach_attach_over_worker);
  tcase_add_test (tc, test_jail_fifo_and_race);
  tcase_add_test (tc, test_preauth_bounds);
  tcase_add_test (tc, test_body_nesting_and_nul);
  tcase_add_test (tc, test_token_whole_bytes);
  tcase_add_test (tc, test_read_file_ranges);
  tcase_add_test (tc, test_connection_close_is_announced);
  tcase_add_test (tc, test_smuggling_heads_refused);
  suite_add_tcase (s, tc);
  {
    TCase *race = tcase_create ("retire-race");

    tcase_set_timeout (race, 540);
    tcase_add_test (race, test_unconfirmed_retires_every_time);
    suite_add_tcase (s, race);
  }

  return nz_test_run (s);
}
