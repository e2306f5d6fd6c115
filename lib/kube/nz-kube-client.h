/* nz-kube-client.h: the Kubernetes API over HTTPS (libsoup 3, GnuTLS through GIO). The
 * cluster CA is verified (or the system trust store when the access names none), the bearer
 * token or client certificate is sent, every request is bounded by apiRequestTimeoutMs, and
 * statuses map to the classes of nz-kube-error.h (spec D.4, D.5). Error messages carry the
 * verb, the path, the status and the server's Status message, never a credential:
 *   "kubernetes: <VERB> <path>: HTTP <code> <reason>: <message>" and
 *   "kubernetes: <VERB> <path>: no answer within <ms>ms". */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "nz-kube-access.h"

G_BEGIN_DECLS

/* spec D.4 apiRequestTimeoutMs: 30000 by default, never below 1000. */
#define NZ_KUBE_API_REQUEST_TIMEOUT_MS 30000
#define NZ_KUBE_API_REQUEST_TIMEOUT_FLOOR_MS 1000
/* A response body beyond this is refused (a LIST of our objects is far smaller). */
#define NZ_KUBE_MAX_BODY (16 * 1024 * 1024)

/* spec D.5 API groups and version. */
#define NZ_KUBE_SANDBOX_API_GROUP "agents.x-k8s.io"
#define NZ_KUBE_SANDBOX_EXTENSIONS_API_GROUP "extensions.agents.x-k8s.io"
#define NZ_KUBE_SANDBOX_API_VERSION "v1beta1"

/* Content types of the writes (spec D.8.5, D.8.8). */
#define NZ_KUBE_CONTENT_JSON "application/json"
#define NZ_KUBE_CONTENT_MERGE_PATCH "application/merge-patch+json"
#define NZ_KUBE_CONTENT_JSON_PATCH "application/json-patch+json"

typedef struct _NzKubeClient NzKubeClient;

/* Takes @access. @timeout_ms 0 means NZ_KUBE_API_REQUEST_TIMEOUT_MS; values below the floor
 * are raised to it (the reference's rule). */
NzKubeClient *nz_kube_client_new (NzKubeAccess *access, guint timeout_ms, GError **error);
void nz_kube_client_free (NzKubeClient *client);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeClient, nz_kube_client_free)

NzKubeAccess *nz_kube_client_get_access (NzKubeClient *client);
guint nz_kube_client_get_timeout_ms (NzKubeClient *client);

/* One request. @body (may be NULL) is sent as @content_type. Returns the response's JSON
 * (new reference; a JSON null for an empty 2xx body), or NULL with a NZ_KUBE_ERROR. A 401
 * from a credential plugin's token runs the plugin once more and retries once (client-go). */
JsonNode *nz_kube_client_request (NzKubeClient *client, const char *method, const char *path,
                                  const char *content_type, JsonNode *body, GError **error);

/* The verbs, each returning the object the server answered (new reference). */
JsonObject *nz_kube_get (NzKubeClient *client, const char *path, GError **error);
JsonObject *nz_kube_create (NzKubeClient *client, const char *collection_path, JsonObject *obj,
                            GError **error);
JsonObject *nz_kube_merge_patch (NzKubeClient *client, const char *path, JsonObject *patch,
                                 GError **error);
JsonObject *nz_kube_json_patch (NzKubeClient *client, const char *path, JsonArray *ops,
                                GError **error);
/* DELETE; with @resource_version a DeleteOptions body with preconditions.resourceVersion
 * (spec D.8.7: a stale one is 409). */
gboolean nz_kube_delete (NzKubeClient *client, const char *path, const char *resource_version,
                         GError **error);

/* "/api/v1/namespaces/<ns>/<resource>[/<name>]" for group NULL or "" (the core group), else
 * "/apis/<group>/<version>/namespaces/<ns>/<resource>[/<name>]"; every segment escaped like
 * encodeURIComponent. */
char *nz_kube_path (const char *group, const char *version, const char *ns, const char *resource,
                    const char *name);

/* A new object {apiVersion: @api_version, kind: @kind, metadata: {name: @name, namespace:
 * @ns}}; *@metadata (may be NULL) borrows its metadata, for labels and annotations. */
JsonObject *nz_kube_object_new (const char *api_version, const char *kind, const char *ns,
                                const char *name, JsonObject **metadata);

G_END_DECLS
