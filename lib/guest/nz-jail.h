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

G_END_DECLS
