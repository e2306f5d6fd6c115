/* nz-kube-client.c: the Kubernetes API client (nz-kube-client.h). Each request runs libsoup's
 * async API on a private main context so one GCancellable bounds it in milliseconds (libsoup's
 * own timeout counts whole seconds and only idle I/O). */
#include "nz-kube-client.h"

#include <libsoup/soup.h>
#include <string.h>

#include "nz-kube-proxy.h"
#include "nz-kube-tls.h"

/* The server's Status message is untrusted text for our stderr: this many bytes at most. */
#define NZ_KUBE_STATUS_MESSAGE_MAX 512

struct _NzKubeClient
{
  NzKubeAccess *access;
  guint timeout_ms;
  GMainContext *context;
  SoupSession *session;
  GTlsDatabase *db; /* NzKubeTlsDatabase: the cluster CA (or system trust), our verdict */
  char *host;       /* the name the server certificate must carry (for messages) */
};

NzKubeClient *
nz_kube_client_new (NzKubeAccess *access, guint timeout_ms, GError **error)
{
  g_autoptr (NzKubeClient) c = g_new0 (NzKubeClient, 1);
  g_autoptr (GUri) uri = NULL;
  g_autoptr (GError) local = NULL;
  g_autofree char *proxy = NULL;

  g_return_val_if_fail (access != NULL && access->server != NULL, NULL);
  c->access = access;
  c->timeout_ms = timeout_ms == 0 ? NZ_KUBE_API_REQUEST_TIMEOUT_MS
                                  : MAX (timeout_ms, NZ_KUBE_API_REQUEST_TIMEOUT_FLOOR_MS);
  uri = g_uri_parse (access->server, G_URI_FLAGS_NONE, &local);
  if (uri == NULL || g_strcmp0 (g_uri_get_scheme (uri), "https") != 0
      || g_uri_get_host (uri) == NULL || *g_uri_get_host (uri) == '\0')
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                        "server '%s' is not an https:// URL", access->server),
           NULL;
  c->host
      = g_strdup (access->tls_server_name != NULL ? access->tls_server_name : g_uri_get_host (uri));
  proxy = nz_kube_proxy_from_env (
      g_uri_get_host (uri), g_uri_get_port (uri) > 0 ? (guint)g_uri_get_port (uri) : 443, &local);
  if (local != NULL)
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG, "%s", local->message), NULL;
  c->db
      = nz_kube_tls_database_new (access->ca_pem, access->tls_server_name, access->insecure, error);
  if (c->db == NULL)
    return NULL;
  c->context = g_main_context_new ();
  g_main_context_push_thread_default (c->context);
  c->session = soup_session_new ();
  soup_session_set_tls_database (c->session, c->db);
  /* The environment's proxy as kubectl takes it, or none: never GIO's default resolver. */
  if (proxy != NULL)
    {
      g_autoptr (GProxyResolver) resolver = g_simple_proxy_resolver_new (proxy, NULL);

      soup_session_set_proxy_resolver (c->session, resolver);
    }
  else
    soup_session_set_proxy_resolver (c->session, NULL);
  g_main_context_pop_thread_default (c->context);
  return g_steal_pointer (&c);
}

void
nz_kube_client_free (NzKubeClient *c)
{
  if (c == NULL)
    return;
  if (c->session != NULL)
    {
      g_main_context_push_thread_default (c->context);
      soup_session_abort (c->session);
      g_clear_object (&c->session);
      /* Let the aborted connections' sources run down before the context goes. */
      while (g_main_context_iteration (c->context, FALSE))
        ;
      g_main_context_pop_thread_default (c->context);
    }
  g_clear_pointer (&c->context, g_main_context_unref);
  g_clear_object (&c->db);
  g_free (c->host);
  nz_kube_access_free (c->access);
  g_free (c);
}

NzKubeAccess *
nz_kube_client_get_access (NzKubeClient *c)
{
  g_return_val_if_fail (c != NULL, NULL);
  return c->access;
}

guint
nz_kube_client_get_timeout_ms (NzKubeClient *c)
{
  g_return_val_if_fail (c != NULL, 0);
  return c->timeout_ms;
}

typedef struct
{
  NzKubeClient *client;
  GTlsCertificateFlags tls_errors; /* why the server certificate was refused, 0 if it was not */
  gboolean done, timed_out;
  GInputStream *stream;
  GByteArray *buf;
  gboolean too_large;
  GError *error;
  GCancellable *cancel;
} Request;

/* The body is read in chunks so an answer past NZ_KUBE_MAX_BODY is refused before it is all
 * in memory. */
#define NZ_KUBE_READ_CHUNK 65536

static void on_read (GObject *source, GAsyncResult *res, gpointer data);

static void
read_next (Request *r)
{
  g_input_stream_read_bytes_async (r->stream, NZ_KUBE_READ_CHUNK, G_PRIORITY_DEFAULT, r->cancel,
                                   on_read, r);
}

static void
on_read (GObject *source, GAsyncResult *res, gpointer data)
{
  Request *r = data;
  g_autoptr (GBytes) chunk
      = g_input_stream_read_bytes_finish (G_INPUT_STREAM (source), res, &r->error);

  if (chunk == NULL || g_bytes_get_size (chunk) == 0)
    {
      r->done = TRUE;
      return;
    }
  g_byte_array_append (r->buf, g_bytes_get_data (chunk, NULL), g_bytes_get_size (chunk));
  if (r->buf->len > NZ_KUBE_MAX_BODY)
    {
      r->too_large = TRUE;
      r->done = TRUE;
      return;
    }
  read_next (r);
}

static void
on_sent (GObject *source, GAsyncResult *res, gpointer data)
{
  Request *r = data;

  r->stream = soup_session_send_finish (SOUP_SESSION (source), res, &r->error);
  if (r->stream == NULL)
    {
      r->done = TRUE;
      return;
    }
  read_next (r);
}

static gboolean
on_timeout (gpointer data)
{
  Request *r = data;

  r->timed_out = TRUE;
  g_cancellable_cancel (r->cancel);
  return G_SOURCE_REMOVE;
}

/* Untrusted server text made printable and short. */
static char *
sanitize (const char *s)
{
  GString *out = g_string_new (NULL);

  for (const char *p = s; *p != '\0' && out->len < NZ_KUBE_STATUS_MESSAGE_MAX; p++)
    g_string_append_c (out, g_ascii_iscntrl (*p) ? ' ' : *p);
  return g_string_free (out, FALSE);
}

static NzKubeErrorCode
class_of_status (guint status)
{
  switch (status)
    {
    case SOUP_STATUS_UNAUTHORIZED:
    case SOUP_STATUS_FORBIDDEN:
      return NZ_KUBE_ERROR_CREDENTIAL;
    case SOUP_STATUS_NOT_FOUND:
    case SOUP_STATUS_GONE:
      return NZ_KUBE_ERROR_GONE;
    case SOUP_STATUS_CONFLICT:
      return NZ_KUBE_ERROR_CONFLICT;
    case SOUP_STATUS_UNPROCESSABLE_ENTITY:
      return NZ_KUBE_ERROR_PATCH_NOT_APPLIED;
    default:
      return NZ_KUBE_ERROR_FAILED;
    }
}

/* The error for a non-2xx answer, with the Status object's reason and message when the body
 * is one. */
static void
set_status_error (GError **error, const char *method, const char *path, guint status, GBytes *body)
{
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree char *reason = NULL, *message = NULL;
  gsize len = body != NULL ? g_bytes_get_size (body) : 0;

  if (len > 0
      && json_parser_load_from_data (parser, g_bytes_get_data (body, NULL), (gssize)len, NULL)
      && JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    {
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      JsonNode *rn = json_object_get_member (o, "reason");
      JsonNode *mn = json_object_get_member (o, "message");

      if (rn != NULL && JSON_NODE_HOLDS_VALUE (rn)
          && json_node_get_value_type (rn) == G_TYPE_STRING)
        reason = sanitize (json_node_get_string (rn));
      if (mn != NULL && JSON_NODE_HOLDS_VALUE (mn)
          && json_node_get_value_type (mn) == G_TYPE_STRING)
        message = sanitize (json_node_get_string (mn));
    }
  if (reason == NULL)
    reason = g_strdup (soup_status_get_phrase (status) != NULL ? soup_status_get_phrase (status)
                                                               : "Unknown");
  g_set_error (error, NZ_KUBE_ERROR, class_of_status (status), "kubernetes: %s %s: HTTP %u %s%s%s",
               method, path, status, reason, message != NULL ? ": " : "",
               message != NULL ? message : "");
}

static char *
tls_flags_text (GTlsCertificateFlags f)
{
  if (f & G_TLS_CERTIFICATE_UNKNOWN_CA)
    return g_strdup ("it is not signed by the cluster CA");
  if (f & G_TLS_CERTIFICATE_BAD_IDENTITY)
    return g_strdup ("it does not name the server");
  if (f & (G_TLS_CERTIFICATE_EXPIRED | G_TLS_CERTIFICATE_NOT_ACTIVATED))
    return g_strdup ("it is expired or not yet valid");
  return g_strdup_printf ("verification flags 0x%x", (unsigned)f);
}

/* One attempt. *@unauthorized is set on a 401. */
static JsonNode *
request_once (NzKubeClient *c, const char *method, const char *path, const char *content_type,
              GBytes *payload, gboolean *unauthorized, GError **error)
{
  g_autoptr (NzKubeCredential) cred = nz_kube_access_credential (c->access, error);
  g_autofree char *url = NULL;
  g_autoptr (SoupMessage) msg = NULL;
  g_autoptr (GCancellable) cancel = g_cancellable_new ();
  g_autoptr (GTlsCertificate) client_cert = NULL;
  g_autoptr (GSource) timer = NULL;
  g_autoptr (GBytes) body = NULL;
  g_autoptr (GError) err = NULL;
  Request r = { .client = c, .cancel = cancel };
  SoupMessageHeaders *h;
  guint status;
  gsize len;

  *unauthorized = FALSE;
  if (cred == NULL)
    return NULL;
  url = g_strconcat (c->access->server, path, NULL);
  msg = soup_message_new (method, url);
  if (msg == NULL)
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED,
                        "kubernetes: %s %s: not a valid URL", method, path),
           NULL;
  h = soup_message_get_request_headers (msg);
  soup_message_headers_replace (h, "Accept", "application/json");
  if (cred->token != NULL && *cred->token != '\0')
    {
      g_autofree char *auth = g_strconcat ("Bearer ", cred->token, NULL);

      soup_message_headers_replace (h, "Authorization", auth);
      memset (auth, 0, strlen (auth));
    }
  if (cred->client_cert_pem != NULL)
    {
      g_autofree char *pem = g_strconcat (cred->client_cert_pem, "\n", cred->client_key_pem, NULL);
      g_autoptr (GError) local = NULL;

      client_cert = g_tls_certificate_new_from_pem (pem, -1, &local);
      memset (pem, 0, strlen (pem));
      if (client_cert == NULL)
        return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFIG,
                            "kubernetes: the client certificate or key is not usable PEM: %s",
                            local->message),
               NULL;
      soup_message_set_tls_client_certificate (msg, client_cert);
    }
  if (payload != NULL)
    soup_message_set_request_body_from_bytes (msg, content_type, payload);
  nz_kube_tls_database_reset (NZ_KUBE_TLS_DATABASE (c->db));

  g_main_context_push_thread_default (c->context);
  timer = g_timeout_source_new (c->timeout_ms);
  g_source_set_callback (timer, on_timeout, &r, NULL);
  g_source_attach (timer, c->context);
  r.buf = g_byte_array_new ();
  soup_session_send_async (c->session, msg, G_PRIORITY_DEFAULT, cancel, on_sent, &r);
  /* A timeout cancels the request; its callback still runs, so this loop always ends. */
  while (!r.done)
    g_main_context_iteration (c->context, TRUE);
  if (r.stream != NULL)
    {
      /* An unfinished body is dropped, not drained: cancelled first, the close is at once. */
      if (r.too_large || r.error != NULL)
        g_cancellable_cancel (cancel);
      g_input_stream_close (r.stream, cancel, NULL);
      g_clear_object (&r.stream);
    }
  g_source_destroy (timer);
  g_main_context_pop_thread_default (c->context);
  r.tls_errors = nz_kube_tls_database_last_errors (NZ_KUBE_TLS_DATABASE (c->db));
  body = g_byte_array_free_to_bytes (r.buf);
  err = r.error;

  if (err != NULL)
    {
      if (r.timed_out)
        return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_TIMED_OUT,
                            "kubernetes: %s %s: no answer within %ums", method, path,
                            c->timeout_ms),
               NULL;
      if (r.tls_errors != 0)
        {
          g_autofree char *why = tls_flags_text (r.tls_errors);

          return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_TLS,
                              "kubernetes: %s %s: the API server's certificate was refused: %s "
                              "(%s)",
                              method, path, why, c->host),
                 NULL;
        }
      /* A handshake we did not refuse: with a client certificate, the server refusing it is
       * a credential refused like a 401; else a TLS failure. */
      if (err->domain == G_TLS_ERROR)
        return g_set_error (error, NZ_KUBE_ERROR,
                            cred->client_cert_pem != NULL ? NZ_KUBE_ERROR_CREDENTIAL
                                                          : NZ_KUBE_ERROR_TLS,
                            "kubernetes: %s %s: the TLS handshake failed%s: %s", method, path,
                            cred->client_cert_pem != NULL ? " with the client certificate" : "",
                            err->message),
               NULL;
      return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_FAILED, "kubernetes: %s %s: %s",
                          method, path, err->message),
             NULL;
    }
  status = soup_message_get_status (msg);
  len = body != NULL ? g_bytes_get_size (body) : 0;
  if (len > NZ_KUBE_MAX_BODY)
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PROTOCOL,
                        "kubernetes: %s %s: the answer is larger than %d bytes", method, path,
                        NZ_KUBE_MAX_BODY),
           NULL;
  if (status < 200 || status > 299)
    {
      *unauthorized = status == SOUP_STATUS_UNAUTHORIZED;
      set_status_error (error, method, path, status, body);
      return NULL;
    }
  if (len == 0)
    return json_node_new (JSON_NODE_NULL);
  {
    g_autoptr (JsonParser) parser = json_parser_new_immutable ();

    if (!json_parser_load_from_data (parser, g_bytes_get_data (body, NULL), (gssize)len, NULL))
      return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PROTOCOL,
                          "kubernetes: %s %s: HTTP %u with a body that is not JSON", method, path,
                          status),
             NULL;
    return json_parser_steal_root (parser);
  }
}

JsonNode *
nz_kube_client_request (NzKubeClient *c, const char *method, const char *path,
                        const char *content_type, JsonNode *body, GError **error)
{
  g_autoptr (GBytes) payload = NULL;
  g_autoptr (GError) local = NULL;
  gboolean unauthorized = FALSE;
  JsonNode *res;

  g_return_val_if_fail (c != NULL && method != NULL && path != NULL && path[0] == '/', NULL);
  if (body != NULL)
    {
      gsize len = 0;
      char *text = json_to_string (body, FALSE);

      len = strlen (text);
      payload = g_bytes_new_take (text, len);
    }
  res = request_once (c, method, path, content_type != NULL ? content_type : NZ_KUBE_CONTENT_JSON,
                      payload, &unauthorized, &local);
  /* client-go: a plugin's credential the server refuses is fetched anew, once. */
  if (res == NULL && unauthorized && c->access->exec != NULL)
    {
      g_clear_error (&local);
      nz_kube_access_forget_credential (c->access);
      res = request_once (c, method, path,
                          content_type != NULL ? content_type : NZ_KUBE_CONTENT_JSON, payload,
                          &unauthorized, &local);
    }
  if (res == NULL)
    g_propagate_error (error, g_steal_pointer (&local));
  return res;
}

static JsonObject *
object_request (NzKubeClient *c, const char *method, const char *path, const char *type,
                JsonNode *body, GError **error)
{
  g_autoptr (JsonNode) res = nz_kube_client_request (c, method, path, type, body, error);

  if (res == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_OBJECT (res))
    return g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PROTOCOL,
                        "kubernetes: %s %s: the answer is not a JSON object", method, path),
           NULL;
  return json_object_ref (json_node_get_object (res));
}

JsonObject *
nz_kube_get (NzKubeClient *c, const char *path, GError **error)
{
  return object_request (c, "GET", path, NULL, NULL, error);
}

static JsonNode *
node_of_object (JsonObject *o)
{
  JsonNode *n = json_node_alloc ();

  return json_node_init_object (n, o);
}

JsonObject *
nz_kube_create (NzKubeClient *c, const char *collection_path, JsonObject *obj, GError **error)
{
  g_autoptr (JsonNode) body = node_of_object (obj);

  return object_request (c, "POST", collection_path, NZ_KUBE_CONTENT_JSON, body, error);
}

JsonObject *
nz_kube_merge_patch (NzKubeClient *c, const char *path, JsonObject *patch, GError **error)
{
  g_autoptr (JsonNode) body = node_of_object (patch);

  return object_request (c, "PATCH", path, NZ_KUBE_CONTENT_MERGE_PATCH, body, error);
}

JsonObject *
nz_kube_json_patch (NzKubeClient *c, const char *path, JsonArray *ops, GError **error)
{
  g_autoptr (JsonNode) body = json_node_alloc ();

  json_node_init_array (body, ops);
  return object_request (c, "PATCH", path, NZ_KUBE_CONTENT_JSON_PATCH, body, error);
}

gboolean
nz_kube_delete (NzKubeClient *c, const char *path, const char *resource_version, GError **error)
{
  g_autoptr (JsonNode) body = NULL;
  g_autoptr (JsonNode) res = NULL;

  if (resource_version != NULL)
    {
      g_autoptr (JsonObject) opts = json_object_new ();
      JsonObject *pre = json_object_new ();

      json_object_set_string_member (opts, "apiVersion", "v1");
      json_object_set_string_member (opts, "kind", "DeleteOptions");
      json_object_set_string_member (pre, "resourceVersion", resource_version);
      json_object_set_object_member (opts, "preconditions", pre);
      body = node_of_object (opts);
    }
  res = nz_kube_client_request (c, "DELETE", path, NZ_KUBE_CONTENT_JSON, body, error);
  return res != NULL;
}

char *
nz_kube_path (const char *group, const char *version, const char *ns, const char *resource,
              const char *name)
{
  g_autofree char *e_ns = g_uri_escape_string (ns, NULL, FALSE);
  g_autofree char *e_res = g_uri_escape_string (resource, NULL, FALSE);
  g_autofree char *e_name = name != NULL ? g_uri_escape_string (name, NULL, FALSE) : NULL;
  g_autofree char *prefix = NULL;

  g_return_val_if_fail (ns != NULL && resource != NULL, NULL);
  if (group == NULL || *group == '\0')
    prefix = g_strdup ("/api/v1");
  else
    {
      g_autofree char *e_group = g_uri_escape_string (group, NULL, FALSE);
      g_autofree char *e_version = g_uri_escape_string (version, NULL, FALSE);

      prefix = g_strdup_printf ("/apis/%s/%s", e_group, e_version);
    }
  return e_name != NULL ? g_strdup_printf ("%s/namespaces/%s/%s/%s", prefix, e_ns, e_res, e_name)
                        : g_strdup_printf ("%s/namespaces/%s/%s", prefix, e_ns, e_res);
}

JsonObject *
nz_kube_object_new (const char *api_version, const char *kind, const char *ns, const char *name,
                    JsonObject **metadata)
{
  JsonObject *obj = json_object_new ();
  JsonObject *meta = json_object_new ();

  json_object_set_string_member (obj, "apiVersion", api_version);
  json_object_set_string_member (obj, "kind", kind);
  json_object_set_string_member (meta, "name", name);
  json_object_set_string_member (meta, "namespace", ns);
  json_object_set_object_member (obj, "metadata", meta);
  if (metadata != NULL)
    *metadata = meta;
  return obj;
}
