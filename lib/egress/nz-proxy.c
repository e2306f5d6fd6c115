/* The egress proxy. Check order per request (spec E.3): target -> self -> allowlist -> port (on
 * the port it will dial) -> literal screen -> resolve and screen EVERY address -> dial the
 * screened address itself (no second resolution, so DNS rebinding has no window). */
#include "nz-proxy.h"

#include <errno.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nz-address.h"
#include "nz-allowlist.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-netlink.h"
#include "nz-splice.h"

/* A request head larger than this is refused: the proxy never buffers without bound. */
#define HEAD_MAX (32 * 1024)

typedef struct
{
  const NzProxyOptions *opts;
  NzProxyConfig *config;
  GPtrArray *local;         /* the host's own addresses (GInetAddress) */
  GHashTable *test_resolve; /* name -> GPtrArray of GInetAddress; NULL = real DNS */
  GTlsDatabase *ca;
  FILE *log;
  guint active;
  int bound_port;
  GMainLoop *loop;
} Proxy;

typedef struct
{
  Proxy *proxy;
  GIOStream *client;
  GIOStream *upstream; /* plain socket connection */
  GIOStream *tls;      /* TLS over upstream, for upgraded/https requests */
  GCancellable *cancel;
  NzSplice *splice;
  guint timeout_source;
  char head[HEAD_MAX];
  gsize head_len;
  gsize head_end; /* offset just past "\r\n\r\n" */
  /* the request */
  gboolean is_connect;
  char *method, *path, *host, *authority;
  int port; /* the dial port */
  gboolean secure;
  GPtrArray *headers; /* "Name: value" lines to send upstream */
  const char *rule;   /* the allowlist entry that admitted the host */
  GList *addrs;       /* GInetAddress, screened */
  GList *next_addr;
} Conn;

static void conn_free (Conn *c);

static void
conn_close (Conn *c)
{
  if (c->timeout_source != 0)
    g_source_remove (c->timeout_source);
  c->timeout_source = 0;
  if (c->splice != NULL)
    nz_splice_free (g_steal_pointer (&c->splice));
  if (c->tls != NULL)
    g_io_stream_close (c->tls, NULL, NULL);
  if (c->upstream != NULL)
    g_io_stream_close (c->upstream, NULL, NULL);
  g_io_stream_close (c->client, NULL, NULL);
  c->proxy->active--;
  conn_free (c);
}

static void
conn_free (Conn *c)
{
  g_clear_object (&c->client);
  g_clear_object (&c->upstream);
  g_clear_object (&c->tls);
  g_clear_object (&c->cancel);
  g_free (c->method);
  g_free (c->path);
  g_free (c->host);
  g_free (c->authority);
  if (c->headers != NULL)
    g_ptr_array_unref (c->headers);
  g_list_free_full (c->addrs, g_object_unref);
  g_free (c);
}

/* One JSON line per decision, flushed: host, port, rule, reason (never a credential). */
static void
log_decision (Conn *c, gboolean allow, const char *rule, const char *reason)
{
  g_autoptr (JsonObject) o = json_object_new ();
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *ts = g_date_time_format_iso8601 (now);
  g_autofree char *line = NULL;

  json_object_set_string_member (o, "time", ts);
  json_object_set_string_member (o, "decision", allow ? "allow" : "deny");
  json_object_set_string_member (o, "method", c->method != NULL ? c->method : "");
  json_object_set_string_member (o, "host", c->host != NULL ? c->host : "");
  if (c->port >= 0)
    json_object_set_int_member (o, "port", c->port);
  json_object_set_string_member (o, "rule", rule);
  json_object_set_string_member (o, "reason", reason);
  line = nz_json_object_to_string (o, NULL);
  fprintf (c->proxy->log, "%s\n", line);
  fflush (c->proxy->log);
}

static void
on_reply_written (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;

  g_output_stream_write_all_finish (G_OUTPUT_STREAM (src), res, NULL, NULL);
  conn_close (c);
}

/* Answers the client and closes. CONNECT denials use the reference's raw framing. */
static void
reply_and_close (Conn *c, int status, const char *phrase, const char *body)
{
  g_autofree char *msg = NULL;

  if (c->is_connect)
    msg = g_strdup_printf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n\r\n%s", status, phrase,
                           body);
  else
    msg = g_strdup_printf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                           "Connection: close\r\n\r\n%s",
                           status, phrase, strlen (body), body);
  g_output_stream_write_all_async (g_io_stream_get_output_stream (c->client), msg, strlen (msg),
                                   G_PRIORITY_DEFAULT, NULL, on_reply_written, c);
  /* The buffer must outlive the write: park it on the connection. */
  g_object_set_data_full (G_OBJECT (c->client), "nz-reply", g_steal_pointer (&msg), g_free);
}

static void
deny (Conn *c, const char *rule, const char *reason, const char *body)
{
  log_decision (c, FALSE, rule, reason);
  reply_and_close (c, 403, "Forbidden", body);
}

static gboolean
on_timeout (gpointer user_data)
{
  Conn *c = user_data;

  c->timeout_source = 0;
  g_cancellable_cancel (c->cancel);
  return G_SOURCE_REMOVE;
}

static void
on_spliced (gpointer user_data)
{
  conn_close (user_data);
}

static void
start_splice (Conn *c, GIOStream *up, GBytes *head)
{
  if (c->timeout_source != 0)
    g_source_remove (c->timeout_source);
  c->timeout_source = 0;
  /* TCP tunnels half-close; a one-shot HTTP exchange ends when either side does. */
  c->splice = nz_splice_start (c->client, up, head, c->proxy->opts->idle_timeout_s,
                               c->is_connect && c->tls == NULL, on_spliced, c);
}

static GBytes *
head_remainder (Conn *c)
{
  return g_bytes_new (c->head + c->head_end, c->head_len - c->head_end);
}

static void
on_established_written (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;
  g_autoptr (GBytes) rest = NULL;

  if (!g_output_stream_write_all_finish (G_OUTPUT_STREAM (src), res, NULL, NULL))
    {
      conn_close (c);
      return;
    }
  rest = head_remainder (c);
  start_splice (c, c->upstream, rest);
}

static char *
build_upstream_head (Conn *c)
{
  GString *h = g_string_new (NULL);
  g_autoptr (GBytes) rest = head_remainder (c);

  g_string_append_printf (h, "%s %s HTTP/1.1\r\n", c->method, c->path);
  for (guint i = 0; i < c->headers->len; i++)
    g_string_append_printf (h, "%s\r\n", (const char *)c->headers->pdata[i]);
  /* One request per upstream connection: the body and response are relayed raw. */
  g_string_append (h, "Connection: close\r\n\r\n");
  g_string_append_len (h, g_bytes_get_data (rest, NULL), g_bytes_get_size (rest));
  return g_string_free (h, FALSE);
}

static void
send_request (Conn *c, GIOStream *up)
{
  gsize len;
  char *head = build_upstream_head (c);
  g_autoptr (GBytes) bytes = NULL;

  len = strlen (head);
  bytes = g_bytes_new_take (head, len);
  /* The rebuilt head (plus any body bytes already read) goes first, then the splice. */
  c->head_end = c->head_len = 0;
  start_splice (c, up, bytes);
}

static void
upstream_failed (Conn *c, const char *message)
{
  g_autofree char *body = g_strdup_printf ("Upstream request failed: %s\n", message);

  if (c->is_connect)
    {
      conn_close (c); /* the reference ends a failed tunnel without a status line */
      return;
    }
  reply_and_close (c, 502, "Bad Gateway", body);
}

static void
on_handshake (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;
  g_autoptr (GError) error = NULL;

  if (!g_tls_connection_handshake_finish (G_TLS_CONNECTION (src), res, &error))
    {
      upstream_failed (c, error->message);
      return;
    }
  send_request (c, c->tls);
}

static void try_connect (Conn *c);

static void
on_connected (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;
  g_autoptr (GError) error = NULL;
  GSocketConnection *conn = g_socket_client_connect_finish (G_SOCKET_CLIENT (src), res, &error);

  if (conn == NULL)
    {
      if (c->next_addr != NULL && !g_cancellable_is_cancelled (c->cancel))
        {
          try_connect (c);
          return;
        }
      upstream_failed (c, error->message);
      return;
    }
  c->upstream = G_IO_STREAM (conn);
  if (c->is_connect)
    {
      static const char established[] = "HTTP/1.1 200 Connection Established\r\n\r\n";

      g_output_stream_write_all_async (g_io_stream_get_output_stream (c->client), established,
                                       strlen (established), G_PRIORITY_DEFAULT, c->cancel,
                                       on_established_written, c);
      return;
    }
  if (c->secure)
    {
      g_autoptr (GSocketConnectable) identity = g_network_address_new (c->host, c->port);

      /* SNI and certificate verification on the NAME, while the socket is the screened
       * address. */
      c->tls = g_tls_client_connection_new (c->upstream, identity, &error);
      if (c->tls == NULL)
        {
          upstream_failed (c, error->message);
          return;
        }
      if (c->proxy->ca != NULL)
        g_tls_connection_set_database (G_TLS_CONNECTION (c->tls), c->proxy->ca);
      g_tls_connection_handshake_async (G_TLS_CONNECTION (c->tls), G_PRIORITY_DEFAULT, c->cancel,
                                        on_handshake, c);
      return;
    }
  send_request (c, c->upstream);
}

static void
try_connect (Conn *c)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketAddress) addr = g_inet_socket_address_new (c->next_addr->data, c->port);

  c->next_addr = c->next_addr->next;
  /* The screened address itself, never through a proxy the environment names: chaining would
   * hand the policy decision to someone else. */
  g_socket_client_set_enable_proxy (client, FALSE);
  /* A GSocketAddress connectable: no name, so no resolution happens here. */
  g_socket_client_connect_async (client, G_SOCKET_CONNECTABLE (addr), c->cancel, on_connected, c);
}

static gboolean
is_exempt (Conn *c)
{
  return nz_allowlist_match ((const char *const *)c->proxy->config->allow_inward_for, c->host)
         != NULL;
}

/* Screens EVERY resolved address (not only the one that would be dialled), then dials them. */
static void
screen_and_connect (Conn *c, GList *addrs)
{
  if (addrs == NULL)
    {
      g_autofree char *msg
          = g_strdup_printf ("Egress denied: %s resolved to no addresses.", c->host);

      log_decision (c, FALSE, "address-screen", "resolved to no addresses");
      upstream_failed (c, msg);
      g_list_free_full (addrs, g_object_unref);
      return;
    }
  c->addrs = addrs;
  if (!is_exempt (c))
    for (GList *l = addrs; l != NULL; l = l->next)
      {
        const char *why = nz_address_blocked_reason (l->data, c->proxy->local);

        if (why != NULL)
          {
            g_autofree char *a = g_inet_address_to_string (l->data);
            g_autofree char *reason = g_strdup_printf ("resolves to a %s address", why);
            g_autofree char *body = g_strdup_printf (
                "Egress denied: %s resolves to %s, which is a %s address. The host is on the "
                "allowlist; the address it resolves to is not reachable from a sandbox.\n",
                c->host, a, why);

            deny (c, "address-screen", reason, body);
            return;
          }
      }
  log_decision (c, TRUE, c->rule, is_exempt (c) ? "allowed (allowInwardFor)" : "allowed");
  c->next_addr = c->addrs;
  try_connect (c);
}

static void
on_resolved (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;
  g_autoptr (GError) error = NULL;
  GList *addrs = g_resolver_lookup_by_name_finish (G_RESOLVER (src), res, &error);

  if (error != NULL)
    {
      upstream_failed (c, error->message);
      return;
    }
  screen_and_connect (c, addrs);
}

static void
resolve (Conn *c)
{
  g_autoptr (GInetAddress) literal = nz_address_parse_literal (c->host);

  if (literal != NULL)
    {
      screen_and_connect (c, g_list_append (NULL, g_steal_pointer (&literal)));
      return;
    }
  if (c->proxy->test_resolve != NULL)
    {
      g_autofree char *key = nz_allowlist_normalize_host (c->host);
      GPtrArray *list = g_hash_table_lookup (c->proxy->test_resolve, key);
      GList *addrs = NULL;

      if (list == NULL)
        {
          g_autofree char *msg = g_strdup_printf ("Error resolving “%s”: Name or service not "
                                                  "known (test resolver)",
                                                  c->host);

          upstream_failed (c, msg);
          return;
        }
      for (guint i = 0; i < list->len; i++)
        addrs = g_list_append (addrs, g_object_ref (list->pdata[i]));
      screen_and_connect (c, addrs);
      return;
    }
  g_resolver_lookup_by_name_async (g_resolver_get_default (), c->host, c->cancel, on_resolved, c);
}

static gboolean
is_self (Conn *c, int port)
{
  const char *fixed[] = { "127.0.0.1", "localhost", "::1", NULL };

  if (port < 0 || port != c->proxy->bound_port)
    return FALSE;
  if (c->proxy->opts->bind_host != NULL && g_str_equal (c->host, c->proxy->opts->bind_host))
    return TRUE;
  return g_strv_contains (fixed, c->host)
         || (c->proxy->config->self_names != NULL
             && g_strv_contains ((const char *const *)c->proxy->config->self_names, c->host));
}

/* The policy decision shared by both paths, in the spec's order after the self check. */
static gboolean
admit (Conn *c)
{
  const char *why;

  c->rule = nz_allowlist_match ((const char *const *)c->proxy->config->allowed_hosts, c->host);
  if (c->rule == NULL)
    {
      g_autofree char *body
          = g_strdup_printf ("Egress denied: %s is not on this sandbox's allowlist.\n", c->host);

      deny (c, "allowlist", "not on the egress allowlist", body);
      return FALSE;
    }
  if (c->proxy->config->host_ports != NULL
      && !nz_egress_rules_allow_port (c->proxy->config->host_ports, c->host, c->port))
    {
      g_autofree char *body
          = g_strdup_printf ("Egress denied: %s:%d is not an allowed port.\n", c->host, c->port);
      g_autofree char *reason = g_strdup_printf ("port %d is not allowed", c->port);

      deny (c, "port", reason, body);
      return FALSE;
    }
  why = is_exempt (c) ? NULL : nz_address_literal_reason (c->host, c->proxy->local);
  if (why != NULL)
    {
      g_autofree char *body = g_strdup_printf (
          "Egress denied: %s is a %s address, which is not reachable from a sandbox.\n", c->host,
          why);
      g_autofree char *reason = g_strdup_printf ("is a %s address", why);

      deny (c, "address-screen", reason, body);
      return FALSE;
    }
  return TRUE;
}

/* Hop-by-hop headers the reference drops, plus whatever the Connection header names. */
static gboolean
is_hop_by_hop (const char *name, const char *connection)
{
  static const char *const drop[]
      = { "proxy-authorization", "proxy-connection", "connection", "keep-alive", NULL };
  g_autofree char *lower = g_ascii_strdown (name, -1);

  if (g_strv_contains (drop, lower))
    return TRUE;
  if (connection != NULL)
    {
      g_auto (GStrv) tokens = g_strsplit (connection, ",", -1);

      for (char **t = tokens; *t != NULL; t++)
        if (g_ascii_strcasecmp (g_strstrip (*t), lower) == 0)
          return TRUE;
    }
  return FALSE;
}

/* Absolute-form "http[s]://[user@]host[:port]/path" -> host, port (-1), path. */
static gboolean
parse_absolute (const char *target, gboolean *https, char **authority, char **path)
{
  const char *rest, *end, *at;

  if (g_ascii_strncasecmp (target, "http://", 7) == 0)
    *https = FALSE, rest = target + 7;
  else if (g_ascii_strncasecmp (target, "https://", 8) == 0)
    *https = TRUE, rest = target + 8;
  else
    return FALSE;
  end = rest + strcspn (rest, "/?#");
  at = memchr (rest, '@', end - rest);
  if (at != NULL)
    rest = at + 1; /* userinfo is never forwarded */
  *authority = g_strndup (rest, end - rest);
  *path = *end == '\0' ? g_strdup ("/")
                       : (*end == '/' ? g_strdup (end) : g_strconcat ("/", end, NULL));
  return TRUE;
}

static void
handle_request (Conn *c)
{
  g_autofree char *head = g_strndup (c->head, c->head_end - 4);
  g_auto (GStrv) lines = g_strsplit (head, "\r\n", -1);
  g_auto (GStrv) req = NULL;
  const char *connection = NULL, *host_header = NULL;
  g_autofree char *authority = NULL;
  gboolean https = FALSE;
  int port = -1;

  req = g_strsplit (lines[0], " ", 3);
  if (g_strv_length (req) != 3 || !g_str_has_prefix (req[2], "HTTP/1."))
    {
      reply_and_close (c, 400, "Bad Request", "Malformed proxy request.\n");
      return;
    }
  c->method = g_strdup (req[0]);
  c->is_connect = g_ascii_strcasecmp (req[0], "CONNECT") == 0;
  for (char **l = lines + 1; *l != NULL; l++)
    {
      char *colon = strchr (*l, ':');

      if (colon == NULL)
        continue;
      if (g_ascii_strncasecmp (*l, "connection:", 11) == 0)
        connection = colon + 1;
      else if (g_ascii_strncasecmp (*l, "host:", 5) == 0 && host_header == NULL)
        host_header = colon + 1;
    }
  if (c->is_connect)
    {
      nz_allowlist_split_authority (req[1], &c->host, &port);
      c->port = port >= 0 ? port : 443;
    }
  else
    {
      if (parse_absolute (req[1], &https, &authority, &c->path))
        nz_allowlist_split_authority (authority, &c->host, &port);
      else if (host_header != NULL)
        {
          nz_allowlist_split_authority (host_header, &c->host, &port);
          c->path = g_strdup (req[1][0] != '\0' ? req[1] : "/");
        }
      else
        {
          reply_and_close (c, 400, "Bad Request",
                           "Malformed proxy request: no absolute URL and no Host header.\n");
          return;
        }
      c->secure = c->proxy->config->upgrade_to_https || https;
      /* An upgraded http://host/ dials 443, so that is the port checked. */
      c->port = port >= 0 ? port : (c->secure ? 443 : 80);
    }
  {
    g_autofree char *lower = g_ascii_strdown (c->host, -1);

    g_free (c->host);
    c->host = g_steal_pointer (&lower);
  }
  if (is_self (c, port))
    {
      log_decision (c, FALSE, "self", "addressed to the proxy itself");
      reply_and_close (c, 400, "Bad Request",
                       "Refusing to proxy a request addressed to the proxy itself; that would "
                       "loop.\n");
      return;
    }
  if (!admit (c))
    return;
  if (!c->is_connect)
    {
      NzBrokeredCredential *cred = NULL;

      c->headers = g_ptr_array_new_with_free_func (g_free);
      for (guint i = 0; i < c->proxy->config->credentials->len && cred == NULL; i++)
        {
          NzBrokeredCredential *k = c->proxy->config->credentials->pdata[i];

          if (nz_allowlist_entry_matches (k->host, c->host))
            cred = k;
        }
      for (char **l = lines + 1; *l != NULL; l++)
        {
          char *colon = strchr (*l, ':');
          g_autofree char *name = colon != NULL ? g_strndup (*l, colon - *l) : NULL;

          if (name == NULL || is_hop_by_hop (name, connection)
              || (cred != NULL && g_ascii_strcasecmp (name, cred->header) == 0))
            continue;
          g_ptr_array_add (c->headers, g_strdup (*l));
        }
      if (host_header == NULL)
        g_ptr_array_add (c->headers, g_strdup_printf ("Host: %s", authority));
      /* The first matching credential overwrites whatever the sandbox sent under that name. */
      if (cred != NULL)
        g_ptr_array_add (c->headers, g_strdup_printf ("%s: %s", cred->header, cred->value));
    }
  resolve (c);
}

static void read_head (Conn *c);

static void
on_head_read (GObject *src, GAsyncResult *res, gpointer user_data)
{
  Conn *c = user_data;
  gssize n = g_input_stream_read_finish (G_INPUT_STREAM (src), res, NULL);
  const char *end;

  if (n <= 0)
    {
      conn_close (c);
      return;
    }
  c->head_len += n;
  end = g_strstr_len (c->head, c->head_len, "\r\n\r\n");
  if (end != NULL)
    {
      c->head_end = end - c->head + 4;
      handle_request (c);
      return;
    }
  if (c->head_len >= sizeof c->head - 1)
    {
      reply_and_close (c, 431, "Request Header Fields Too Large",
                       "Request head too large for the egress proxy.\n");
      return;
    }
  read_head (c);
}

static void
read_head (Conn *c)
{
  g_input_stream_read_async (g_io_stream_get_input_stream (c->client), c->head + c->head_len,
                             sizeof c->head - 1 - c->head_len, G_PRIORITY_DEFAULT, c->cancel,
                             on_head_read, c);
}

static gboolean
on_incoming (GSocketService *service, GSocketConnection *connection, GObject *source,
             gpointer user_data)
{
  Proxy *p = user_data;
  Conn *c;

  if (p->active >= p->opts->max_connections)
    {
      static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                                 "Connection: close\r\n\r\nThe egress proxy is at its connection "
                                 "limit.\n";
      GSocket *s = g_socket_connection_get_socket (connection);

      /* Best effort, never blocking: the limit exists so that nothing waits on this client. */
      g_socket_set_blocking (s, FALSE);
      g_socket_send (s, busy, strlen (busy), NULL, NULL);
      g_io_stream_close (G_IO_STREAM (connection), NULL, NULL);
      return TRUE;
    }
  p->active++;
  c = g_new0 (Conn, 1);
  c->proxy = p;
  c->port = -1;
  c->client = G_IO_STREAM (g_object_ref (connection));
  c->cancel = g_cancellable_new ();
  /* Head, resolution, connect and TLS handshake share one deadline; the splice has its own. */
  if (p->opts->idle_timeout_s > 0)
    c->timeout_source = g_timeout_add_seconds (p->opts->idle_timeout_s, on_timeout, c);
  read_head (c);
  return TRUE;
}

static GHashTable *
parse_test_resolve (const char *spec, GError **error)
{
  g_autoptr (GHashTable) t
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
  g_auto (GStrv) entries = g_strsplit (spec, ",", -1);

  for (char **e = entries; *e != NULL; e++)
    {
      g_auto (GStrv) kv = g_strsplit (*e, "=", 2);
      g_auto (GStrv) addrs = NULL;
      GPtrArray *list;

      if (**e == '\0')
        continue;
      if (g_strv_length (kv) != 2)
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                          "test resolver entry '%s' is not "
                          "NAME=ADDR[;ADDR]",
                          *e),
                NULL);
      list = g_ptr_array_new_with_free_func (g_object_unref);
      g_hash_table_insert (t, nz_allowlist_normalize_host (kv[0]), list);
      addrs = g_strsplit (kv[1], ";", -1);
      for (char **a = addrs; *a != NULL; a++)
        {
          GInetAddress *ia = g_inet_address_new_from_string (*a);

          if (ia == NULL)
            return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                              "test resolver address '%s' is not "
                              "an IP address",
                              *a),
                    NULL);
          g_ptr_array_add (list, ia);
        }
    }
  return g_steal_pointer (&t);
}

static gboolean
on_signal (gpointer user_data)
{
  g_main_loop_quit (((Proxy *)user_data)->loop);
  return G_SOURCE_CONTINUE;
}

int
nz_proxy_run (const NzProxyOptions *opts, GError **error)
{
  Proxy p = { .opts = opts, .config = opts->config };
  g_autoptr (GSocketService) service = g_socket_service_new ();
  g_autoptr (GString) where = g_string_new (NULL);
  g_autoptr (GMainLoop) loop = g_main_loop_new (NULL, FALSE);
  g_autoptr (GPtrArray) local = NULL;
  guint n_hosts = g_strv_length (opts->config->allowed_hosts);
  guint sig_term, sig_int;

  local = nz_netlink_local_addresses (error);
  if (local == NULL)
    return (nz_prefix_error (error, "reading the host's interface addresses"), NZ_EXIT_FAILURE);
  p.local = local;
  p.loop = loop;
  if (opts->test_resolve != NULL)
    {
      p.test_resolve = parse_test_resolve (opts->test_resolve, error);
      if (p.test_resolve == NULL)
        return NZ_EXIT_USAGE;
    }
  if (opts->ca_file != NULL)
    {
      p.ca = g_tls_file_database_new (opts->ca_file, error);
      if (p.ca == NULL)
        return (nz_prefix_error (error, "CA file '%s'", opts->ca_file), NZ_EXIT_FAILURE);
    }
  p.log = stderr;
  if (opts->log_path != NULL)
    {
      p.log = fopen (opts->log_path, "ae");
      if (p.log == NULL)
        return (nz_throw_errno_prefix (error, "open decision log '%s'", opts->log_path),
                NZ_EXIT_FAILURE);
    }
  if (opts->bind_host != NULL)
    {
      g_autoptr (GInetAddress) any = g_inet_address_new_from_string (opts->bind_host);
      g_autoptr (GSocketAddress) addr = NULL;
      g_autoptr (GSocketAddress) effective = NULL;

      if (any == NULL)
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "--listen '%s' is not an IP address",
                          opts->bind_host),
                NZ_EXIT_USAGE);
      addr = g_inet_socket_address_new (any, opts->config->port == 0 ? 0 : opts->config->port);
      if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), addr, G_SOCKET_TYPE_STREAM,
                                          G_SOCKET_PROTOCOL_TCP, NULL, &effective, error))
        return NZ_EXIT_FAILURE;
      p.bound_port = g_inet_socket_address_get_port (G_INET_SOCKET_ADDRESS (effective));
      g_string_append_printf (where, "%s:%d", opts->bind_host, p.bound_port);
    }
  if (opts->unix_path != NULL)
    {
      g_autoptr (GSocketAddress) ua = g_unix_socket_address_new (opts->unix_path);

      if (unlink (opts->unix_path) < 0 && errno != ENOENT)
        return (nz_throw_errno_prefix (error, "unlink '%s'", opts->unix_path), NZ_EXIT_FAILURE);
      if (!g_socket_listener_add_address (G_SOCKET_LISTENER (service), ua, G_SOCKET_TYPE_STREAM,
                                          G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL, error))
        return NZ_EXIT_FAILURE;
      g_string_append_printf (where, "%sunix:%s", where->len > 0 ? " and " : "", opts->unix_path);
    }
  g_signal_connect (service, "incoming", G_CALLBACK (on_incoming), &p);
  g_socket_service_start (service);
  sig_term = g_unix_signal_add (SIGTERM, on_signal, &p);
  sig_int = g_unix_signal_add (SIGINT, on_signal, &p);
  /* The reference's listening line, on stdout (tests read it instead of sleeping). Counts
   * only: no host names beyond the count, never a credential. */
  if (opts->config->host_ports != NULL)
    printf ("namzu-egress-proxy: listening on %s with %u allowed host(s), %u port rule(s) and %u "
            "brokered credential(s)\n",
            where->str, n_hosts, opts->config->host_ports->len, opts->config->credentials->len);
  else
    printf ("namzu-egress-proxy: listening on %s with %u allowed host(s) and %u brokered "
            "credential(s)\n",
            where->str, n_hosts, opts->config->credentials->len);
  fflush (stdout);
  g_main_loop_run (loop);
  g_source_remove (sig_term);
  g_source_remove (sig_int);
  g_socket_service_stop (service);
  g_socket_listener_close (G_SOCKET_LISTENER (service));
  if (opts->unix_path != NULL)
    unlink (opts->unix_path);
  if (p.log != stderr)
    fclose (p.log);
  g_clear_object (&p.ca);
  if (p.test_resolve != NULL)
    g_hash_table_unref (p.test_resolve);
  return NZ_EXIT_OK;
}
