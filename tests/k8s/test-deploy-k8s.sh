#!/usr/bin/env bash
# deploy/k8s through Debian's real kubectl against tests/fakes/fake-kube-apiserver.py (HTTPS with
# a CA this test makes, a bearer token): `kubectl apply -f deploy/k8s/` creates every object, a
# second apply changes nothing and succeeds, and `kubectl get -f deploy/k8s/ -o json` reads back
# what the fake stored: the kinds and names, the template label on both templates' pods, the
# agent container (port 1024, the bind token from metadata.uid, the hardening), the baseline
# NetworkPolicy, the claimant and host roles' rules (as lib/kube/nz-kube-rbac.h says, checked by
# test-kube-rbac against the files) and the admission policy's validations.
# Args: SOURCE_DIR. TAP. Under CI=true a missing kubectl, certtool or PyYAML fails, never skips.
#
# kubectl is $NAMZU_TEST_KUBECTL, default /opt/namzu-test/kubernetes-client/usr/bin/kubectl:
# Debian 12's kubernetes-client (1.20), which scripts/install-deps unpacks there. Never the
# kubectl on $PATH: on these machines that is the Google Cloud SDK's.
# --validate=false: kubectl 1.20 validates against the server's /openapi/v2, a schema of every
# type that the fake does not serve (it would be a copy of Kubernetes' own, which the fake cannot
# keep true); the server-side check that matters here is what gets stored, read back below.
set -u
src=$1
kubectl=${NAMZU_TEST_KUBECTL:-/opt/namzu-test/kubernetes-client/usr/bin/kubectl}
n=0 failed=0

bail() {
  if [[ -n ${CI:-} && ${CI} != false && ${CI} != 0 ]]; then
    echo "1..1"; echo "not ok 1 prerequisite missing under CI: $1"; exit 1
  fi
  echo "1..0 # SKIP $1"
  exit 0
}
[[ -x $kubectl ]] || bail "no Debian kubectl at $kubectl (scripts/install-deps)"
command -v certtool >/dev/null || bail "certtool is not installed (gnutls-bin)"
python3 -c 'import yaml' 2>/dev/null || bail "python3 has no yaml module (python3-yaml)"

tmp=$(mktemp -d)
fake_pid=
cleanup() {
  [[ -n $fake_pid ]] && kill "$fake_pid" 2>/dev/null && wait "$fake_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

ok() { # description; the condition's status is $?
  local rc=$? what=$1
  n=$((n + 1))
  if [[ $rc == 0 ]]; then echo "ok $n $what"; else echo "not ok $n $what"; failed=1; fi
}

# A cluster CA and the fake's server certificate for 127.0.0.1.
printf 'cn = namzu test cluster CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$tmp/ca.cfg"
printf 'cn = kube-apiserver\nip_address = 127.0.0.1\ntls_www_server\nexpiration_days = 2\n' \
  >"$tmp/server.cfg"
{
  certtool --generate-privkey --key-type=ecdsa --outfile "$tmp/ca.key" &&
    certtool --generate-self-signed --load-privkey "$tmp/ca.key" --template "$tmp/ca.cfg" \
      --outfile "$tmp/ca.pem" &&
    certtool --generate-privkey --key-type=ecdsa --outfile "$tmp/server.key" &&
    certtool --generate-certificate --load-privkey "$tmp/server.key" \
      --load-ca-certificate "$tmp/ca.pem" --load-ca-privkey "$tmp/ca.key" \
      --template "$tmp/server.cfg" --outfile "$tmp/server.pem"
} >/dev/null 2>"$tmp/certtool.err" || { cat "$tmp/certtool.err" >&2; bail "certtool failed"; }

token=deploy-token-$$-$RANDOM
mkfifo "$tmp/ready"
python3 "$src/tests/fakes/fake-kube-apiserver.py" --cert "$tmp/server.pem" \
  --key "$tmp/server.key" --token "admin=$token" --stored-namespaces \
  >"$tmp/ready" 2>"$tmp/fake.log" &
fake_pid=$!
read -r line <"$tmp/ready"
port=${line##*:}
[[ $port =~ ^[0-9]+$ ]] || { echo "1..1"; echo "not ok 1 the fake did not start: $line"; exit 1; }

cat >"$tmp/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
  - name: fake
    cluster:
      server: https://127.0.0.1:$port
      certificate-authority: $tmp/ca.pem
users:
  - name: admin
    user:
      token: $token
contexts:
  - name: fake
    context: {cluster: fake, user: admin}
current-context: fake
KC
k() { HOME=$tmp "$kubectl" --kubeconfig "$tmp/kubeconfig" --cache-dir "$tmp/cache" "$@"; }

k apply --validate=false -R -f "$src/deploy/k8s/" >"$tmp/apply1" 2>&1
ok "kubectl apply -f deploy/k8s/ succeeds" || sed 's/^/# /' "$tmp/apply1" "$tmp/fake.log"
grep -c ' created$' "$tmp/apply1" | grep -qx 18
ok "the first apply created 18 objects" || sed 's/^/# /' "$tmp/apply1"

k apply --validate=false -R -f "$src/deploy/k8s/" >"$tmp/apply2" 2>&1
ok "a second apply succeeds" || sed 's/^/# /' "$tmp/apply2"
grep -c ' unchanged$' "$tmp/apply2" | grep -qx 18
ok "the second apply reports all 18 objects unchanged" || sed 's/^/# /' "$tmp/apply2"

k get -R -f "$src/deploy/k8s/" -o json >"$tmp/got.json" 2>"$tmp/get.err"
ok "kubectl get -f deploy/k8s/ -o json reads every object back" || sed 's/^/# /' "$tmp/get.err"

# Every check below is one python3 assertion on what the fake stored (not on the files: the
# files and the store must agree, and the store is what a cluster would act on).
check() { # description, python expression over `objs` (kind/name -> object) and `files`
  python3 - "$tmp/got.json" "$src/deploy/k8s" "$2" <<'PY' 2>"$tmp/check.err"
import glob, json, os, sys, yaml
got = json.load(open(sys.argv[1]))
items = got["items"] if got.get("kind") == "List" else [got]
objs = {(o["kind"], o["metadata"]["name"]): o for o in items}
files = [d for f in sorted(glob.glob(os.path.join(sys.argv[2], "**", "*.yaml"), recursive=True))
         for d in yaml.safe_load_all(open(f)) if d]
def pod(name):
    return objs[("SandboxTemplate", name)]["spec"]["podTemplate"]
def agent(name):
    return [c for c in pod(name)["spec"]["containers"] if c["name"] == "agent"][0]
def env(name, var):
    return [e for e in agent(name)["env"] if e["name"] == var][0]
def rules(kind, name):
    return objs[(kind, name)]["rules"]
if not eval("(" + sys.argv[3] + ")"):
    sys.exit(1)
PY
  ok "$1" || sed 's/^/# /' "$tmp/check.err"
}

check "every object of the files was stored, and nothing else came back" \
  'sorted(objs) == sorted((d["kind"], d["metadata"]["name"]) for d in files) and len(objs) == 18'
check "the kinds of spec D.11.3" \
  '{k for k, _ in objs} == {"Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
   "ClusterRoleBinding", "RuntimeClass", "SandboxTemplate", "SandboxWarmPool", "NetworkPolicy",
   "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}'
check "namespaced objects are in namzu-sandboxes, cluster-scoped ones in none" \
  'all(o["metadata"].get("namespace") == (None if k in ("Namespace", "ClusterRole",
   "ClusterRoleBinding", "RuntimeClass", "ValidatingAdmissionPolicy",
   "ValidatingAdmissionPolicyBinding") else "namzu-sandboxes") for (k, _), o in objs.items())'
check "the service accounts namzu-sandbox-host and namzu-sandbox-claimant" \
  '("ServiceAccount", "namzu-sandbox-host") in objs and ("ServiceAccount", "namzu-sandbox-claimant") in objs'
check "both templates label their pods sandbox.namzu.ai/template=<template name>" \
  'all(pod(t)["metadata"]["labels"]["sandbox.namzu.ai/template"] == t
       for t in ("namzu-task", "namzu-workspace"))'
check "the agent listens on 1024 with its bind token from the pod uid (both templates)" \
  'all(agent(t)["ports"][0]["containerPort"] == 1024
       and env(t, "NAMZU_AGENT_TCP_PORT")["value"] == "1024"
       and env(t, "NAMZU_AGENT_BIND_TOKEN")["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
       for t in ("namzu-task", "namzu-workspace"))'
check "the task agent is non-root, no privilege escalation, no capability, seccomp RuntimeDefault" \
  'agent("namzu-task")["securityContext"] == {"runAsUser": 1001, "runAsGroup": 1001,
   "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
   "seccompProfile": {"type": "RuntimeDefault"}}'
check "the task template: service, kata-qemu, grace 5 s; the pool of 3 claims from it" \
  'objs[("SandboxTemplate", "namzu-task")]["spec"]["service"] is True
   and pod("namzu-task")["spec"]["runtimeClassName"] == "kata-qemu"
   and pod("namzu-task")["spec"]["terminationGracePeriodSeconds"] == 5
   and objs[("RuntimeClass", "kata-qemu")]["handler"] == "kata-qemu"
   and objs[("SandboxWarmPool", "namzu-task-pool")]["spec"] == {"sandboxTemplateRef":
       {"name": "namzu-task"}, "replicas": 3, "updateStrategy": {"type": "OnReplenish"}}'
check "the workspace template: a Block disk at /dev/namzu-workspace, the prestop hook" \
  'agent("namzu-workspace")["volumeDevices"] == [{"name": "workspace-disk",
   "devicePath": "/dev/namzu-workspace"}]
   and agent("namzu-workspace")["lifecycle"]["preStop"]["exec"]["command"] == ["/entrypoint.sh", "prestop"]
   and objs[("SandboxTemplate", "namzu-workspace")]["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Block"'
check "the baseline policy: every namzu pod, ingress only from the host pods on TCP 1024" \
  'objs[("NetworkPolicy", "namzu-sandbox-baseline")]["spec"]["podSelector"] == {"matchExpressions":
   [{"key": "sandbox.namzu.ai/template", "operator": "Exists"}]}
   and objs[("NetworkPolicy", "namzu-sandbox-baseline")]["spec"]["policyTypes"] == ["Ingress", "Egress"]
   and objs[("NetworkPolicy", "namzu-sandbox-baseline")]["spec"]["ingress"] == [{"from":
   [{"podSelector": {"matchLabels": {"namzu.ai/component": "host"}}}],
   "ports": [{"protocol": "TCP", "port": 1024}]}]'
check "the baseline egress: kube-dns on UDP/TCP 53 first" \
  'objs[("NetworkPolicy", "namzu-sandbox-baseline")]["spec"]["egress"][0] == {"to":
   [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
     "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
   "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}'
check "the claimant role (D.5): claims, sandboxes get only, pools, pods, policies" \
  '[(r["apiGroups"], r["resources"], r["verbs"]) for r in rules("Role", "namzu-sandbox-claimant")] == [
   (["extensions.agents.x-k8s.io"], ["sandboxclaims"], ["create", "get", "list", "patch", "delete"]),
   (["agents.x-k8s.io"], ["sandboxes"], ["get"]),
   (["extensions.agents.x-k8s.io"], ["sandboxwarmpools"], ["get"]),
   ([""], ["pods"], ["get", "list"]),
   (["networking.k8s.io"], ["networkpolicies"], ["get", "list"]),
   (["cilium.io"], ["ciliumnetworkpolicies"], ["get", "list"])]'
check "the host role (D.5) and its binding to namzu-sandbox-host" \
  'sorted((r["resources"][0], tuple(r["verbs"])) for r in rules("Role", "namzu-sandbox-host")) == sorted([
   ("sandboxclaims", ("create", "get", "list", "patch", "delete")),
   ("sandboxes", ("create", "get", "list", "patch", "delete")),
   ("sandboxtemplates", ("get",)), ("sandboxwarmpools", ("get",)), ("pods", ("get", "list")),
   ("persistentvolumeclaims", ("get",)), ("networkpolicies", ("get", "list")),
   ("ciliumnetworkpolicies", ("get", "list"))])
   and objs[("RoleBinding", "namzu-sandbox-host")]["subjects"] == [{"kind": "ServiceAccount",
   "name": "namzu-sandbox-host", "namespace": "namzu-sandboxes"}]'
check "no role grants pods/exec or a wildcard" \
  'all("pods/exec" not in r["resources"] and "*" not in r["resources"] + r["verbs"] + r["apiGroups"]
       for (k, _), o in objs.items() if k in ("Role", "ClusterRole") for r in o["rules"])'
check "the admission fence (D.10.9): Fail, CNP create/update/delete, the host SA only, 7 validations" \
  'objs[("ValidatingAdmissionPolicy", "namzu-per-sandbox-egress")]["spec"]["failurePolicy"] == "Fail"
   and objs[("ValidatingAdmissionPolicy", "namzu-per-sandbox-egress")]["spec"]["matchConstraints"]["resourceRules"]
       == [{"apiGroups": ["cilium.io"], "apiVersions": ["v2"], "resources": ["ciliumnetworkpolicies"],
            "operations": ["CREATE", "UPDATE", "DELETE"]}]
   and "system:serviceaccount:namzu-sandboxes:namzu-sandbox-host" in
       objs[("ValidatingAdmissionPolicy", "namzu-per-sandbox-egress")]["spec"]["matchConditions"][0]["expression"]
   and [v["name"] for v in objs[("ValidatingAdmissionPolicy", "namzu-per-sandbox-egress")]["spec"]["variables"]]
       == ["target", "writing", "owners", "spec", "egress", "selector"]
   and len(objs[("ValidatingAdmissionPolicy", "namzu-per-sandbox-egress")]["spec"]["validations"]) == 7'
check "the fence's validations name what D.10.9 forbids" \
  'all(w in " ".join(v["expression"] for v in objs[("ValidatingAdmissionPolicy",
   "namzu-per-sandbox-egress")]["spec"]["validations"]) for w in ("namzu-sbx-", "SandboxClaim",
   "blockOwnerDeletion", "sandbox.namzu.ai/per-sandbox-egress", "matchExpressions", "specs",
   "ingressDeny", "egressDeny", "nodeSelector", "toCIDR", "toCIDRSet", "toEntities", "toServices",
   "toGroups", "toNodes", "toRequires", "toFQDNs", "kube-dns", "matchName", "matchPattern"))'
check "the fence binding denies, in namzu-sandboxes" \
  'objs[("ValidatingAdmissionPolicyBinding", "namzu-per-sandbox-egress-binding")]["spec"] ==
   {"policyName": "namzu-per-sandbox-egress", "validationActions": ["Deny"], "matchResources":
   {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "namzu-sandboxes"}}}}'

echo "1..$n"
exit $failed
