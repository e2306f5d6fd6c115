/* microvm:kubernetes: per-sandbox egress of task sandboxes (spec D.10.8). */
#include "nz-kube-task-egress.h"
#include "nz-kube-internal.h"

#include "nz-autofd.h"
#include "nz-egress-live.h"
#include "nz-errors.h"
#include "nz-json.h"
#include "nz-kube-error.h"
#include "nz-kube-persandbox.h"
#include "nz-kube-ws.h"

JsonObject *
nz_kube_task_egress_pod_labels (const NzEgressK8sConfig *egress, const char *object_name,
                                GError **error)
{
  g_autoptr (JsonObject) base = json_object_new ();

  /* The value is the name the backend chose for the object it creates, never one read
   * back: the per-sandbox policy selects exactly this label. */
  if (egress->per_sandbox)
    json_object_set_string_member (base, egress->per_sandbox_label_key, object_name);
  return nz_egress_k8s_compose_pod_labels (egress, base, error);
}

void
nz_kube_task_egress_record (const NzEgressK8sConfig *egress, JsonObject *raw_egress, NzHandle *h)
{
  JsonObject *raw_ps = raw_egress != NULL ? nz_json_get_object (raw_egress, "perSandbox") : NULL;
  JsonNode *narrowing = raw_ps != NULL ? json_object_get_member (raw_ps, "narrowing") : NULL;
  JsonObject *rec;

  if (!egress->per_sandbox)
    return;
  rec = json_object_new ();
  json_object_set_string_member (rec, "labelKey", egress->per_sandbox_label_key);
  json_object_set_string_member (rec, "admissionPolicyName", egress->admission_policy_name);
  json_object_set_string_member (rec, "admissionPolicyBindingName",
                                 egress->admission_policy_binding_name);
  if (egress->per_sandbox_narrowing != NULL && narrowing != NULL)
    json_object_set_member (rec, "narrowing", json_node_copy (narrowing));
  json_object_set_object_member (h->priv, "perSandbox", rec);
}

gboolean
nz_kube_task_egress_settable (NzHandle *h)
{
  return !nz_kube_ws_is (h) && nz_json_get_object (h->priv, "perSandbox") != NULL;
}

static gboolean
refuse_unless_settable (NzHandle *h, GError **error)
{
  if (nz_kube_ws_is (h))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "This sandbox cannot change its network policy: a microvm:kubernetes "
                     "workspace has no setNetworkPolicy (its egress is the namespace's)");
  if (!nz_kube_task_egress_settable (h))
    return nz_throw (error, NZ_ERROR_UNSUPPORTED,
                     "This sandbox cannot change its network policy: it was created without "
                     "backend.egress.perSandbox. Create it with a --config whose backend.egress "
                     "has perSandbox {\"engine\":\"cilium\",\"admissionPolicyName\":...} "
                     "(docs/kubernetes.md, Per-sandbox egress)");
  return TRUE;
}

/* The owner recorded at create, as the per-sandbox write takes it; FALSE for a handle that
 * names something the backend never creates (a task sandbox's object is a namzu-task-* claim
 * or Sandbox of agent-sandbox v1beta1). */
static gboolean
owner_of (NzHandle *h, NzKubePerSandbox *ps, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "perSandbox");
  const char *kind = nz_json_get_string (h->priv, "objectKind");
  const char *api = nz_json_get_string (h->priv, "objectApiVersion");
  const char *claim_api = NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION;
  const char *sandbox_api = NZ_KUBE_SANDBOX_API_GROUP "/" NZ_KUBE_SANDBOX_API_VERSION;

  ps->namespace_ = nz_json_get_string (h->priv, "namespace");
  ps->label_key = nz_json_get_string (rec, "labelKey");
  ps->admission_policy_name = nz_json_get_string (rec, "admissionPolicyName");
  ps->admission_binding_name = nz_json_get_string (rec, "admissionPolicyBindingName");
  ps->owner_name = nz_json_get_string (h->priv, "object");
  ps->owner_uid = nz_json_get_string (h->priv, "objectUid");
  ps->owner_is_claim = g_strcmp0 (kind, "SandboxClaim") == 0;
  if (ps->namespace_ == NULL || ps->label_key == NULL || ps->admission_policy_name == NULL
      || ps->admission_binding_name == NULL || ps->owner_name == NULL
      || !g_str_has_prefix (ps->owner_name, NZ_KUBE_TASK_NAME_PREFIX)
      || g_strcmp0 (api, ps->owner_is_claim ? claim_api : sandbox_api) != 0
      || (!ps->owner_is_claim && g_strcmp0 (kind, "Sandbox") != 0))
    return nz_throw (error, NZ_ERROR_FAILED,
                     "sandbox '%s': its state does not name the claim or Sandbox the backend "
                     "created, so no per-sandbox policy can be written for it",
                     h->id);
  return TRUE;
}

/* perSandbox.narrowing as the create recorded it (*@out NULL without one). */
static gboolean
narrowing_of (NzHandle *h, NzEgressK8sNarrowing **out, GError **error)
{
  JsonObject *rec = nz_json_get_object (h->priv, "perSandbox");
  JsonNode *node = rec != NULL ? json_object_get_member (rec, "narrowing") : NULL;

  *out = NULL;
  if (node == NULL)
    return TRUE;
  *out = nz_egress_k8s_narrowing_parse (node, "perSandbox.narrowing", error);
  return *out != NULL;
}

/* The per-sandbox classes into NZ_ERROR, prefixed; NZ_EGRESS_ERROR (a host refused) keeps its
 * domain, whose codes namzu-egress names. Always FALSE. */
static gboolean
set_failed (GError **error, GError *local, const char *id)
{
  if (local->domain == NZ_KUBE_EGRESS_ERROR)
    {
      local->code = local->code == NZ_KUBE_EGRESS_ERROR_FENCE_MISSING ? NZ_ERROR_NOT_FOUND
                    : local->code == NZ_KUBE_EGRESS_ERROR_FENCE_UNREADABLE
                        ? NZ_ERROR_PERMISSION_DENIED
                    : local->code == NZ_KUBE_EGRESS_ERROR_OWNER_UID_MISSING ? NZ_ERROR_PROTOCOL
                                                                            : NZ_ERROR_FAILED;
      local->domain = NZ_ERROR;
    }
  else if (local->domain != NZ_EGRESS_ERROR)
    nz_kube_error_convert (&local);
  g_prefix_error (&local, "sandbox '%s': ", id);
  g_propagate_error (error, local);
  return FALSE;
}

gboolean
nz_kube_backend_set_network_policy (NzHandle *probe, const char *const *hosts, gboolean *changed,
                                    GError **error)
{
  g_auto (GStrv) lower = NULL;
  g_autoptr (NzEgressK8sNarrowing) narrowing = NULL;
  g_autoptr (NzHandle) h = NULL;
  g_autoptr (NzKubeClient) client = NULL;
  nz_autofd int lock = -1;
  NzKubePerSandbox ps = { 0 };
  GError *local = NULL;

  *changed = FALSE;
  if (!refuse_unless_settable (probe, error))
    return FALSE;
  /* spec D.10.8: lower-cased, checked and held against perSandbox.narrowing before anything
   * is queued or asked. */
  if (!narrowing_of (probe, &narrowing, error)
      || (lower = nz_egress_k8s_narrowing_check_hosts (narrowing, hosts, error)) == NULL)
    return FALSE;
  /* One write at a time per sandbox, each applying and verifying its own list. */
  lock = nz_egress_lock (probe->dir, error);
  if (lock < 0)
    return FALSE;
  /* Re-read under the lock: a destroy may have removed it while this call waited. */
  h = nz_handle_load (probe->id, error);
  if (h == NULL)
    return nz_prefix_error (error, "sandbox '%s' was destroyed while the change waited", probe->id);
  if (!refuse_unless_settable (h, error) || !owner_of (h, &ps, error)
      || !nz_kube_lease_renew (h, error))
    return FALSE;
  client = nz_kube_handle_client (h, nz_kube_handle_api_timeout (h), error);
  if (client == NULL)
    return FALSE;
  ps.narrowing = narrowing;
  if (!nz_kube_per_sandbox_set (client, &ps, (const char *const *)lower, changed, &local))
    return set_failed (error, local, h->id);
  return TRUE;
}
