/* nz-errors.h: the namzu error domain, throw helpers and the one error -> exit code map. */
#pragma once

#include <glib.h>
#include <gio/gio.h>

G_BEGIN_DECLS

#define NZ_ERROR (nz_error_quark ())
GQuark nz_error_quark (void);

typedef enum
{
  NZ_ERROR_FAILED,
  NZ_ERROR_INVALID_ARGS,
  NZ_ERROR_NOT_FOUND,
  NZ_ERROR_BUSY,
  NZ_ERROR_TIMED_OUT,
  NZ_ERROR_PERMISSION_DENIED,
  NZ_ERROR_UNSUPPORTED,
  NZ_ERROR_PROTOCOL,
} NzErrorCode;

/* CLI exit codes (DESIGN.md "CLI contract"). */
#define NZ_EXIT_OK 0
#define NZ_EXIT_FAILURE 1
#define NZ_EXIT_USAGE 2
/* A sandbox's server (namzu-agent, namzu-worker) whose lifetime ended (nz-lifetime.h): not 0
 * (a clean SIGTERM) nor 1 (a failure), so whoever reads it can tell expiry apart. */
#define NZ_EXIT_EXPIRED 3

/* Always return FALSE so callers can `return nz_throw (...)`. */
gboolean nz_throw (GError **error, NzErrorCode code, const char *fmt, ...) G_GNUC_PRINTF (3, 4);
/* Sets an error from errno (saved on entry), prefixed: "<prefix>: <strerror>". */
gboolean nz_throw_errno_prefix (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);
/* Prefixes an existing error's message and returns FALSE. */
gboolean nz_prefix_error (GError **error, const char *fmt, ...) G_GNUC_PRINTF (2, 3);

NzErrorCode nz_error_code_from_errno (int errsv);
/* The one conversion point for foreign (GIO, GnuTLS, ...) errors into NZ_ERROR. */
void nz_error_convert (GError **error);

/* Stable, lowercase names used in the `{"error":{"code":...}}` CLI object. */
const char *nz_error_code_name (const GError *error);
/* The one map from an error to a CLI exit code. */
int nz_error_to_exit_code (const GError *error);

G_END_DECLS
