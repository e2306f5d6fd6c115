/* microvm:kubernetes: task sandboxes on the agent-sandbox controller (spec D.4-D.7). */
#include "nz-kube-backend.h"
#include "nz-kube-internal.h"

#include <string.h>

#include "nz-agent-client.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-egress-k8s.h"
#include "nz-kube-client.h"
#include "nz-kube-egress.h"
#include "nz-kube-net.h"
#include "nz-kube-ingress.h"
#include "nz-kube-union.h"
#include "nz-kube-probe.h"
#include "nz-kube-task-egress.h"
#include "nz-kube-workspace.h"
#include "nz-kube-ws.h"

/* spec D.7: a rebind reads the pod with its own timeout, no caller's deadline. */
#define REBIND_READ_TIMEOUT_MS 10000
/* A status read (namzu-ls) is bounded like a healthz. */
#define STATUS_API_TIMEOUT_MS 5000

/* ---- small JSON helpers ------------------------------------------------------------------ */

static JsonObject *
obj_path (JsonObject *o, const char *a, const char *b)
{
  JsonObject *x = o != NULL ? nz_json_get_object (o, a) : NULL;

  return b == NULL || x == NULL ? x : nz_json_get_object (x, b);
}

static const char *
str_path (JsonObject *o, const char *a, const char *b, const char *c)
{
  JsonObject *x = obj_path (o, a, c != NULL ? b : NULL);

  return x != NULL ? nz_json_get_string (x, c != NULL ? c : b) : NULL;
}

static char *
rfc3339_ms (gint64 ms)
{
  g_autoptr (GDateTime) t = g_date_time_new_from_unix_utc (ms / 1000);

  return g_date_time_format (t, "%Y-%m-%dT%H:%M:%SZ");
}

/* The Ready condition: 1 True, 0 False/Unknown, -1 absent. @reason/@message borrowed. */
static int
ready_condition (JsonObject *obj, const char **reason, const char **message)
{
  JsonArray *conds = nz_json_get_array (obj_path (obj, "status", NULL), "conditions");

  for (guint i = 0; conds != NULL && i < json_array_get_length (conds); i++)
    {
      JsonNode *n = json_array_get_element (conds, i);
      JsonObject *c = JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;

      if (c == NULL || g_strcmp0 (nz_json_get_string (c, "type"), "Ready") != 0)
        continue;
      if (reason != NULL)
        *reason = nz_json_get_string (c, "reason");
      if (message != NULL)
        *message = nz_json_get_string (c, "message");
      return g_strcmp0 (nz_json_get_string (c, "status"), "True") == 0 ? 1 : 0;
    }
  return -1;
}

/* The first podIPs entry of a Sandbox's (or a claim's status.sandbox) status: strings or
 * {ip} objects. */
static const char *
first_pod_ip (JsonObject *status)
{
  JsonArray *ips = status != NULL ? nz_json_get_array (status, "podIPs") : NULL;
  JsonNode *n
      = ips != NULL && json_array_get_length (ips) > 0 ? json_array_get_element (ips, 0) : NULL;

  if (n == NULL)
    return NULL;
  if (JSON_NODE_HOLDS_OBJECT (n))
    return nz_json_get_string (json_node_get_object (n), "ip");
  return nz_json_node_string (n);
}

/* An address we put into an endpoint: a host name or an IP, nothing that could change the
 * endpoint's shape (the reply it came from is the cluster's, not ours). */
gboolean
nz_kube_address_is_sane (const char *a)
{
  gsize n = a != NULL ? strlen (a) : 0;

  if (n == 0 || n > 253)
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_isalnum (a[i]) || a[i] == '-' || a[i] == '.' || a[i] == ':'))
      return FALSE;
  return TRUE;
}

char *
nz_kube_agent_endpoint (const char *host, guint port)
{
  if (strchr (host, ':') != NULL)
    return g_strdup_printf ("tcp:[%s]:%u", host, port);
  return g_strdup_printf ("tcp:%s:%u", host, port);
}

/* ---- cluster access from a handle --------------------------------------------------------- */

NzKubeClient *
nz_kube_client_for (JsonObject *access_spec, const char *expect_server, guint timeout_ms,
                    GError **error)
{
  g_autoptr (GError) local = NULL;
  NzKubeAccess *access = nz_kube_access_open (access_spec, &local);

  if (access == NULL)
    {
      nz_kube_error_convert (&local);
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  for (guint i = 0; access->warnings != NULL && i < access->warnings->len; i++)
    g_printerr ("namzu: warning: %s\n", (const char *)access->warnings->pdata[i]);
  /* The handle was made on one API server; a kubeconfig that now points elsewhere must not
   * quietly act on another cluster. */
  if (expect_server != NULL && g_strcmp0 (access->server, expect_server) != 0)
    {
      nz_throw (error, NZ_ERROR_INVALID_ARGS,
                "kubernetes: the cluster access now names API server %s, but the sandbox was "
                "created on %s; use the kubeconfig and context it was created with",
                access->server, expect_server);
      nz_kube_access_free (access);
      return NULL;
    }
  return nz_kube_client_new (access, timeout_ms, error);
}

NzKubeClient *
nz_kube_handle_client (NzHandle *h, guint timeout_ms, GError **error)
{
  JsonObject *spec = nz_json_get_object (h->priv, "access");

  if (spec == NULL)
    return (nz_throw (error, NZ_ERROR_FAILED, "sandbox '%s' records no cluster access", h->id),
            NULL);
  return nz_kube_client_for (spec, nz_json_get_string (h->priv, "server"), timeout_ms, error);
}

static gboolean kube_fail (GError **error, GError *local, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

/* Moves a NZ_KUBE_ERROR into NZ_ERROR with a prefix. Always FALSE. */
static gboolean
kube_fail (GError **error, GError *local, const char *fmt, ...)
{
  g_autofree char *prefix = NULL;
  va_list ap;

  nz_kube_error_convert (&local);
  va_start (ap, fmt);
  prefix = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_prefix_error (&local, "%s: ", prefix);
  g_propagate_error (error, local);
  return FALSE;
}

/* The path of the object a handle owns (its claim or Sandbox). */
static char *
owner_path (JsonObject *priv)
{
  gboolean claim = g_strcmp0 (nz_json_get_string (priv, "objectKind"), "SandboxClaim") == 0;

  return nz_kube_path (claim ? NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP : NZ_KUBE_SANDBOX_API_GROUP,
                       NZ_KUBE_SANDBOX_API_VERSION, nz_json_get_string (priv, "namespace"),
                       claim ? "sandboxclaims" : "sandboxes", nz_json_get_string (priv, "object"));
}

/* DELETE; 404/410 count as done (spec D.6.3). */
static gboolean
release (NzKubeClient *client, JsonObject *priv, GError **error)
{
  g_autofree char *path = owner_path (priv);
  GError *local = NULL;

  if (nz_kube_delete (client, path, NULL, &local))
    return TRUE;
  if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
    {
      g_error_free (local);
      return TRUE;
    }
  return kube_fail (error, local, "kubernetes: release of %s %s",
                    nz_json_get_string (priv, "objectKind"), nz_json_get_string (priv, "object"));
}

/* ---- check ---------------------------------------------------------------------------------- */

gboolean
nz_kube_backend_check (const NzCreateOptions *opts, GError **error)
{
  const NzKubeOptions *k = nz_kube_options (opts);
  g_autoptr (GPtrArray) labels = g_ptr_array_new ();
  g_autofree char *list = NULL;

  /* spec D.4 assertEnforceable: what a claim could only carry by going cold. */
  if (opts->network != NZ_NETWORK_DENY_ALL || opts->egress_hosts->len > 0
      || opts->egress_profile != NULL || opts->egress_credentials != NULL)
    g_ptr_array_add (labels, "egress");
  if (opts->memory_mb > 0)
    g_ptr_array_add (labels, "memoryLimitMb");
  if (opts->max_processes > 0)
    g_ptr_array_add (labels, "maxProcesses");
  if (opts->env->len > 0)
    g_ptr_array_add (labels, "env");
  if (labels->len > 0)
    {
      g_ptr_array_add (labels, NULL);
      list = g_strjoinv (", ", (char **)labels->pdata);
      return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                       "The kubernetes sandbox backend cannot enforce per-sandbox %s: a "
                       "SandboxClaim carrying env or volumes is forced to cold-start, so limits, "
                       "environment and network come from the SandboxTemplate and the "
                       "namespace's policies (egress: backend.egress)",
                       list);
    }
  /* namzu's own settings a pod cannot take from a host either. */
  if (opts->mounts->len > 0)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "layout: microvm:kubernetes cannot bind host directories into a pod (the "
                     "host is not the node); copy files in with namzu-cp");
  if (opts->cpus > 0 || opts->disk_mb > 0)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "%s: microvm:kubernetes takes resources from the SandboxTemplate's pod spec",
                     opts->cpus > 0 ? "cpus" : "diskMb");
  if (opts->writable_paths->len > 0 || !opts->read_only_rootfs)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "writableRootfsPaths/readOnlyRootfs: microvm:kubernetes takes the root "
                     "filesystem from the SandboxTemplate's pod spec");
  if (opts->idle_timeout_ms > 0)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "idleTimeoutMs: microvm:kubernetes has no idle timeout; its lease "
                     "(claimTtlSeconds) ends a sandbox nobody uses");
  if (opts->agent_shares_uid)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "--agent-shares-uid is a container:bwrap setting");
  if (opts->image != NULL)
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "image: microvm:kubernetes runs the SandboxTemplate's image");
  if (k->template_name == NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "backend.sandboxTemplateName (--template): is required: the SandboxTemplate "
                     "the pod comes from");
  /* spec D.4: a pooled pod's spec comes from the pool. */
  if (k->runtime_class != NULL && k->warm_pool != NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "backend.runtimeClassName: refused together with warmPoolName: a pooled "
                     "pod's spec comes from its warm pool's template (set runtimeClassName "
                     "there)");
  if (!nz_kube_ws_check (opts, error))
    return FALSE;
  if (k->egress != NULL)
    {
      g_autoptr (NzEgressK8sConfig) egress = nz_kube_net_egress_config (k, error);

      if (egress == NULL)
        return FALSE;
      /* spec D.8.3: a workspace has no setNetworkPolicy, so the option is refused rather
       * than dropped. */
      if (k->workspace_id != NULL && egress->per_sandbox)
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "KubernetesWorkspacePerSandboxEgressConfigError: "
                         "backend.egress.perSandbox: a workspace has no setNetworkPolicy, so it "
                         "cannot take per-sandbox egress; leave perSandbox out of a --workspace "
                         "create. Nothing was created.");
    }
  return TRUE;
}

/* ---- create --------------------------------------------------------------------------------- */

typedef struct
{
  const NzCreateOptions *opts;
  const NzKubeOptions *k;
  NzKubeClient *client;
  const char *ns;
  gint64 deadline;  /* monotonic us: one deadline for the whole path (spec D.6.1) */
  guint timeout_ms; /* readyTimeoutMs */
  guint poll_ms;
  const char *label;      /* "SandboxClaim namzu-task-..." for messages */
  JsonObject *pod_labels; /* backend.egress's profile label (spec D.10.6), or NULL */
} Acquire;

/* spec D.10.6 KubernetesPodLabelNotObservedError: the claimed pod carries every label the
 * claim asked for in spec.additionalPodMetadata (the egress profile and per-sandbox labels the
 * policies select). A controller that dropped them leaves the pod outside those policies. */
static gboolean
labels_observed (Acquire *a, JsonObject *labels, const char *pod, GError **error)
{
  JsonObjectIter it;
  const char *k;
  JsonNode *v;

  if (a->pod_labels == NULL)
    return TRUE;
  json_object_iter_init (&it, a->pod_labels);
  while (json_object_iter_next (&it, &k, &v))
    if (labels == NULL || g_strcmp0 (nz_json_get_string (labels, k), json_node_get_string (v)) != 0)
      return nz_throw (error, NZ_ERROR_FAILED,
                       "KubernetesPodLabelNotObservedError: pod %s/%s of %s lacks the label "
                       "%s=%s its claim asked for (spec.additionalPodMetadata.labels); the "
                       "egress policies that select it would not apply. The agent-sandbox "
                       "controller's allowed-label-domains (ConfigMap agent-sandbox-config in "
                       "agent-sandbox-system) must include sandbox.namzu.ai",
                       a->ns, pod, a->label, k, json_node_get_string (v));
  return TRUE;
}

static gboolean
past_deadline (Acquire *a, GError **error)
{
  if (a->opts->interrupted != NULL && *a->opts->interrupted)
    return !nz_throw (error, NZ_ERROR_FAILED, "interrupted while the sandbox was starting");
  if (g_get_monotonic_time () >= a->deadline)
    return !nz_throw (error, NZ_ERROR_TIMED_OUT, "kubernetes: %s never became Ready (%ums)",
                      a->label, a->timeout_ms);
  return FALSE;
}

static void
pause_poll (Acquire *a)
{
  gint64 left = a->deadline - g_get_monotonic_time ();

  if (a->opts->waiting != NULL)
    a->opts->waiting (a->opts->waiting_data);
  g_usleep (MAX (0, MIN (left, (gint64)a->poll_ms * 1000)));
}

static JsonObject *
build_claim (Acquire *a, const char *name, const char *shutdown)
{
  JsonObject *meta;
  JsonObject *claim
      = nz_kube_object_new (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION,
                            "SandboxClaim", a->ns, name, &meta);
  JsonObject *spec = json_object_new ();
  JsonObject *pool = json_object_new ();
  JsonObject *life = json_object_new ();

  /* spec D.4 claimLabels: the claim's metadata.labels only, never the pod's. */
  if (a->k->claim_labels != NULL)
    json_object_set_object_member (meta, "labels", json_object_ref (a->k->claim_labels));
  json_object_set_string_member (pool, "name", a->k->warm_pool);
  json_object_set_object_member (spec, "warmPoolRef", pool);
  json_object_set_string_member (life, "shutdownTime", shutdown);
  json_object_set_string_member (life, "shutdownPolicy", "Delete");
  json_object_set_object_member (spec, "lifecycle", life);
  /* The profile label is warm-safe here (spec D.10.6), unlike env or volumes. */
  if (a->pod_labels != NULL)
    {
      JsonObject *extra = json_object_new ();

      json_object_set_object_member (extra, "labels", json_object_ref (a->pod_labels));
      json_object_set_object_member (spec, "additionalPodMetadata", extra);
    }
  /* Never env, volumeClaimTemplates or other pod metadata: they force a cold start. */
  json_object_set_object_member (claim, "spec", spec);
  return claim;
}

/* Pool-less: the template's pod template with the template label merged in (ours wins) and
 * the runtimeClassName overlay; its volumeClaimTemplates verbatim. */
static JsonObject *
build_sandbox (Acquire *a, JsonObject *tpl, const char *name, const char *shutdown, GError **error)
{
  JsonObject *tspec = obj_path (tpl, "spec", NULL);
  JsonObject *ptpl = tspec != NULL ? nz_json_get_object (tspec, "podTemplate") : NULL;
  JsonObject *sb, *spec, *pt, *pmeta, *labels;
  JsonNode *copy;

  if (ptpl == NULL || nz_json_get_object (ptpl, "spec") == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "kubernetes: SandboxTemplate %s/%s has no spec.podTemplate.spec", a->ns,
                      a->k->template_name),
            NULL);
  copy = json_node_copy (json_object_get_member (tspec, "podTemplate"));
  pt = json_node_dup_object (copy);
  json_node_unref (copy);
  pmeta = nz_json_get_object (pt, "metadata");
  if (pmeta == NULL)
    {
      pmeta = json_object_new ();
      json_object_set_object_member (pt, "metadata", pmeta);
    }
  labels = nz_json_get_object (pmeta, "labels");
  if (labels == NULL)
    {
      labels = json_object_new ();
      json_object_set_object_member (pmeta, "labels", labels);
    }
  json_object_set_string_member (labels, NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY, a->k->template_name);
  if (a->pod_labels != NULL)
    {
      g_autoptr (GList) keys = json_object_get_members (a->pod_labels);

      for (GList *l = keys; l != NULL; l = l->next)
        json_object_set_string_member (labels, l->data,
                                       nz_json_get_string (a->pod_labels, l->data));
    }
  if (a->k->runtime_class != NULL)
    json_object_set_string_member (nz_json_get_object (pt, "spec"), "runtimeClassName",
                                   a->k->runtime_class);

  sb = nz_kube_object_new (NZ_KUBE_SANDBOX_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION, "Sandbox",
                           a->ns, name, NULL);
  spec = json_object_new ();
  json_object_set_string_member (spec, "operatingMode", "Running");
  json_object_set_object_member (spec, "podTemplate", pt);
  json_object_set_boolean_member (spec, "service", TRUE);
  json_object_set_string_member (spec, "shutdownTime", shutdown);
  json_object_set_string_member (spec, "shutdownPolicy", "Delete");
  if (json_object_has_member (tspec, "volumeClaimTemplates"))
    json_object_set_member (
        spec, "volumeClaimTemplates",
        json_node_copy (json_object_get_member (tspec, "volumeClaimTemplates")));
  json_object_set_object_member (sb, "spec", spec);
  return sb;
}

/* Polls the claim or Sandbox until Ready=True (no watch). Returns the last read. */
static JsonObject *
wait_ready (Acquire *a, const char *path, gboolean claim, GError **error)
{
  for (;;)
    {
      GError *local = NULL;
      g_autoptr (JsonObject) obj = nz_kube_get (a->client, path, &local);
      const char *reason = NULL, *message = NULL;

      if (obj == NULL)
        {
          /* Gone while we waited: the cluster took it away (a rejected claim, a reaper). */
          kube_fail (error, local, "%s", a->label);
          return NULL;
        }
      switch (ready_condition (obj, &reason, &message))
        {
        case 1:
          return g_steal_pointer (&obj);
        case 0:
          /* spec D.10.6: the controller refused the claim's pod labels. */
          if (claim && g_strcmp0 (reason, "InvalidMetadata") == 0)
            return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                              "kubernetes: %s was rejected by the controller (claim-rejected, "
                              "InvalidMetadata): %s; the agent-sandbox-config ConfigMap's "
                              "allowed-label-domains must include sandbox.namzu.ai",
                              a->label, message != NULL ? message : "no message"),
                    NULL);
          break;
        default:
          break;
        }
      if (past_deadline (a, error))
        return NULL;
      pause_poll (a);
    }
}

typedef struct
{
  char *uid, *ip, *name;
  JsonObject *labels; /* the pod's metadata.labels, or NULL */
} BoundPod;

static void
bound_pod_clear (BoundPod *p)
{
  g_clear_pointer (&p->uid, g_free);
  g_clear_pointer (&p->ip, g_free);
  g_clear_pointer (&p->name, g_free);
  g_clear_pointer (&p->labels, json_object_unref);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (BoundPod, bound_pod_clear)

static gboolean
take_pod (JsonObject *pod, BoundPod *out)
{
  const char *uid = str_path (pod, "metadata", "uid", NULL);

  if (uid == NULL || *uid == '\0' || !nz_kube_pod_is_live (pod))
    return FALSE;
  out->uid = g_strdup (uid);
  out->ip = g_strdup (nz_kube_pod_ip (pod));
  out->name = g_strdup (str_path (pod, "metadata", "name", NULL));
  out->labels = obj_path (pod, "metadata", "labels") != NULL
                    ? json_object_ref (obj_path (pod, "metadata", "labels"))
                    : NULL;
  return TRUE;
}

/* spec D.6.1 readBoundPod: the pod named after the Sandbox, else the first live pod of the
 * Sandbox's status.selector; the uid is the agent's token, so no uid is a refusal. */
static gboolean
read_bound_pod (NzKubeClient *client, const char *ns, const char *sandbox, BoundPod *out,
                GError **error)
{
  g_autofree char *pod_path = nz_kube_path (NULL, "v1", ns, "pods", sandbox);
  g_autoptr (JsonObject) pod = nz_kube_get (client, pod_path, NULL);
  g_autofree char *sb_path = NULL;
  g_autoptr (JsonObject) sb = NULL;
  const char *selector;

  if (pod != NULL && take_pod (pod, out))
    return TRUE;
  sb_path = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, ns, "sandboxes",
                          sandbox);
  sb = nz_kube_get (client, sb_path, NULL);
  selector = str_path (sb, "status", "selector", NULL);
  if (selector != NULL && *selector != '\0')
    {
      g_autofree char *pods = nz_kube_path (NULL, "v1", ns, "pods", NULL);
      g_autofree char *esc = g_uri_escape_string (selector, NULL, FALSE);
      g_autofree char *list_path = g_strdup_printf ("%s?labelSelector=%s", pods, esc);
      g_autoptr (JsonObject) list = nz_kube_get (client, list_path, NULL);
      JsonArray *items = nz_json_get_array (list, "items");

      for (guint i = 0; items != NULL && i < json_array_get_length (items); i++)
        {
          JsonNode *n = json_array_get_element (items, i);

          if (JSON_NODE_HOLDS_OBJECT (n) && take_pod (json_node_get_object (n), out))
            return TRUE;
        }
    }
  return nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                   "kubernetes: could not read a pod uid for sandbox %s/%s (neither the pod "
                   "named after it nor a live pod of its status.selector): the uid is the "
                   "agent's token, so the sandbox is refused rather than returned "
                   "unauthenticated",
                   ns, sandbox);
}

static void
collect_stdout (NzExecStream stream, const char *data, gsize len, gpointer user_data)
{
  GString *out = user_data;

  /* Bounded by the body's maxOutputBytes; stderr is not the probe's. */
  if (stream == NZ_EXEC_STDOUT)
    g_string_append_len (out, data, len);
}

/* spec D.6.1 privilege probe. */
static gboolean
privilege_probe (NzAgentClient *c, guint timeout_ms, GError **error)
{
  g_autoptr (JsonObject) body = json_object_new ();
  g_autoptr (JsonArray) args = json_array_new ();
  g_autoptr (JsonObject) res = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  g_autofree char *what = NULL;
  GError *local = NULL;
  NzKubeProbeVerdict v;
  double code = -1;

  json_array_add_string_element (args, "/proc/self/status");
  json_object_set_string_member (body, "command", "cat");
  json_object_set_array_member (body, "args", g_steal_pointer (&args));
  json_object_set_int_member (body, "timeoutMs", timeout_ms);
  json_object_set_int_member (body, "maxOutputBytes", 64 * 1024);
  res = nz_agent_client_exec (c, body, collect_stdout, out, NULL, NULL, &local);
  if (res == NULL)
    {
      g_prefix_error (&local, "kubernetes privilege probe: ");
      g_propagate_error (error, local);
      return FALSE;
    }
  if (nz_json_get_bool (res, "timedOut", FALSE))
    return nz_throw (error, NZ_ERROR_TIMED_OUT,
                     "kubernetes privilege probe: cat /proc/self/status did not finish within "
                     "%ums (probe timeout)",
                     timeout_ms);
  if (!nz_json_get_number (res, "exitCode", &code) || code != 0)
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                     "kubernetes privilege probe failed (probe-failed): cat /proc/self/status "
                     "exited %g",
                     code);
  v = nz_kube_probe_judge (out->str, &what);
  if (v != NZ_KUBE_PROBE_OK)
    return nz_throw (error, NZ_ERROR_PERMISSION_DENIED,
                     "kubernetes privilege probe refused the pod (%s): %s; the agent must run "
                     "with no capabilities and no_new_privs (see deploy/k8s)",
                     nz_kube_probe_reason (v), what);
  return TRUE;
}

gboolean
nz_kube_agent_up (NzHandle *h, guint ready_ms, guint probe_ms, const char *label, GError **error)
{
  g_autoptr (NzAgentClient) agent = nz_agent_client_new (h->endpoint, h->token);
  const char *const *features;
  JsonArray *arr;
  const char *boot;

  if (!nz_agent_client_wait_ready (agent, ready_ms, error))
    return nz_prefix_error (error, "kubernetes: the agent of %s at %s", label, h->endpoint);
  if (!privilege_probe (agent, probe_ms, error))
    return FALSE;
  features = nz_agent_client_get_features (agent);
  arr = json_array_new ();
  for (guint i = 0; features != NULL && features[i] != NULL; i++)
    json_array_add_string_element (arr, features[i]);
  json_object_set_array_member (h->priv, "features", arr);
  /* spec D.8.10: a guest restart shows as a new guestBootId (on an authenticated reply;
   * healthz has none): the probe's reserve reply carries it (spec A.10). Else, best effort, a
   * stat-file; an agent without file ops has none to give. */
  boot = nz_agent_client_get_guest_boot_id (agent);
  if (boot != NULL)
    json_object_set_string_member (h->priv, "guestBootId", boot);
  else if (nz_agent_client_has_feature (agent, "file-ops"))
    {
      g_autoptr (JsonObject) body = json_object_new ();
      g_autoptr (JsonObject) st = NULL;

      json_object_set_string_member (body, "path", ".");
      st = nz_agent_client_call (agent, "stat-file", body, NULL, NULL);
      boot = st != NULL ? nz_json_get_string (st, "guestBootId") : NULL;
      if (boot != NULL)
        json_object_set_string_member (h->priv, "guestBootId", boot);
    }
  return TRUE;
}

NzKubeClient *
nz_kube_create_begin (const NzCreateOptions *opts, NzHandle *h, JsonObject *access_spec,
                      const char *kind, const char *object, const char **ns, GError **error)
{
  const NzKubeOptions *k = nz_kube_options (opts);
  g_autoptr (NzKubeClient) client
      = nz_kube_client_for (access_spec, NULL, k->api_timeout_ms, error);
  NzKubeAccess *access;

  if (client == NULL)
    return NULL;
  access = nz_kube_client_get_access (client);
  *ns = k->namespace != NULL ? k->namespace : access->namespace;
  if (*ns == NULL)
    return (nz_throw (error, NZ_ERROR_INVALID_ARGS,
                      "backend.namespace (--namespace): is required (the kubeconfig context "
                      "names none)"),
            NULL);
  h->id = nz_state_new_id ();
  h->backend = g_strdup (NZ_KUBE_BACKEND_NAME);
  h->tier = g_strdup ("microvm");
  h->created_at_ms = g_get_real_time () / 1000;
  nz_handle_set_lifetime (h, opts);
  json_object_set_object_member (h->priv, "access", json_object_ref (access_spec));
  json_object_set_string_member (h->priv, "server", access->server);
  json_object_set_string_member (h->priv, "namespace", *ns);
  json_object_set_string_member (h->priv, "objectKind", kind);
  json_object_set_string_member (h->priv, "object", object);
  json_object_set_string_member (h->priv, "template", k->template_name);
  json_object_set_string_member (h->priv, "agentAddress", k->pod_ip ? "pod-ip" : "service");
  json_object_set_int_member (h->priv, "agentPort",
                              k->agent_port != 0 ? k->agent_port : NZ_KUBE_AGENT_PORT_DEFAULT);
  if (k->api_timeout_ms != 0)
    json_object_set_int_member (h->priv, "apiRequestTimeoutMs", k->api_timeout_ms);
  json_object_set_int_member (h->priv, "streamHeartbeatMs",
                              k->heartbeat_ms >= 0 ? k->heartbeat_ms
                                                   : NZ_KUBE_STREAM_HEARTBEAT_MS_DEFAULT);
  return g_steal_pointer (&client);
}

static gint64
lease_end_ms (const NzCreateOptions *opts, gint64 created_ms, gint64 now_ms, gint64 ttl_s)
{
  gint64 end = now_ms + ttl_s * 1000;

  /* --ttl (namzu's hard lifetime) caps the lease: never renewed past it. */
  if (opts != NULL && opts->ttl_ms > 0)
    end = MIN (end, created_ms + opts->ttl_ms);
  /* shutdownTime is whole seconds: the end recorded is the one the cluster acts on. */
  return end - end % 1000;
}

NzHandle *
nz_kube_backend_create (const NzCreateOptions *opts, GError **error)
{
  const NzKubeOptions *k = nz_kube_options (opts);
  g_autoptr (NzHandle) h = nz_handle_new ();
  g_autoptr (JsonObject) access_spec = nz_kube_access_spec (k);
  g_autoptr (NzKubeClient) client = NULL;
  g_autoptr (JsonObject) posted = NULL;
  g_autoptr (JsonObject) ready = NULL;
  g_auto (BoundPod) pod = { 0 };
  g_autoptr (JsonObject) pod_labels = NULL;
  g_auto (NzKubeNet) net = { 0 };
  g_autofree char *uuid = g_uuid_string_random ();
  g_autofree char *name = g_strconcat (NZ_KUBE_TASK_NAME_PREFIX, uuid, NULL);
  g_autofree char *label = NULL;
  g_autofree char *path = NULL;
  g_autofree char *shutdown = NULL;
  g_autofree char *address = NULL;
  g_autofree char *sandbox = NULL;
  gboolean claim = k->warm_pool != NULL;
  const char *claim_api = NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION;
  const char *sandbox_api = NZ_KUBE_SANDBOX_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION;
  GError *local = NULL;
  Acquire a = { opts, k };
  gint64 now_ms, lease_end;
  guint port = k->agent_port != 0 ? k->agent_port : NZ_KUBE_AGENT_PORT_DEFAULT;
  gint64 ttl_s = k->claim_ttl_s > 0 ? k->claim_ttl_s : NZ_KUBE_CLAIM_TTL_S_DEFAULT;

  if (k->workspace_id != NULL)
    return nz_kube_ws_create (opts, error);
  client = nz_kube_create_begin (opts, h, access_spec, claim ? "SandboxClaim" : "Sandbox", name,
                                 &a.ns, error);
  if (client == NULL)
    return NULL;
  a.client = client;
  if (!nz_kube_net_begin (&net, client, k, a.ns, k->template_name, TRUE, error))
    return NULL;
  if (net.egress != NULL)
    {
      /* The profile and per-sandbox labels (spec D.10.6, D.10.8), warm-safe on a claim:
       * composed (a collision refused) before anything is asked of the cluster. */
      if ((pod_labels = nz_kube_task_egress_pod_labels (net.egress, name, error)) == NULL)
        return NULL;
      a.pod_labels = json_object_get_size (pod_labels) > 0 ? pod_labels : NULL;
      nz_kube_task_egress_record (net.egress, k->egress, h);
    }
  /* spec D.10.7: the named policy, before anything is created. */
  if (!nz_kube_net_verify_named (&net, error))
    return NULL;
  a.timeout_ms = k->ready_timeout_ms != 0 ? k->ready_timeout_ms : NZ_KUBE_READY_TIMEOUT_MS_DEFAULT;
  a.poll_ms = k->ready_poll_ms != 0 ? k->ready_poll_ms : NZ_KUBE_READY_POLL_MS_DEFAULT;
  a.deadline = g_get_monotonic_time () + (gint64)a.timeout_ms * 1000;
  label = g_strdup_printf ("%s %s/%s", claim ? "SandboxClaim" : "Sandbox", a.ns, name);
  a.label = label;
  now_ms = h->created_at_ms;
  lease_end = lease_end_ms (opts, h->created_at_ms, now_ms, ttl_s);
  shutdown = rfc3339_ms (lease_end);
  if (claim)
    json_object_set_string_member (h->priv, "warmPool", k->warm_pool);
  json_object_set_string_member (h->priv, "objectApiVersion", claim ? claim_api : sandbox_api);
  json_object_set_int_member (h->priv, "claimTtlSeconds", ttl_s);
  json_object_set_int_member (h->priv, "leaseRenewedAt", now_ms);
  json_object_set_int_member (h->priv, "leaseExpiresAt", lease_end);
  /* Recorded before the object exists, so a crash between the POST and the end still leaves
   * namzu-destroy something to release. */
  if (!nz_handle_make_dir (h, error) || !nz_handle_save (h, error))
    {
      if (h->dir != NULL)
        nz_handle_remove_dir (h, NULL);
      return NULL;
    }

  if (claim)
    {
      g_autoptr (JsonObject) body = build_claim (&a, name, shutdown);
      g_autofree char *coll
          = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, a.ns,
                          "sandboxclaims", NULL);

      posted = nz_kube_create (client, coll, body, &local);
    }
  else
    {
      g_autofree char *tpl_path
          = nz_kube_path (NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, a.ns,
                          "sandboxtemplates", k->template_name);
      g_autoptr (JsonObject) tpl = nz_kube_get (client, tpl_path, &local);
      g_autoptr (JsonObject) body = NULL;

      if (tpl != NULL && (body = build_sandbox (&a, tpl, name, shutdown, &local)) != NULL
          && nz_kube_net_pods_ok (
              &net,
              obj_path (obj_path (obj_path (body, "spec", NULL), "podTemplate", "metadata"),
                        "labels", NULL),
              &local))
        {
          g_autofree char *coll = nz_kube_path (
              NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION, a.ns, "sandboxes", NULL);

          posted = nz_kube_create (client, coll, body, &local);
        }
    }
  if (posted == NULL)
    {
      /* Nothing was created (or the POST's outcome is unknown: release anyway). */
      release (client, h->priv, NULL);
      nz_handle_remove_dir (h, NULL);
      kube_fail (error, local, "%s", label);
      return NULL;
    }
  json_object_set_string_member (
      h->priv, "objectUid",
      str_path (posted, "metadata", "uid", NULL) ? str_path (posted, "metadata", "uid", NULL) : "");
  path = owner_path (h->priv);
  ready = wait_ready (&a, path, claim, &local);
  if (ready != NULL)
    {
      JsonObject *st = obj_path (ready, "status", NULL);
      JsonObject *where = claim ? obj_path (ready, "status", "sandbox") : st;
      const char *fqdn = where != NULL ? nz_json_get_string (where, "serviceFQDN") : NULL;

      sandbox
          = g_strdup (claim ? (where != NULL ? nz_json_get_string (where, "name") : NULL) : name);
      if (sandbox == NULL || *sandbox == '\0')
        nz_throw (&local, NZ_ERROR_PROTOCOL,
                  "SandboxClaim %s reported Ready but named no sandbox in status.sandbox.name",
                  name);
      else if (read_bound_pod (client, a.ns, sandbox, &pod, &local)
               /* spec D.6.1: a claim's pod labels are known only now. */
               && (!claim
                   || (labels_observed (&a, pod.labels, pod.name != NULL ? pod.name : sandbox,
                                        &local)
                       && nz_kube_net_pods_ok (&net, pod.labels, &local))))
        {
          if (k->pod_ip)
            {
              /* spec D.6.1: the live pod's IP, polled until present. */
              while (pod.ip == NULL && !past_deadline (&a, &local))
                {
                  pause_poll (&a);
                  bound_pod_clear (&pod);
                  if (!read_bound_pod (client, a.ns, sandbox, &pod, &local))
                    break;
                }
              address = g_strdup (pod.ip);
            }
          else
            {
              address = g_strdup (fqdn != NULL && *fqdn != '\0' ? fqdn : first_pod_ip (where));
              if (address == NULL && local == NULL)
                nz_throw (&local, NZ_ERROR_INVALID_ARGS,
                          "kubernetes: sandbox %s/%s reports neither status.serviceFQDN nor a pod "
                          "IP to reach its agent at. Set 'service: true' on the SandboxTemplate, "
                          "or use agentAddress: 'pod-ip'",
                          a.ns, sandbox);
            }
          if (address != NULL && !nz_kube_address_is_sane (address))
            {
              nz_throw (&local, NZ_ERROR_PROTOCOL,
                        "kubernetes: sandbox %s/%s reports an agent address that is no host "
                        "name or IP",
                        a.ns, sandbox);
              g_clear_pointer (&address, g_free);
            }
        }
    }
  if (address != NULL && local == NULL)
    {
      gint64 left_ms = (a.deadline - g_get_monotonic_time ()) / 1000;

      h->endpoint = nz_kube_agent_endpoint (address, port);
      h->token = g_strdup (pod.uid);
      json_object_set_string_member (h->priv, "sandbox", sandbox);
      json_object_set_string_member (h->priv, "pod", pod.name != NULL ? pod.name : sandbox);
      /* The agent answers once its pod is up; within the one deadline. */
      if (left_ms <= 0)
        nz_throw (&local, NZ_ERROR_TIMED_OUT, "kubernetes: %s never became Ready (%ums)", label,
                  a.timeout_ms);
      else
        nz_kube_agent_up (h, (guint)left_ms, MIN (a.timeout_ms, NZ_KUBE_PROBE_TIMEOUT_MS_MAX),
                          label, &local);
    }
  else if (local == NULL && ready == NULL)
    nz_throw (&local, NZ_ERROR_FAILED, "kubernetes: %s did not start", label);
  /* A slow start may have spent half the lease already: renewed before anyone relies on it. */
  if (local != NULL || !nz_handle_save (h, &local) || !nz_kube_lease_renew (h, &local))
    {
      /* spec D.6.1: any failure along the way releases what was created. */
      g_autoptr (GError) rel = NULL;

      if (!release (client, h->priv, &rel))
        g_printerr ("namzu: warning: %s\n", rel->message);
      nz_handle_remove_dir (h, NULL);
      nz_error_convert (&local);
      g_propagate_error (error, local);
      return NULL;
    }
  return g_steal_pointer (&h);
}

/* ---- destroy, status, describe ------------------------------------------------------------ */

gint64
nz_kube_priv_int (JsonObject *priv, const char *member)
{
  double v = 0;

  return nz_json_get_number (priv, member, &v) ? (gint64)v : 0;
}

/* apiRequestTimeoutMs as the create recorded it (0: the client's default). */
guint
nz_kube_handle_api_timeout (NzHandle *h)
{
  return (guint)CLAMP (nz_kube_priv_int (h->priv, "apiRequestTimeoutMs"), 0, G_MAXINT32);
}

gboolean
nz_kube_backend_destroy (NzHandle *h, GError **error)
{
  g_autoptr (NzKubeClient) client = NULL;

  if (nz_kube_ws_is (h))
    return nz_kube_ws_destroy (h, error);
  client = nz_kube_handle_client (h, nz_kube_handle_api_timeout (h), error);
  if (client == NULL || !release (client, h->priv, error))
    return nz_prefix_error (error, "sandbox '%s' is not released", h->id);
  return nz_handle_remove_dir (h, error);
}

NzSandboxStatus
nz_kube_backend_status (NzHandle *h, guint timeout_ms)
{
  gint64 now = g_get_real_time () / 1000;
  gint64 expires = nz_kube_priv_int (h->priv, "leaseExpiresAt");
  g_autoptr (NzKubeClient) client = NULL;
  g_autoptr (JsonObject) obj = NULL;
  g_autoptr (NzAgentClient) agent = NULL;
  g_autoptr (JsonObject) hz = NULL;
  g_autofree char *path = NULL;
  GError *local = NULL;

  if (nz_kube_ws_is (h))
    return nz_kube_ws_status (h);
  if (expires > 0 && now >= expires)
    return NZ_SANDBOX_EXPIRED;
  client = nz_kube_handle_client (h, STATUS_API_TIMEOUT_MS, NULL);
  if (client == NULL)
    return NZ_SANDBOX_UNRESPONSIVE;
  path = owner_path (h->priv);
  obj = nz_kube_get (client, path, &local);
  if (obj == NULL)
    {
      gboolean gone = g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE);

      g_error_free (local);
      return gone ? NZ_SANDBOX_DEAD : NZ_SANDBOX_UNRESPONSIVE;
    }
  if (h->endpoint == NULL)
    return NZ_SANDBOX_UNRESPONSIVE;
  agent = nz_agent_client_new (h->endpoint, h->token);
  (void)timeout_ms;
  hz = nz_agent_client_healthz (agent, NULL, NULL);
  return hz != NULL ? NZ_SANDBOX_RUNNING : NZ_SANDBOX_UNRESPONSIVE;
}

void
nz_kube_backend_describe (NzHandle *h, JsonObject *pub)
{
  JsonObject *caps = json_object_new ();
  JsonObject *kube = json_object_new ();
  const char *members[]
      = { "namespace", "objectKind",   "object",    "sandbox", "pod",          "template",
          "warmPool",  "agentAddress", "workspace", "origin",  "operatingMode" };
  gint64 expires = nz_kube_priv_int (h->priv, "leaseExpiresAt");

  for (gsize i = 0; i < G_N_ELEMENTS (members); i++)
    {
      const char *v = nz_json_get_string (h->priv, members[i]);

      if (v != NULL)
        json_object_set_string_member (kube, members[i], v);
    }
  if (expires > 0)
    {
      g_autofree char *when = nz_json_format_time_ms (expires);

      json_object_set_string_member (kube, "leaseExpiresAt", when);
    }
  if (nz_kube_ws_is (h))
    {
      if (json_object_has_member (h->priv, "heldEpoch"))
        json_object_set_int_member (kube, "heldEpoch", nz_kube_priv_int (h->priv, "heldEpoch"));
    }
  else
    json_object_set_int_member (kube, "claimTtlSeconds",
                                nz_kube_priv_int (h->priv, "claimTtlSeconds"));
  json_object_set_object_member (pub, "kubernetes", kube);
  json_object_set_string_member (caps, "transport", "agent");
  json_object_set_boolean_member (caps, "egressAllowlist", FALSE);
  json_object_set_boolean_member (caps, "setNetworkPolicy", nz_kube_task_egress_settable (h));
  json_object_set_boolean_member (caps, "persistentAfterCreate", TRUE);
  if (nz_json_get_array (h->priv, "features") != NULL)
    json_object_set_array_member (caps, "features",
                                  json_array_ref (nz_json_get_array (h->priv, "features")));
  json_object_set_object_member (pub, "capabilities", caps);
}

/* ---- leases and the transport ----------------------------------------------------------- */

/* spec D.6.2: renewal every ttl/2, jittered 10%: due once no more than half the lease is left
 * (counted from the end the cluster was told, which is whole seconds). */
static gboolean
renewal_due (NzHandle *h, gint64 now)
{
  gint64 expires = nz_kube_priv_int (h->priv, "leaseExpiresAt");
  gint64 ttl_ms = nz_kube_priv_int (h->priv, "claimTtlSeconds") * 1000;
  gint64 half = ttl_ms / 2;
  gint64 jitter = half / 10;

  if (ttl_ms <= 0)
    return FALSE;
  if (jitter > 0)
    half += g_random_int_range (-(gint32)MIN (jitter, G_MAXINT32 / 2),
                                (gint32)MIN (jitter, G_MAXINT32 / 2) + 1);
  return expires - now <= MAX (half, 1);
}

gboolean
nz_kube_lease_renew (NzHandle *h, GError **error)
{
  gint64 now = g_get_real_time () / 1000;
  gint64 expires = nz_kube_priv_int (h->priv, "leaseExpiresAt");
  gint64 ttl_s = nz_kube_priv_int (h->priv, "claimTtlSeconds");
  gboolean claim = g_strcmp0 (nz_json_get_string (h->priv, "objectKind"), "SandboxClaim") == 0;
  g_autoptr (NzKubeClient) client = NULL;
  g_autoptr (JsonObject) patch = NULL;
  g_autoptr (JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  g_autofree char *when = NULL;
  JsonObject *spec, *life;
  gint64 end;
  GError *local = NULL;

  if (expires > 0 && now >= expires)
    {
      g_autofree char *at = nz_json_format_time_ms (expires);

      return nz_throw (error, NZ_ERROR_NOT_FOUND,
                       "sandbox '%s' is gone: its lease ran out at %s (no tool call renewed it "
                       "within claimTtlSeconds) and the cluster deletes it; namzu-destroy %s "
                       "removes what is left here",
                       h->id, at, h->id);
    }
  if (!renewal_due (h, now))
    return TRUE;
  end = lease_end_ms (NULL, 0, now, ttl_s);
  if (h->expires_at_ms > 0)
    end = MIN (end, h->expires_at_ms - h->expires_at_ms % 1000);
  if (end <= expires)
    return TRUE; /* --ttl reached: nothing to extend */
  /* spec D.6.2: the PATCH timeout is min(30000, interval/4), at least 1 (the client's floor
   * of 1000 applies). */
  client = nz_kube_handle_client (h, (guint)MAX (1, MIN (30000, ttl_s * 1000 / 2 / 4)), error);
  if (client == NULL)
    return FALSE;
  when = rfc3339_ms (end);
  patch = json_object_new ();
  spec = json_object_new ();
  if (claim)
    {
      life = json_object_new ();
      json_object_set_string_member (life, "shutdownTime", when);
      json_object_set_object_member (spec, "lifecycle", life);
    }
  else
    json_object_set_string_member (spec, "shutdownTime", when);
  json_object_set_object_member (patch, "spec", spec);
  path = owner_path (h->priv);
  answer = nz_kube_merge_patch (client, path, patch, &local);
  if (answer == NULL)
    {
      if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
        {
          g_error_free (local);
          return nz_throw (error, NZ_ERROR_NOT_FOUND,
                           "sandbox '%s' is gone: %s %s no longer exists (its lease ran out or "
                           "it was deleted); namzu-destroy %s removes what is left here",
                           h->id, nz_json_get_string (h->priv, "objectKind"),
                           nz_json_get_string (h->priv, "object"), h->id);
        }
      /* onLeaseRenewalError: said, and the next tool call retries. */
      nz_kube_error_convert (&local);
      g_printerr ("namzu: warning: sandbox '%s': lease renewal failed (retried on the next "
                  "call): %s\n",
                  h->id, local->message);
      g_error_free (local);
      return TRUE;
    }
  json_object_set_int_member (h->priv, "leaseRenewedAt", now);
  json_object_set_int_member (h->priv, "leaseExpiresAt", end);
  return nz_handle_save (h, error);
}

/* The transport's rebind hook: the handle re-read from the state directory, its pod
 * re-resolved (nz_kube_backend_rebind). */
static NzTransport *
rebind_by_id (const char *sandbox_id, GError **error)
{
  g_autoptr (NzHandle) h = nz_handle_load (sandbox_id, error);

  return h != NULL ? nz_kube_backend_rebind (h, error) : NULL;
}

NzTransport *
nz_kube_backend_open_transport (NzHandle *h, GError **error)
{
  NzTransport *t;

  /* A workspace has no lease; a suspended one is refused before anything is dialled. */
  if (nz_kube_ws_is (h) ? !nz_kube_ws_check_open (h, error) : !nz_kube_lease_renew (h, error))
    return NULL;
  t = nz_backend_bearer_transport (h, error);
  if (t != NULL)
    {
      t->rebind = rebind_by_id;
      t->sandbox_id = g_strdup (h->id);
    }
  return t;
}

NzTransport *
nz_kube_backend_rebind (NzHandle *h, GError **error)
{
  g_autoptr (NzKubeClient) client = nz_kube_handle_client (h, REBIND_READ_TIMEOUT_MS, error);
  const char *sandbox = nz_json_get_string (h->priv, "sandbox");
  g_auto (BoundPod) pod = { 0 };
  double port = NZ_KUBE_AGENT_PORT_DEFAULT;

  if (client == NULL)
    return NULL;
  if (sandbox == NULL)
    return (nz_throw (error, NZ_ERROR_FAILED, "sandbox '%s' records no bound Sandbox", h->id),
            NULL);
  /* spec D.8.10: never rebind across another Sandbox uid; a suspended one is refused. */
  if (nz_kube_ws_is (h) && !nz_kube_ws_check_rebind (h, error))
    return NULL;
  if (!read_bound_pod (client, nz_json_get_string (h->priv, "namespace"), sandbox, &pod, error))
    return NULL;
  nz_json_get_number (h->priv, "agentPort", &port);
  if (g_strcmp0 (nz_json_get_string (h->priv, "agentAddress"), "pod-ip") == 0)
    {
      if (pod.ip == NULL || !nz_kube_address_is_sane (pod.ip))
        return (nz_throw (error, NZ_ERROR_FAILED,
                          "kubernetes: the pod of sandbox '%s' has no usable IP yet", h->id),
                NULL);
      g_free (h->endpoint);
      h->endpoint = nz_kube_agent_endpoint (pod.ip, (guint)port);
    }
  g_free (h->token);
  h->token = g_strdup (pod.uid);
  if (pod.name != NULL)
    json_object_set_string_member (h->priv, "pod", pod.name);
  if (!nz_handle_save (h, error))
    return NULL;
  return nz_backend_bearer_transport (h, error);
}
