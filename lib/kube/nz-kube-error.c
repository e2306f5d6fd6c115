/* nz-kube-error.c: the kube tier's error domain and its one map into NZ_ERROR. */
#include "nz-kube-error.h"

#include "nz-errors.h"

/* clang-format off */
G_DEFINE_QUARK (nz-kube-error-quark, nz_kube_error)
/* clang-format on */

void
nz_kube_error_convert (GError **error)
{
  static const NzErrorCode map[] = {
    [NZ_KUBE_ERROR_FAILED] = NZ_ERROR_FAILED,
    [NZ_KUBE_ERROR_CONFIG] = NZ_ERROR_INVALID_ARGS,
    [NZ_KUBE_ERROR_CREDENTIAL] = NZ_ERROR_PERMISSION_DENIED,
    [NZ_KUBE_ERROR_GONE] = NZ_ERROR_NOT_FOUND,
    [NZ_KUBE_ERROR_CONFLICT] = NZ_ERROR_BUSY,
    [NZ_KUBE_ERROR_PATCH_NOT_APPLIED] = NZ_ERROR_BUSY,
    [NZ_KUBE_ERROR_TIMED_OUT] = NZ_ERROR_TIMED_OUT,
    [NZ_KUBE_ERROR_TLS] = NZ_ERROR_PERMISSION_DENIED,
    [NZ_KUBE_ERROR_PROTOCOL] = NZ_ERROR_PROTOCOL,
  };

  if (error == NULL || *error == NULL)
    return;
  if ((*error)->domain != NZ_KUBE_ERROR)
    {
      nz_error_convert (error);
      return;
    }
  (*error)->code = (*error)->code >= 0 && (gsize)(*error)->code < G_N_ELEMENTS (map)
                       ? (int)map[(*error)->code]
                       : NZ_ERROR_FAILED;
  (*error)->domain = NZ_ERROR;
}
