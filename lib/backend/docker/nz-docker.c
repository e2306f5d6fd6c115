#include "nz-docker.h"

#include <errno.h>
#include <gio/gio.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "nz-agent-client.h"
#include "nz-autofd.h"
#include "nz-backend-config.h"
#include "nz-docker-argv.h"
#include "nz-docker-egress.h"
#include "nz-docker-net.h"
#include "nz-docker-options.h"
#include "nz-egress-live.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-sandbox-env.h"

/* Each docker CLI call that is not the run itself: long enough for a loaded daemon, short
 * enough that a wedged one is reported rather than waited on forever. */
#define NZ_DOCKER_CALL_TIMEOUT_MS 60000
/* The worker's own NAMZU_SANDBOX_IDLE_TIMEOUT_MS default (spec C.1), used when none is given. */
#define NZ_DOCKER_WORKER_IDLE_TIMEOUT_MS 300000
/* `docker run` may have to create the container's layers first. */
#define NZ_DOCKER_RUN_TIMEOUT_MS 120000

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

/* Reads both pipes until EOF or @deadline (monotonic µs, 0 = none). FALSE on expiry. */
static gboolean
drain_pipes (int out_fd, int err_fd, GString *out, GString *err, gint64 deadline)
{
  struct pollfd fds[2] = { { out_fd, POLLIN, 0 }, { err_fd, POLLIN, 0 } };
  GString *bufs[2] = { out, err };
  int open_fds = 2;

  while (open_fds > 0)
    {
      int wait_ms = -1;
      int r;

      if (deadline > 0)
        {
          gint64 left = deadline - g_get_monotonic_time ();

          if (left <= 0)
            return FALSE;
          wait_ms = (int)MIN (left / 1000 + 1, G_MAXINT);
        }
      r = poll (fds, 2, wait_ms);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return TRUE;
      for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0 && fds[i].revents != 0)
          {
            char buf[4096];
            ssize_t n = read (fds[i].fd, buf, sizeof buf);

            if (n > 0)
              g_string_append_len (bufs[i], buf, n);
            else if (n == 0 || errno != EINTR)
              {
                fds[i].fd = -1;
                open_fds--;
              }
          }
    }
  return TRUE;
}

char *
nz_docker_run (const char *docker, const char *const *args, gsize n_args, const char *token,
               guint timeout_ms, GError **error)
{
  return nz_docker_run_env (docker, args, n_args, NZ_DOCKER_TOKEN_ENV, token, timeout_ms, error);
}

char *
nz_docker_run_env (const char *docker, const char *const *args, gsize n_args,
                   const char *env_name, const char *env_value, guint timeout_ms, GError **error)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  g_autoptr (GString) out = g_string_new (NULL);
  g_autoptr (GString) err = g_string_new (NULL);
  g_autofree char *shown = NULL;
  gint64 deadline = timeout_ms > 0 ? g_get_monotonic_time () + (gint64)timeout_ms * 1000 : 0;
  int out_fd = -1, err_fd = -1, status = 0;
  gboolean finished;
  GPid pid;

  g_return_val_if_fail (docker != NULL && args != NULL, NULL);
  g_ptr_array_add (argv, (gpointer)docker);
  for (gsize i = 0; i < n_args; i++)
    g_ptr_array_add (argv, (gpointer)args[i]);
  g_ptr_array_add (argv, NULL);
  shown = nz_docker_redact_argv (args, n_args);
  /* The token, or the proxy's configuration, reaches docker through its environment only
   * (spec B.5): a valueless --env in the argv names it. */
  if (env_value != NULL)
    envp = g_environ_setenv (envp, env_name, env_value, TRUE);
  /* Plain pipes and poll(): GLib 2.74's g_subprocess_communicate() leaks. stdin is /dev/null
   * (spawn's default without G_SPAWN_CHILD_INHERITS_STDIN). */
  if (!g_spawn_async_with_pipes (NULL, (char **)argv->pdata, envp,
                                 G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_CLOEXEC_PIPES, NULL, NULL,
                                 &pid, NULL, &out_fd, &err_fd, error))
    {
      nz_error_convert (error);
      return (nz_prefix_error (error, "cannot run %s %s", docker, shown), NULL);
    }
  finished = drain_pipes (out_fd, err_fd, out, err, deadline);
  if (!finished)
    kill (pid, SIGKILL);
  close (out_fd);
  close (err_fd);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  g_spawn_close_pid (pid);
  if (!finished)
    return (nz_throw (error, NZ_ERROR_TIMED_OUT, "%s %s did not finish within %u ms", docker,
                      shown, timeout_ms), NULL);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      int code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);

      return (nz_throw (error, NZ_ERROR_FAILED, "%s %s exited %d: %s", docker, shown, code,
                        g_strstrip (err->str)), NULL);
    }
  return g_strdup (g_strstrip (out->str));
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

#define refuse nz_config_refuse

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

/* An array of non-empty strings, appended to @out. */
static void
config_string_list (JsonObject *b, const char *member, const char *what, GPtrArray *out,
                    GPtrArray *reasons)
{
  JsonNode *n = json_object_get_member (b, member);
  JsonArray *arr = n != NULL && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;

  if (n != NULL && arr == NULL)
    refuse (reasons, "backend.%s: must be an array of %s", member, what);
  for (guint i = 0; arr != NULL && i < json_array_get_length (arr); i++)
    {
      JsonNode *e = json_array_get_element (arr, i);

      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_STRING
          || *json_node_get_string (e) == '\0')
        refuse (reasons, "backend.%s[%u]: must be a non-empty string", member, i);
      else
        g_ptr_array_add (out, g_strdup (json_node_get_string (e)));
    }
}

/* A non-empty string member replaces *@dst. */
static void
config_string_into (JsonObject *b, const char *member, char **dst, GPtrArray *reasons)
{
  const char *s = config_string (b, member, reasons);

  if (s != NULL)
    {
      g_free (*dst);
      *dst = g_strdup (s);
    }
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

const char *const nz_docker_config_keys[] = {
  "image", "network", "hostReachability", "egressProxyImage", "egressProxyUpstreamNetwork",
  "brokeredCredentials", "allowInwardFor", "labels", "cpuLimit", "readyTimeoutMs",
  "readyPollIntervalMs", "readOnlyRootfs", "writableRootfsPaths", NULL,
};

void
nz_docker_parse_config (JsonObject *b, NzCreateOptions *opts, GPtrArray *reasons)
{
  NzDockerOptions *d = nz_docker_options_ensure (opts);
  const char *s;
  JsonNode *n;

  config_string_into (b, "image", &opts->image, reasons);
  config_string_into (b, "network", &d->network, reasons);
  if ((s = config_string (b, "hostReachability", reasons)) != NULL)
    {
      if (strcmp (s, "host-port") != 0 && strcmp (s, "container-network") != 0)
        refuse (reasons, "backend.hostReachability: must be 'host-port' or 'container-network'");
      g_free (d->host_reachability);
      d->host_reachability = g_strdup (s);
    }
  config_string_into (b, "egressProxyImage", &d->proxy_image, reasons);
  config_string_into (b, "egressProxyUpstreamNetwork", &d->upstream_network, reasons);
  n = json_object_get_member (b, "brokeredCredentials");
  if (n != NULL && !JSON_NODE_HOLDS_ARRAY (n))
    refuse (reasons, "backend.brokeredCredentials: must be a list of {host, header, value}");
  else if (n != NULL)
    {
      /* Shape and coverage are checked with the policy (nz_egress_options_check). Secrets:
       * kept as text for the proxy's environment only. */
      g_free (opts->egress_credentials);
      opts->egress_credentials = nz_json_to_string (n, NULL);
    }
  config_string_list (b, "allowInwardFor", "host names", d->allow_inward_for, reasons);
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
          g_ptr_array_add (d->labels, g_strdup (l->data));
          g_ptr_array_add (d->labels, g_strdup (json_node_get_string (v)));
        }
    }
  n = json_object_get_member (b, "cpuLimit");
  if (n != NULL)
    {
      g_autoptr (GError) local = NULL;

      if (!node_is_number (n) || !isfinite (json_node_get_double (n))
          || json_node_get_double (n) <= 0)
        refuse (reasons, "backend.cpuLimit: cpuLimit must be a finite number greater than 0 "
                "(docker's --cpus takes a decimal, e.g. 1.5)");
      else if (!nz_cpus_check (json_node_get_double (n), "backend.cpuLimit", &local))
        refuse (reasons, "%s", local->message);
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
    d->ready_poll_ms = config_ready_ms (b, "readyPollIntervalMs", reasons);
  n = json_object_get_member (b, "readOnlyRootfs");
  if (n != NULL)
    {
      if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
        refuse (reasons, "backend.readOnlyRootfs: must be a boolean");
      else
        opts->read_only_rootfs = json_node_get_boolean (n);
    }
  config_string_list (b, "writableRootfsPaths", "paths", opts->writable_paths, reasons);
}

/* ---- check -------------------------------------------------------------------------------- */

static gboolean
is_host_port (const NzCreateOptions *opts)
{
  const char *how = nz_docker_options (opts)->host_reachability;

  return how == NULL || strcmp (how, "host-port") == 0;
}

static const char *
docker_network (const NzCreateOptions *opts)
{
  const char *network = nz_docker_options (opts)->network;

  return network != NULL ? network : NZ_DOCKER_DEFAULT_NETWORK;
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
  const NzDockerOptions *d = nz_docker_options (opts);
  g_autoptr (GPtrArray) writable = NULL;

  if (opts->agent_shares_uid)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "--agent-shares-uid: only container:bwrap has it (the worker always has a "
                     "uid of its own here)");
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
  if (d->host_reachability != NULL && strcmp (d->host_reachability, "host-port") != 0
      && strcmp (d->host_reachability, "container-network") != 0)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "hostReachability must be 'host-port' or 'container-network', got '%s'",
                     d->host_reachability);
  if (opts->cpus != 0 && !nz_docker_check_cpus (opts->cpus, error))
    return FALSE;
  writable = nz_docker_writable_paths (opts, error);
  if (writable == NULL)
    return FALSE;
  if (!nz_egress_options_check (opts, backend_is_runsc (name) ? "runsc" : "docker", error))
    return FALSE;
  /* Spec B.3 resolveNetwork: an allowlist is only ever enforced by the proxy container. */
  if (opts->network == NZ_NETWORK_ALLOWLIST
      && (d->proxy_image == NULL || *d->proxy_image == '\0'))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "The docker sandbox backend cannot enforce an egress policy of kind "
                     "'static' without an egress proxy: it runs the allowlist in a sibling "
                     "container on the sandbox's internal network. Name the image it should run "
                     "the proxy as (egressProxyImage, --egress-proxy-image — see "
                     "images/egress-proxy/Dockerfile; scripts/build-images builds "
                     "namzu-egress-proxy:latest), or use 'deny-all' / 'allow-all'. Refusing "
                     "rather than silently granting full network access.");
  return TRUE;
}

/* ---- readiness ---------------------------------------------------------------------------- */

static gboolean
container_running (const char *docker, const char *name)
{
  g_autofree char *out = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "inspect",
                                 "--format", "{{.State.Running}}", name);

  return g_strcmp0 (out, "true") == 0;
}

/* Spec D.3 waitForWorkerReady: poll /healthz with protocol admission until admitted or the
 * deadline (the probe carries no token, like the reference's); a protocol mismatch is fatal
 * at once. A container that is gone (its worker refused to start; --rm removed it) is
 * reported then, not at the deadline. */
static gboolean
wait_ready (const char *docker, NzHandle *h, const char *name, const NzCreateOptions *opts,
            GError **error)
{
  guint timeout_ms = opts->ready_timeout_ms;
  volatile sig_atomic_t *interrupted = opts->interrupted;
  g_autoptr (NzAgentClient) client = nz_agent_client_new (h->endpoint, NULL);
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;

  for (;;)
    {
      g_autoptr (GError) local = NULL;
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;

      if (opts->waiting != NULL)
        opts->waiting (opts->waiting_data);
      if (nz_agent_client_wait_ready (client, (guint)CLAMP (left_ms, 1, 1000), &local))
        return TRUE;
      if (!g_error_matches (local, NZ_ERROR, NZ_ERROR_TIMED_OUT))
        {
          g_propagate_prefixed_error (error, g_steal_pointer (&local),
                                      "the sandbox's worker was refused: ");
          return FALSE;
        }
      if (interrupted != NULL && *interrupted)
        return nz_throw (error, NZ_ERROR_FAILED, "interrupted while the sandbox was starting");
      if (g_get_monotonic_time () >= deadline)
        return nz_throw (error, NZ_ERROR_TIMED_OUT,
                         "namzu-sandbox worker did not become ready within %ums: %s. Check that "
                         "the container runtime is running and the image runs namzu-worker",
                         timeout_ms, local->message);
      if (!container_running (docker, name))
        return nz_throw (error, NZ_ERROR_FAILED,
                         "container %s exited during startup (its worker refused to start, or "
                         "the image has no worker): %s", name, local->message);
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
               gboolean host_port, const char *runtime)
{

  json_object_set_string_member (h->priv, "container", name);
  json_object_set_string_member (h->priv, "image", opts->image);
  json_object_set_string_member (h->priv, "dockerNetwork", network);
  json_object_set_string_member (h->priv, "hostReachability",
                                 host_port ? "host-port" : "container-network");
  if (runtime != NULL)
    json_object_set_string_member (h->priv, "runtime", runtime);
  json_object_set_string_member (h->priv, "network",
                                 opts->network == NZ_NETWORK_ALLOW_ALL   ? "allow-all"
                                 : opts->network == NZ_NETWORK_ALLOWLIST ? "allowlist"
                                                                         : "deny-all");
  if (opts->network == NZ_NETWORK_ALLOWLIST)
    nz_docker_egress_record (h, opts, network);
  const NzMount *outputs = find_mount (opts, "outputs");

  json_object_set_string_member (h->priv, "rootDir", outputs != NULL ? outputs->container_path
                                                                      : NZ_LAYOUT_OUTPUTS_PATH);
  json_object_set_object_member (h->priv, "limits", nz_create_options_limits (opts));
  if (opts->default_timeout_ms > 0)
    json_object_set_int_member (h->priv, "defaultTimeoutMs", opts->default_timeout_ms);
  nz_sandbox_env_record (h->priv, opts->env);
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

/* A failed create leaves nothing: the sandbox container, the proxy container, the network and
 * its host guard, the state. The guard stays while anything of the sandbox may still run. */
static void
rollback (const char *docker, NzHandle *h, const char *name)
{
  g_autofree char *rm = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "rm", "-f", name);
  gboolean proxy_gone = nz_docker_egress_stop (h, NULL);

  if (rm != NULL && proxy_gone)
    nz_docker_net_release (docker, h, NULL);
  nz_handle_remove_dir (h, NULL);
}

/* On an --internal network the sandbox still has a default route on docker 20.10, to a gateway
 * whose isolation rules drop everything: a tool that ignores the proxy settings would hang in
 * connect() instead of failing. Dropping the route (nz_docker_build_isolate_argv) makes it fail
 * at once with "Network is unreachable". The boundary does not depend on it — the daemon drops
 * those packets either way — so an image without namzu-egress only keeps the slow failure;
 * the handle records which ("defaultRoute"). */
static void
isolate_routes (const char *docker, NzHandle *h, const char *name, const char *image)
{
  g_autoptr (GPtrArray) argv = nz_docker_build_isolate_argv (name, image);
  g_autofree char *out = nz_docker_run (docker, (const char *const *)argv->pdata, argv->len,
                                        NULL, NZ_DOCKER_RUN_TIMEOUT_MS, NULL);

  json_object_set_string_member (h->priv, "defaultRoute", out != NULL ? "dropped" : "kept");
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
  g_autofree char *private_name = NULL;
  const char *network = docker_network (opts);
  const char *runtime = backend_is_runsc (opts->backend) ? "runsc" : NULL;
  /* A boundary (deny-all, an allowlist) is alone on its network, behind the host guard. */
  gboolean guarded = opts->network != NZ_NETWORK_ALLOW_ALL;
  gboolean private_net = nz_docker_net_wants_private (opts);
  gboolean host_port = is_host_port (opts);
  gboolean internal_net;
  NzDockerPlan plan = { 0 };
  gboolean started;

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
  h->id = nz_state_new_id ();
  if (private_net)
    {
      /* Created --internal below, for this sandbox alone; reached on it unless the host asked
       * for a published port (which an internal network cannot give, and is refused). */
      network = private_name = g_strconcat (NZ_DOCKER_NET_PREFIX, h->id, NULL);
      if (nz_docker_options (opts)->host_reachability == NULL)
        host_port = FALSE;
    }
  else
    /* The daemon's answer, never the name, says whether the network is a boundary; an
     * unreadable answer (no such network, daemon down) is no boundary. */
    internal = DOCKER (docker, NULL, NZ_DOCKER_CALL_TIMEOUT_MS, NULL, "network", "inspect",
                       "--format", "{{.Internal}}", network);
  internal_net = private_net || nz_docker_network_is_internal (internal);
  if (!nz_docker_check_network (network, host_port, opts->network, internal_net, error))
    return NULL;
  /* A V2 configuration only for an image that reads it, and a named network that carries
   * nothing else: refused before anything starts. */
  if (opts->network == NZ_NETWORK_ALLOWLIST && !nz_docker_egress_preflight (docker, opts, error))
    return NULL;
  if (guarded && !private_net && !nz_docker_net_check_alone (docker, network, error))
    return NULL;

  h->backend = g_strdup (backend_is_runsc (opts->backend) ? "container:runsc"
                                                          : "container:docker");
  h->tier = g_strdup ("container");
  h->created_at_ms = g_get_real_time () / 1000;
  nz_handle_set_lifetime (h, opts);
  h->token = nz_docker_mint_token (error);
  if (h->token == NULL)
    return NULL;
  name = g_strconcat (NZ_DOCKER_NAME_PREFIX, h->id, NULL);
  plan.opts = opts;
  plan.name = name;
  plan.network = network;
  plan.runtime = runtime;
  plan.host_port = host_port;
  plan.proxy_env = opts->network == NZ_NETWORK_ALLOWLIST;
  plan.expires_at_ms = h->expires_at_ms;
  plan.idle_timeout_ms = h->idle_timeout_ms;
  /* Unset, the worker still has the reference's idle timeout: the handle says so. */
  if (h->idle_timeout_ms == 0)
    h->idle_timeout_ms = NZ_DOCKER_WORKER_IDLE_TIMEOUT_MS;
  argv = nz_docker_build_run_argv (&plan, error);
  if (argv == NULL || !nz_handle_make_dir (h, error))
    return NULL;
  record_policy (h, opts, name, network, host_port, runtime);
  /* Saved before anything runs: a create killed half-way leaves a handle namzu-destroy can
   * act on (the proxy's name follows from the id). The guard is in force before anything
   * joins the network, and a create that cannot install it is refused. */
  if (!nz_handle_save (h, error)
      || (guarded && !nz_docker_net_prepare (docker, h, opts, network, private_net, error)))
    {
      nz_handle_remove_dir (h, NULL);
      return NULL;
    }
  /* The proxy first: its alias must be in the internal network's DNS before the sandbox
   * starts. */
  if (plan.proxy_env)
    {
      g_ptr_array_add (opts->egress_hosts, NULL);
      started = nz_docker_egress_start (h, (const char *const *)opts->egress_hosts->pdata, error);
      g_ptr_array_remove_index (opts->egress_hosts, opts->egress_hosts->len - 1);
      if (!started || !nz_handle_save (h, error))
        {
          rollback (docker, h, name);
          return NULL;
        }
    }
  out = nz_docker_run (docker, (const char *const *)argv->pdata, argv->len, h->token,
                       NZ_DOCKER_RUN_TIMEOUT_MS, error);
  if (out == NULL)
    {
      /* A run that failed half-way may still have created the container. */
      rollback (docker, h, name);
      return NULL;
    }
  json_object_set_string_member (h->priv, "containerId", out);
  /* Two creates racing onto one named network: neither keeps it shared. */
  if (guarded && !private_net && !nz_docker_net_check_members (docker, h, network, error))
    {
      rollback (docker, h, name);
      return NULL;
    }
  if (internal_net)
    isolate_routes (docker, h, name,
                    plan.proxy_env ? nz_docker_options (opts)->proxy_image : opts->image);
  h->endpoint = read_endpoint (docker, name, network, plan.host_port, error);
  if (h->endpoint == NULL || !nz_handle_save (h, error)
      || !wait_ready (docker, h, name, opts, error))
    {
      rollback (docker, h, name);
      return NULL;
    }
  return g_steal_pointer (&h);
}

/* ---- destroy, status, describe ---------------------------------------------------------- */

/* How often a teardown re-asks while the daemon is already removing the container. */
#define RM_IN_PROGRESS_RETRY_MS 100

/* Checked teardown (spec B.7): a non-zero `docker rm -f` is an error and the state stays, so
 * the destroy can be retried; only a confirmed removal drops the handle. */
static gboolean
teardown (NzHandle *h, guint timeout_ms, GError **error)
{
  const char *name = nz_json_get_string (h->priv, "container");
  g_autofree char *docker = nz_docker_find_binary (error);
  g_autofree char *out = NULL;
  gint64 deadline = g_get_monotonic_time () + (gint64)timeout_ms * 1000;
  g_autoptr (GError) rm_error = NULL;
  g_autoptr (GError) proxy_error = NULL;
  g_autoptr (GError) net_error = NULL;
  nz_autofd int lock = -1;

  if (docker == NULL)
    return nz_prefix_error (error, "sandbox '%s' is not removed", h->id);
  if (name == NULL || !g_str_has_prefix (name, NZ_DOCKER_NAME_PREFIX))
    return nz_throw (error, NZ_ERROR_FAILED, "sandbox '%s' names no container of ours", h->id);
  /* A policy change in progress finishes first (it swaps under the same lock), so no
   * replacement proxy is started behind the teardown's back. */
  lock = nz_egress_lock (h->dir, error);
  if (lock < 0)
    return FALSE;
  for (;;)
    {
      g_autoptr (GError) local = NULL;
      gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;

      out = DOCKER (docker, NULL, (guint)MAX (left_ms, 1), &local, "rm", "-f", name);
      if (out != NULL)
        break;
      /* A worker that poisoned itself exits, and the daemon's own --rm removal of the
       * container is then under way: wait for it (an `rm -f` of a gone container succeeds)
       * rather than report a teardown that is in fact happening. */
      left_ms = (deadline - g_get_monotonic_time ()) / 1000;
      if (strstr (local->message, "is already in progress") == NULL
          || left_ms <= RM_IN_PROGRESS_RETRY_MS)
        {
          rm_error = g_steal_pointer (&local);
          break;
        }
      g_usleep (RM_IN_PROGRESS_RETRY_MS * 1000);
    }
  /* The proxy goes too, whatever happened to the sandbox; its error counts only if the
   * sandbox's removal did not fail first. */
  if (!nz_docker_egress_stop (h, &proxy_error) && out != NULL)
    {
      rm_error = g_steal_pointer (&proxy_error);
      g_clear_pointer (&out, g_free);
    }
  /* The network and its guard last, once nothing of the sandbox runs. */
  if (out != NULL && !nz_docker_net_release (docker, h, &net_error))
    {
      rm_error = g_steal_pointer (&net_error);
      g_clear_pointer (&out, g_free);
    }
  if (out == NULL)
    {
      g_propagate_error (error, g_steal_pointer (&rm_error));
      return nz_prefix_error (error, "sandbox '%s' could not be confirmed removed (its state is "
                              "kept; retry namzu-destroy)", h->id);
    }
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
  g_autoptr (NzAgentClient) client = NULL;

  if (docker == NULL || name == NULL || !container_running (docker, name))
    /* The worker exits only when its lifetime ends (past the deadline, or idle: it always has
     * an idle timeout) or when it poisons itself; --rm took the exit status with the
     * container, so a gone container with a lifetime reads as expired. */
    return docker != NULL && name != NULL
                   && (nz_handle_is_past_deadline (h) || h->idle_timeout_ms > 0)
               ? NZ_SANDBOX_EXPIRED
               : NZ_SANDBOX_DEAD;
  if (timeout_ms == 0 || h->endpoint == NULL)
    return NZ_SANDBOX_RUNNING;
  client = nz_agent_client_new (h->endpoint, NULL);
  return nz_agent_client_wait_ready (client, timeout_ms, NULL) ? NZ_SANDBOX_RUNNING
                                                               : NZ_SANDBOX_UNRESPONSIVE;
}

void
nz_docker_layout (NzHandle *h, NzLayout *out)
{
  JsonArray *mounts = nz_json_get_array (h->priv, "mounts");
  const char *outputs = NULL;

  for (guint i = 0; mounts != NULL && i < json_array_get_length (mounts); i++)
    {
      JsonNode *n = json_array_get_element (mounts, i);
      JsonObject *m = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;

      if (m != NULL && g_strcmp0 (nz_json_get_string (m, "label"), "outputs") == 0
          && nz_json_get_string (m, "containerPath") != NULL)
        outputs = nz_json_get_string (m, "containerPath");
    }
  if (outputs == NULL)
    outputs = nz_json_get_string (h->priv, "rootDir");
  /* Docker always mounts outputs; a handle that recorded no path has it at the default. */
  out->collected_dir = g_strdup (outputs != NULL ? outputs : NZ_LAYOUT_OUTPUTS_PATH);
  out->collected_name = "docker outputs bind";
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
  /* An allowlist (and its live change) exists only where a proxy container was planned. */
  json_object_set_boolean_member (caps, "egressAllowlist",
                                  nz_json_get_object (h->priv, "egress") != NULL);
  json_object_set_boolean_member (caps, "setNetworkPolicy",
                                  nz_json_get_object (h->priv, "egress") != NULL);
  json_object_set_boolean_member (caps, "persistentAfterCreate", TRUE);
  json_object_set_object_member (pub, "capabilities", caps);
}
