#!/usr/bin/env python3
"""Tests of the FAKE agent-sandbox controller (tests/fakes/fake_kube_controller.py) inside
fake-kube-apiserver.py: it must behave like the real one where namzu's backend looks, or the
backend's tests prove nothing. TAP output. Needs bwrap and openssl: without them the test is
skipped, except under CI=true, where that is a failure (like nz_test_require_program)."""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
import urllib.error

SRC = os.environ.get("NZ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TOOLS = os.environ.get("NZ_TOOLS_DIR", "")
AGENT = os.path.join(TOOLS, "namzu-agent")
ANN = "fake-controller.namzu.test/"
A = "/apis/agents.x-k8s.io/v1beta1/namespaces/%s/sandboxes"
E = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/%s/"
P = "/api/v1/namespaces/%s/pods"
N = [0]
# The host's service account, as deploy/k8s names it: the per-sandbox admission fence
# (spec D.10.9) matches only its requests. Its token is HOST_TOKEN; "tok" is another user.
HOST_USER = "system:serviceaccount:namzu-sandboxes:namzu-sandbox-host"
HOST_TOKEN = "hosttok"


def tap(ok, what):
    """One TAP line; a message's newlines are folded so it stays one line."""
    N[0] += 1
    what = " | ".join(x for x in str(what).splitlines() if x.strip())
    print("%s %d - %s" % ("ok" if ok else "not ok", N[0], what), flush=True)
    return ok


for prog in ("bwrap", "openssl"):
    if shutil.which(prog) is None:
        if os.environ.get("CI") == "true":
            print("1..1\nnot ok 1 - %s is required under CI=true" % prog)
            sys.exit(1)
        print("1..0 # SKIP %s not found" % prog)
        sys.exit(0)


class Fake:
    def __init__(self, subnet):
        self.dir = tempfile.mkdtemp(prefix="nz-fake-ctl-")
        cert, key = os.path.join(self.dir, "c.pem"), os.path.join(self.dir, "k.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "1", "-subj", "/CN=127.0.0.1", "-addext",
                        "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRC, "tests/fakes/fake-kube-apiserver.py"), "--cert",
             cert, "--key", key, "--token", "t=tok", "--token", HOST_USER + "=" + HOST_TOKEN,
             "--controller", "--agent", AGENT,
             "--pod-subnet", subnet, "--state-dir", os.path.join(self.dir, "state")],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.dir, "fake.log"), "w"),
            text=True)
        line = self.proc.stdout.readline()
        self.port = int(line.rsplit(":", 1)[1])
        self.ctx = ssl._create_unverified_context()

    def req(self, method, path, body=None, ctype="application/json", token="tok"):
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request("https://127.0.0.1:%d%s" % (self.port, path), data=data,
                                   method=method)
        r.add_header("Authorization", "Bearer " + token)
        r.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(r, context=self.ctx, timeout=10) as f:
                return f.status, json.loads(f.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def get(self, path):
        return self.req("GET", path)

    def wait(self, path, pred, secs=20):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            code, obj = self.get(path)
            if pred(code, obj):
                return obj
            time.sleep(0.05)
        return None

    def api_log(self):
        """(requests, ms) the fake has logged so far: one line a request, and one with the time
        it spent handling it (fake-kube-apiserver-ms)."""
        n, ms = 0, 0.0
        with open(os.path.join(self.dir, "fake.log"), errors="replace") as fh:
            for line in fh:
                if line.startswith("fake-kube-apiserver: "):
                    n += 1
                elif line.startswith("fake-kube-apiserver-ms: "):
                    ms += float(line.split()[1])
        return n, ms

    def requests_seen(self):
        return self.api_log()[0]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)
        if os.environ.get("NZ_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def ready(code, o):
    return code == 200 and any(c.get("type") == "Ready" and c.get("status") == "True"
                               for c in (o.get("status") or {}).get("conditions") or [])


def frame(obj):
    b = json.dumps(obj).encode()
    return b"%08x\n" % len(b) + b


def call(ip, obj):
    """One request; the first reply frame (a reply op), or all of them (a stream op)."""
    if "command" in obj:
        obj = dict(obj)
        obj["body"] = {"command": obj.pop("command"), "args": obj.pop("args", [])}
    frames = []
    with socket.create_connection((ip, 1024), timeout=10) as s:
        s.sendall(frame(obj))
        buf = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            buf += c
        while len(buf) >= 9:
            n = int(buf[:8], 16)
            try:
                frames.append(json.loads(buf[9:9 + n]))
            except ValueError:  # a raw data frame or the empty terminator
                frames.append(buf[9:9 + n].decode(errors="replace"))
            buf = buf[9 + n:]
    if not frames:
        return None
    return frames[0] if obj.get("op") == "healthz" else frames


def template(name, ann=None):
    return {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
            "metadata": {"name": name, "annotations": ann or {}},
            "spec": {"podTemplate": {"metadata": {"labels": {"app": "t"}},
                                     "spec": {"containers": [{"name": "agent",
                                                              "image": "x"}]}}}}


def sandbox(name, tpl, vct=False, **spec):
    s = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
         "metadata": {"name": name},
         "spec": dict({"podTemplate": {"metadata": {"labels": {
             "sandbox.namzu.ai/template": tpl}}, "spec": {"containers": [{"name": "a"}]}}},
             **spec)}
    if vct:
        s["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "ws"},
                                              "spec": {"accessModes": ["ReadWriteOnce"]}}]
    return s


CNP = "/apis/cilium.io/v2/namespaces/%s/ciliumnetworkpolicies"
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def fence_objects(ns):
    """deploy/k8s/validatingadmissionpolicy-cilium.yaml, its binding selecting namespace @ns."""
    import yaml
    with open(os.path.join(SRC, "deploy/k8s/validatingadmissionpolicy-cilium.yaml")) as fh:
        policy, binding = list(yaml.safe_load_all(fh))
    binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"] = {
        "kubernetes.io/metadata.name": ns}
    return policy, binding


def per_sandbox_cnp(owner, hosts=("api.example.com",)):
    """A policy the fence admits: what namzu writes for the SandboxClaim @owner."""
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "namzu-sbx-" + owner["metadata"]["uid"],
                         "ownerReferences": [{
                             "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                             "kind": "SandboxClaim", "name": owner["metadata"]["name"],
                             "uid": owner["metadata"]["uid"]}]},
            "spec": {"endpointSelector": {"matchLabels": {
                "sandbox.namzu.ai/per-sandbox-egress": owner["metadata"]["name"]}},
                "egress": [{"toEndpoints": [{"matchLabels": {
                    "k8s:io.kubernetes.pod.namespace": "kube-system",
                    "k8s:k8s-app": "kube-dns"}}],
                    "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}],
                                 "rules": {"dns": [{"matchPattern": "*"}]}}]},
                    {"toFQDNs": [{"matchName": h} for h in hosts]}]}}


def admission_fence(f):
    """The fake's per-sandbox fence (spec D.10.9), its 403 knob, and its GC of a CNP."""
    import copy
    ns = "t"
    policy, binding = fence_objects(ns)
    code, owner = f.req("POST", E % ns + "sandboxclaims", {  # no pool: the controller leaves it
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
        "metadata": {"name": "owner1"}, "spec": {}})
    good = per_sandbox_cnp(owner)
    hostile = copy.deepcopy(good)
    hostile["spec"]["egress"].append({"toCIDR": ["10.0.0.0/8"]})
    code, _ = f.req("POST", CNP % ns, hostile, token=HOST_TOKEN)
    tap(code == 201, "without the fence stored, the host's writes are not judged")
    f.req("DELETE", CNP % ns + "/" + good["metadata"]["name"])
    tap(f.req("POST", VAP, policy)[0] == 201 and f.req("POST", VAPB, binding)[0] == 201,
        "the fence's policy and binding are stored (cluster-scoped)")
    denial = ("ValidatingAdmissionPolicy 'namzu-per-sandbox-egress' with binding "
              "'namzu-per-sandbox-egress-binding' denied request: ")
    cases = []

    def variant(what, rule, change):
        v = copy.deepcopy(good)
        change(v)
        cases.append((what, rule, v))

    variant("another name", "named namzu-sbx-", lambda v: v["metadata"].update(name="mine"))
    variant("a name that is not its owner's uid", "exactly one ownerReference",
            lambda v: v["metadata"].update(name="namzu-sbx-other"))
    variant("two owners", "exactly one ownerReference",
            lambda v: v["metadata"]["ownerReferences"].append(
                dict(v["metadata"]["ownerReferences"][0])))
    variant("blockOwnerDeletion", "without blockOwnerDeletion",
            lambda v: v["metadata"]["ownerReferences"][0].update(blockOwnerDeletion=True))
    variant("a Pod owner", "SandboxClaim or a Sandbox",
            lambda v: v["metadata"]["ownerReferences"][0].update(kind="Pod"))
    variant("another sandbox's label", "endpointSelector is exactly",
            lambda v: v["spec"]["endpointSelector"]["matchLabels"].update({
                "sandbox.namzu.ai/per-sandbox-egress": "namzu-task-other"}))
    variant("a second selector key", "endpointSelector is exactly",
            lambda v: v["spec"]["endpointSelector"]["matchLabels"].update({"app": "x"}))
    variant("an empty selector", "endpointSelector is exactly",
            lambda v: v["spec"].update(endpointSelector={}))
    variant("matchExpressions", "endpointSelector is exactly",
            lambda v: v["spec"]["endpointSelector"].update(matchExpressions=[]))
    variant("egressDeny", "no specs, ingress", lambda v: v["spec"].update(egressDeny=[]))
    variant("specs", "no specs, ingress", lambda v: v["spec"].update(specs=[]))
    variant("no egress", "non-empty egress", lambda v: v["spec"].update(egress=[]))
    variant("toCIDR", "no CIDR", lambda v: v["spec"]["egress"].append({"toCIDR": ["0.0.0.0/0"]}))
    variant("toEntities", "no CIDR",
            lambda v: v["spec"]["egress"][1].update(toEntities=["world"]))
    variant("toEndpoints other than kube-dns", "no CIDR",
            lambda v: v["spec"]["egress"][0]["toEndpoints"][0]["matchLabels"].update({
                "k8s:k8s-app": "web"}))
    variant("kube-dns on another port", "no CIDR",
            lambda v: v["spec"]["egress"][0]["toPorts"][0]["ports"][0].update(port="443"))
    variant("an empty toFQDNs", "toFQDNs is non-empty",
            lambda v: v["spec"]["egress"][1].update(toFQDNs=[]))
    variant("matchPattern '*'", "toFQDNs is non-empty",
            lambda v: v["spec"]["egress"][1]["toFQDNs"].append({"matchPattern": "*"}))
    variant("matchPattern '*.com'", "toFQDNs is non-empty",
            lambda v: v["spec"]["egress"][1]["toFQDNs"].append({"matchPattern": "*.com"}))
    variant("a matchName with a newline", "toFQDNs is non-empty",
            lambda v: v["spec"]["egress"][1]["toFQDNs"].append({"matchName": "a.example\n"}))
    variant("both matchName and matchPattern", "toFQDNs is non-empty",
            lambda v: v["spec"]["egress"][1]["toFQDNs"][0].update(matchPattern="*.example.com"))
    for what, rule, v in cases:
        code, st = f.req("POST", CNP % ns, v, token=HOST_TOKEN)
        msg = (st or {}).get("message", "")
        tap(code == 422 and (st or {}).get("reason") == "Invalid" and denial in msg
            and rule in msg, "the fence denies the host's CREATE with %s (%s)" % (what, msg))
    code, _ = f.req("POST", CNP % ns, good, token=HOST_TOKEN)
    tap(code == 201, "the fence admits the host's per-sandbox policy")
    path = CNP % ns + "/" + good["metadata"]["name"]
    code, st = f.req("PATCH", path, {"spec": {"egress": [{"toEntities": ["world"]}]}},
                     "application/merge-patch+json", token=HOST_TOKEN)
    tap(code == 422 and denial in (st or {}).get("message", ""),
        "the fence denies an UPDATE (merge patch) that widens it")
    code, st = f.req("PATCH", path, {"spec": {"egress": per_sandbox_cnp(
        owner, ("b.example.org",))["spec"]["egress"]}}, "application/merge-patch+json",
        token=HOST_TOKEN)
    tap(code == 200 and st["spec"]["egress"][1]["toFQDNs"] == [{"matchName": "b.example.org"}],
        "the fence admits an UPDATE within the rules")
    code, _ = f.req("POST", CNP % ns, cases[0][2])
    tap(code == 201, "another user is not matched (matchConditions)")
    code, st = f.req("DELETE", CNP % ns + "/mine", token=HOST_TOKEN)
    tap(code == 422 and "named namzu-sbx-" in (st or {}).get("message", ""),
        "the fence denies the host's DELETE of another policy")
    f.req("DELETE", CNP % ns + "/mine")
    code, _ = f.req("POST", CNP % "other-ns", hostile, token=HOST_TOKEN)
    tap(code == 201, "a namespace the binding does not select is not matched")
    code, st = f.req("POST", "/fake/forbid-resource/validatingadmissionpolicies", {})
    code2, st2 = f.get(VAP + "/" + policy["metadata"]["name"])
    tap(code == 200 and code2 == 403 and "at the cluster scope" in (st2 or {}).get("message", ""),
        "--forbid-resource answers 403 on a cluster-scoped resource (%s)"
        % (st2 or {}).get("message", ""))
    f.req("DELETE", "/fake/forbid-resource/validatingadmissionpolicies")
    tap(f.get(VAP + "/" + policy["metadata"]["name"])[0] == 200, "and is switched off again")
    f.req("DELETE", E % ns + "sandboxclaims/owner1")
    tap(f.wait(path, lambda c, o: c == 404, 10) is not None,
        "GC: the CNP goes with its owner (by uid)")
    code, _ = f.req("DELETE", CNP % ns + "/" + good["metadata"]["name"], token=HOST_TOKEN)
    f.req("DELETE", VAPB + "/" + binding["metadata"]["name"])
    f.req("DELETE", VAP + "/" + policy["metadata"]["name"])


def main():
    f = Fake("127.77.1")
    g = Fake("127.77.2")
    try:
        ns = "t"
        f.req("POST", E % ns + "sandboxtemplates", template("tpl"))
        code, s = f.req("POST", A % ns, sandbox("s1", "tpl", vct=True))
        tap(code == 201, "POST a Sandbox")
        s = f.wait(A % ns + "/s1", ready)
        tap(s is not None, "the Sandbox becomes Ready")
        st = s["status"] if s else {}
        tap(st.get("serviceFQDN") == "s1.t.svc.cluster.local" and st.get("service") == "s1"
            and st.get("podIPs") == ["127.77.1.2"], "status: service, serviceFQDN, podIPs")
        tap(st.get("selector", "").startswith("agents.x-k8s.io/sandbox-name-hash="),
            "status.selector is the name-hash label")
        code, pod = f.get(P % ns + "/s1")
        meta = pod.get("metadata", {})
        tap(code == 200 and pod["status"]["phase"] == "Running"
            and pod["status"]["podIP"] == "127.77.1.2" and meta.get("uid")
            and meta["labels"].get("sandbox.namzu.ai/template") == "tpl"
            and "agents.x-k8s.io/sandbox-name-hash=" + meta["labels"].get(
                "agents.x-k8s.io/sandbox-name-hash", "") == st.get("selector")
            and meta["ownerReferences"][0]["uid"] == s["metadata"]["uid"],
            "the pod: named after the Sandbox, Running, labels, owner")
        tap(int(meta.get("annotations", {}).get(ANN + "start-ms", "-1")) >= 0,
            "the pod has start-ms")
        code, pvc = f.get("/api/v1/namespaces/t/persistentvolumeclaims/ws-s1")
        tap(code == 200, "the PVC ws-s1 exists")
        uid = meta.get("uid")
        r = call("127.77.1.2", {"op": "healthz", "token": uid})
        tap(r is not None and r.get("ok") is True, "healthz with the pod uid answers")
        r = call("127.77.1.2", {"op": "execute", "token": uid,
                                "command": "sh", "args": ["-c", "echo hi > /workspace/f; "
                                                          "grep CapEff /proc/self/status"]})
        tap(r is not None and "CapEff:\\t0000000000000000" in json.dumps(r),
            "execute with the uid runs, with no capabilities: %s" % json.dumps(r)[:200])
        r = call("127.77.1.2", {"op": "execute", "token": "wrong", "command": "true"})
        tap(r is not None and "unauthorized" in json.dumps(r),
            "a wrong token is unauthorized")
        r = call("127.77.1.2", {"op": "execute", "command": "true"})
        tap(r is not None and "unauthorized" in json.dumps(r), "no token is unauthorized")

        # suspend / resume
        f.req("PATCH", A % ns + "/s1", {"spec": {"operatingMode": "Suspended"}},
              "application/merge-patch+json")
        tap(f.wait(P % ns + "/s1", lambda c, o: c == 404) is not None,
            "Suspended: the pod is gone")
        tap(f.wait(A % ns + "/s1", lambda c, o: not ready(c, o)) is not None,
            "Suspended: not Ready")
        f.req("PATCH", A % ns + "/s1", {"spec": {"operatingMode": "Running"}},
              "application/merge-patch+json")
        f.wait(A % ns + "/s1", ready)
        code, pod2 = f.get(P % ns + "/s1")
        uid2 = pod2.get("metadata", {}).get("uid")
        tap(code == 200 and uid2 and uid2 != uid, "resumed: a new pod, a new uid")
        ok = f.wait(P % ns + "/s1", lambda c, o: c == 200 and o["status"]["phase"] ==
                    "Running")
        r = call("127.77.1.2", {"op": "execute", "token": uid2, "command": "cat",
                                "args": ["/workspace/f"]})
        tap(ok is not None and "hi" in json.dumps(r), "the workspace file survived")
        r = call("127.77.1.2", {"op": "execute", "token": uid, "command": "true"})
        tap(r is not None and "unauthorized" in json.dumps(r), "the old uid is refused")

        # DELETE the pod: recreated with a new uid
        f.req("DELETE", P % ns + "/s1")
        pod3 = f.wait(P % ns + "/s1", lambda c, o: c == 200 and o["metadata"]["uid"] != uid2
                      and o["status"]["phase"] == "Running")
        tap(pod3 is not None, "a deleted pod is recreated with a new uid")

        # lose
        code, _ = f.req("POST", "/fake/pods/t/s1/lose", {})
        code, pod4 = f.get(P % ns + "/s1")
        tap(pod4["status"]["phase"] == "Failed", "lose: the pod is Failed")
        try:
            call("127.77.1.2", {"op": "healthz"})
            lost = False
        except OSError:
            lost = True
        tap(lost, "lose: the agent is gone")

        # GC: delete the Sandbox, its pod and PVC go; the directory too
        state = os.path.join(f.dir, "state", "pvc", "t", "ws-s1")
        tap(os.path.isdir(state), "the PVC directory exists")
        f.req("DELETE", A % ns + "/s1")
        tap(f.wait(P % ns + "/s1", lambda c, o: c == 404) is not None
            and f.wait("/api/v1/namespaces/t/persistentvolumeclaims/ws-s1",
                       lambda c, o: c == 404) is not None, "GC: the pod and PVC are deleted")
        time.sleep(0.3)
        tap(not os.path.isdir(state), "GC: the PVC directory is removed")

        # shutdownTime
        past = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
        f.req("POST", A % ns, sandbox("s2", "tpl", shutdownTime=past))
        tap(f.wait(A % ns + "/s2", ready) is not None, "s2 Ready")
        tap(f.wait(A % ns + "/s2", lambda c, o: c == 404, 10) is not None
            and f.wait(P % ns + "/s2", lambda c, o: c == 404) is not None,
            "shutdownTime: the Sandbox and its pod are deleted")

        # warm pool + claim
        f.req("POST", E % ns + "sandboxwarmpools", {
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
            "metadata": {"name": "pool"},
            "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "tpl"}}})
        p = f.wait(E % ns + "sandboxwarmpools/pool", lambda c, o: c == 200 and (
            o.get("status") or {}).get("readyReplicas") == 2)
        tap(p is not None, "the warm pool has 2 ready replicas")
        later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
        f.req("POST", E % ns + "sandboxclaims", {
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": {"name": "c1"},
            "spec": {"warmPoolRef": {"name": "pool"},
                     "additionalPodMetadata": {"labels": {"x": "y"}},
                     "lifecycle": {"shutdownTime": later, "shutdownPolicy": "Delete"}}})
        c = f.wait(E % ns + "sandboxclaims/c1", ready)
        sb = (c or {}).get("status", {}).get("sandbox", {})
        tap(c is not None and sb.get("name", "").startswith("pool-") and len(sb["name"]) == 10
            and sb.get("serviceFQDN") and sb.get("podIPs"), "the claim binds a warm sandbox")
        tap(int(c["metadata"]["annotations"][ANN + "bind-ms"]) >= 0, "the claim has bind-ms")
        _, spod = f.get(P % ns + "/" + sb.get("name", "x"))
        tap(spod.get("metadata", {}).get("labels", {}).get("x") == "y",
            "additionalPodMetadata.labels are on the pod")
        _, sbo = f.get(A % ns + "/" + sb.get("name", "x"))
        tap(sbo["metadata"]["ownerReferences"][0]["uid"] == c["metadata"]["uid"],
            "the adopted Sandbox is owned by the claim")
        p = f.wait(E % ns + "sandboxwarmpools/pool", lambda c, o: c == 200 and (
            o.get("status") or {}).get("readyReplicas") == 2)
        tap(p is not None, "the pool is replenished")
        tap(f.wait(E % ns + "sandboxclaims/c1", lambda c, o: c == 404, 10) is not None
            and f.wait(A % ns + "/" + sb["name"], lambda c, o: c == 404) is not None
            and f.wait(P % ns + "/" + sb["name"], lambda c, o: c == 404) is not None,
            "claim shutdownTime: claim, sandbox and pod are deleted")

        # failure annotations
        for mode, check in [
                ("fail", lambda pod, s: pod["status"]["phase"] == "Failed"),
                ("stall", lambda pod, s: pod["status"]["phase"] == "Pending"),
                ("privileged", lambda pod, s: True)]:
            f.req("POST", E % ns + "sandboxtemplates", template("t-" + mode, {ANN + "start":
                                                                              mode}))
            f.req("POST", A % ns, sandbox("f-" + mode, "t-" + mode))
            time.sleep(1.5)
            _, pod = f.get(P % ns + "/f-" + mode)
            _, s = f.get(A % ns + "/f-" + mode)
            if mode == "privileged":
                s = f.wait(A % ns + "/f-" + mode, ready)
                r = call(s["status"]["podIPs"][0], {
                    "op": "execute", "token": pod["metadata"]["uid"], "command": "sh",
                    "args": ["-c", "grep CapEff /proc/self/status"]})
                tap(r is not None and "CapEff:\\t0000000000000000" not in json.dumps(r),
                    "start: privileged: the agent has capabilities")
            else:
                tap(check(pod, s) and not ready(200, s), "start: %s" % mode)
        f.req("POST", E % ns + "sandboxtemplates", template("t-nouid", {ANN + "start":
                                                                        "no-uid"}))
        f.req("POST", A % ns, sandbox("f-nouid", "t-nouid"))
        s = f.wait(A % ns + "/f-nouid", ready)
        code, _ = f.get(P % ns + "/f-nouid")
        _, lst = f.get(P % ns + "?labelSelector=" + s["status"]["selector"])
        tap(code == 404 and len(lst["items"]) == 1
            and "uid" not in lst["items"][0]["metadata"],
            "start: no-uid: the pod is found only by the selector, without a uid")
        f.req("POST", E % ns + "sandboxtemplates", template("t-other", {ANN + "pod-name":
                                                                        "other"}))
        f.req("POST", A % ns, sandbox("f-other", "t-other"))
        s = f.wait(A % ns + "/f-other", ready)
        code, _ = f.get(P % ns + "/f-other")
        _, lst = f.get(P % ns + "?labelSelector=" + s["status"]["selector"])
        tap(code == 404 and len(lst["items"]) == 1 and lst["items"][0]["metadata"]["uid"],
            "pod-name: other: found by the selector, with a uid")
        f.req("POST", E % ns + "sandboxtemplates", template("t-nosvc", {ANN + "service":
                                                                        "none"}))
        f.req("POST", A % ns, sandbox("f-nosvc", "t-nosvc"))
        s = f.wait(A % ns + "/f-nosvc", ready)
        tap("serviceFQDN" not in s["status"] and s["status"]["podIPs"],
            "service: none: no serviceFQDN")
        f.req("POST", E % ns + "sandboxtemplates", template("t-rej", {ANN + "claim":
                                                                      "reject"}))
        f.req("POST", E % ns + "sandboxwarmpools", {
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
            "metadata": {"name": "prej"},
            "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "t-rej"}}})
        f.req("POST", E % ns + "sandboxclaims", {
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
            "metadata": {"name": "crej"}, "spec": {"warmPoolRef": {"name": "prej"}}})
        c = f.wait(E % ns + "sandboxclaims/crej", lambda code, o: code == 200 and any(
            x.get("reason") == "InvalidMetadata" and x.get("status") == "False"
            for x in (o.get("status") or {}).get("conditions") or []))
        tap(c is not None, "claim: reject: Ready=False InvalidMetadata")

        admission_fence(f)

        # a second fake beside the first one
        g.req("POST", E % ns + "sandboxtemplates", template("tpl"))
        g.req("POST", A % ns, sandbox("s1", "tpl"))
        s = g.wait(A % ns + "/s1", ready)
        _, gp = g.get(P % ns + "/s1")
        r = call("127.77.2.2", {"op": "execute", "token": gp["metadata"]["uid"],
                                "command": "true"})
        tap(s is not None and s["status"]["podIPs"] == ["127.77.2.2"]
            and "unauthorized" not in json.dumps(r), "a second fake on another subnet")
    finally:
        f.stop()
        g.stop()
    print("1..%d" % N[0])


if __name__ == "__main__":
    main()
