/* nz-kube-workspace.h: the Kubernetes-object half of workspaces (spec D.8): identity and
 * naming, the Block-mode disk rule, the pod-template hash, the holder-epoch fence (JSON Patch
 * of test+add, the 422 retry), the unfenced merge patch, and the fenced DELETE. The agent-side
 * steps of a suspend (reap terminals, quiesce, flush, guestBootId) are the caller's; this
 * library only reads and writes API objects. Not yet reachable from the tools. */
#pragma once

#include <json-glib/json-glib.h>

#include "nz-kube-client.h"

G_BEGIN_DECLS

#define NZ_KUBE_WORKSPACE_NAME_PREFIX "namzu-ws-"
#define NZ_KUBE_WORKSPACE_ID_MAX 54 /* 63 - strlen (prefix) */
#define NZ_KUBE_SANDBOX_TEMPLATE_LABEL_KEY "sandbox.namzu.ai/template"
#define NZ_KUBE_HOLDER_EPOCH_ANNOTATION "sandbox.namzu.ai/holder-epoch"
#define NZ_KUBE_POD_TEMPLATE_HASH_ANNOTATION "sandbox.namzu.ai/pod-template-hash"
#define NZ_KUBE_MODE_CHANGED_AT_ANNOTATION "sandbox.namzu.ai/operating-mode-changed-at"
#define NZ_KUBE_HOLDER_EPOCH_WRITE_ATTEMPTS 3
#define NZ_KUBE_FENCED_DELETE_RETRIES 3 /* D.8.7: a 409 re-reads and retries up to 3 times */

#define NZ_KUBE_WORKSPACE_ERROR (nz_kube_workspace_error_quark ())
GQuark nz_kube_workspace_error_quark (void);

typedef enum
{
  NZ_KUBE_WORKSPACE_ERROR_INVALID_ID,      /* D.8.1: refused, never sanitised */
  NZ_KUBE_WORKSPACE_ERROR_DISK,            /* KubernetesWorkspaceDiskError */
  NZ_KUBE_WORKSPACE_ERROR_PRECONDITION,    /* KubernetesWorkspacePreconditionError */
  NZ_KUBE_WORKSPACE_ERROR_MISMATCH,        /* KubernetesWorkspaceMismatchError */
  NZ_KUBE_WORKSPACE_ERROR_SUSPEND_TIMEOUT, /* KubernetesWorkspaceSuspendTimeoutError */
  NZ_KUBE_WORKSPACE_ERROR_RESUME_TIMEOUT,  /* no new live pod with an IP in time */
  NZ_KUBE_WORKSPACE_ERROR_REPLACED,        /* KubernetesWorkspaceReplacedError */
  NZ_KUBE_WORKSPACE_ERROR_CONFIG,          /* e.g. KubernetesWorkspacePerSandboxEgressConfigError */
} NzKubeWorkspaceErrorCode;

/* D.8.1: TRUE when @id matches ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ and has at most 54 chars. */
gboolean nz_kube_workspace_check_id (const char *id, GError **error);
/* "namzu-ws-<id>", or NULL with INVALID_ID. */
char *nz_kube_workspace_name (const char *id, GError **error);

/* D.8.2 assertBlockModeWorkspaceDisk on a template's (or Sandbox's) spec: non-empty
 * volumeClaimTemplates, each named, volumeMode Block, each referenced by a container or
 * initContainer volumeDevices entry and by no volumeMounts entry. Else DISK with the message
 * "<source>: <reason>". */
gboolean nz_kube_workspace_assert_block_disk (const char *source, JsonObject *spec, GError **error);

/* D.5 canonical JSON: keys sorted by UTF-16 code unit recursively, serialised as
 * JSON.stringify does. Returns a new string. */
char *nz_kube_canonical_json (JsonNode *node);
/* "sha256:" + hex SHA-256 of nz_kube_canonical_json (@pod_template). */
char *nz_kube_pod_template_hash (JsonNode *pod_template);

/* D.5 holder epoch: NULL (absent) is 0; "^(?:0|[1-9][0-9]*)$" within a safe integer is its
 * value; anything else returns FALSE (unreadable, refused). */
gboolean nz_kube_holder_epoch_parse (const char *annotation, guint64 *out);

/* No epoch given (the fence is off). */
#define NZ_KUBE_NO_EPOCH ((gint64)-1)

/* The stored epoch of @sandbox. FALSE when its annotation is unreadable; *@annotation points
 * at the raw annotation (NULL when absent). */
gboolean nz_kube_workspace_stored_epoch (JsonObject *sandbox, guint64 *out,
                                         const char **annotation);
/* D.8.8 the rule: TRUE iff the stored epoch <= @epoch (a readable annotation), else
 * PRECONDITION: "kubernetes workspace <id>: <operation> refused: holder epoch <e> is behind the
 * stored epoch <s> of <sandboxName>" or "...: the stored holder-epoch annotation \"<a>\" of
 * <sandboxName> is unreadable". */
gboolean nz_kube_workspace_check_epoch (JsonObject *sandbox, const char *operation,
                                        const char *workspace_id, guint64 epoch, GError **error);

/* One fenced (or plain) write of a workspace Sandbox. */
typedef struct
{
  const char *operating_mode; /* "Running" / "Suspended", or NULL: the mode is kept */
  JsonNode *pod_template;     /* a refresh (D.8.9): the new spec.podTemplate, else NULL */
  gboolean require_suspended; /* caller test /spec/operatingMode == "Suspended" (refresh) */
  const char *now;            /* operating-mode-changed-at; NULL: the host clock */
} NzKubeWorkspaceWrite;

/* The JSON Patch of D.8.8 for @w on @current at @epoch (tests first, then adds; see the
 * spec for the order). operating-mode-changed-at is stamped only when @w changes the mode. */
JsonArray *nz_kube_workspace_fenced_patch (JsonObject *current, guint64 epoch,
                                           const NzKubeWorkspaceWrite *w);
/* The unfenced merge-patch body of D.8.5: {metadata:{annotations:{changed-at}},
 * spec:{operatingMode}}; the annotation only when the mode changes. */
JsonObject *nz_kube_workspace_merge_patch_body (JsonObject *current, const char *mode,
                                                const char *now);

/* The fenced write with the 422 retry of D.8.8 (at most HOLDER_EPOCH_WRITE_ATTEMPTS): @current
 * is the last read (NULL: GET first). Returns the object the server answered, or for a
 * refresh whose re-read is no longer Suspended the re-read with *@applied FALSE (the epoch
 * checked). Errors: PRECONDITION, or the NZ_KUBE_ERROR of the API (PATCH_NOT_APPLIED when the
 * tested value did not move, GONE...). @epoch NZ_KUBE_NO_EPOCH sends the merge patch
 * (refresh: a JSON patch with the caller test only). */
JsonObject *nz_kube_workspace_write (NzKubeClient *client, const char *ns, const char *workspace_id,
                                     const char *operation, gint64 epoch,
                                     const NzKubeWorkspaceWrite *w, JsonObject *current,
                                     gboolean *applied, GError **error);

/* D.8.7: GET (404: done), check the epoch, DELETE with preconditions.resourceVersion of that
 * read; a 409 re-reads and retries (1 + NZ_KUBE_FENCED_DELETE_RETRIES attempts); 404 is success.
 * NZ_KUBE_NO_EPOCH: a plain DELETE (404 OK). */
gboolean nz_kube_workspace_delete (NzKubeClient *client, const char *ns, const char *workspace_id,
                                   gint64 epoch, GError **error);

/* The sandbox object path of @workspace_id (NULL with INVALID_ID). */
char *nz_kube_workspace_path (const char *ns, const char *workspace_id, GError **error);

G_END_DECLS
