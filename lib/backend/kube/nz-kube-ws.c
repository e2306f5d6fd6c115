/* microvm:kubernetes workspaces through the tools (spec D.8); the API-object half is
 * lib/kube/nz-kube-workspace. */
#include "nz-kube-ws.h"

#include <string.h>

#include "nz-agent-client.h"
#include "nz-agent-files.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-knobs.h"
#include "nz-kube-internal.h"
#include "nz-kube-net.h"
#include "nz-kube-workspace.h"
#include "nz-state.h"

/* How long a suspend waits for the agent's healthz before its quiesce or flush. */
#define SUSPEND_AGENT_READY_MS 5000

gboolean
nz_kube_ws_is (NzHandle *h)
{
  return nz_json_get_string (h->priv, "workspace") != NULL;
}

gboolean
nz_kube_ws_check (const NzCreateOptions *opts, GError **error)
{
  const NzKubeOptions *k = nz_kube_options (opts);
  GError *local = NULL;

  if (k->workspace_id == NULL)
    {
      if (k->holder_epoch >= 0 || k->refresh_pod_template)
        return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                         "backend.%s (--%s): only a workspace (--workspace) has a holder epoch "
                         "or a pod template to refresh",
                         k->holder_epoch >= 0 ? "holderEpoch" : "refreshPodTemplate",
                         k->holder_epoch >= 0 ? "epoch" : "refresh-pod-template");
      return TRUE;
    }
  if (!nz_kube_workspace_check_id (k->workspace_id, &local))
    {
      /* Bad input, as the CLI contract counts it. */
      nz_throw (error, NZ_ERROR_INVALID_ARGS, "%s", local->message);
      g_error_free (local);
      return FALSE;
    }
  if (k->warm_pool != NULL)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "backend.warmPoolName: a workspace is always a Sandbox of its own, never a "
                     "claim from a warm pool (spec D.8.1)");
  if (opts->ttl_ms > 0)
    return nz_throw (error, NZ_ERROR_INVALID_ARGS,
                     "--ttl: a workspace has no lease and no shutdownTime; namzu-suspend stops "
                     "it and namzu-destroy deletes it");
  return TRUE;
}

static gint64
held_epoch (NzHandle *h)
{
  double v = -1;

  return nz_json_get_number (h->priv, "heldEpoch", &v) && v >= 0 ? (gint64)v : NZ_KUBE_NO_EPOCH;
}

static guint
priv_ms (NzHandle *h, const char *member, guint fallback)
{
  gint64 v = nz_kube_priv_int (h->priv, member);

  return v > 0 ? (guint)MIN (v, G_MAXINT32) : fallback;
}

/* Where the agent of the new pod is: its IP under pod-ip, else the Sandbox's service. */
static char *
agent_address (NzKubeClient *client, NzHandle *h, const char *pod_ip, GError **error)
{
  const char *ns = nz_json_get_string (h->priv, "namespace");
  const char *name = nz_json_get_string (h->priv, "sandbox");
  const char *addr = pod_ip;
  g_autoptr (JsonObject) sb = NULL;

  if (g_strcmp0 (nz_json_get_string (h->priv, "agentAddress"), "pod-ip") != 0)
    {
      g_autofree char *path = nz_kube_path (NZ_KUBE_SANDBOX_API_GROUP, NZ_KUBE_SANDBOX_API_VERSION,
                                            ns, "sandboxes", name);
      JsonObject *st;

      sb = nz_kube_get (client, path, error);
      if (sb == NULL)
        return NULL;
      st = nz_json_get_object (sb, "status");
      if (st != NULL && nz_json_get_string (st, "serviceFQDN") != NULL
          && *nz_json_get_string (st, "serviceFQDN") != '\0')
        addr = nz_json_get_string (st, "serviceFQDN");
    }
  if (addr == NULL || !nz_kube_address_is_sane (addr))
    return (nz_throw (error, NZ_ERROR_PROTOCOL,
                      "kubernetes workspace %s: no usable agent address for %s/%s",
                      nz_json_get_string (h->priv, "workspace"), ns, name),
            NULL);
  return g_strdup (addr);
}

/* The new pod (uid @uid, IP @ip) as the handle's agent: endpoint, token, and the agent up
 * within @timeout_ms. */
static gboolean
bind_pod (NzKubeClient *client, NzHandle *h, const char *uid, const char *ip, guint timeout_ms,
          GError **error)
{
  g_autofree char *addr = agent_address (client, h, ip, error);
  g_autofree char *label = NULL;

  if (addr == NULL)
    return FALSE;
  label = g_strdup_printf ("workspace %s", nz_json_get_string (h->priv, "sandbox"));
  g_free (h->endpoint);
  h->endpoint = nz_kube_agent_endpoint (addr, (guint)nz_kube_priv_int (h->priv, "agentPort"));
  if (h->token != NULL)
    explicit_bzero (h->token, strlen (h->token));
  g_free (h->token);
  h->token = g_strdup (uid);
  json_object_set_string_member (h->priv, "pod", nz_json_get_string (h->priv, "sandbox"));
  return nz_kube_agent_up (h, timeout_ms, MIN (timeout_ms, NZ_KUBE_PROBE_TIMEOUT_MS_MAX), label,
                           error);
}

/* spec D.8.3 step 5: the ingress proof and the egress union check on the labels the
 * workspace's pods will carry (not memoised here, as the spec says). */
static gboolean
network_hook (JsonObject *pod_labels, gpointer data, GError **error)
{
  return nz_kube_net_pods_ok (data, pod_labels, error);
}

NzHandle *
nz_kube_ws_create (const NzCreateOptions *opts, GError **error)
{
  const NzKubeOptions *k = nz_kube_options (opts);
  g_autoptr (NzHandle) h = nz_handle_new ();
  g_autoptr (JsonObject) access_spec = nz_kube_access_spec (k);
  g_autoptr (NzKubeClient) client = NULL;
  g_autoptr (NzKubeWorkspaceOpened) opened = NULL;
  g_autoptr (NzKubeWorkspaceMismatch) mismatch = NULL;
  g_autofree char *name = NULL;
  g_autofree char *uid = NULL;
  g_autofree char *ip = NULL;
  NzKubeWorkspaceSpec spec = { 0 };
  g_auto (NzKubeNet) net = { 0 };
  GError *local = NULL;
  guint poll = k->ready_poll_ms != 0 ? k->ready_poll_ms : NZ_KUBE_READY_POLL_MS_DEFAULT;
  guint timeout = k->ready_timeout_ms != 0 ? k->ready_timeout_ms : NZ_KUBE_READY_TIMEOUT_MS_DEFAULT;
  const char *sb_uid;

  name = nz_kube_workspace_name (k->workspace_id, error);
  if (name == NULL)
    return NULL;
  client = nz_kube_create_begin (opts, h, access_spec, "Sandbox", name, &spec.ns, error);
  if (client == NULL)
    return NULL;
  spec.workspace_id = k->workspace_id;
  spec.template_name = k->template_name;
  spec.epoch = k->holder_epoch >= 0 ? k->holder_epoch : NZ_KUBE_NO_EPOCH;
  spec.refresh_pod_template = k->refresh_pod_template;
  /* spec D.8.3 step 2: backend.egress and its named policy, before anything is written. */
  if (!nz_kube_net_begin (&net, client, k, spec.ns, k->template_name, FALSE, error)
      || !nz_kube_net_verify_named (&net, error))
    return NULL;
  if (net.egress != NULL)
    {
      spec.egress_profile = net.egress->profile;
      spec.profile_label_key = net.egress->profile_label_key;
      spec.per_sandbox_egress = net.egress->per_sandbox;
    }
  spec.verify = network_hook;
  spec.verify_data = &net;
  json_object_set_string_member (h->priv, "sandbox", name);
  json_object_set_string_member (h->priv, "workspace", k->workspace_id);
  json_object_set_int_member (h->priv, "readyPollIntervalMs", poll);
  json_object_set_int_member (h->priv, "readyTimeoutMs", timeout);

  opened = nz_kube_workspace_create (client, &spec, &mismatch, &local);
  if (opened == NULL)
    {
      /* Nothing of ours to undo: a failed POST made nothing, and an adopted workspace is not
       * ours to delete. */
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return NULL;
    }
  sb_uid = opened->sandbox != NULL
               ? nz_json_get_string (nz_json_get_object (opened->sandbox, "metadata"), "uid")
               : NULL;
  json_object_set_string_member (h->priv, "sandboxUid", sb_uid != NULL ? sb_uid : "");
  json_object_set_string_member (h->priv, "origin", opened->origin);
  json_object_set_string_member (h->priv, "operatingMode", "Running");
  if (opened->held_epoch >= 0)
    json_object_set_int_member (h->priv, "heldEpoch", opened->held_epoch);
  if (!nz_kube_workspace_wait_pod_ready (client, spec.ns, k->workspace_id, opened->draining_pod_uid,
                                         poll, timeout, &uid, &ip, &local)
      || !bind_pod (client, h, uid, ip, timeout, &local) || !nz_handle_make_dir (h, &local)
      || !nz_handle_save (h, &local))
    {
      /* spec D.8.7: a failed create suspends (a disk is never deleted for a failed start). */
      if (g_strcmp0 (opened->origin, "adopted-running") != 0 || opened->woke)
        nz_kube_workspace_suspend (client, spec.ns, k->workspace_id, opened->held_epoch, NULL, NULL,
                                   poll, timeout, NULL, NULL);
      if (h->dir != NULL)
        nz_handle_remove_dir (h, NULL);
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return NULL;
    }
  return g_steal_pointer (&h);
}

static gboolean
ws_refuse_task (NzHandle *h, const char *verb, GError **error)
{
  return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                   "sandbox '%s' is a Kubernetes task sandbox: it cannot be %s (only a workspace, "
                   "namzu-create --workspace ID, keeps its disk); namzu-destroy releases it",
                   h->id, verb);
}

gboolean
nz_kube_ws_destroy (NzHandle *h, GError **error)
{
  g_autoptr (NzKubeClient) client
      = nz_kube_handle_client (h, nz_kube_handle_api_timeout (h), error);
  GError *local = NULL;

  if (client == NULL)
    return FALSE;
  /* Never delete another holder's workspace of the same name: ours was replaced (or is gone),
   * so only this handle goes. */
  if (!nz_kube_ws_check_identity (h, &local))
    {
      if (!g_error_matches (local, NZ_KUBE_WORKSPACE_ERROR, NZ_KUBE_WORKSPACE_ERROR_REPLACED))
        {
          g_propagate_error (error, local);
          return nz_prefix_error (error, "workspace '%s' is not deleted", h->id);
        }
      g_printerr ("namzu: warning: %s; it is left alone, only this handle is removed\n",
                  local->message);
      g_error_free (local);
      return nz_handle_remove_dir (h, error);
    }
  if (!nz_kube_workspace_delete (client, nz_json_get_string (h->priv, "namespace"),
                                 nz_json_get_string (h->priv, "workspace"), held_epoch (h), NULL,
                                 &local))
    {
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return nz_prefix_error (error, "workspace '%s' is not deleted", h->id);
    }
  return nz_handle_remove_dir (h, error);
}

NzSandboxStatus
nz_kube_ws_status (NzHandle *h)
{
  g_autoptr (NzKubeClient) client = nz_kube_handle_client (h, 5000, NULL);
  g_autofree char *path = NULL;
  g_autoptr (JsonObject) sb = NULL;
  g_autoptr (NzAgentClient) agent = NULL;
  g_autoptr (JsonObject) hz = NULL;
  GError *local = NULL;
  JsonObject *spec;

  if (client == NULL)
    return NZ_SANDBOX_UNRESPONSIVE;
  path = nz_kube_workspace_path (nz_json_get_string (h->priv, "namespace"),
                                 nz_json_get_string (h->priv, "workspace"), NULL);
  sb = path != NULL ? nz_kube_get (client, path, &local) : NULL;
  if (sb == NULL)
    {
      gboolean gone = g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE);

      g_clear_error (&local);
      return gone ? NZ_SANDBOX_DEAD : NZ_SANDBOX_UNRESPONSIVE;
    }
  spec = nz_json_get_object (sb, "spec");
  if (spec != NULL && g_strcmp0 (nz_json_get_string (spec, "operatingMode"), "Suspended") == 0)
    return NZ_SANDBOX_SUSPENDED;
  if (h->endpoint == NULL)
    return NZ_SANDBOX_UNRESPONSIVE;
  agent = nz_agent_client_new (h->endpoint, h->token);
  hz = nz_agent_client_healthz (agent, NULL, NULL);
  return hz != NULL ? NZ_SANDBOX_RUNNING : NZ_SANDBOX_UNRESPONSIVE;
}

gboolean
nz_kube_ws_check_open (NzHandle *h, GError **error)
{
  /* spec D.8.5: while suspended every call is refused without dialling. */
  if (g_strcmp0 (nz_json_get_string (h->priv, "operatingMode"), "Suspended") == 0)
    return nz_throw (error, NZ_ERROR_FAILED,
                     "kubernetes workspace %s: %s is suspended; namzu-resume --sandbox %s wakes "
                     "it",
                     nz_json_get_string (h->priv, "workspace"),
                     nz_json_get_string (h->priv, "sandbox"), h->id);
  return TRUE;
}

/* The Sandbox is still ours (spec D.8.10); *@suspended (may be NULL): its operatingMode is
 * Suspended. */
static gboolean
check_identity (NzHandle *h, gboolean *suspended, GError **error)
{
  g_autoptr (NzKubeClient) client = nz_kube_handle_client (h, 10000, error);
  g_autoptr (NzKubeWorkspaceIdentity) id = NULL;
  const char *expected = nz_json_get_string (h->priv, "sandboxUid");
  GError *local = NULL;

  if (client == NULL)
    return FALSE;
  id = nz_kube_workspace_read_identity (
      client, nz_json_get_string (h->priv, "namespace"), nz_json_get_string (h->priv, "workspace"),
      expected != NULL && *expected != '\0' ? expected : NULL, &local);
  if (id == NULL)
    {
      /* REPLACED keeps its own code: nz_kube_ws_destroy tells it apart. */
      if (local->domain == NZ_KUBE_ERROR)
        nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return FALSE;
    }
  if (suspended != NULL)
    *suspended = id->suspended;
  return TRUE;
}

gboolean
nz_kube_ws_check_identity (NzHandle *h, GError **error)
{
  return check_identity (h, NULL, error);
}

gboolean
nz_kube_ws_check_rebind (NzHandle *h, GError **error)
{
  gboolean suspended = FALSE;

  if (!check_identity (h, &suspended, error) || !nz_kube_ws_check_open (h, error))
    return FALSE;
  /* spec D.8.12: suspended behind this handle's back (another holder): the handle says so from
   * now on, and the call is refused, noticed by the transport. */
  if (suspended)
    {
      json_object_set_string_member (h->priv, "operatingMode", "Suspended");
      nz_handle_save (h, NULL);
      return nz_throw (error, NZ_ERROR_FAILED,
                       "kubernetes workspace %s: %s was suspended by another holder (noticed by "
                       "the transport); namzu-resume --sandbox %s wakes it",
                       nz_json_get_string (h->priv, "workspace"),
                       nz_json_get_string (h->priv, "sandbox"), h->id);
    }
  return TRUE;
}

/* ---- suspend (spec D.8.5) ------------------------------------------------------------------ */

typedef struct
{
  NzHandle *h;
  const NzSuspendOptions *o;
  JsonObject *report;
} SuspendRun;

static gboolean
refusal_is (JsonObject *reply, const char *prefix)
{
  const char *err = nz_json_get_string (reply, "error");

  return err != NULL && g_str_has_prefix (err, prefix);
}

/* A quiesce or flush the agent refused: the suspend stops, nothing patched. */
static gboolean
unconfirmed (NzHandle *h, GError **error, const char *step, JsonObject *reply)
{
  const char *code = nz_json_get_string (reply, "error");

  return nz_throw (error, NZ_ERROR_FAILED,
                   "kubernetes workspace %s: suspend refused, the %s is unconfirmed (%s); "
                   "nothing was patched",
                   nz_json_get_string (h->priv, "workspace"), step,
                   code != NULL ? code : "refused with no code");
}

/* The quiesce never reached the agent (taking @local): the suspend stops. */
static gboolean
quiesce_unreached (NzHandle *h, GError **error, GError *local)
{
  g_prefix_error (&local,
                  "kubernetes workspace %s: suspend refused, the quiesce is unconfirmed "
                  "(nothing was patched): ",
                  nz_json_get_string (h->priv, "workspace"));
  g_propagate_error (error, local);
  return FALSE;
}

static void
warn (NzHandle *h, const char *what, const char *why)
{
  g_printerr ("namzu-suspend: warning: workspace %s: %s%s%s\n",
              nz_json_get_string (h->priv, "workspace"), what, why != NULL ? ": " : "",
              why != NULL ? why : "");
}

/* Steps 3-5, after the epoch gate and before the patch: a CLI holds no connection-bound
 * terminal or session attachment of its own, so the reaping of step 3 has nothing to do here;
 * then the quiesce (if asked) and the flush (unless --no-flush). */
static gboolean
before_patch (JsonObject *sandbox, gpointer data, GError **error)
{
  SuspendRun *r = data;
  g_autoptr (NzAgentClient) c = NULL;
  GError *local = NULL;

  (void)sandbox;
  if (!r->o->quiesce && !r->o->flush)
    return TRUE;
  c = nz_agent_client_new (r->h->endpoint, r->h->token);
  /* healthz first: the features say what the agent can do. */
  if (!nz_agent_client_wait_ready (c, SUSPEND_AGENT_READY_MS, &local))
    {
      if (r->o->quiesce)
        {
          return quiesce_unreached (r->h, error, local);
        }
      /* onFlushUnreachable: said, and the suspend proceeds. */
      warn (r->h, "the agent is unreachable; suspending without a flush", local->message);
      json_object_set_boolean_member (r->report, "flushUnreachable", TRUE);
      g_error_free (local);
      return TRUE;
    }
  if (r->o->quiesce)
    {
      g_autoptr (JsonObject) q = nz_agent_client_quiesce (c, r->o->grace_ms, NULL, &local);
      JsonObject *out = json_object_new ();

      json_object_set_object_member (r->report, "quiesce", out);
      if (q == NULL)
        {
          return quiesce_unreached (r->h, error, local);
        }
      if (!nz_json_get_bool (q, "ok", FALSE) && refusal_is (q, "unknown_op"))
        {
          warn (r->h, "the agent cannot quiesce; suspending without it", NULL);
          json_object_set_boolean_member (out, "unsupported", TRUE);
        }
      else if (!nz_json_get_bool (q, "ok", FALSE))
        return unconfirmed (r->h, error, "quiesce", q);
      else
        {
          const char *scope = nz_json_get_string (q, "scope");
          JsonArray *stopped = nz_json_get_array (q, "stopped");

          /* The agent's words are untrusted: only the scope's two values are repeated. */
          json_object_set_string_member (
              out, "scope",
              g_strcmp0 (scope, "pid-namespace") == 0 ? "pid-namespace" : "owned-sessions");
          json_object_set_int_member (out, "stopped",
                                      stopped != NULL ? json_array_get_length (stopped) : 0);
          if (g_strcmp0 (scope, "pid-namespace") != 0)
            warn (r->h, "the quiesce was narrowed to the agent's own sessions", NULL);
        }
    }
  if (r->o->flush)
    {
      g_autoptr (JsonObject) f = NULL;
      JsonObject *out = json_object_new ();

      json_object_set_object_member (r->report, "flush", out);
      if (!nz_agent_client_has_feature (c, "flush"))
        {
          warn (r->h, "the agent cannot flush; suspending without it", NULL);
          json_object_set_boolean_member (out, "unsupported", TRUE);
          return TRUE;
        }
      f = nz_agent_client_flush (c, 0, NULL, &local);
      if (f == NULL)
        {
          /* onFlushUnreachable: said, and the suspend proceeds. */
          warn (r->h, "the flush did not reach the agent; suspending without it", local->message);
          json_object_set_boolean_member (out, "unreachable", TRUE);
          g_error_free (local);
        }
      else if (!nz_json_get_bool (f, "ok", FALSE)
               && (refusal_is (f, "unknown_op") || refusal_is (f, "flush_unsupported")))
        {
          warn (r->h, "the agent cannot flush here; suspending without it",
                nz_json_get_string (f, "error"));
          json_object_set_boolean_member (out, "unsupported", TRUE);
        }
      else if (!nz_json_get_bool (f, "ok", FALSE))
        return unconfirmed (r->h, error, "flush", f);
      else
        {
          double ms = 0;

          json_object_set_boolean_member (out, "ok", TRUE);
          if (nz_json_get_number (f, "durationMs", &ms) && nz_is_safe_integer (ms) && ms >= 0)
            json_object_set_int_member (out, "durationMs", (gint64)ms);
        }
    }
  return TRUE;
}

gboolean
nz_kube_ws_suspend (NzHandle *h, const NzSuspendOptions *o, JsonObject *report, GError **error)
{
  g_autoptr (NzKubeClient) client = NULL;
  SuspendRun r = { h, o, report };
  gint64 epoch = o->epoch >= 0 ? o->epoch : held_epoch (h);
  gboolean already = FALSE;
  GError *local = NULL;

  if (!nz_kube_ws_is (h))
    return ws_refuse_task (h, "suspended", error);
  client = nz_kube_handle_client (h, nz_kube_handle_api_timeout (h), error);
  if (client == NULL)
    return FALSE;
  if (!nz_kube_workspace_suspend (client, nz_json_get_string (h->priv, "namespace"),
                                  nz_json_get_string (h->priv, "workspace"), epoch, before_patch,
                                  &r, priv_ms (h, "readyPollIntervalMs", 50),
                                  priv_ms (h, "readyTimeoutMs", 60000), &already, &local))
    {
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return FALSE;
    }
  /* The pod that served until now: a resume must bind another (spec D.8.5 step 8). */
  if (!already && h->token != NULL)
    json_object_set_string_member (h->priv, "retiredPodUid", h->token);
  json_object_set_string_member (h->priv, "operatingMode", "Suspended");
  if (epoch >= 0)
    json_object_set_int_member (h->priv, "heldEpoch", epoch);
  json_object_set_string_member (report, "id", h->id);
  json_object_set_string_member (report, "workspace", nz_json_get_string (h->priv, "workspace"));
  json_object_set_string_member (report, "operatingMode", "Suspended");
  json_object_set_boolean_member (report, "alreadySuspended", already);
  return nz_handle_save (h, error);
}

/* ---- resume (spec D.8.6) ------------------------------------------------------------------- */

gboolean
nz_kube_ws_resume (NzHandle *h, gint64 epoch_arg, JsonObject *report, GError **error)
{
  g_autoptr (NzKubeClient) client = NULL;
  g_autofree char *uid = NULL;
  g_autofree char *ip = NULL;
  g_autofree char *old_uid = g_strdup (h->token);
  g_autofree char *old_boot = g_strdup (nz_json_get_string (h->priv, "guestBootId"));
  const char *retired = nz_json_get_string (h->priv, "retiredPodUid");
  const char *ns = nz_json_get_string (h->priv, "namespace");
  const char *ws = nz_json_get_string (h->priv, "workspace");
  const char *boot, *restart = NULL;
  gint64 epoch = epoch_arg >= 0 ? epoch_arg : held_epoch (h);
  guint poll = priv_ms (h, "readyPollIntervalMs", 50);
  guint timeout = priv_ms (h, "readyTimeoutMs", 60000);
  gboolean woke = FALSE;
  GError *local = NULL;

  if (!nz_kube_ws_is (h))
    return ws_refuse_task (h, "resumed", error);
  client = nz_kube_handle_client (h, nz_kube_handle_api_timeout (h), error);
  if (client == NULL || !nz_kube_ws_check_identity (h, error))
    return FALSE;
  if (!nz_kube_workspace_resume (client, ns, ws, epoch, NULL, retired, poll, timeout, &uid, &ip,
                                 &woke, &local)
      || !bind_pod (client, h, uid, ip, timeout, &local))
    {
      /* onStartFailure 'suspend-if-woken' (the default): back to Suspended, then the error. */
      if (woke)
        nz_kube_workspace_suspend (client, ns, ws, epoch, NULL, NULL, poll, timeout, NULL, NULL);
      nz_kube_error_convert (&local);
      g_propagate_error (error, local);
      return FALSE;
    }
  json_object_remove_member (h->priv, "retiredPodUid");
  json_object_set_string_member (h->priv, "operatingMode", "Running");
  if (epoch >= 0)
    json_object_set_int_member (h->priv, "heldEpoch", epoch);
  /* spec D.8.10: a new pod uid is a replaced pod; the same uid with a new boot id a restarted
   * container. (The uid itself is the agent's token: never printed.) */
  boot = nz_json_get_string (h->priv, "guestBootId");
  if (g_strcmp0 (old_uid, uid) != 0)
    restart = "pod-replaced";
  else if (old_boot != NULL && boot != NULL && strcmp (old_boot, boot) != 0)
    restart = "container-restarted";
  json_object_set_string_member (report, "id", h->id);
  json_object_set_string_member (report, "workspace", ws);
  json_object_set_string_member (report, "operatingMode", "Running");
  json_object_set_boolean_member (report, "woke", woke);
  if (restart != NULL)
    json_object_set_string_member (report, "guestRestart", restart);
  else
    json_object_set_null_member (report, "guestRestart");
  return nz_handle_save (h, error);
}
