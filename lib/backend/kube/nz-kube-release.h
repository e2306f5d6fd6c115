/* nz-kube-release.h: microvm:kubernetes's bulk verbs (spec D.6.3), for namzu-destroy
 * --selector and namzu-ls --capacity:
 *   - releaseKubernetesTaskSandboxes({labelSelector}): LIST the SandboxClaims of the namespace
 *     by the label selector (claimLabels are their metadata.labels) and DELETE each, 404/410
 *     counting as done; an empty selector is an error. The local handles of the released
 *     sandboxes are removed (with a tombstone, like namzu-destroy), so namzu-ls lists no ghost.
 *   - readKubernetesTaskCapacity: the warm pool's status.readyReplicas and spec.replicas, the
 *     claims whose spec.warmPoolRef.name is the pool, and the namespace's Pending pods.
 * The cluster is named the way namzu-create names it (--config's backend section, then
 * --kubeconfig, --context, --namespace over it: nz_kube_access_spec / nz_kube_access_open).
 * This header needs no Kubernetes type: in a build without the Kubernetes client the verbs
 * are refused like the backend itself ("not available in this build"). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* The flags that name the cluster, shared by namzu-destroy and namzu-ls. */
typedef struct
{
  char *backend;    /* --backend: must be microvm:kubernetes (or --config's backend) */
  char *config;     /* --config FILE: the reference provider config */
  char *kubeconfig; /* --kubeconfig FILE */
  char *context;    /* --context NAME */
  char *namespace;  /* --namespace NS */
  char *warm_pool;  /* --warm-pool NAME (namzu-ls --capacity only) */
} NzKubeBulkFlags;

/* Adds --backend, --config, --kubeconfig, --context, --namespace (and --warm-pool when
 * @warm_pool) to @ctx's main options, storing into @flags. */
void nz_kube_bulk_add_entries (GOptionContext *ctx, NzKubeBulkFlags *flags, gboolean warm_pool);
/* The first of the flags given, as it is spelled ("--kubeconfig"), or NULL when none is. */
const char *nz_kube_bulk_flags_given (const NzKubeBulkFlags *flags);

/* TRUE when @selector is NULL, empty or only whitespace: it would select every claim. */
gboolean nz_kube_selector_is_blank (const char *selector);

/* Both verbs first open the cluster and namespace @flags name: a backend other than
 * microvm:kubernetes is refused (INVALID_ARGS, naming the verb's flag), and so is a config or
 * flag the backend refuses; that reads files only (--config, the kubeconfig). */

/* spec D.6.3 releaseKubernetesTaskSandboxes: {deleted, names} (names of the claims released,
 * in the LIST's order). A blank selector is INVALID_ARGS before any request; one the API
 * server cannot parse (HTTP 400) is INVALID_ARGS naming it. When some DELETE fails the others
 * are still made and their handles removed; the error then names what was and was not
 * released. Returns a new reference. */
JsonObject *nz_kube_release_task_sandboxes (const NzKubeBulkFlags *flags, const char *selector,
                                            GError **error);

/* spec D.6.3 readKubernetesTaskCapacity of the pool --warm-pool (else the config's
 * warmPoolName) names, INVALID_ARGS when neither does: {warmPool, readyReplicas, replicas,
 * claims, pendingPods}. A pool that does not exist is NOT_FOUND. Returns a new reference. */
JsonObject *nz_kube_read_task_capacity (const NzKubeBulkFlags *flags, GError **error);

G_END_DECLS
