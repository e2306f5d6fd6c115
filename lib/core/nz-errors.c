#include "nz-errors.h"

#include <errno.h>
#include <string.h>

G_DEFINE_QUARK (nz-error-quark, nz_error)

gboolean
nz_throw (GError **error, NzErrorCode code, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  if (error != NULL)
    *error = g_error_new_valist (NZ_ERROR, code, fmt, ap);
  va_end (ap);
  return FALSE;
}

NzErrorCode
nz_error_code_from_errno (int errsv)
{
  switch (errsv)
    {
    case ENOENT:
    case ESRCH:
      return NZ_ERROR_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
      return NZ_ERROR_PERMISSION_DENIED;
    case EINVAL:
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
      return NZ_ERROR_INVALID_ARGS;
    case EBUSY:
    case EAGAIN:
    case EEXIST:
      return NZ_ERROR_BUSY;
    case ETIMEDOUT:
      return NZ_ERROR_TIMED_OUT;
    case ENOSYS:
    case EOPNOTSUPP:
      return NZ_ERROR_UNSUPPORTED;
    default:
      return NZ_ERROR_FAILED;
    }
}

gboolean
nz_throw_errno_prefix (GError **error, const char *fmt, ...)
{
  int errsv = errno;
  g_autofree char *prefix = NULL;
  va_list ap;

  va_start (ap, fmt);
  prefix = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NZ_ERROR, nz_error_code_from_errno (errsv), "%s: %s", prefix,
               g_strerror (errsv));
  errno = errsv;
  return FALSE;
}

gboolean
nz_prefix_error (GError **error, const char *fmt, ...)
{
  g_autofree char *prefix = NULL;
  va_list ap;

  if (error == NULL || *error == NULL)
    return FALSE;
  va_start (ap, fmt);
  prefix = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_prefix_error (error, "%s: ", prefix);
  return FALSE;
}

static NzErrorCode
code_from_io_error (int code)
{
  switch (code)
    {
    case G_IO_ERROR_NOT_FOUND:
      return NZ_ERROR_NOT_FOUND;
    case G_IO_ERROR_PERMISSION_DENIED:
    case G_IO_ERROR_READ_ONLY:
      return NZ_ERROR_PERMISSION_DENIED;
    case G_IO_ERROR_INVALID_ARGUMENT:
    case G_IO_ERROR_INVALID_DATA:
    case G_IO_ERROR_INVALID_FILENAME:
      return NZ_ERROR_INVALID_ARGS;
    case G_IO_ERROR_BUSY:
    case G_IO_ERROR_EXISTS:
    case G_IO_ERROR_WOULD_BLOCK:
      return NZ_ERROR_BUSY;
    case G_IO_ERROR_TIMED_OUT:
      return NZ_ERROR_TIMED_OUT;
    case G_IO_ERROR_NOT_SUPPORTED:
      return NZ_ERROR_UNSUPPORTED;
    default:
      return NZ_ERROR_FAILED;
    }
}

static NzErrorCode
code_from_file_error (int code)
{
  switch (code)
    {
    case G_FILE_ERROR_NOENT:
      return NZ_ERROR_NOT_FOUND;
    case G_FILE_ERROR_ACCES:
    case G_FILE_ERROR_PERM:
    case G_FILE_ERROR_ROFS:
      return NZ_ERROR_PERMISSION_DENIED;
    case G_FILE_ERROR_EXIST:
      return NZ_ERROR_BUSY;
    case G_FILE_ERROR_INVAL:
    case G_FILE_ERROR_NOTDIR:
    case G_FILE_ERROR_ISDIR:
    case G_FILE_ERROR_NAMETOOLONG:
      return NZ_ERROR_INVALID_ARGS;
    default:
      return NZ_ERROR_FAILED;
    }
}

void
nz_error_convert (GError **error)
{
  GError *e;

  if (error == NULL || *error == NULL || (*error)->domain == NZ_ERROR)
    return;
  e = *error;
  if (e->domain == G_IO_ERROR)
    e->code = code_from_io_error (e->code);
  else if (e->domain == G_FILE_ERROR)
    e->code = code_from_file_error (e->code);
  else if (e->domain == G_OPTION_ERROR)
    e->code = NZ_ERROR_INVALID_ARGS;
  else
    e->code = NZ_ERROR_FAILED;
  e->domain = NZ_ERROR;
}

const char *
nz_error_code_name (const GError *error)
{
  static const char *const names[] = {
    [NZ_ERROR_FAILED] = "failed",
    [NZ_ERROR_INVALID_ARGS] = "invalid_args",
    [NZ_ERROR_NOT_FOUND] = "not_found",
    [NZ_ERROR_BUSY] = "busy",
    [NZ_ERROR_TIMED_OUT] = "timed_out",
    [NZ_ERROR_PERMISSION_DENIED] = "permission_denied",
    [NZ_ERROR_UNSUPPORTED] = "unsupported",
    [NZ_ERROR_PROTOCOL] = "protocol",
  };

  if (error == NULL || error->domain != NZ_ERROR || error->code < 0
      || (gsize)error->code >= G_N_ELEMENTS (names))
    return "failed";
  return names[error->code];
}

int
nz_error_to_exit_code (const GError *error)
{
  if (error == NULL)
    return NZ_EXIT_OK;
  if ((error->domain == NZ_ERROR && error->code == NZ_ERROR_INVALID_ARGS)
      || error->domain == G_OPTION_ERROR)
    return NZ_EXIT_USAGE;
  return NZ_EXIT_FAILURE;
}
