#!/usr/bin/env python3
"""microvm:kubernetes per-sandbox egress (spec D.10.8) through the tools: namzu-create with
backend.egress.perSandbox labels the pod <labelKey>=<claim or Sandbox name> (pool and pool-less
paths), and namzu-egress set then writes that sandbox's CiliumNetworkPolicy namzu-sbx-<uid>
behind the admission fence: refused while the fence is missing or unreadable, PATCHed on a
second set, DELETEd by --none, garbage-collected with its owner on namzu-destroy, and admitted
by the fake's enforcement of deploy/k8s/validatingadmissionpolicy-cilium.yaml (spec D.10.9),
since namzu authenticates as the host's service account the fence matches. Against the FAKE
API server and its FAKE controller (tests/fakes/). TAP output. Without bwrap/openssl the test
is skipped, except under CI=true (a failure)."""

import sys

sys.dont_write_bytecode = True  # the harness must not write into the source tree
import copy
import json
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_harness import e2e, fc  # noqa: E402  (its requirement check runs here)

NS = e2e.NS
tap = e2e.tap
CNP = fc.CNP % NS
LABEL = "sandbox.namzu.ai/per-sandbox-egress"
PER_SANDBOX = {"engine": "cilium", "admissionPolicyName": "namzu-per-sandbox-egress"}
DNS_VISIBILITY = {"toEndpoints": [{"matchLabels": {
    "k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}}],
    "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}],
                 "rules": {"dns": [{"matchPattern": "*"}]}}]}


def named_cnp(name, selector):
    """The baseline the operator applies: the translation of policy static [base.example.com]."""
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"endpointSelector": {"matchLabels": selector},
                     "egress": [DNS_VISIBILITY, {"toFQDNs": [{"matchName": "base.example.com"}]}]}}


def per_sandbox_objects(f):
    """The namzu-sbx-* policies in NS."""
    code, lst = f.get(CNP)
    return [i for i in (lst.get("items") or []) if i["metadata"]["name"].startswith("namzu-sbx-")]


def main():
    f = fc.Fake("127.83.%d" % (os.getpid() % 200 + 1))
    try:
        e = e2e.Env(f, token=fc.HOST_TOKEN)
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("tpl"))
        f.req("POST", CNP, named_cnp("tpl-egress", {"sandbox.namzu.ai/template": "tpl"}))
        f.req("POST", CNP, named_cnp("tpl-web-egress", {"sandbox.namzu.ai/template": "tpl",
                                                        "sandbox.namzu.ai/egress-profile": "web"}))
        f.req("POST", fc.E % NS + "sandboxwarmpools",
              {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
               "metadata": {"name": "pool1"},
               "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "tpl"}}})
        cfg = os.path.join(f.dir, "cfg.json")
        egress = {"policy": {"kind": "static", "allowedHosts": ["base.example.com"]},
                  "engine": "cilium", "verify": "named-object-only", "perSandbox": PER_SANDBOX}

        def create(eg, *flags, **backend):
            with open(cfg, "w") as fh:
                json.dump({"backend": dict({"tier": "microvm", "service": "kubernetes",
                                            "sandboxTemplateName": "tpl",
                                            "agentAddress": "pod-ip", "egress": eg},
                                           **backend)}, fh)
            rc, out, err = e.run("namzu-create", "--config", cfg, *flags)
            return rc, json.loads(out) if rc == 0 else {}, err

        def egress_set(sid, *hosts):
            rc, out, err = e.run("namzu-egress", "set", "--sandbox", sid, *hosts)
            return rc, json.loads(out) if rc == 0 else {}, err

        # Pool-less: the Sandbox's pod template and its pod carry the label.
        rc, h, err = create(egress)
        tap(rc == 0, "pool-less create with perSandbox (%s)" % err.strip()[-300:])
        sid, obj = h.get("id", "x"), h.get("kubernetes", {}).get("object", "x")
        tap(h.get("capabilities", {}).get("setNetworkPolicy") is True
            and "perSandbox" not in json.dumps(h),
            "the public handle says setNetworkPolicy, and holds nothing of the private record")
        code, sb = f.get(fc.A % NS + "/" + obj)
        labels = (((sb.get("spec") or {}).get("podTemplate") or {}).get("metadata") or {}).get(
            "labels") or {}
        code, pod = f.get(fc.P % NS + "/" + obj)
        tap(labels.get(LABEL) == obj and labels.get("sandbox.namzu.ai/template") == "tpl"
            and (pod.get("metadata") or {}).get("labels", {}).get(LABEL) == obj,
            "the pod carries %s=<the Sandbox's name>" % LABEL)
        uid = sb.get("metadata", {}).get("uid", "?")
        path = CNP + "/namzu-sbx-" + uid

        # The fence missing: refused, nothing written.
        rc, _, err = egress_set(sid, "api.example.com")
        tap(rc == 1 and "KubernetesAdmissionFenceMissingError" in err
            and "validatingadmissionpolicies/namzu-per-sandbox-egress" in err
            and not per_sandbox_objects(f),
            "the fence missing: refused, nothing written (%s)" % err.strip())
        policy, binding = fc.fence_objects(NS)
        f.req("POST", fc.VAP, policy)
        rc, _, err = egress_set(sid, "api.example.com")
        tap(rc == 1 and "KubernetesAdmissionFenceMissingError" in err
            and "ValidatingAdmissionPolicyBinding namzu-per-sandbox-egress-binding" in err
            and not per_sandbox_objects(f),
            "the binding missing: refused, nothing written (%s)" % err.strip())
        f.req("POST", fc.VAPB, binding)
        # Unreadable (403): refused, nothing written.
        f.req("POST", "/fake/forbid-resource/validatingadmissionpolicybindings", {})
        rc, _, err = egress_set(sid, "api.example.com")
        tap(rc == 1 and "KubernetesAdmissionFenceUnreadableError" in err and "403" in err
            and not per_sandbox_objects(f),
            "the fence unreadable (403): refused, nothing written (%s)" % err.strip())
        f.req("DELETE", "/fake/forbid-resource/validatingadmissionpolicybindings")

        # A bad host: refused before any request.
        for bad in ("*.example.com", ".com", "10.0.0.1", "a b.example"):
            before = f.requests_seen()
            rc, _, err = egress_set(sid, "ok.example.com", bad)
            tap(rc == 1 and "KubernetesNetworkPolicyHostError" in err
                and f.requests_seen() == before and not per_sandbox_objects(f),
                "the host %r is refused before any request (%s)" % (bad, err.strip()[-160:]))

        # Written, behind the fence the fake enforces for the host's service account.
        rc, out, err = egress_set(sid, "api.example.com", ".Example.org")
        code, cnp = f.get(path)
        spec = cnp.get("spec") or {}
        owners = (cnp.get("metadata") or {}).get("ownerReferences")
        tap(rc == 0 and out.get("changed") is True and code == 200,
            "namzu-egress set writes namzu-sbx-<the Sandbox's uid> (%s)" % err.strip()[-300:])
        tap(spec.get("endpointSelector") == {"matchLabels": {LABEL: obj}},
            "it selects exactly this sandbox's label")
        tap(owners == [{"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": obj,
                        "uid": uid}], "its one owner is the Sandbox, without blockOwnerDeletion")
        tap(spec.get("egress") == [DNS_VISIBILITY, {"toFQDNs": [
            {"matchName": "api.example.com"}, {"matchName": "example.org"},
            {"matchPattern": "*.example.org"}]}] and set(spec) == {"endpointSelector", "egress"},
            "its egress is DNS plus the hosts, lower-cased (%s)" % json.dumps(spec.get("egress")))
        hostile = copy.deepcopy(cnp)
        hostile["spec"]["endpointSelector"] = {"matchLabels": {LABEL: "namzu-task-other"}}
        code, st = f.req("PATCH", path, {"spec": hostile["spec"]},
                         "application/merge-patch+json", token=fc.HOST_TOKEN)
        tap(code == 422 and "denied request" in (st or {}).get("message", ""),
            "the fence is in force for the host's user: a policy selecting another sandbox is "
            "denied")
        rv = cnp.get("metadata", {}).get("resourceVersion")
        rc, out, err = egress_set(sid, "api.example.com", ".example.org")
        tap(rc == 0 and out.get("changed") is False,
            "the same list again: applied and verified, changed false (%s)" % err.strip()[-200:])
        rc, out, err = egress_set(sid, "Other.Example.NET")
        code, cnp2 = f.get(path)
        tap(rc == 0 and out.get("changed") is True and cnp2.get("metadata", {}).get(
            "resourceVersion") != rv and cnp2.get("metadata", {}).get("uid") == cnp.get(
            "metadata", {}).get("uid")
            and (cnp2.get("spec") or {}).get("egress", [{}, {}])[1] == {"toFQDNs": [
                {"matchName": "other.example.net"}]},
            "a second set PATCHes the same object with the new hosts (%s)" % err.strip()[-200:])
        rc, out, err = egress_set(sid, "--none")
        tap(rc == 0 and out.get("changed") is True and out.get("allowedHosts") == []
            and f.get(path)[0] == 404, "--none deletes it (%s)" % err.strip()[-200:])
        rc, out, err = egress_set(sid, "--none")
        tap(rc == 0 and out.get("changed") is False, "--none again: already gone, changed false")
        rc, _, err = e.run("namzu-egress", "set", "--sandbox", sid)
        tap(rc == 2 and "--none" in err, "no hosts and no --none is a usage error")
        egress_set(sid, "api.example.com")
        rc, _, err = e.run("namzu-destroy", "--sandbox", sid)
        tap(rc == 0 and f.wait(path, lambda c, o: c == 404) is not None,
            "namzu-destroy: the Sandbox is deleted and the GC takes its policy")

        # The pool path, with a profile: the claim asks for both labels (warm-safe).
        rc, h, err = create(dict(egress, profile="web"), warmPoolName="pool1")
        sid, obj = h.get("id", "x"), h.get("kubernetes", {}).get("object", "x")
        code, claim = f.get(fc.E % NS + "sandboxclaims/" + obj)
        extra = ((claim.get("spec") or {}).get("additionalPodMetadata") or {}).get("labels")
        tap(rc == 0 and extra == {LABEL: obj, "sandbox.namzu.ai/egress-profile": "web"},
            "a claim carries the per-sandbox and profile labels in additionalPodMetadata (%s)"
            % err.strip()[-300:])
        bound = ((claim.get("status") or {}).get("sandbox") or {}).get("name", "x")
        code, pod = f.get(fc.P % NS + "/" + bound)
        tap((pod.get("metadata") or {}).get("labels", {}).get(LABEL) == obj,
            "the claimed pod carries %s=<the claim's name>" % LABEL)
        cuid = claim.get("metadata", {}).get("uid", "?")
        rc, out, err = egress_set(sid, "api.example.com")
        code, cnp = f.get(CNP + "/namzu-sbx-" + cuid)
        tap(rc == 0 and code == 200 and (cnp.get("metadata") or {}).get("ownerReferences") == [
            {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
             "name": obj, "uid": cuid}]
            and (cnp.get("spec") or {}).get("endpointSelector") == {"matchLabels": {LABEL: obj}},
            "on a claim: namzu-sbx-<the claim's uid>, owned by the claim (%s)"
            % err.strip()[-300:])
        rc, _, err = e.run("namzu-destroy", "--sandbox", sid)
        tap(rc == 0 and f.get(fc.E % NS + "sandboxclaims/" + obj)[0] == 404
            and f.wait(CNP + "/namzu-sbx-" + cuid, lambda c, o: c == 404) is not None,
            "namzu-destroy: the claim is deleted and the GC takes its policy")

        # perSandbox.narrowing (spec D.10.5): the sandbox's policy is narrowed the same way,
        # and a host the narrowing cannot express is refused before any request.
        narrow = dict(egress, perSandbox=dict(PER_SANDBOX, narrowing={
            "tlsServerNames": True, "dnsNames": True}))
        rc, h, err = create(narrow)
        tap(rc == 0, "create with perSandbox.narrowing (%s)" % err.strip()[-300:])
        sid = h.get("id", "x")
        before = f.requests_seen()
        rc, _, err = egress_set(sid, ".example.org")
        tap(rc == 1 and "tlsServerNames" in err and f.requests_seen() == before,
            "a domain entry under tlsServerNames is refused before any request (%s)"
            % err.strip()[-200:])
        rc, out, err = egress_set(sid, "API.example.com")
        kube = h.get("kubernetes", {})
        code, uid_obj = f.get((fc.A % NS) + "/" + kube.get("object", "x"))
        nuid = (uid_obj.get("metadata") or {}).get("uid", "x") if code == 200 else "x"
        code, cnp = f.get(CNP + "/namzu-sbx-" + nuid)
        eg = (cnp.get("spec") or {}).get("egress") or [{}, {}]
        dns = ((eg[0].get("toPorts") or [{}])[0].get("rules") or {}).get("dns")
        tap(rc == 0 and code == 200 and eg[1:] == [{
            "toFQDNs": [{"matchName": "api.example.com"}],
            "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}],
                         "serverNames": ["api.example.com"]}]}]
            and dns is not None and {"matchName": "api.example.com"} in dns
            and {"matchPattern": "*"} not in dns,
            "the narrowed policy: one rule per host, TLS on 443 with its server name, DNS "
            "narrowed to its names (%s)" % err.strip()[-200:])
        e.run("namzu-destroy", "--sandbox", sid)

        # Refusals.
        rc, h, err = create({"policy": {"kind": "static", "allowedHosts": ["base.example.com"]},
                             "engine": "cilium", "verify": "named-object-only"})
        tap(rc == 0 and h.get("capabilities", {}).get("setNetworkPolicy") is False,
            "without perSandbox: setNetworkPolicy false (%s)" % err.strip()[-200:])
        rc2, _, err = egress_set(h.get("id", "x"), "api.example.com")
        tap(rc2 == 1 and "created without backend.egress.perSandbox" in err
            and not per_sandbox_objects(f),
            "without perSandbox: namzu-egress set is refused, naming what to configure (%s)"
            % err.strip())
        e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
        rc, _, err = create(egress, "--workspace", "w1")
        tap(rc != 0 and "KubernetesWorkspacePerSandboxEgressConfigError" in err
            and f.get(fc.A % NS + "/namzu-ws-w1")[0] == 404,
            "perSandbox on a workspace is refused before anything is created (%s)"
            % err.strip())
        clash = dict(egress, profile="web", profileLabelKey=LABEL)
        rc, _, err = create(clash)
        tap(rc != 0 and "KubernetesEgressProfileConfigError" in err
            and e2e.objects_left(f) == 0,
            "a profile label on the per-sandbox label's key is refused (%s)" % err.strip())
    finally:
        f.stop()
    print("1..%d" % fc.N[0])


if __name__ == "__main__":
    main()
