/* nz-kube-access.h: how namzu reaches a cluster's API server, the way Kubernetes users expect
 * (docs/kubernetes.md "Cluster access"):
 *   - in-cluster: the pod's service-account token, CA and namespace, and
 *     KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT (spec D.4 `access: {inCluster: true}`);
 *   - a kubeconfig: an explicit path, else $KUBECONFIG (a colon-separated list, merged the
 *     way kubectl merges it), else ~/.kube/config; its current-context or a named one;
 *   - an explicit server and bearer token (spec D.4 `access: {server, ca?, getToken}`).
 * Loading reads files only; nothing here contacts the cluster. */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

#include "nz-kube-error.h"

G_BEGIN_DECLS

/* The service-account directory a pod sees (token, ca.crt, namespace). */
#define NZ_KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
/* Test knob: another directory in place of NZ_KUBE_SERVICEACCOUNT_DIR (tests cannot write
 * /var/run/secrets). Not for production use. */
#define NZ_KUBE_SERVICEACCOUNT_DIR_ENV "NZ_TEST_KUBE_SERVICEACCOUNT_DIR"

/* The two ExecCredential versions a credential plugin may speak. */
#define NZ_KUBE_EXEC_V1 "client.authentication.k8s.io/v1"
#define NZ_KUBE_EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"
/* A plugin's stdout beyond this is refused (an ExecCredential is a few KiB). */
#define NZ_KUBE_EXEC_MAX_OUTPUT (1024 * 1024)
/* A plugin that has not answered by then is killed (kubectl has no bound; a CLI needs one). */
#define NZ_KUBE_EXEC_TIMEOUT_MS 60000

typedef struct _NzKubeExec NzKubeExec;

typedef struct
{
  char *server;          /* "https://host:port" (no trailing slash) */
  char *ca_pem;          /* the cluster CA bundle; NULL: the system's trust store */
  gboolean insecure;     /* insecure-skip-tls-verify: no server verification (warned) */
  char *tls_server_name; /* the name the certificate is verified against, else the host */
  char *token;           /* a static bearer token */
  char *token_file;      /* a bearer token re-read on every credential read */
  char *client_cert_pem; /* a client certificate and its key (both or neither) */
  char *client_key_pem;
  NzKubeExec *exec;    /* a credential plugin */
  char *namespace;     /* the context's (or the pod's) namespace, NULL when none */
  char *context;       /* the kubeconfig context used; NULL for in-cluster/explicit */
  GPtrArray *warnings; /* what a tool should print once (e.g. insecure-skip-tls-verify) */
} NzKubeAccess;

/* The credential for one request, read from the access (token file re-read, plugin run or its
 * cached answer). */
typedef struct
{
  char *token;           /* bearer, or NULL */
  char *client_cert_pem; /* with client_key_pem, or NULL */
  char *client_key_pem;
} NzKubeCredential;

void nz_kube_access_free (NzKubeAccess *access);
void nz_kube_credential_free (NzKubeCredential *cred);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeAccess, nz_kube_access_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzKubeCredential, nz_kube_credential_free)

/* In-cluster access: <dir>/token (re-read per request: kubelet rotates it), <dir>/ca.crt,
 * <dir>/namespace, server https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT. */
NzKubeAccess *nz_kube_access_in_cluster (GError **error);

/* A kubeconfig. @path: an explicit file (must exist), or NULL for $KUBECONFIG, else
 * ~/.kube/config. @context: a context name, or NULL for current-context. */
NzKubeAccess *nz_kube_access_from_kubeconfig (const char *path, const char *context,
                                              GError **error);

/* Explicit server and bearer token; @ca_pem NULL for the system trust store. */
NzKubeAccess *nz_kube_access_new_explicit (const char *server, const char *ca_pem,
                                           const char *token, GError **error);

/* The credential to send now. A plugin is run when it has no cached answer or the answer's
 * expirationTimestamp has passed. */
NzKubeCredential *nz_kube_access_credential (NzKubeAccess *access, GError **error);

/* The server said 401: forget a plugin's cached answer so the next read runs it again. */
void nz_kube_access_forget_credential (NzKubeAccess *access);

/* YAML (the kubeconfig subset: mappings, sequences, plain and quoted scalars, every scalar a
 * string) as a JSON tree; anchors, aliases and multiple documents are refused. */
JsonNode *nz_kube_yaml_parse (const char *text, gsize len, const char *what, GError **error);

G_END_DECLS
