/* nz-spawn.h: start a command the way the reference's Node spawn({detached: true}) does, with
 * posix_spawn (a vfork-style clone) instead of fork: the agent's address space is not copied
 * for every command, which on a VM costs milliseconds per spawn. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Starts @argv in @cwd with @envp as the leader of a new session and process group (pgid =
 * sid = pid), every signal at its default disposition, an empty signal mask and no
 * descriptors but 0-2.
 *
 * argv[0] without a '/' is looked up like libuv does: in the PATH of @envp (not the agent's),
 * "/usr/bin:/bin" when @envp has none; an empty or relative PATH entry is relative to @cwd. A
 * candidate that exists but cannot be executed (EACCES) does not end the search, and the
 * result is EACCES only when nothing later is found.
 *
 * Stdin is a pipe whose write end goes to *@in_fd, or /dev/null when @in_fd is NULL; stdout and
 * stderr are pipes whose read ends go to *@out_fd and *@err_fd. The returned descriptors are
 * close-on-exec and blocking, owned by the caller. The child is not reaped.
 *
 * Returns 0, or the errno of the failure (Node names spawn failures by their errno:
 * "spawn <command> ENOENT"); on failure nothing is left open or running. */
int nz_spawn_session (const char *cwd, const char *const *argv, const char *const *envp,
                      int *in_fd, int *out_fd, int *err_fd, GPid *out_pid);

G_END_DECLS
