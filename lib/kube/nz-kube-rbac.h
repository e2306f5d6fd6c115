/* The RBAC rules namzu's microvm:kubernetes backend needs (spec reference-agent.md D.5), as the
 * JSON of a Role's "rules". deploy/k8s/rbac*.yaml carry the same rules, in the same order;
 * tests/unit/test-kube-rbac.c pins each file to its constant, so changing the verbs the backend
 * uses means changing both. */
#pragma once

/* rbac-claimant.yaml, Role namzu-sandbox-claimant: a pool-only host. It claims from a
 * SandboxWarmPool and reads what it binds to; no Sandbox writes, no templates, no PVCs. */
#define NZ_KUBE_CLAIMANT_RBAC_RULES                                                             \
  "["                                                                                           \
  "{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxclaims\"],"          \
  "\"verbs\":[\"create\",\"get\",\"list\",\"patch\",\"delete\"]},"                              \
  "{\"apiGroups\":[\"agents.x-k8s.io\"],\"resources\":[\"sandboxes\"],\"verbs\":[\"get\"]},"    \
  "{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxwarmpools\"],"       \
  "\"verbs\":[\"get\"]},"                                                                       \
  "{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\",\"list\"]},"               \
  "{\"apiGroups\":[\"networking.k8s.io\"],\"resources\":[\"networkpolicies\"],"                 \
  "\"verbs\":[\"get\",\"list\"]},"                                                              \
  "{\"apiGroups\":[\"cilium.io\"],\"resources\":[\"ciliumnetworkpolicies\"],"                   \
  "\"verbs\":[\"get\",\"list\"]}"                                                               \
  "]"

/* rbac.yaml, Role namzu-sandbox-host: the wide role (a warm pool, or Sandboxes POSTed from a
 * SandboxTemplate, and workspaces with their PVCs). */
#define NZ_KUBE_HOST_RBAC_RULES                                                                 \
  "["                                                                                           \
  "{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxclaims\"],"          \
  "\"verbs\":[\"create\",\"get\",\"list\",\"patch\",\"delete\"]},"                              \
  "{\"apiGroups\":[\"agents.x-k8s.io\"],\"resources\":[\"sandboxes\"],"                         \
  "\"verbs\":[\"create\",\"get\",\"list\",\"patch\",\"delete\"]},"                              \
  "{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxtemplates\"],"       \
  "\"verbs\":[\"get\"]},"                                                                       \
  "{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxwarmpools\"],"       \
  "\"verbs\":[\"get\"]},"                                                                       \
  "{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\",\"list\"]},"               \
  "{\"apiGroups\":[\"\"],\"resources\":[\"persistentvolumeclaims\"],\"verbs\":[\"get\"]},"      \
  "{\"apiGroups\":[\"networking.k8s.io\"],\"resources\":[\"networkpolicies\"],"                 \
  "\"verbs\":[\"get\",\"list\"]},"                                                              \
  "{\"apiGroups\":[\"cilium.io\"],\"resources\":[\"ciliumnetworkpolicies\"],"                   \
  "\"verbs\":[\"get\",\"list\"]}"                                                               \
  "]"

/* rbac-per-sandbox-egress.yaml, Role namzu-sandbox-host-per-sandbox-egress (D.10.8). */
#define NZ_KUBE_PER_SANDBOX_EGRESS_RBAC_RULES                                                   \
  "[{\"apiGroups\":[\"cilium.io\"],\"resources\":[\"ciliumnetworkpolicies\"],"                  \
  "\"verbs\":[\"create\",\"patch\",\"delete\"]}]"

/* rbac-per-sandbox-egress.yaml, ClusterRole namzu-sandbox-host-admission-fence-read: the host
 * reads the admission fence (validatingadmissionpolicy-cilium.yaml) before every write. */
#define NZ_KUBE_ADMISSION_FENCE_READ_RBAC_RULES                                                 \
  "[{\"apiGroups\":[\"admissionregistration.k8s.io\"],"                                         \
  "\"resources\":[\"validatingadmissionpolicies\",\"validatingadmissionpolicybindings\"],"      \
  "\"verbs\":[\"get\"]}]"
