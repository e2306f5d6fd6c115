/* nz-jail.h: the workspace jail (spec C.1): lexical resolution against the workspace and the
 * extra read/write roots, then a realpath check so a symlink cannot lead outside. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _NzJail NzJail;

/* @workspace is NAMZU_SANDBOX_WORKSPACE; @read_roots / @write_roots are the raw ':'-separated
 * NAMZU_SANDBOX_READ_ROOTS / WRITE_ROOTS (may be NULL). Relative entries resolve against the
 * process's cwd, like path.resolve. */
NzJail *nz_jail_new (const char *workspace, const char *read_roots, const char *write_roots);
void nz_jail_free (NzJail *jail);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzJail, nz_jail_free)

const char *nz_jail_get_workspace (NzJail *jail);
/* NULL-terminated, normalised and de-duplicated; the workspace is always first. */
const char *const *nz_jail_get_read_roots (NzJail *jail);
const char *const *nz_jail_get_write_roots (NzJail *jail);

/* path.resolve(@base, @path): lexical, no filesystem access. Returns a new string. */
char *nz_jail_resolve_path (const char *base, const char *path);

/* Lexical step for a cwd: relative or absolute, it must stay inside the workspace itself
 * (extra roots never apply). Error: "path escapes the workspace". */
char *nz_jail_resolve_cwd (NzJail *jail, const char *path, GError **error);

/* Lexical step for file ops. A relative path must stay in the workspace; an absolute one must
 * be inside one of the op's roots. *@out_root (optional) receives the chosen root. */
char *nz_jail_resolve_read (NzJail *jail, const char *path, char **out_root, GError **error);
char *nz_jail_resolve_write (NzJail *jail, const char *path, char **out_root, GError **error);

/* Symlink step: realpath(@target) (or realpath(dirname)/basename when the target does not
 * exist yet) must be inside realpath(@root). Error: "symlink escapes the workspace", or the
 * Node-style ENOENT/EACCES message. Returns the real path. */
char *nz_jail_realpath_within (const char *target, const char *root, GError **error);

/* ---- race-free opens (the realpath check above is advice; these are the enforcement) ----
 * Every open of a jailed path goes through one of these: the realpath step decides which real
 * path is meant (so symlinks that stay inside keep working), then that real path is opened
 * component by component beneath a directory fd of the real root with no symlink followed at
 * all (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, or an O_NOFOLLOW
 * walk where the kernel has no openat2). A symlink swapped in after the check makes the open
 * fail ("symlink escapes the workspace"); it can never lead it outside. */

/* openat(@root_fd, @rel) without following any symlink or "..", never leaving @root_fd. Returns
 * the fd or -1 with errno (ELOOP/EXDEV for a symlink met on the way). O_CLOEXEC is added. */
int nz_jail_openat_beneath (int root_fd, const char *rel, int flags, mode_t mode);

/* Test hook: TRUE makes nz_jail_openat_beneath take the O_NOFOLLOW walk, as on a kernel
 * without openat2. */
void nz_jail_set_force_walk (gboolean force);

/* Opens @target (lexically jailed to @root) race-free. *@out_real (optional) gets the real
 * path. Errors: the realpath step's, "symlink escapes the workspace" for a swapped symlink, or
 * the Node-style errno message of the open. */
int nz_jail_open_within (const char *target, const char *root, int flags, mode_t mode,
                         char **out_real, GError **error);

/* Opens the real parent directory of @target (which need not exist) race-free, O_RDONLY |
 * O_DIRECTORY; *@out_base gets the entry name to use with the *at calls, *@out_real
 * (optional) the real path of the target. */
int nz_jail_open_parent_within (const char *target, const char *root, char **out_real,
                                char **out_base, GError **error);

/* Opens the real parent directory of the entry @target names, without resolving @target's
 * last component: lstat/unlink/rename semantics, so a symlink is the entry itself, never what
 * it points to. The parent goes through the realpath step and is opened race-free; @target
 * itself must be strictly below @root (the root is refused: "path escapes the workspace").
 * *@out_base gets the last component, *@out_real (optional) realpath(parent)/base. */
int nz_jail_open_entry_parent (const char *target, const char *root, char **out_real,
                               char **out_base, GError **error);

/* mkdir -p of @dir (lexically jailed to @root), each directory made with mkdirat in its
 * parent's fd opened race-free: a symlinked parent pointing outside is refused, never
 * followed. Error messages as g_mkdir_with_parents' ("ENOTDIR: ..., mkdir '<dir>'"). */
gboolean nz_jail_mkdir_p_within (const char *dir, const char *root, GError **error);

/* For a child's cwd: mkdir -p @dir beneath the workspace, open it race-free, and return a path
 * that names exactly that directory ("/proc/self/fd/N", valid while *@out_fd is open), so a
 * symlink swapped in before the child's chdir cannot move it. The caller closes *@out_fd
 * after the spawn. */
char *nz_jail_enter_cwd (NzJail *jail, const char *dir, int *out_fd, GError **error);

G_END_DECLS
