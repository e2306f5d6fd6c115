/* nz-kube-net.h: the network proofs a microvm:kubernetes create needs before its pods may run
 * a workload — backend.egress parsed (spec D.10.6), its named policy verified (D.10.7), and on
 * the labels the pods carry the ingress proof (D.9) and the egress union check (D.10.7) — with
 * the caches of spec D.4 (nz-kube-cache.h). Task sandboxes and workspaces both go through it. */
#pragma once

#include "nz-egress-k8s.h"
#include "nz-kube-client.h"
#include "nz-kube-options.h"

G_BEGIN_DECLS

typedef struct
{
  NzKubeClient *client;      /* borrowed */
  const NzKubeOptions *k;    /* borrowed */
  const char *ns;            /* borrowed */
  NzEgressK8sConfig *egress; /* backend.egress parsed (owned), or NULL without it */
  JsonObject *expected;      /* the verified translation (owned), or NULL */
  gboolean memo;             /* pass through the D.4 caches (a workspace's step 5: FALSE) */
} NzKubeNet;

void nz_kube_net_clear (NzKubeNet *n);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (NzKubeNet, nz_kube_net_clear)

/* backend.egress of @k parsed (spec D.10.6), or NULL with INVALID_ARGS naming the field. */
NzEgressK8sConfig *nz_kube_net_egress_config (const NzKubeOptions *k, GError **error);

/* Sets @n up for @k on @client in @ns, without I/O: backend.egress parsed (n->egress) and,
 * with it, its translation for template @tpl, narrowed by ciliumNarrowing (n->expected). */
gboolean nz_kube_net_begin (NzKubeNet *n, NzKubeClient *client, const NzKubeOptions *k,
                            const char *ns, const char *tpl, gboolean memo, GError **error);

/* spec D.10.7: the named policy of n->expected is applied as translated (the backend never
 * creates it); TRUE without backend.egress. A pass is cached for NZ_KUBE_CACHE_TTL_MS whatever
 * n->memo says (spec D.4 runs it once per host process). */
gboolean nz_kube_net_verify_named (NzKubeNet *n, GError **error);

/* On the labels the pods carry (@labels, may be NULL): the ingress proof (spec D.9, unless
 * backend.ingress is 'unverified'), then, with backend.egress and verify 'union', the union
 * check against n->expected (NetworkPolicies, and CiliumNetworkPolicies under engine cilium).
 * With n->memo a pass of either is cached per label set (spec D.4). */
gboolean nz_kube_net_pods_ok (NzKubeNet *n, JsonObject *labels, GError **error);

G_END_DECLS
