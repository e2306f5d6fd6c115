#!/usr/bin/env python3
"""microvm:kubernetes network verification through the tools. Egress (spec D.10.6, D.10.7,
namzu-create --config's backend.egress): the named policy verified before anything is created
(missing or different: refused, nothing left), the profile label on the pod (a Sandbox's pod
template, a claim's additionalPodMetadata; a claimed pod without it refused), narrowing, and
the union check (spec D.10.7) over the NetworkPolicies that select the pods, and under the
cilium engine over CiliumNetworkPolicies too. Ingress (spec D.9): the agent port
proven reachable only from the host's pods before a Sandbox is POSTed, after a claim binds (then
released), before a workspace is POSTed, from CiliumNetworkPolicies too under cilium;
backend.ingress 'unverified' opts out. Against the FAKE API server and its FAKE controller
(tests/fakes/). TAP output. Without bwrap/openssl the test is skipped, except under CI=true (a
failure)."""

import sys

sys.dont_write_bytecode = True  # the harness must not write into the source tree
import json
import os

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_harness import e2e, fc  # noqa: E402  (its requirement check runs here)

NS = e2e.NS
tap = e2e.tap
NP = "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies" % NS
DNS_RULE = {"to": [{"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "kube-system"}}}],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}


CNP = "/apis/cilium.io/v2/namespaces/%s/ciliumnetworkpolicies" % NS
# spec D.10.3 CILIUM_DNS_VISIBILITY_RULE.
CILIUM_DNS_RULE = {"toEndpoints": [{"matchLabels": {
    "k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}}],
    "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}],
                 "rules": {"dns": [{"matchPattern": "*"}]}}]}
STATIC = {"policy": {"kind": "static", "allowedHosts": ["api.example.com"]}, "engine": "cilium",
          "profile": "web"}


def cilium_policy(name, egress):
    """A CiliumNetworkPolicy selecting the web-profile pods (the translation's selector)."""
    return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"endpointSelector": {"matchLabels": {
                "sandbox.namzu.ai/template": "tpl", "sandbox.namzu.ai/egress-profile": "web"}},
                "egress": egress}}


def policy(name, egress, profile="web"):
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"podSelector": {"matchLabels": {"sandbox.namzu.ai/template": "tpl",
                                                     "sandbox.namzu.ai/egress-profile": profile}},
                     "policyTypes": ["Egress"], "egress": egress}}


def main():
    f = fc.Fake("127.82.%d" % (os.getpid() % 200 + 1))
    try:
        e = e2e.Env(f)
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("tpl"))
        cfg = os.path.join(f.dir, "cfg.json")

        def create(egress, **backend):
            with open(cfg, "w") as fh:
                json.dump({"backend": dict({"tier": "microvm", "service": "kubernetes",
                                            "sandboxTemplateName": "tpl",
                                            "agentAddress": "pod-ip", "egress": egress},
                                           **backend)}, fh)
            return e.run("namzu-create", "--config", cfg)

        deny = {"policy": {"kind": "deny-all"}, "verify": "named-object-only", "profile": "web"}
        rc, _, err = create({"policy": {"kind": "nonsense"}, "verify": "named-object-only"})
        tap(rc != 0 and "backend.egress" in err, "a bad egress config is refused, naming it (%s)"
            % err.strip())

        rc, _, err = create(deny)
        tap(rc != 0 and "tpl-web-egress" in err and e2e.objects_left(f) == 0,
            "the named policy missing: refused before anything is created (%s)" % err.strip())
        f.req("POST", NP, policy("tpl-web-egress", [{}]))
        rc, _, err = create(deny)
        tap(rc != 0 and "tpl-web-egress" in err and e2e.objects_left(f) == 0,
            "a policy that is not the translation is refused (%s)" % err.strip())
        f.req("DELETE", NP + "/tpl-web-egress")
        f.req("POST", NP, policy("tpl-web-egress", [DNS_RULE]))
        rc, out, err = create(deny)
        tap(rc == 0, "the translated policy present: created (%s)" % err.strip()[-300:])
        h = json.loads(out) if rc == 0 else {}
        code, sb = f.get(fc.A % NS + "/" + h.get("kubernetes", {}).get("object", "x"))
        labels = (((sb.get("spec") or {}).get("podTemplate") or {}).get("metadata") or {}).get(
            "labels") or {}
        tap(labels.get("sandbox.namzu.ai/egress-profile") == "web"
            and labels.get("sandbox.namzu.ai/template") == "tpl",
            "the Sandbox's pod carries the profile label the policy selects")
        rc, out2, _ = e.run("namzu-exec", "--sandbox", h.get("id", "x"), "--", "echo", "ok")
        tap(rc == 0 and out2 == "ok\n", "and runs commands")
        e.run("namzu-destroy", "--sandbox", h.get("id", "x"))

        # The union check (verify 'union', the default; spec D.10.7): policies add up, so any
        # other policy selecting the pods must allow no more than deny-all's DNS rule. The
        # baseline's placeholder rule to 203.0.113.0/24 does.
        union = dict(deny, verify="union")
        rc, _, err = create(union)
        tap(rc != 0 and "policy-widens-egress" in err and "namzu-sandbox-baseline" in err
            and e2e.objects_left(f) == 0,
            "the union check refuses the baseline's wider placeholder rule (%s)" % err.strip())
        narrow = e2e.baseline_policy()
        narrow["spec"]["egress"] = narrow["spec"]["egress"][:1]  # kube-dns only: inside DNS_RULE
        f.req("DELETE", e2e.BASELINE_PATH + "/namzu-sandbox-baseline")
        f.req("POST", e2e.BASELINE_PATH, narrow)
        wide_elsewhere = policy("elsewhere", [{}])
        wide_elsewhere["spec"]["podSelector"] = {"matchLabels": {"app": "not-ours"}}
        f.req("POST", NP, wide_elsewhere)
        rc, out, err = create(union)
        tap(rc == 0, "a narrower rule, and a wide policy selecting other pods, pass (%s)"
            % err.strip()[-300:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")

        # The union check under the cilium engine (spec D.10.7): CiliumNetworkPolicies are listed
        # too, and a static translation is judged by FQDN, port and destination kind.
        rc, _, err = create(STATIC)
        tap(rc != 0 and "tpl-web-egress" in err and "CiliumNetworkPolicy" in err
            and e2e.objects_left(f) == 0,
            "cilium: the translated CiliumNetworkPolicy missing is refused (%s)" % err.strip())
        f.req("POST", CNP, cilium_policy("tpl-web-egress", [CILIUM_DNS_RULE, {
            "toFQDNs": [{"matchName": "api.example.com"}]}]))
        # Only the object of the translation's kind is exempt: deny-all's NetworkPolicy of the
        # same name lets the sandbox reach every kube-system pod, which the CNP does not.
        rc, _, err = create(STATIC)
        tap(rc != 0 and "NetworkPolicy tpl-web-egress also selects" in err
            and e2e.objects_left(f) == 0,
            "cilium: a NetworkPolicy named like the CiliumNetworkPolicy is judged (%s)"
            % err.strip()[-200:])
        f.req("DELETE", NP + "/tpl-web-egress")
        rc, out, err = create(STATIC)
        tap(rc == 0, "cilium: only the translation (and the narrowed baseline) selects the pods: "
            "created (%s)" % err.strip()[-300:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        elsewhere = cilium_policy("cnp-elsewhere", [{"toEntities": ["world"]}])
        elsewhere["spec"]["endpointSelector"] = {"matchLabels": {"k8s:app": "not-ours"}}
        f.req("POST", CNP, elsewhere)
        f.req("POST", CNP, cilium_policy("cnp-same", [{
            "toFQDNs": [{"matchName": "API.example.com"}],
            "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}]))
        rc, out, err = create(STATIC)
        tap(rc == 0, "cilium: a narrower CiliumNetworkPolicy, and a wide one selecting other "
            "pods, pass (%s)" % err.strip()[-300:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        for name, rule in (("cnp-fqdn", {"toFQDNs": [{"matchName": "evil.example.net"}]}),
                           ("cnp-cidr", {"toCIDR": ["10.0.0.0/8"]})):
            f.req("POST", CNP, cilium_policy(name, [rule]))
            rc, _, err = create(STATIC)
            tap(rc != 0 and ("CiliumNetworkPolicy %s also selects" % name) in err
                and e2e.objects_left(f) == 0,
                "cilium: a selecting CiliumNetworkPolicy allowing more is refused, nothing left: "
                "%s (%s)" % (name, err.strip()[-160:]))
            f.req("DELETE", CNP + "/" + name)
        f.req("POST", CNP, cilium_policy("cnp-wide", [{"toEntities": ["world"]}]))
        rc, out, err = create(dict(STATIC, verify="named-object-only"))
        tap(rc == 0, "cilium: verify 'named-object-only' skips the union check (%s)"
            % err.strip()[-200:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        f.req("DELETE", CNP + "/cnp-wide")
        # Ingress under cilium (spec D.9): CiliumNetworkPolicies are read there too.
        open_agent = cilium_policy("cnp-open-agent", [])
        del open_agent["spec"]["egress"]
        open_agent["spec"]["ingress"] = [{"toPorts": [{"ports": [{"port": "1024",
                                                                  "protocol": "TCP"}]}]}]
        f.req("POST", CNP, open_agent)
        rc, _, err = create(STATIC)
        tap(rc != 0 and "CiliumNetworkPolicy cnp-open-agent does not keep the agent port 1024 "
            "private" in err and e2e.objects_left(f) == 0,
            "cilium: a CiliumNetworkPolicy opening the agent port to all is refused (%s)"
            % err.strip()[-160:])
        f.req("DELETE", CNP + "/cnp-open-agent")
        for name in ("cnp-elsewhere", "cnp-same", "tpl-web-egress"):
            f.req("DELETE", CNP + "/" + name)
        f.req("POST", NP, policy("tpl-web-egress", [DNS_RULE]))
        for name, rule in (("all-ports-dns", {"to": DNS_RULE["to"]}),
                           ("other-ns", {"to": [{"namespaceSelector": {"matchLabels": {
                               "kubernetes.io/metadata.name": "default"}}}],
                               "ports": DNS_RULE["ports"]}),
                           ("cidr", {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]})):
            extra = policy(name, [rule])
            f.req("POST", NP, extra)
            rc, _, err = create(union)
            tap(rc != 0 and ("NetworkPolicy %s also selects" % name) in err
                and e2e.objects_left(f) == 0,
                "a selecting policy allowing more is refused: %s (%s)" % (name, err.strip()[-120:]))
            f.req("DELETE", NP + "/" + name)
        f.req("DELETE", NP + "/elsewhere")
        f.req("DELETE", e2e.BASELINE_PATH + "/namzu-sandbox-baseline")
        f.req("POST", e2e.BASELINE_PATH, e2e.baseline_policy())

        # The pool path: the label goes on the claim's additionalPodMetadata (warm-safe).
        f.req("POST", fc.E % NS + "sandboxwarmpools",
              {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
               "metadata": {"name": "pool1"},
               "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "tpl"}}})
        rc, out, err = create(deny, warmPoolName="pool1")
        h = json.loads(out) if rc == 0 else {}
        code, c = f.get(fc.E % NS + "sandboxclaims/" + h.get("kubernetes", {}).get("object", "x"))
        extra = ((c.get("spec") or {}).get("additionalPodMetadata") or {}).get("labels") or {}
        tap(rc == 0 and extra == {"sandbox.namzu.ai/egress-profile": "web"},
            "a claim carries the profile label in additionalPodMetadata (%s)"
            % err.strip()[-300:])
        e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
        # A controller that binds the claim but drops its labels (allowed-label-domains
        # without sandbox.namzu.ai): the pod is outside the profile's policy, so refused and
        # the claim released (spec D.10.6 KubernetesPodLabelNotObservedError).
        f.req("POST", fc.E % NS + "sandboxtemplates",
              fc.template("tpl-drop", {fc.ANN + "claim": "drop-labels"}))
        f.req("POST", fc.E % NS + "sandboxwarmpools",
              {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
               "metadata": {"name": "pool-drop"},
               "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "tpl-drop"}}})
        rc, _, err = create(deny, warmPoolName="pool-drop")
        tap(rc != 0 and "KubernetesPodLabelNotObservedError" in err
            and "sandbox.namzu.ai/egress-profile=web" in err
            and not (f.get(fc.E % NS + "sandboxclaims")[1].get("items") or []),
            "a claimed pod without the profile label is refused, the claim released (%s)"
            % err.strip()[-200:])
        f.req("DELETE", fc.E % NS + "sandboxwarmpools/pool-drop")

        # ciliumNarrowing (spec D.10.5): the named CiliumNetworkPolicy must be the narrowed
        # translation, so the unnarrowed one is refused and the narrowed one passes.
        cnp = "/apis/cilium.io/v2/namespaces/%s/ciliumnetworkpolicies" % NS
        static = {"policy": {"kind": "static", "allowedHosts": ["api.example.com"]},
                  "engine": "cilium", "verify": "named-object-only", "profile": "web",
                  "ciliumNarrowing": {"ports": [443], "dnsNames": True}}
        rc, _, err = create(dict(deny, ciliumNarrowing={"ports": [443]}))
        tap(rc != 0 and "KubernetesEgressNarrowingUnsupportedError" in err
            and "policy kind 'deny-all'" in err and e2e.objects_left(f) == 0,
            "ciliumNarrowing on deny-all is refused, naming the kind (%s)" % err.strip())
        rc, _, err = create(dict(static, ciliumNarrowing={"ports": [0]}))
        tap(rc != 0 and "backend.egress.ciliumNarrowing.ports[0] is not a port" in err,
            "a bad narrowing is refused, naming the field (%s)" % err.strip())

        def cilium(dns, rules):
            return {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
                    "metadata": {"name": "tpl-web-egress", "namespace": NS},
                    "spec": {"endpointSelector": {"matchLabels": {
                        "sandbox.namzu.ai/template": "tpl",
                        "sandbox.namzu.ai/egress-profile": "web"}},
                        "egress": [{"toEndpoints": [{"matchLabels": {
                            "k8s:io.kubernetes.pod.namespace": "kube-system",
                            "k8s:k8s-app": "kube-dns"}}],
                            "toPorts": [{"ports": [{"port": "53", "protocol": "ANY"}],
                                         "rules": {"dns": dns}}]}] + rules}}

        f.req("POST", cnp, cilium([{"matchPattern": "*"}],
                                  [{"toFQDNs": [{"matchName": "api.example.com"}]}]))
        rc, out, err = create(static)
        tap(rc != 0 and "has other egress rules" in err and e2e.objects_left(f) == 0,
            "the unnarrowed policy is not the narrowed translation: refused (%s)"
            % err.strip()[-200:])
        if rc == 0:  # a wrong pass must not leave a sandbox to the cases after it
            e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x"))
        f.req("DELETE", cnp + "/tpl-web-egress")
        f.req("POST", cnp, cilium(
            [{"matchName": "api.example.com"},
             {"matchName": "api.example.com.%s.svc.cluster.local" % NS},
             {"matchName": "api.example.com.svc.cluster.local"},
             {"matchName": "api.example.com.cluster.local"}],
            [{"toFQDNs": [{"matchName": "api.example.com"}],
              "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]}]))
        rc, out, err = create(static)
        tap(rc == 0, "the narrowed policy present: created (%s)" % err.strip()[-300:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        f.req("DELETE", cnp + "/tpl-web-egress")
        # The claim path under cilium: judged on the bound pod, released when refused; the full
        # baseline's placeholder CIDR rule (a NetworkPolicy) widens a static translation too.
        f.req("POST", CNP, cilium_policy("tpl-web-egress", [CILIUM_DNS_RULE, {
            "toFQDNs": [{"matchName": "api.example.com"}]}]))
        rc, _, err = create(STATIC, warmPoolName="pool1")
        claims_left = len(f.get(fc.E % NS + "sandboxclaims")[1].get("items") or [])
        tap(rc != 0 and "NetworkPolicy namzu-sandbox-baseline also selects" in err
            and "203.0.113.0/24" in err and claims_left == 0,
            "cilium: a claimed pod a NetworkPolicy widens is refused, the claim released (%s)"
            % err.strip()[-200:])
        f.req("DELETE", CNP + "/tpl-web-egress")

        # Ingress (spec D.9).
        def plain(*flags, **backend):
            with open(cfg, "w") as fh:
                json.dump({"backend": dict({"tier": "microvm", "service": "kubernetes",
                                            "sandboxTemplateName": "tpl",
                                            "agentAddress": "pod-ip"}, **backend)}, fh)
            return e.run("namzu-create", "--config", cfg, *flags)

        def claims():
            return len([i for i in f.get(fc.E % NS + "sandboxclaims")[1].get("items") or []])

        base = e2e.BASELINE_PATH + "/namzu-sandbox-baseline"
        f.req("DELETE", base)
        rc, _, err = plain()
        tap(rc != 0 and "no NetworkPolicy with Ingress" in err and e2e.objects_left(f) == 0,
            "no ingress policy: the Sandbox is refused before its POST (%s)" % err.strip())
        rc, _, err = plain(warmPoolName="pool1")
        tap(rc != 0 and "no NetworkPolicy with Ingress" in err and claims() == 0,
            "a claimed pod without an ingress policy: refused, the claim released (%s)"
            % err.strip())
        disk = fc.template("wtpl")
        disk["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "ws"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}}]
        disk["spec"]["podTemplate"]["spec"]["containers"][0]["volumeDevices"] = [
            {"name": "ws", "devicePath": "/dev/namzu-workspace"}]
        f.req("POST", fc.E % NS + "sandboxtemplates", disk)
        rc, _, err = plain("--workspace", "w9", sandboxTemplateName="wtpl")
        code, _ = f.get(fc.A % NS + "/namzu-ws-w9")
        tap(rc != 0 and "no NetworkPolicy with Ingress" in err and code == 404,
            "a workspace without an ingress policy: refused before its POST (%s)"
            % err.strip()[-200:])
        rc, out, err = plain(ingress="unverified")
        tap(rc == 0, "ingress: 'unverified' opts out (%s)" % err.strip()[-200:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        f.req("POST", e2e.BASELINE_PATH, e2e.baseline_policy())
        other_port = policy("other-port", [])
        other_port["spec"]["policyTypes"] = ["Ingress"]
        other_port["spec"]["ingress"] = [{"ports": [{"protocol": "TCP", "port": 8080}]}]
        del other_port["spec"]["egress"]
        f.req("POST", NP, other_port)
        rc, out, err = plain()
        tap(rc == 0, "a rule open to all on another port does not reach the agent (%s)"
            % err.strip()[-200:])
        e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x") if rc == 0 else "x")
        for name, rule in (("wide", {}),
                           ("other-ns", {"from": [{"namespaceSelector": {}, "podSelector": {
                               "matchLabels": {"namzu.ai/component": "host"}}}],
                               "ports": [{"protocol": "TCP", "port": 1024}]}),
                           ("not-host", {"from": [{"podSelector": {"matchLabels": {
                               "app": "x"}}}]}),
                           ("range", {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                                      "ports": [{"port": 1000, "endPort": 2000}]})):
            p = policy(name, [])
            p["spec"]["podSelector"] = {"matchLabels": {"sandbox.namzu.ai/template": "tpl"}}
            p["spec"]["policyTypes"] = ["Ingress"]
            p["spec"]["ingress"] = [rule]
            del p["spec"]["egress"]
            f.req("POST", NP, p)
            rc, _, err = plain()
            tap(rc != 0 and ("NetworkPolicy %s does not keep the agent port 1024 private" % name)
                in err and e2e.objects_left(f) == 0,
                "a policy letting other peers reach the agent port is refused: %s (%s)"
                % (name, err.strip()[-160:]))
            f.req("DELETE", NP + "/" + name)

        # The caches of spec D.4: a pass of the named, ingress and union checks is kept for 5
        # minutes in the state directory, a refusal never.
        e.cache = True
        union = {"policy": {"kind": "deny-all"}, "profile": "web"}
        f.req("POST", NP, policy("tpl-web-egress", [DNS_RULE]))
        # the baseline without its placeholder 203.0.113.0/24 rule, which widens deny-all
        base_dns = e2e.baseline_policy()
        base_dns["spec"]["egress"] = [r for r in base_dns["spec"]["egress"]
                                      if not any("ipBlock" in t for t in r.get("to", []))]
        f.req("DELETE", base)
        f.req("POST", e2e.BASELINE_PATH, base_dns)

        def created(rc, out):
            if rc == 0:
                e.run("namzu-destroy", "--sandbox", json.loads(out).get("id", "x"))
            return rc == 0

        n0 = f.requests_seen()
        ok1 = created(*create(union)[:2])
        n1 = f.requests_seen()
        ok2 = created(*create(union)[:2])
        n2 = f.requests_seen()
        tap(ok1 and ok2 and (n2 - n1) == (n1 - n0) - 3,
            "a second create within the cache's time skips the named GET and the two LISTs "
            "(%d, then %d requests)" % (n1 - n0, n2 - n1))
        f.req("POST", NP, policy("wide", [{}]))
        rc, out, err = create(union)
        tap(created(rc, out), "a policy added since is not seen while the pass is fresh (%s)"
            % err.strip()[-200:])
        e.cache = False
        rc, out, err = create(union)
        tap(not created(rc, out) and "NetworkPolicy wide also selects" in err,
            "NAMZU_KUBE_VERIFY_CACHE=0 asks the cluster again: refused (%s)" % err.strip()[-200:])
        f.req("DELETE", NP + "/wide")
        e.cache = True
        other = dict(union, profile="api")
        rc, out, err = create(other)
        tap(not created(rc, out) and "tpl-api-egress" in err,
            "a refusal (the named policy missing) ... (%s)" % err.strip()[-200:])
        f.req("POST", NP, policy("tpl-api-egress", [DNS_RULE], profile="api"))
        rc, out, err = create(other)
        tap(created(rc, out), "... is not cached: applied, the next create passes (%s)"
            % err.strip()[-200:])
        e.cache = False

        # Workspaces (spec D.8.3 steps 2, 4, 5): the named policy before the POST, the profile
        # label on the pod template, the union check; an adopted one must carry the profile.
        def wscreate(egress, wid):
            with open(cfg, "w") as fh:
                json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                       "sandboxTemplateName": "wtpl", "agentAddress": "pod-ip",
                                       "egress": egress}}, fh)
            return e.run("namzu-create", "--config", cfg, "--workspace", wid)

        def ws_policy(profile, egress):
            p = policy("wtpl-%s-egress" % profile, egress, profile=profile)
            p["spec"]["podSelector"]["matchLabels"]["sandbox.namzu.ai/template"] = "wtpl"
            return p

        wdeny = {"policy": {"kind": "deny-all"}, "profile": "ws"}
        rc, _, err = wscreate(wdeny, "we1")
        tap(rc != 0 and "wtpl-ws-egress" in err and f.get(fc.A % NS + "/namzu-ws-we1")[0] == 404,
            "workspace: the named policy missing, refused before the POST (%s)"
            % err.strip()[-200:])
        f.req("POST", NP, ws_policy("ws", [DNS_RULE]))
        wide = ws_policy("ws", [{}])
        wide["metadata"]["name"] = "ws-wide"
        f.req("POST", NP, wide)
        rc, _, err = wscreate(wdeny, "we1")
        tap(rc != 0 and "NetworkPolicy ws-wide also selects" in err
            and f.get(fc.A % NS + "/namzu-ws-we1")[0] == 404,
            "workspace: a widening policy, refused before the POST (%s)" % err.strip()[-200:])
        f.req("DELETE", NP + "/ws-wide")
        rc, out, err = wscreate(wdeny, "we1")
        code, sb = f.get(fc.A % NS + "/namzu-ws-we1")
        labels = (((sb.get("spec") or {}).get("podTemplate") or {}).get("metadata") or {}).get(
            "labels") or {}
        tap(rc == 0 and labels.get("sandbox.namzu.ai/egress-profile") == "ws"
            and labels.get("sandbox.namzu.ai/template") == "wtpl",
            "workspace: created with the profile label on its pod template (%s)"
            % err.strip()[-200:])
        wid = json.loads(out).get("id", "x") if rc == 0 else "x"
        f.req("POST", NP, ws_policy("other", [DNS_RULE]))
        rc2, _, err = wscreate(dict(wdeny, profile="other"), "we1")
        tap(rc2 != 0 and "egressProfile" in err,
            "workspace: adopting it with another profile is a mismatch (%s)" % err.strip()[-200:])
        rc3, _, err = wscreate(dict(wdeny, perSandbox={
            "engine": "cilium", "admissionPolicyName": "p"}, engine="cilium"), "we2")
        tap(rc3 != 0 and "KubernetesWorkspacePerSandboxEgressConfigError" in err,
            "workspace: perSandbox refused (%s)" % err.strip()[-200:])
        e.run("namzu-destroy", "--sandbox", wid)
    finally:
        f.stop()
    print("1..%d" % fc.N[0])


if __name__ == "__main__":
    main()
