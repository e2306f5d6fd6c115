/* nz-privsep.h: the agent's and the worker's separation from their own workload.
 *
 * The server (agent or worker) runs under a uid of its own, non-dumpable, holding only
 * CAP_SETUID, CAP_SETGID and CAP_KILL; every process it starts for the workload switches to the
 * workload's uid/gid with no capabilities before exec. Same kernel, different uid: the workload
 * cannot signal the server, read its /proc/<pid>/{environ,mem}, or take its fds (pidfd_getfd),
 * because each of those needs the same uid or a capability over it. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Switches this process to @server_uid/@server_gid (keeping CAP_SETUID, CAP_SETGID, CAP_KILL and
 * nothing else, no ambient capabilities), makes it non-dumpable, sets its filesystem uid/gid to
 * the workload's so files it writes for the host belong to the workload, and records
 * @workload_uid/@workload_gid for nz_privsep_drop_child(). Call before any thread exists: the
 * filesystem uid is per thread and only threads created afterwards inherit it. */
gboolean nz_privsep_enter (uid_t server_uid, gid_t server_gid, uid_t workload_uid,
                           gid_t workload_gid, GError **error);

/* Reads NAMZU_AGENT_UID/NAMZU_AGENT_GID (the server's ids) and NAMZU_AGENT_WORKLOAD_UID/
 * NAMZU_AGENT_WORKLOAD_GID and calls nz_privsep_enter() when they are set; otherwise only makes
 * the process non-dumpable. @prefix names the variables ("NAMZU_AGENT" or "NAMZU_WORKER"). */
gboolean nz_privsep_enter_from_env (const char *prefix, GError **error);

/* Moves the environment onto the heap, without the variables named in @drop (NULL-terminated,
 * may be NULL), and overwrites every byte of the original strings with NULs. /proc/<pid>/environ
 * shows the original block (not the C library's copy) for the life of the process, and
 * gVisor's /proc lets any uid read it (mode 0444 there, whatever the process's dumpability):
 * after this it reads as NULs only. Call it once the configuration has copied what it needs,
 * before any thread exists; pointers g_getenv returned before it are dangling after it. */
void nz_privsep_hide_environ (const char *const *drop);

/* Brackets a file operation done for the host. Under privsep on Linux the filesystem ids are
 * the workload's for good and these do nothing; on gVisor (no setfsuid) they switch this
 * thread's effective uid/gid to the workload's and back. Nest freely, per thread. Prefer
 * NZ_PRIVSEP_FS_SCOPE, which ends the bracket when the enclosing block does. */
void nz_privsep_fs_begin (void);
void nz_privsep_fs_end (void);

static inline void
nz_privsep_fs_scope_end (int *unused)
{
  nz_privsep_fs_end ();
}

#define NZ_PRIVSEP_FS_SCOPE                                                                   \
  __attribute__ ((cleanup (nz_privsep_fs_scope_end), unused))                                 \
  int G_PASTE (nz_privsep_fs_scope_, __LINE__) = (nz_privsep_fs_begin (), 0)

/* The uid every workload process runs as: the workload's under privsep, else ours. */
uid_t nz_privsep_workload_uid (void);

/* Whether nz_privsep_enter() ran: spawned processes then change uid. */
gboolean nz_privsep_active (void);

/* In a forked child before exec, async-signal-safe: no supplementary groups, the workload's
 * gid and uid (real, effective, saved, filesystem), no capabilities (permitted, effective,
 * inheritable, ambient). Returns 0 or an errno; a no-op (0) when privsep is not active. */
int nz_privsep_drop_child (void);

/* A GSpawnChildSetupFunc that calls nz_privsep_drop_child() and _exit(127)s on failure. */
void nz_privsep_child_setup (gpointer user_data);

G_END_DECLS
