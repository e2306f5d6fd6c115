/* nz-seccomp.h: the seccomp filter every container:bwrap sandbox runs under, built with
 * libseccomp and exported as classic BPF for `bwrap --seccomp FD`. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The syscalls the filter answers with EPERM (clone3 gets ENOSYS, see the .c). */
const char *const *nz_seccomp_denied_syscalls (void);

/* Builds the filter and returns a memfd holding the BPF program, offset 0, or -1
 * with an error. The caller owns the fd. */
int nz_seccomp_build_fd (GError **error);

G_END_DECLS
