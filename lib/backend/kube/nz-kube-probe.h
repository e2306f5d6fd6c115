/* nz-kube-probe.h: the privilege probe of a Kubernetes task sandbox (spec D.6.1,
 * privilege-probe.ts): `cat /proc/self/status` through the agent must show no capability in
 * any set and NoNewPrivs: 1, or the sandbox is destroyed before anyone uses it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* KubernetesPrivilegeProbeError reasons. */
typedef enum
{
  NZ_KUBE_PROBE_OK,
  NZ_KUBE_PROBE_FAILED,     /* "probe-failed": the command did not exit 0 */
  NZ_KUBE_PROBE_UNREADABLE, /* "unreadable-output": a field missing or not bare hex */
  NZ_KUBE_PROBE_PRIVILEGED, /* "privileged": a capability set non-zero, or NoNewPrivs not 1 */
} NzKubeProbeVerdict;

const char *nz_kube_probe_reason (NzKubeProbeVerdict v);

/* Judges the text of /proc/self/status. *@what (may be NULL) gets a new string saying which
 * field decided, for the message. CapInh, CapPrm, CapEff and CapBnd must each appear once as
 * bare hex (any length: parsed as a big integer, so "0000000000000000" and "0" are zero) and
 * be zero; NoNewPrivs must be exactly 1. */
NzKubeProbeVerdict nz_kube_probe_judge (const char *status_text, char **what);

G_END_DECLS
