#include "nz-docker.h"

#include <gio/gio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nz-docker-argv.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"

/* Each docker CLI call that is not the run itself: long enough for a loaded daemon, short
 * enough that a wedged one is reported rather than waited on forever. */
#define NZ_DOCKER_CALL_TIMEOUT_MS 60000
/* `docker run` may have to create the container's layers first. */
#define NZ_DOCKER_RUN_TIMEOUT_MS 120000
/* One readiness probe: connect + GET /healthz + the answer. */
#define NZ_DOCKER_PROBE_TIMEOUT_S 2
/* Largest /healthz answer we read. */
#define NZ_DOCKER_PROBE_MAX_BYTES 65536

static const char *const docker_missing_hint =
  "install docker (apt-get install docker.io) and start the daemon (scripts/start-dockerd), or "
  "point NAMZU_DOCKER at the docker CLI";

static gboolean
backend_is_runsc (const char *backend)
{
  return g_strcmp0 (backend, "container:runsc") == 0;
}

/* ---- running the docker CLI ----------------------------------------------------------- */

char *
nz_docker_find_binary (GError **error)
{
  const char *env = g_getenv ("NAMZU_DOCKER");
  char *path;

  if (env != NULL && *env != '\0')
    {
      if (g_file_test (env, G_FILE_TEST_IS_EXECUTABLE) && !g_file_test (env, G_FILE_TEST_IS_DIR))
        return g_strdup (env);
      return (nz_throw (error, NZ_ERROR_NOT_FOUND, "docker not found at NAMZU_DOCKER=%s: %s",
                        env, docker_missing_hint), NULL);
    }
  path = g_find_program_in_path ("docker");
  if (path == NULL)
    return (nz_throw (error, NZ_ERROR_NOT_FOUND, "the docker CLI is not on PATH: %s",
                      docker_missing_hint), NULL);
  return path;
}

typedef struct
{
  gboolean done;
  char *out;
  char *err;
  GError *error;
} RunState;

static void
on_communicated (GObject *src, GAsyncResult *res, gpointer data)
{
  RunState *st = data;

  g_subprocess_communicate_utf8_finish (G_SUBPROCESS (src), res, &st->out, &st->err,
                                        &st->error);
  st->done = TRUE;
}

static gboolean
on_deadline (gpointer data)
{
  *(gboolean *)data = TRUE;
  return G_SOURCE_REMOVE;
}

char *
nz_docker_run (const char *docker, const char *const *args, gsize n_args, const char *token,
               guint timeout_ms, GError **error)
{
  g_autoptr (GSubprocessLauncher) launcher = NULL;
  g_autoptr (GSubprocess) proc = NULL;
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GMainContext) ctx = g_main_context_new ();
  g_autoptr (GSource) timer = NULL;
  g_autofree char *shown = NULL;
  RunState st = { 0 };
  gboolean expired = FALSE;
  char *out;

  g_return_val_if_fail (docker != NULL && args != NULL, NULL);
  g_ptr_array_add (argv, (gpointer)docker);
  for (gsize i = 0; i < n_args; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  shown = nz_docker_redact_argv (args, n_args);

  launcher = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                        | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  /* The token reaches docker through its environment only (spec B.5). */
  if (token != NULL)
    g_subprocess_launcher_setenv (launcher, NZ_DOCKER_TOKEN_ENV, token, TRUE);
  proc = g_subprocess_launcher_spawnv (launcher, (const char *const *)argv->pdata, error);
  if (proc == NULL)
    {
      nz_error_convert (error);
      return (nz_prefix_error (error, "cannot run %s %s", docker, shown), NULL);
    }
  g_main_context_push_thread_default (ctx);
  g_subprocess_communicate_utf8_async (proc, NULL, NULL, on_communicated, &st);
  if (timeout_ms > 0)
    {
      timer = g_timeout_source_new (timeout_ms);
      g_source_set_callback (timer, on_deadline, &expired, NULL);
      g_source_attach (timer, ctx);
    }
  while (!st.done && !expired)
    g_main_context_iteration (ctx, TRUE);
  if (!st.done)
    {
      g_subprocess_force_exit (proc);
      while (!st.done)
        g_main_context_iteration (ctx, TRUE);
    }
  if (timer != NULL)
    g_source_destroy (timer);
  g_main_context_pop_thread_default (ctx);

  if (expired)
    {
      g_free (st.out);
      g_free (st.err);
      g_clear_error (&st.error);
      return (nz_throw (error, NZ_ERROR_TIMED_OUT, "%s %s did not finish within %u ms", docker,
                        shown, timeout_ms), NULL);
    }
  if (st.error != NULL)
    {
      g_free (st.out);
      g_free (st.err);
      g_propagate_error (error, st.error);
      nz_error_convert (error);
      return (nz_prefix_error (error, "%s %s", docker, shown), NULL);
    }
  if (!g_subprocess_get_successful (proc))
    {
      int code = g_subprocess_get_if_exited (proc) ? g_subprocess_get_exit_status (proc)
                                                   : 128 + g_subprocess_get_term_sig (proc);

      nz_throw (error, NZ_ERROR_FAILED, "%s %s exited %d: %s", docker, shown, code,
                st.err != NULL ? g_strstrip (st.err) : "");
      g_free (st.out);
      g_free (st.err);
      return NULL;
    }
  g_free (st.err);
  out = st.out != NULL ? st.out : g_strdup ("");
  return g_strstrip (out);
}

/* A docker call with a fixed argv. */
#define DOCKER(docker, token, timeout, error, ...)                                           \
  ({                                                                                         \
    const char *const _a[] = { __VA_ARGS__ };                                                \
    nz_docker_run ((docker), _a, G_N_ELEMENTS (_a), (token), (timeout), (error));            \
  })

char **
nz_docker_list_runtimes (const char *docker, GError **error)
{
  g_autofree char *out = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, error, "info",
                                 "--format", "{{json .Runtimes}}");
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (GList) names = NULL;
  GPtrArray *arr;

  if (out == NULL)
    return (nz_prefix_error (error, "cannot ask the docker daemon for its runtimes"), NULL);
  obj = nz_json_parse_object (out, -1, error);
  if (obj == NULL)
    return (nz_prefix_error (error, "docker info --format '{{json .Runtimes}}'"), NULL);
  names = json_object_get_members (obj);
  arr = g_ptr_array_new ();
  for (GList *l = names; l != NULL; l = l->next)
    g_ptr_array_add (arr, g_strdup (l->data));
  g_ptr_array_add (arr, NULL);
  return (char **)g_ptr_array_free (arr, FALSE);
}

/* ---- config ----------------------------------------------------------------------------- */

G_GNUC_PRINTF (2, 3) static void
refuse (GPtrArray *reasons, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  g_ptr_array_add (reasons, g_strdup_vprintf (fmt, ap));
  va_end (ap);
}

static gboolean
node_is_number (JsonNode *n)
{
  return JSON_NODE_HOLDS_VALUE (n) && (json_node_get_value_type (n) == G_TYPE_DOUBLE
                                       || json_node_get_value_type (n) == G_TYPE_INT64);
}

static const char *
config_string (JsonObject *b, const char *member, GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, member);

  if (n == NULL)
    return NULL;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING
      || *json_node_get_string (n) == '\0')
    {
      refuse (reasons, "backend.%s: must be a non-empty string", member);
      return NULL;
    }
  return json_node_get_string (n);
}

/* Spec D.3 resolveReadinessOptions: a safe integer in 1..2^31-1. */
static guint
config_ready_ms (JsonObject *b, const char *member, GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, member);
  double v;

  if (n == NULL)
    return 0;
  v = node_is_number (n) ? json_node_get_double (n) : NAN;
  if (!nz_is_safe_integer (v) || v < 1 || v > G_MAXINT32)
    {
      refuse (reasons, "backend.%s: docker.%s must be a positive safe integer no greater than "
              "2147483647", member, member);
      return 0;
    }
  return (guint)v;
}

void
nz_docker_parse_config (NzCreateOptions *opts, JsonObject *b, GPtrArray *reasons)
{
  /* The egress proxy sibling container (spec B.3) is not started by this build: refuse its
   * settings by name rather than accept a boundary nobody enforces. */
  static const char *const proxy_only[] = { "egressProxyImage", "egressProxyUpstreamNetwork",
                                            "brokeredCredentials", "allowInwardFor" };
  const char *s;
  JsonNode *n;

  if ((s = config_string (b, "image", reasons)) != NULL)
    {
      g_free (opts->image);
      opts->image = g_strdup (s);
    }
  if ((s = config_string (b, "network", reasons)) != NULL)
    {
      g_free (opts->docker_network);
      opts->docker_network = g_strdup (s);
    }
  if ((s = config_string (b, "hostReachability", reasons)) != NULL)
    {
      if (strcmp (s, "host-port") != 0 && strcmp (s, "container-network") != 0)
        refuse (reasons, "backend.hostReachability: must be 'host-port' or 'container-network'");
      g_free (opts->host_reachability);
      opts->host_reachability = g_strdup (s);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (proxy_only); i++)
    if (json_object_has_member (b, proxy_only[i]))
      refuse (reasons, "backend.%s: the egress proxy container is not available in this build "
              "yet", proxy_only[i]);
  n = json_object_get_member (b, "labels");
  if (n != NULL && !JSON_NODE_HOLDS_OBJECT (n))
    refuse (reasons, "backend.labels: must be an object of strings");
  else if (n != NULL)
    {
      JsonObject *labels = json_node_get_object (n);
      g_autoptr (GList) keys = json_object_get_members (labels);

      for (GList *l = keys; l != NULL; l = l->next)
        {
          JsonNode *v = json_object_get_member (labels, l->data);

          if (!JSON_NODE_HOLDS_VALUE (v) || json_node_get_value_type (v) != G_TYPE_STRING)
            {
              refuse (reasons, "backend.labels.%s: must be a string", (const char *)l->data);
              continue;
            }
          g_ptr_array_add (opts->labels, g_strdup (l->data));
          g_ptr_array_add (opts->labels, g_strdup (json_node_get_string (v)));
        }
    }
  n = json_object_get_member (b, "cpuLimit");
  if (n != NULL)
    {
      if (!node_is_number (n) || !isfinite (json_node_get_double (n))
          || json_node_get_double (n) <= 0)
        refuse (reasons, "backend.cpuLimit: cpuLimit must be a finite number greater than 0 "
                "(docker's --cpus takes a decimal, e.g. 1.5)");
      else
        opts->cpus = json_node_get_double (n);
    }
  if (json_object_has_member (b, "readyTimeoutMs"))
    {
      guint v = config_ready_ms (b, "readyTimeoutMs", reasons);

      if (v > 0)
        opts->ready_timeout_ms = v;
    }
  if (json_object_has_member (b, "readyPollIntervalMs"))
    opts->ready_poll_ms = config_ready_ms (b, "readyPollIntervalMs", reasons);
  n = json_object_get_member (b, "readOnlyRootfs");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        refuse (reasons, "backend.readOnlyRootfs: must be a boolean");
      else
        opts->read_only_rootfs = json_node_get_boolean (n);
    }
  n = json_object_get_member (b, "writableRootfsPaths");
  if (n != NULL)
    {
      JsonArray *arr = JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;

      if (arr == NULL)
        refuse (reasons, "backend.writableRootfsPaths: must be an array of paths");
      for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++)
        {
          JsonNode *e = json_array_get_element (arr, i);

          if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING)
            refuse (reasons, "backend.writableRootfsPaths[%u]: must be a string", i);
          else
            g_ptr_array_add (opts->writable_paths, g_strdup (json_node_get_string (e)));
        }
    }
}

/* ---- check -------------------------------------------------------------------------------- */

static gboolean
is_host_port (const NzCreateOptions *opts)
{
  return opts->host_reachability == NULL || strcmp (opts->host_reachability, "host-port") == 0;
}

static const char *
docker_network (const NzCreateOptions *opts)
{
  return opts->docker_network != NULL ? opts->docker_network : NZ_DOCKER_DEFAULT_NETWORK;
}

static const NzMount *
find_mount (const NzCreateOptions *opts, const char *label)
{
  for (guint i = 0; i < opts->mounts->len; i++)
    if (strcmp (((NzMount *)opts->mounts->pdata[i])->label, label) == 0)
      return opts->mounts->pdata[i];
  return NULL;
}

gboolean
nz_docker_check (const NzCreateOptions *opts, GError **error)
{
  const char *name = opts->backend != NULL ? opts->backend : "container:docker";
  g_autoptr (GPtrArray) writable = NULL;

  if (opts->image == NULL || *opts->image == '\0')
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "%s needs an image (--image, config backend.image); scripts/build-images "
                     "builds namzu-worker:latest", name);
  /* Spec B.4: the outputs bind is the worker's workspace and the handle's rootDir. */
  if (find_mount (opts, "outputs") == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "layout.outputs: `outputs` is required (deliverables surface). Pass "
                     "--outputs DIR or layout.outputs.source = { type: \"hostDir\", hostPath: "
                     "\"...\" }");
  if (opts->host_reachability != NULL && strcmp (opts->host_reachability, "host-port") != 0
      && strcmp (opts->host_reachability, "container-network") != 0)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "hostReachability must be 'host-port' or 'container-network', got '%s'",
                     opts->host_reachability);
  if (opts->cpus != 0 && !nz_docker_check_cpus (opts->cpus, error))
    return FALSE;
  writable = nz_docker_writable_paths (opts, error);
  if (writable == NULL)
    return FALSE;
  if (opts->network == NZ_NETWORK_ALLOWLIST)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "The docker sandbox backend cannot enforce an egress policy of kind "
                     "'static' without an egress proxy: this build does not start the proxy "
                     "sibling container yet. Use 'deny-all' (an --internal network) or "
                     "'allow-all'. Refusing rather than silently granting full network access.");
  return TRUE;
}

/* ---- readiness ---------------------------------------------------------------------------- */

/* Decodes a chunked body in place; FALSE when it is not well formed. */
static gboolean
dechunk (GString *body)
{
  g_autoptr (GString) out = g_string_new (NULL);
  const char *p = body->str, *end = body->str + body->len;

  while (p < end)
    {
      char *eol = NULL;
      guint64 n = g_ascii_strtoull (p, &eol, 16);
      const char *crlf = g_strstr_len (p, end - p, "\r\n");

      if (eol == p || crlf == NULL)
        return FALSE;
      p = crlf + 2;
      if (n == 0)
        break;
      if ((guint64)(end - p) < n)
        return FALSE;
      g_string_append_len (out, p, (gssize)n);
      p += n + 2;
    }
  g_string_assign (body, out->str);
  return TRUE;
}

/* One unauthenticated GET /healthz (spec D.3 probeHttpHealth; readiness carries no token).
 * Returns 1 when admitted, 0 when not ready yet (*why says why), -1 with @error on a protocol
 * mismatch, which does not heal by waiting. */
static int
probe_healthz (const char *host, guint16 port, char **why, GError **error)
{
  g_autoptr (GSocketClient) client = g_socket_client_new ();
  g_autoptr (GSocketConnection) conn = NULL;
  g_autoptr (GString) resp = g_string_new (NULL);
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonObject) obj = NULL;
  g_autofree char *req = g_strdup_printf ("GET /healthz HTTP/1.1\r\nHost: %s:%u\r\n"
                                          "Connection: close\r\n\r\n", host, port);
  GOutputStream *out;
  GInputStream *in;
  const char *body;
  guint status = 0;
  char buf[4096];
  gssize n;
  double version = 0;

  g_socket_client_set_timeout (client, NZ_DOCKER_PROBE_TIMEOUT_S);
  conn = g_socket_client_connect_to_host (client, host, port, NULL, &local);
  if (conn == NULL)
    {
      *why = g_strdup (local->message);
      return 0;
    }
  out = g_io_stream_get_output_stream (G_IO_STREAM (conn));
  in = g_io_stream_get_input_stream (G_IO_STREAM (conn));
  if (!g_output_stream_write_all (out, req, strlen (req), NULL, NULL, &local))
    {
      *why = g_strdup (local->message);
      return 0;
    }
  while ((n = g_input_stream_read (in, buf, sizeof buf, NULL, &local)) > 0
         && resp->len < NZ_DOCKER_PROBE_MAX_BYTES)
    g_string_append_len (resp, buf, n);
  if (n < 0 || resp->len == 0)
    {
      /* docker's port proxy accepts, then closes, while nothing listens inside yet. */
      *why = g_strdup (local != NULL ? local->message : "connection closed before an answer");
      return 0;
    }
  if (sscanf (resp->str, "HTTP/1.%*d %u", &status) != 1 || (body = strstr (resp->str, "\r\n\r\n")) == NULL)
    {
      *why = g_strdup ("healthz answer is not HTTP");
      return 0;
    }
  if (status < 200 || status > 299)
    {
      /* 503 worker_retiring and 401 are "not ready yet", like the reference. */
      *why = g_strdup_printf ("healthz HTTP %u", status);
      return 0;
    }
  {
    g_autofree char *head = g_ascii_strdown (resp->str, body - resp->str);
    g_autoptr (GString) text = g_string_new (body + 4);

    if (strstr (head, "transfer-encoding: chunked") != NULL && !dechunk (text))
      return (nz_throw (error, NZ_ERROR_PROTOCOL, "Sandbox worker health response is not valid "
                        "JSON for protocol 2: bad chunked encoding"), -1);
    obj = nz_json_parse_object (text->str, (gssize)text->len, &local);
    if (obj == NULL)
      return (nz_throw (error, NZ_ERROR_PROTOCOL, "Sandbox worker health response is not valid "
                        "JSON for protocol 2: %s", local->message), -1);
  }
  if (!nz_json_get_bool (obj, "ok", FALSE) || !nz_json_get_number (obj, "protocolVersion", &version)
      || version != 2)
    {
      JsonNode *v = json_object_get_member (obj, "protocolVersion");
      g_autofree char *shown = v != NULL ? nz_json_to_string (v, NULL) : g_strdup ("missing");

      return (nz_throw (error, NZ_ERROR_PROTOCOL, "Sandbox worker protocol version mismatch: "
                        "expected 2, received %s. Rebuild the worker image from the same Namzu "
                        "release.", shown), -1);
    }
  return 1;
}

/* Splits "http://HOST:PORT". */
static gboolean
endpoint_host_port (const char *endpoint, char **host, guint16 *port)
{
  const char *p = g_str_has_prefix (endpoint, "http://") ? endpoint + 7 : NULL;
  const char *colon = p != NULL ? strrchr (p, ':') : NULL;
  guint64 v = 0;

  if (colon == NULL || !g_ascii_string_to_unsigned (colon + 1, 10, 1, 65535, &v, NULL))
    return FALSE;
  *host = g_strndup (p, colon - p);
  *port = (guint16)v;
  return TRUE;
}

static gboolean
container_running (const char *docker, const char *name)
{
  g_autofree char *out = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "inspect",
                                 "--format", "{{.State.Running}}", name);

  return g_strcmp0 (out, "true") == 0;
}

/* Spec D.3 waitForWorkerReady: poll until admitted or the deadline; a protocol mismatch is
 * fatal at once. A container that is gone (its worker refused to start; --rm removed it) is
 * reported then, not at the deadline. */
static gboolean
wait_ready (const char *docker, NzHandle *h, const char *name, guint timeout_ms, guint poll_ms,
            volatile sig_atomic_t *interrupted, GError **error)
{
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;
  g_autofree char *host = NULL;
  g_autofree char *last = g_strdup ("no probe answered yet");
  guint16 port = 0;

  if (!endpoint_host_port (h->endpoint, &host, &port))
    return nz_throw (error, NZ_ERROR_FAILED, "bad worker endpoint '%s'", h->endpoint);
  for (guint round = 1;; round++)
    {
      g_autofree char *why = NULL;
      int r = probe_healthz (host, port, &why, error);

      if (r > 0)
        return TRUE;
      if (r < 0)
        return FALSE;
      g_free (last);
      last = g_steal_pointer (&why);
      if (interrupted != NULL && *interrupted)
        return nz_throw (error, NZ_ERROR_FAILED, "interrupted while the sandbox was starting");
      if (round % 10 == 0 && !container_running (docker, name))
        return nz_throw (error, NZ_ERROR_FAILED,
                         "container %s exited during startup (its worker refused to start, or "
                         "the image has no worker): %s", name, last);
      if (g_get_monotonic_time () + (gint64)poll_ms * 1000 >= deadline)
        return nz_throw (error, NZ_ERROR_TIMED_OUT,
                         "namzu-sandbox worker did not become ready within %ums: %s. Check that "
                         "the container runtime is running and the image runs namzu-worker",
                         timeout_ms, last);
      g_usleep ((gulong)poll_ms * 1000);
    }
}

/* ---- create ------------------------------------------------------------------------------- */

static gboolean
check_runtime (const char *docker, const char *runtime, GError **error)
{
  g_auto (GStrv) runtimes = nz_docker_list_runtimes (docker, error);
  g_autofree char *list = NULL;

  if (runtimes == NULL)
    return FALSE;
  if (g_strv_contains ((const char *const *)runtimes, runtime))
    return TRUE;
  list = g_strjoinv (", ", runtimes);
  return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                   "container:runsc needs the docker daemon to have a '%s' runtime, and it has "
                   "none (it has: %s). Register gVisor in /etc/docker/daemon.json "
                   "(\"runtimes\": {\"%s\": {\"path\": \"/usr/bin/runsc\"}}) and reload dockerd; "
                   "scripts/start-dockerd does both", runtime, list, runtime);
}

static void
record_policy (NzHandle *h, const NzCreateOptions *opts, const char *name, const char *network,
               const char *runtime)
{
  JsonObject *limits = json_object_new ();

  json_object_set_string_member (h->priv, "container", name);
  json_object_set_string_member (h->priv, "image", opts->image);
  json_object_set_string_member (h->priv, "dockerNetwork", network);
  json_object_set_string_member (h->priv, "hostReachability",
                                 is_host_port (opts) ? "host-port" : "container-network");
  if (runtime != NULL)
    json_object_set_string_member (h->priv, "runtime", runtime);
  json_object_set_string_member (h->priv, "network",
                                 opts->network == NZ_NETWORK_ALLOW_ALL ? "allow-all"
                                                                       : "deny-all");
  const NzMount *outputs = find_mount (opts, "outputs");

  json_object_set_string_member (h->priv, "rootDir", outputs != NULL ? outputs->container_path
                                                                      : NZ_LAYOUT_OUTPUTS_PATH);
  if (opts->memory_mb > 0)
    json_object_set_int_member (limits, "memoryMb", opts->memory_mb);
  if (opts->max_processes > 0)
    json_object_set_int_member (limits, "maxProcesses", opts->max_processes);
  if (opts->cpus > 0)
    json_object_set_double_member (limits, "cpus", opts->cpus);
  json_object_set_object_member (h->priv, "limits", limits);
  if (opts->default_timeout_ms > 0)
    json_object_set_int_member (h->priv, "defaultTimeoutMs", opts->default_timeout_ms);
}

/* Where the host reaches the worker: the loopback port docker mapped (spec B.6 c), or the
 * container's address on its network (container-network; the reference dials the container's
 * name, which only resolves from another container on that network, so a host process reads
 * the address back instead). */
static char *
read_endpoint (const char *docker, const char *name, const char *network, gboolean host_port,
               GError **error)
{
  g_autofree char *out = NULL;
  guint64 port = 0;

  if (host_port)
    {
      out = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, error, "inspect", "--format",
                    "{{(index (index .NetworkSettings.Ports \"2024/tcp\") 0).HostPort}}", name);
      if (out == NULL)
        return NULL;
      if (!g_ascii_string_to_unsigned (out, 10, 1, 65535, &port, NULL))
        return (nz_throw (error, NZ_ERROR_FAILED,
                          "docker inspect returned no usable host port mapping for %s: '%s'. "
                          "The worker's port 2024 must be published (--publish 127.0.0.1::2024)",
                          name, out), NULL);
      return g_strdup_printf ("http://127.0.0.1:%u", (guint)port);
    }
  {
    g_autofree char *fmt = g_strdup_printf ("{{(index .NetworkSettings.Networks \"%s\").IPAddress}}",
                                            network);

    out = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, error, "inspect", "--format", fmt,
                  name);
  }
  if (out == NULL)
    return NULL;
  if (!g_hostname_is_ip_address (out))
    return (nz_throw (error, NZ_ERROR_FAILED, "container %s has no address on network '%s' "
                      "('%s')", name, network, out), NULL);
  return strchr (out, ':') != NULL ? g_strdup_printf ("http://[%s]:2024", out)
                                   : g_strdup_printf ("http://%s:2024", out);
}

NzHandle *
nz_docker_create (const NzCreateOptions *opts, GError **error)
{
  g_autoptr (NzHandle) h = nz_handle_new ();
  g_autoptr (GPtrArray) argv = NULL;
  g_autofree char *docker = NULL;
  g_autofree char *name = NULL;
  g_autofree char *internal = NULL;
  g_autofree char *out = NULL;
  const char *network = docker_network (opts);
  const char *runtime = backend_is_runsc (opts->backend) ? "runsc" : NULL;
  NzDockerPlan plan = { 0 };

  /* Everything that starts nothing first, so a refusal leaves nothing behind. */
  docker = nz_docker_find_binary (error);
  if (docker == NULL)
    return NULL;
  for (guint i = 0; i < opts->mounts->len; i++)
    {
      NzMount *m = opts->mounts->pdata[i];

      /* docker would create a missing bind source as root; the backend never creates host
       * directories (spec B.4). */
      if (!g_file_test (m->host_path, G_FILE_TEST_IS_DIR))
        return (nz_throw (error, NZ_ERROR_INVALID_ARGS, "layout.%s: host directory '%s' does "
                          "not exist", m->label, m->host_path), NULL);
    }
  if (runtime != NULL && !check_runtime (docker, runtime, error))
    return NULL;
  /* The daemon's answer, never the name, says whether the network is a boundary; an
   * unreadable answer (no such network, daemon down) is no boundary. */
  internal = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "network", "inspect",
                     "--format", "{{.Internal}}", network);
  if (!nz_docker_check_network (network, is_host_port (opts), opts->network,
                                nz_docker_network_is_internal (internal), error))
    return NULL;

  h->id = nz_state_new_id ();
  h->backend = g_strdup (backend_is_runsc (opts->backend) ? "container:runsc"
                                                          : "container:docker");
  h->tier = g_strdup ("container");
  h->created_at_ms = g_get_real_time () / 1000;
  h->token = nz_docker_mint_token (error);
  if (h->token == NULL)
    return NULL;
  name = g_strconcat (NZ_DOCKER_NAME_PREFIX, h->id, NULL);
  plan.opts = opts;
  plan.name = name;
  plan.network = network;
  plan.runtime = runtime;
  plan.host_port = is_host_port (opts);
  argv = nz_docker_build_run_argv (&plan, error);
  if (argv == NULL || !nz_handle_make_dir (h, error))
    return NULL;
  record_policy (h, opts, name, network, runtime);
  /* Saved before anything runs: a create killed half-way leaves a handle namzu-destroy can
   * act on. */
  if (!nz_handle_save (h, error))
    {
      nz_handle_remove_dir (h, NULL);
      return NULL;
    }
  out = nz_docker_run (docker, (const char *const *)argv->pdata, argv->len, h->token,
                       NZ_DOCKER_RUN_TIMEOUT_MS, error);
  if (out == NULL)
    {
      /* A run that failed half-way may still have created the container. */
      g_autofree char *rm = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "rm", "-f",
                                    name);

      nz_handle_remove_dir (h, NULL);
      return NULL;
    }
  json_object_set_string_member (h->priv, "containerId", out);
  h->endpoint = read_endpoint (docker, name, network, plan.host_port, error);
  if (h->endpoint == NULL || !nz_handle_save (h, error)
      || !wait_ready (docker, h, name, opts->ready_timeout_ms,
                      opts->ready_poll_ms > 0 ? opts->ready_poll_ms
                                              : NZ_DOCKER_READY_POLL_MS_DEFAULT,
                      opts->interrupted, error))
    {
      g_autofree char *rm = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "rm", "-f",
                                    name);

      nz_handle_remove_dir (h, NULL);
      return NULL;
    }
  return g_steal_pointer (&h);
}

/* ---- destroy, status, describe ---------------------------------------------------------- */

/* Checked teardown (spec B.7): a non-zero `docker rm -f` is an error and the state stays, so
 * the destroy can be retried; only a confirmed removal drops the handle. */
static gboolean
teardown (NzHandle *h, guint timeout_ms, GError **error)
{
  const char *name = nz_json_get_string (h->priv, "container");
  g_autofree char *docker = nz_docker_find_binary (error);
  g_autofree char *out = NULL;

  if (docker == NULL)
    return nz_prefix_error (error, "sandbox '%s' is not removed", h->id);
  if (name == NULL || !g_str_has_prefix (name, NZ_DOCKER_NAME_PREFIX))
    return nz_throw (error, NZ_ERROR_FAILED, "sandbox '%s' names no container of ours", h->id);
  out = DOCKER (docker, NULL, timeout_ms, error, "rm", "-f", name);
  if (out == NULL)
    return nz_prefix_error (error, "sandbox '%s' could not be confirmed removed (its state is "
                            "kept; retry namzu-destroy)", h->id);
  return nz_handle_remove_dir (h, error);
}

gboolean
nz_docker_destroy (NzHandle *h, GError **error)
{
  return teardown (h, NZ_DOCKER_CALL_TIMEOUT_MS, error);
}

gboolean
nz_docker_retire (NzHandle *h, GError **error)
{
  /* The worker could not confirm a cancellation, so its process outcome is unknown: the
   * whole container goes, within the spec's retirement deadline. */
  if (!teardown (h, NZ_DOCKER_RETIRE_DEADLINE_MS, error))
    return nz_prefix_error (error, "docker sandbox %s retirement", h->id);
  return TRUE;
}

NzSandboxStatus
nz_docker_status (NzHandle *h, guint timeout_ms)
{
  const char *name = nz_json_get_string (h->priv, "container");
  g_autofree char *docker = nz_docker_find_binary (NULL);
  g_autofree char *host = NULL;
  g_autofree char *why = NULL;
  guint16 port = 0;
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  if (docker == NULL || name == NULL || !container_running (docker, name))
    return NZ_SANDBOX_DEAD;
  if (timeout_ms == 0 || h->endpoint == NULL || !endpoint_host_port (h->endpoint, &host, &port))
    return NZ_SANDBOX_RUNNING;
  do
    {
      g_clear_pointer (&why, g_free);
      switch (probe_healthz (host, port, &why, NULL))
        {
        case 1:
          return NZ_SANDBOX_RUNNING;
        case -1:
          return NZ_SANDBOX_UNRESPONSIVE;
        default:
          g_usleep (50 * 1000);
        }
    }
  while (g_get_monotonic_time () < deadline);
  return NZ_SANDBOX_UNRESPONSIVE;
}

void
nz_docker_describe (NzHandle *h, JsonObject *pub)
{
  JsonObject *caps = json_object_new ();
  JsonObject *limits = nz_json_get_object (h->priv, "limits");
  const char *members[] = { "rootDir", "network", "container", "image", "dockerNetwork",
                            "hostReachability", "runtime" };

  for (gsize i = 0; i < G_N_ELEMENTS (members); i++)
    {
      const char *v = nz_json_get_string (h->priv, members[i]);

      if (v != NULL)
        json_object_set_string_member (pub, members[i], v);
    }
  if (limits != NULL)
    json_object_set_object_member (pub, "limits", json_object_ref (limits));
  json_object_set_string_member (caps, "transport", "worker");
  json_object_set_boolean_member (caps, "egressAllowlist", FALSE);
  json_object_set_boolean_member (caps, "setNetworkPolicy", FALSE);
  json_object_set_boolean_member (caps, "persistentAfterCreate", TRUE);
  json_object_set_object_member (pub, "capabilities", caps);
}
