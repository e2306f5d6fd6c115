/* nz-kube-workspace.h: the Kubernetes-object half of workspaces (spec D.8): identity and
 * naming, the Block-mode disk rule, the pod-template hash, the holder-epoch fence (JSON Patch
 * of test+add, the 422 retry), the unfenced merge patch, and the fenced DELETE. The agent-side
 * steps of a suspend (reap terminals, quiesce, flush, guestBootId) are the caller's; this
 * library only reads and writes API objects; lib/backend/kube/nz-kube-ws.c drives it for the
 * tools. */
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

/* D.8.7: check the epoch on @current (the handle's last read; NULL: GET, 404 is done), DELETE
 * with preconditions.resourceVersion of that read; a 409 re-reads and retries (up to
 * NZ_KUBE_FENCED_DELETE_RETRIES times); 404 is success. NZ_KUBE_NO_EPOCH: a plain DELETE. */
gboolean nz_kube_workspace_delete (NzKubeClient *client, const char *ns, const char *workspace_id,
                                   gint64 epoch, JsonObject *current, GError **error);

/* The sandbox object path of @workspace_id (NULL with INVALID_ID). */
char *nz_kube_workspace_path (const char *ns, const char *workspace_id, GError **error);

/* ---- Create and adopt (D.8.3, D.8.4) ---- */

#define NZ_KUBE_EGRESS_PROFILE_LABEL_KEY "sandbox.namzu.ai/egress-profile"

/* A hook of the caller (D.8.3 steps 2 and 5: egress and ingress verification, another
 * library): sees the pod labels the Sandbox will carry; FALSE with @error refuses the create. */
typedef gboolean (*NzKubeWorkspaceVerifyFunc) (JsonObject *pod_labels, gpointer data,
                                               GError **error);

typedef struct
{
  const char *ns;
  const char *workspace_id;
  const char *template_name;     /* sandboxTemplateName */
  const char *profile_label_key; /* NULL: NZ_KUBE_EGRESS_PROFILE_LABEL_KEY */
  const char *egress_profile;    /* NULL: none configured */
  gboolean per_sandbox_egress;   /* refused on a workspace (CONFIG) */
  gint64 epoch;                  /* NZ_KUBE_NO_EPOCH or a non-negative safe integer */
  gboolean refresh_pod_template;
  NzKubeWorkspaceVerifyFunc verify; /* may be NULL */
  gpointer verify_data;
} NzKubeWorkspaceSpec;

/* KubernetesWorkspaceMismatchError's fields. */
typedef struct
{
  char *sandbox_name;
  char *field;             /* "sandboxTemplateName" | "egressProfile" | "runtimeClassName" */
  char *expected, *actual; /* NULL: absent */
} NzKubeWorkspaceMismatch;
void nz_kube_workspace_mismatch_free (NzKubeWorkspaceMismatch *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeWorkspaceMismatch, nz_kube_workspace_mismatch_free)

typedef struct
{
  char *sandbox_name;
  char *origin;           /* "created" | "resumed" | "adopted-running" */
  JsonObject *sandbox;    /* the last object read or written */
  gint64 held_epoch;      /* the epoch held (NZ_KUBE_NO_EPOCH without one) */
  char *draining_pod_uid; /* adopt: a terminating pod to skip when binding, or NULL */
  gboolean woke;          /* this call moved it Suspended -> Running: wait for the new pod */
  gboolean refreshed;     /* a template refresh was applied */
} NzKubeWorkspaceOpened;
void nz_kube_workspace_opened_free (NzKubeWorkspaceOpened *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeWorkspaceOpened, nz_kube_workspace_opened_free)

/* D.8.3 steps 1, 3, 4, 6, 7, 8 (+ the verify hook for 2 and 5): validate, GET the template and
 * check its disk, POST the Sandbox (Running, service, no shutdownTime, the epoch and hash
 * annotations); a 409 adopts. Errors: INVALID_ID, CONFIG, DISK, MISMATCH (with *@mismatch when
 * non-NULL), PRECONDITION, NZ_KUBE_ERROR. */
NzKubeWorkspaceOpened *nz_kube_workspace_create (NzKubeClient *client,
                                                 const NzKubeWorkspaceSpec *spec,
                                                 NzKubeWorkspaceMismatch **mismatch,
                                                 GError **error);
/* D.8.4 on its own (the template is read for runtimeClassName and a refresh). */
NzKubeWorkspaceOpened *nz_kube_workspace_adopt (NzKubeClient *client,
                                                const NzKubeWorkspaceSpec *spec,
                                                NzKubeWorkspaceMismatch **mismatch, GError **error);

/* ---- Pods, suspend and resume (D.8.5, D.8.6) ---- */

/* D.5 readPodIP / isPodLive / isPodStopped. */
const char *nz_kube_pod_ip (JsonObject *pod);
gboolean nz_kube_pod_is_live (JsonObject *pod);
gboolean nz_kube_pod_is_stopped (JsonObject *pod);

/* Polls the pod (named after the Sandbox) every @interval_ms until GET is 404 or the pod is
 * Succeeded/Failed; past @timeout_ms (one deadline) SUSPEND_TIMEOUT: "kubernetes workspace
 * <id>: suspend of <sandboxName> unconfirmed: the pod was not retired within <ms>ms". */
gboolean nz_kube_workspace_wait_pod_retired (NzKubeClient *client, const char *ns,
                                             const char *workspace_id, guint interval_ms,
                                             guint timeout_ms, GError **error);
/* Polls for the new pod: same name, uid != @retired_uid (may be NULL), live, with an IP.
 * Returns its uid and IP; past the deadline RESUME_TIMEOUT. */
gboolean nz_kube_workspace_wait_pod_ready (NzKubeClient *client, const char *ns,
                                           const char *workspace_id, const char *retired_uid,
                                           guint interval_ms, guint timeout_ms, char **pod_uid,
                                           char **pod_ip, GError **error);

/* A step of the caller inside a suspend (D.8.5 steps 3-5: reap terminals, quiesce, flush):
 * FALSE with @error stops the suspend before any patch. */
typedef gboolean (*NzKubeWorkspaceStepFunc) (JsonObject *sandbox, gpointer data, GError **error);

/* D.8.5 object side: GET (the epoch gate when @epoch is set; a Suspended object returns TRUE
 * at once with *@already TRUE), @before_patch, the Suspended write (fenced or merge), then
 * wait_pod_retired. */
gboolean nz_kube_workspace_suspend (NzKubeClient *client, const char *ns, const char *workspace_id,
                                    gint64 epoch, NzKubeWorkspaceStepFunc before_patch,
                                    gpointer data, guint interval_ms, guint timeout_ms,
                                    gboolean *already, GError **error);
/* D.8.6 object side: GET, the epoch rule, then the Running write (a template refresh with
 * @refresh_template, D.8.9; a stamp-only write when already Running with an epoch), then
 * wait_pod_ready skipping @retired_uid. *@woke TRUE when this call moved the mode. */
gboolean nz_kube_workspace_resume (NzKubeClient *client, const char *ns, const char *workspace_id,
                                   gint64 epoch, JsonNode *refresh_template,
                                   const char *retired_uid, guint interval_ms, guint timeout_ms,
                                   char **pod_uid, char **pod_ip, gboolean *woke, GError **error);

/* ---- Standalone reads (D.8.8, D.8.10) ---- */

typedef struct
{
  char *workspace_id;
  char *operating_mode;
  char *template;
  char *created_at;      /* or NULL */
  char *mode_changed_at; /* or NULL */
  gint64 holder_epoch;   /* 0 when absent, -1 when unreadable (omitted) */
} NzKubeWorkspaceInfo;
void nz_kube_workspace_info_free (NzKubeWorkspaceInfo *i);

/* One GET of the sandboxes collection, filtered to the namzu-ws- prefix and a non-empty
 * template label. A GPtrArray of NzKubeWorkspaceInfo (owns them). */
GPtrArray *nz_kube_workspace_list (NzKubeClient *client, const char *ns, GError **error);

typedef struct
{
  char *sandbox_uid;
  GHashTable *volume_claim_uids; /* vctName -> uid, best effort */
  char *pod_uid;                 /* NULL when no live pod */
  gboolean suspended;            /* spec.operatingMode is Suspended (D.8.12: maybe by another) */
} NzKubeWorkspaceIdentity;
void nz_kube_workspace_identity_free (NzKubeWorkspaceIdentity *i);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeWorkspaceIdentity, nz_kube_workspace_identity_free)

/* D.8.10: the Sandbox uid (REPLACED when @expected_sandbox_uid is set and the object is gone or
 * has another uid: "kubernetes workspace <id>: <sandboxName> was replaced (expected uid <e>,
 * found <a|none>)"; terminal, never rebind), the PVC uids (best effort) and the pod uid. */
NzKubeWorkspaceIdentity *nz_kube_workspace_read_identity (NzKubeClient *client, const char *ns,
                                                          const char *workspace_id,
                                                          const char *expected_sandbox_uid,
                                                          GError **error);

G_END_DECLS
