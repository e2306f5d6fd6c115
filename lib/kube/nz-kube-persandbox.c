/* nz-kube-persandbox.c: the admission fence and the per-sandbox CiliumNetworkPolicy write
 * (spec D.10.8). */
#include "nz-kube-persandbox.h"

#include <string.h>

#include "nz-json.h"
#include "nz-kube-error.h"

/* ---- the admission fence ---------------------------------------------------------------- */

/* The fences proven in this process: "<server>\n<policy>\n<binding>". Successes only. */
static GMutex fence_lock;
static GHashTable *fence_proven;

void
nz_kube_admission_fence_forget (void)
{
  g_mutex_lock (&fence_lock);
  g_clear_pointer (&fence_proven, g_hash_table_unref);
  g_mutex_unlock (&fence_lock);
}

/* Whether @key was proven; with @add it is now. */
static gboolean
fence_memo (const char *key, gboolean add)
{
  gboolean known;

  g_mutex_lock (&fence_lock);
  if (add && fence_proven == NULL)
    fence_proven = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  known = fence_proven != NULL && g_hash_table_contains (fence_proven, key);
  if (add && !known)
    g_hash_table_add (fence_proven, g_strdup (key));
  g_mutex_unlock (&fence_lock);
  return known;
}

static gboolean
fence_read (NzKubeClient *client, const char *resource, const char *kind, const char *name,
            GError **error)
{
  g_autofree char *esc = g_uri_escape_string (name, NULL, FALSE);
  g_autofree char *path = g_strdup_printf (NZ_KUBE_ADMISSION_API_PREFIX "/%s/%s", resource, esc);
  g_autoptr (GError) local = NULL;
  g_autoptr (JsonObject) obj = nz_kube_get (client, path, &local);

  if (obj != NULL)
    return TRUE;
  if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
    return (g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_FENCE_MISSING,
                         "KubernetesAdmissionFenceMissingError: %s %s (%s) is not applied, and "
                         "per-sandbox egress policies are written only behind it. Apply "
                         "deploy/k8s/validatingadmissionpolicy-cilium.yaml (or correct "
                         "backend.egress.perSandbox's names). Nothing was written.",
                         kind, name, path),
            FALSE);
  /* 401/403: the host may not read it, so it cannot know the fence is there. */
  if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CREDENTIAL))
    return (g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_FENCE_UNREADABLE,
                         "KubernetesAdmissionFenceUnreadableError: %s %s (%s) could not be read "
                         "(%s), so the host cannot prove its writes are fenced. Grant it get on "
                         "validatingadmissionpolicies and validatingadmissionpolicybindings "
                         "(deploy/k8s/rbac-per-sandbox-egress.yaml). Nothing was written.",
                         kind, name, path, local->message),
            FALSE);
  g_propagate_error (error, g_steal_pointer (&local));
  return FALSE;
}

gboolean
nz_kube_admission_fence_check (NzKubeClient *client, const char *policy_name,
                               const char *binding_name, GError **error)
{
  g_autofree char *key = NULL;

  g_return_val_if_fail (client != NULL && policy_name != NULL && binding_name != NULL, FALSE);
  key = g_strdup_printf ("%s\n%s\n%s", nz_kube_client_get_access (client)->server, policy_name,
                         binding_name);
  if (fence_memo (key, FALSE))
    return TRUE;
  if (!fence_read (client, NZ_KUBE_ADMISSION_POLICIES, "ValidatingAdmissionPolicy", policy_name,
                   error)
      || !fence_read (client, NZ_KUBE_ADMISSION_BINDINGS, "ValidatingAdmissionPolicyBinding",
                      binding_name, error))
    return FALSE;
  fence_memo (key, TRUE);
  return TRUE;
}

/* ---- the write ------------------------------------------------------------------------ */

/* @a's and @b's member @name (in @sub when not NULL) are both absent, or deep-equal. */
static gboolean
same_member (JsonObject *a, JsonObject *b, const char *sub, const char *name)
{
  JsonNode *x = nz_json_member (sub != NULL ? nz_json_get_object (a, sub) : a, name);
  JsonNode *y = nz_json_member (sub != NULL ? nz_json_get_object (b, sub) : b, name);

  return x == NULL || y == NULL ? x == y : json_node_equal (x, y);
}

gboolean
nz_kube_per_sandbox_check (JsonObject *expected, JsonObject *actual, const char *path,
                           GError **error)
{
  const char *reason = NULL;

  if (!nz_kube_egress_check_applied (expected, actual, path, error))
    return FALSE;
  if (!same_member (expected, actual, NULL, "spec"))
    reason = "has spec members the write did not send";
  else if (!same_member (expected, actual, "metadata", "ownerReferences"))
    reason = "has other ownerReferences than its one owner";
  if (reason == NULL)
    return TRUE;
  g_set_error (error, NZ_KUBE_EGRESS_ERROR, NZ_KUBE_EGRESS_ERROR_MISMATCH,
               "KubernetesEgressPolicyMismatchError: CiliumNetworkPolicy %s %s; a per-sandbox "
               "policy must be exactly what the host wrote",
               path, reason);
  return FALSE;
}

/* A DNS-1123 label (the owner's name is a label value; its uid ends an object name). */
static gboolean
dns_label (const char *s, gsize max)
{
  gsize n = s != NULL ? strlen (s) : 0;

  if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
    return FALSE;
  for (gsize i = 0; i < n; i++)
    if (!(g_ascii_isdigit (s[i]) || g_ascii_islower (s[i]) || s[i] == '-'))
      return FALSE;
  return TRUE;
}

gboolean
nz_kube_per_sandbox_set (NzKubeClient *client, const NzKubePerSandbox *ps, const char *const *hosts,
                         gboolean *changed, GError **error)
{
  g_autoptr (JsonObject) want = NULL;
  g_autoptr (JsonObject) got = NULL;
  g_autoptr (JsonObject) answer = NULL;
  g_autofree char *path = NULL;
  g_autofree char *collection = NULL;
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (client != NULL && ps != NULL && hosts != NULL && changed != NULL, FALSE);
  *changed = FALSE;
  want = nz_kube_egress_per_sandbox_policy (ps->namespace_, ps->label_key, ps->owner_is_claim,
                                            ps->owner_name, ps->owner_uid, hosts, ps->narrowing,
                                            error);
  if (want == NULL)
    return FALSE;
  /* Both came back from the cluster once; a name that is no label value would select
   * nothing, or something else, and a uid that is no label could not name the policy. */
  if (!dns_label (ps->owner_name, 63) || !dns_label (ps->owner_uid, 253 - 10))
    return (g_set_error (error, NZ_KUBE_ERROR, NZ_KUBE_ERROR_PROTOCOL,
                         "kubernetes: %s %s/%s has a name or uid that cannot name a per-sandbox "
                         "policy; nothing was written",
                         ps->owner_is_claim ? "SandboxClaim" : "Sandbox", ps->namespace_,
                         ps->owner_name),
            FALSE);
  path = nz_kube_egress_policy_path (want);
  if (!nz_kube_admission_fence_check (client, ps->admission_policy_name, ps->admission_binding_name,
                                      error))
    return FALSE;
  if (hosts[0] == NULL)
    {
      /* An empty list: the sandbox is left with the baseline alone. */
      if (nz_kube_delete (client, path, NULL, &local))
        return (*changed = TRUE);
      if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_GONE))
        return TRUE;
      return (g_propagate_error (error, g_steal_pointer (&local)), FALSE);
    }
  collection = g_path_get_dirname (path);
  answer = nz_kube_create (client, collection, want, &local);
  if (answer != NULL)
    *changed = TRUE;
  else if (g_error_matches (local, NZ_KUBE_ERROR, NZ_KUBE_ERROR_CONFLICT))
    {
      /* It exists (an earlier set): a merge patch replaces its arrays (egress,
       * ownerReferences) and the selector's one key; the read-back judges the rest. */
      g_autoptr (JsonObject) before = nz_kube_get (client, path, NULL);

      g_clear_error (&local);
      *changed = before == NULL || !nz_kube_per_sandbox_check (want, before, path, NULL);
      answer = nz_kube_merge_patch (client, path, want, &local);
      if (answer == NULL)
        return (g_propagate_error (error, g_steal_pointer (&local)), FALSE);
    }
  else
    return (g_propagate_error (error, g_steal_pointer (&local)), FALSE);
  /* The answer to the write is not the proof: what the cluster now holds is. */
  got = nz_kube_get (client, path, error);
  return got != NULL && nz_kube_per_sandbox_check (want, got, path, error);
}
