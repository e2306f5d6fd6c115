#define _GNU_SOURCE
#include "nz-seccomp.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nz-autofd.h"
#include "nz-errors.h"

/* Default allow, and deny with EPERM what a workload in a namespace sandbox never needs and
 * what has a history of turning a sandboxed process into a host compromise:
 *   mount, umount2, pivot_root, chroot, move_mount, open_tree, fsopen, fsconfig, fsmount,
 *   fspick, mount_setattr  - reshaping the filesystem view bwrap built (and the new mount API
 *                            that reaches the same places);
 *   unshare, setns         - no nested namespaces: a fresh user namespace hands back a full
 *                            capability set and a large kernel attack surface;
 *   kexec_load, kexec_file_load, reboot, init_module, finit_module, delete_module
 *                          - the kernel itself;
 *   bpf, perf_event_open   - kernel attack surface and side channels;
 *   keyctl, add_key, request_key - the kernel keyring is not namespaced;
 *   swapon, swapoff, syslog, acct - host-global state;
 *   open_by_handle_at      - walks past the mount view by inode handle (the "shocker" escape);
 *   name_to_handle_at      - its partner;
 *   userfaultfd            - stalls kernel threads at will, a race-exploit primitive;
 *   ptrace, process_vm_readv, process_vm_writev - no debugging of other processes;
 *   io_uring_setup, io_uring_enter, io_uring_register - runs syscalls this filter never sees;
 *   ioctl(TIOCSTI), ioctl(TIOCLINUX) - pushing keystrokes into a terminal outside;
 *   clone with any CLONE_NEW* flag - unshare by another name.
 * clone3 gets ENOSYS instead of EPERM: its flags sit behind a pointer a filter cannot read,
 * and ENOSYS makes glibc fall back to clone(), which the rule above can inspect.
 * The rules are added for x86_64, x86 (i386) and x32, so a 32-bit or x32 binary meets the same
 * filter; any other architecture is killed (libseccomp's bad-arch default). */
static const char *const denied[] = {
  "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
  "fsmount", "fspick", "mount_setattr", "unshare", "setns", "kexec_load", "kexec_file_load",
  "reboot", "init_module", "finit_module", "delete_module", "bpf", "perf_event_open", "keyctl",
  "add_key", "request_key", "swapon", "swapoff", "syslog", "acct", "open_by_handle_at",
  "name_to_handle_at", "userfaultfd", "ptrace", "process_vm_readv", "process_vm_writev",
  "io_uring_setup", "io_uring_enter", "io_uring_register", NULL
};

#define NZ_CLONE_NS_FLAGS                                                                      \
  (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID \
   | CLONE_NEWNET)

const char *const *
nz_seccomp_denied_syscalls (void)
{
  return denied;
}

static void
ctx_release (scmp_filter_ctx *ctx)
{
  if (*ctx != NULL)
    seccomp_release (*ctx);
}

static gboolean
throw_seccomp (GError **error, int rc, const char *what)
{
  errno = -rc;
  return nz_throw_errno_prefix (error, "seccomp: %s", what);
}

int
nz_seccomp_build_fd (GError **error)
{
  __attribute__ ((cleanup (ctx_release))) scmp_filter_ctx ctx = NULL;
  nz_autofd int fd = -1;
  static const guint32 extra_arches[] = { SCMP_ARCH_X86, SCMP_ARCH_X32 };
  int rc;

  ctx = seccomp_init (SCMP_ACT_ALLOW);
  if (ctx == NULL)
    return (nz_throw (error, NZ_ERROR_FAILED, "seccomp: cannot initialise a filter"), -1);
  if (seccomp_arch_native () == SCMP_ARCH_X86_64)
    for (gsize i = 0; i < G_N_ELEMENTS (extra_arches); i++)
      {
        rc = seccomp_arch_add (ctx, extra_arches[i]);
        if (rc != 0 && rc != -EEXIST)
          return (throw_seccomp (error, rc, "add architecture"), -1);
      }
  for (const char *const *name = denied; *name != NULL; name++)
    {
      int nr = seccomp_syscall_resolve_name (*name);

      /* A syscall this libseccomp does not know cannot be named in a rule; it is then also
       * absent from the older kernels that libseccomp version targets. */
      if (nr == __NR_SCMP_ERROR)
        continue;
      rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), nr, 0);
      if (rc != 0)
        return (throw_seccomp (error, rc, *name), -1);
    }
  rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (ENOSYS), SCMP_SYS (clone3), 0);
  if (rc != 0)
    return (throw_seccomp (error, rc, "clone3"), -1);
  /* The ioctl request is an unsigned int in the kernel: compare the low 32 bits only, so a
   * caller cannot dodge the rule by setting high bits. */
  rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                         SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)TIOCSTI));
  if (rc == 0)
    rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (ioctl), 1,
                           SCMP_A1 (SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)TIOCLINUX));
  if (rc != 0)
    return (throw_seccomp (error, rc, "ioctl"), -1);
  /* clone() with any namespace flag is unshare() by another name: one rule per flag, because
   * a rule can only test "masked bits equal a value". */
  for (guint64 bit = 1; bit != 0; bit <<= 1)
    if ((NZ_CLONE_NS_FLAGS & bit) != 0)
      {
        rc = seccomp_rule_add (ctx, SCMP_ACT_ERRNO (EPERM), SCMP_SYS (clone), 1,
                               SCMP_A0 (SCMP_CMP_MASKED_EQ, bit, bit));
        if (rc != 0)
          return (throw_seccomp (error, rc, "clone"), -1);
      }
  fd = memfd_create ("namzu-seccomp", MFD_CLOEXEC);
  if (fd < 0)
    return (nz_throw_errno_prefix (error, "seccomp: memfd_create"), -1);
  rc = seccomp_export_bpf (ctx, fd);
  if (rc != 0)
    return (throw_seccomp (error, rc, "export the BPF program"), -1);
  if (lseek (fd, 0, SEEK_SET) != 0)
    return (nz_throw_errno_prefix (error, "seccomp: rewind the BPF program"), -1);
  return nz_steal_fd (&fd);
}
