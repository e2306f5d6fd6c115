/* nz-kube-error.h: the kube tier's error domain. Classes follow the reference's Kubernetes
 * client (spec D.4/D.5, k8s-client.test.ts): 401/403 a credential error, 404/410 gone
 * (AlreadyGone: release and lease renewal count it as done), 409 conflict, 422 a patch not
 * applied (a JSON Patch `test` that failed, or an object the server called Invalid). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define NZ_KUBE_ERROR (nz_kube_error_quark ())
GQuark nz_kube_error_quark (void);

typedef enum
{
  NZ_KUBE_ERROR_FAILED,            /* any other HTTP status or transport failure */
  NZ_KUBE_ERROR_CONFIG,            /* a kubeconfig / in-cluster setup we cannot use */
  NZ_KUBE_ERROR_CREDENTIAL,        /* HTTP 401 or 403, or a credential plugin that failed */
  NZ_KUBE_ERROR_GONE,              /* HTTP 404 or 410 */
  NZ_KUBE_ERROR_CONFLICT,          /* HTTP 409 */
  NZ_KUBE_ERROR_PATCH_NOT_APPLIED, /* HTTP 422 */
  NZ_KUBE_ERROR_TIMED_OUT,         /* no answer within apiRequestTimeoutMs */
  NZ_KUBE_ERROR_TLS,               /* the server's certificate is not the cluster CA's */
  NZ_KUBE_ERROR_PROTOCOL,          /* a 2xx whose body is not the JSON object we asked for */
} NzKubeErrorCode;

/* Moves a NZ_KUBE_ERROR into NZ_ERROR (nz-errors.h) for the CLI's one exit-code map:
 * CONFIG -> INVALID_ARGS, CREDENTIAL -> PERMISSION_DENIED, GONE -> NOT_FOUND,
 * CONFLICT -> BUSY, PATCH_NOT_APPLIED -> BUSY, TIMED_OUT -> TIMED_OUT, TLS -> PERMISSION_DENIED,
 * PROTOCOL -> PROTOCOL, FAILED -> FAILED. Other domains go through nz_error_convert. */
void nz_kube_error_convert (GError **error);

G_END_DECLS
