/* nz-kube-options.h: microvm:kubernetes's own options (spec D.4), a private type behind
 * NzCreateOptions's backend_opts: what the reference config's backend section and
 * namzu-create's Kubernetes flags (--kubeconfig, --context, --namespace, --template,
 * --warm-pool, --agent-address, --workspace, --epoch, --refresh-pod-template) say, parsed by
 * nz_kube_parse_config. Nothing here contacts the cluster: the backend is built without I/O and
 * verifies lazily (spec D.4). */
#pragma once

#include "nz-backend.h"
#include "nz-kube-access.h"

G_BEGIN_DECLS

#define NZ_KUBE_BACKEND_NAME "microvm:kubernetes"

/* spec D.4 defaults */
#define NZ_KUBE_AGENT_PORT_DEFAULT 1024
#define NZ_KUBE_READY_POLL_MS_DEFAULT 50
#define NZ_KUBE_READY_TIMEOUT_MS_DEFAULT 60000
#define NZ_KUBE_CLAIM_TTL_S_DEFAULT 3600
#define NZ_KUBE_STREAM_HEARTBEAT_MS_DEFAULT 15000
/* spec D.6.1: the object name of a task sandbox is namzu-task-<uuid>. */
#define NZ_KUBE_TASK_NAME_PREFIX "namzu-task-"

typedef enum
{
  NZ_KUBE_ACCESS_KUBECONFIG, /* $KUBECONFIG / ~/.kube/config / --kubeconfig, --context */
  NZ_KUBE_ACCESS_IN_CLUSTER, /* access: {inCluster: true} */
  NZ_KUBE_ACCESS_EXPLICIT,   /* access: {server, ca?, token} */
} NzKubeAccessKind;

typedef struct
{
  NzKubeAccessKind access_kind;
  char *kubeconfig;    /* explicit kubeconfig path, or NULL */
  char *context;       /* kubeconfig context, or NULL for current-context */
  char *server;        /* EXPLICIT */
  char *ca_pem;        /* EXPLICIT, may be NULL */
  char *token;         /* EXPLICIT: a secret; never printed */
  char *namespace;     /* NULL: the kubeconfig context's or the pod's namespace */
  char *template_name; /* sandboxTemplateName */
  char *warm_pool;     /* warmPoolName: set -> a SandboxClaim; unset -> a Sandbox */
  guint agent_port;    /* 0: NZ_KUBE_AGENT_PORT_DEFAULT */
  gboolean pod_ip;     /* agentAddress 'pod-ip' (FALSE: 'service') */
  guint ready_poll_ms;
  guint ready_timeout_ms;
  gint64 claim_ttl_s;
  char *runtime_class;
  gboolean ingress_unverified;   /* ingress: 'unverified' */
  guint api_timeout_ms;          /* 0: NZ_KUBE_API_REQUEST_TIMEOUT_MS */
  gint64 heartbeat_ms;           /* -1: unset (the default) */
  JsonObject *claim_labels;      /* claimLabels, string values; may be NULL */
  JsonObject *egress;            /* backend.egress, kept for the egress check; may be NULL */
  char *workspace_id;            /* workspaceId: a workspace namzu-ws-<id> (spec D.8), or NULL */
  gint64 holder_epoch;           /* holderEpoch: -1 unset (no fence) */
  gboolean refresh_pod_template; /* refreshPodTemplate (spec D.8.9) */
} NzKubeOptions;

#define NZ_KUBE_OPTIONS_FOR NZ_KUBE_BACKEND_NAME

extern const char *const nz_kube_config_keys[];
void nz_kube_parse_config (JsonObject *b, NzCreateOptions *opts, GPtrArray *reasons);

/* @opts's Kubernetes options, or the defaults when it carries none. Never NULL. */
const NzKubeOptions *nz_kube_options (const NzCreateOptions *opts);

/* The access the options name, as JSON for the private handle ({kind, kubeconfig?, context?}
 * or {kind:"in-cluster"} or {kind:"explicit", server, ca?, token}): every later tool call
 * reaches the cluster the way the create did. Returns a new reference. */
JsonObject *nz_kube_access_spec (const NzKubeOptions *k);
/* Opens the access a spec (nz_kube_access_spec) names. */
NzKubeAccess *nz_kube_access_open (JsonObject *spec, GError **error);

G_END_DECLS
