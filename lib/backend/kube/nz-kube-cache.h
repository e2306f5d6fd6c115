/* nz-kube-cache.h: the verification caches of spec D.4 for a suite of short-lived tools. The
 * reference host keeps them in its process: the egress named-object check once, the union
 * check per label set for 5 minutes, the ingress check per label set. A namzu tool lives for
 * one create, so the passes are kept in the private state directory instead, each for
 * NZ_KUBE_CACHE_TTL_MS: a create within that time of an identical check that passed skips the
 * API reads. Only passes are kept (a refusal is asked again every time), the key is everything
 * the verdict depends on besides the cluster's state (server, namespace, labels, the expected
 * translation), and the directory is the user's own (0700), like the handles beside it.
 * NAMZU_KUBE_VERIFY_CACHE=0 neither uses nor writes them: every check asks the cluster (after
 * changing the namespace's policies, say). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Spec D.4's EGRESS_UNION_CACHE_TTL_MS; also the bound of the other two here. */
#define NZ_KUBE_CACHE_TTL_MS (5 * 60 * 1000)

/* Whether a check of @kind ("egress-named", "egress-union", "ingress") with @key passed less
 * than NZ_KUBE_CACHE_TTL_MS ago. Any doubt (no state dir, a file in the future) is FALSE. */
gboolean nz_kube_cache_fresh (const char *kind, const char *key);

/* Records that the check of @kind with @key passed now. Best effort: a cache that cannot be
 * written only costs the next create the reads. Entries past their time are removed. */
void nz_kube_cache_note (const char *kind, const char *key);

G_END_DECLS
