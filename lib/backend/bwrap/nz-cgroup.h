/* nz-cgroup.h: resource limits for a sandbox through cgroups (v1 per-controller hierarchies,
 * or the v2 unified hierarchy). One cgroup per limited controller, named namzu/<id>. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  gint64 memory_mb;     /* 0 = no limit */
  gint64 max_processes; /* 0 = no limit */
  double cpus;          /* 0 = no limit */
} NzCgroupLimits;

typedef struct
{
  GPtrArray *paths;    /* char *: every cgroup directory created, for removal */
  GArray *procs_fds;   /* int: an open cgroup.procs per directory, written by the child */
} NzCgroup;

/* Creates the cgroups that enforce @limits and writes the limits. A limit that cannot be
 * enforced is refused, naming the flag, e.g. "--memory-mb cannot be enforced: no writable memory
 * cgroup controller (...)"; nothing is left behind then. With no limits, returns an empty
 * NzCgroup. */
NzCgroup *nz_cgroup_create (const char *id, const NzCgroupLimits *limits, GError **error);
/* Closes the procs fds (after the child has joined). */
void nz_cgroup_close_fds (NzCgroup *cg);
/* Frees; does not remove the directories. */
void nz_cgroup_free (NzCgroup *cg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (NzCgroup, nz_cgroup_free)

/* Joins the calling process to every cgroup: async-signal-safe, for the child between fork
 * and exec. Returns 0 or an errno value. */
int nz_cgroup_join_fds (const int *fds, guint n_fds);

/* Kills what is left in @paths and removes them, bounded by @timeout_ms. Missing directories
 * count as removed. */
gboolean nz_cgroup_remove (const char *const *paths, guint n_paths, guint timeout_ms,
                           GError **error);

/* Where cgroups live: /sys/fs/cgroup, or $NAMZU_CGROUP_ROOT (tests point it elsewhere to
 * simulate a host without controllers). */
const char *nz_cgroup_root (void);

G_END_DECLS
