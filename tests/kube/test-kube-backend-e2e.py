#!/usr/bin/env python3
"""microvm:kubernetes end to end through the tools (namzu-create, namzu-exec, namzu-ls,
namzu-destroy) against the FAKE API server and its FAKE agent-sandbox controller
(tests/fakes/): the pods' agents are real namzu-agent processes in bwrap on 127.A.B.N with
the pod uid as their token; everything on the host side is the real build. TAP output.
Without bwrap/openssl the test is skipped, except under CI=true (a failure)."""

import importlib.util
import sys

sys.dont_write_bytecode = True  # importing the fake harness must not write into the source tree
import json
import os
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("fakectl", os.path.join(HERE,
                                                                      "test-fake-controller.py"))
fc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fc)  # its requirement check (bwrap, openssl) runs here

TOOLS = fc.TOOLS
NS = "ns1"
# The lease of the lease tests: short, but under the sanitizers long enough that a create and
# the renewal PATCH (its timeout is a quarter of half the lease, spec D.6.2) fit.
TTL = 20 if os.environ.get("NZ_SANITIZE", "none") not in ("", "none") else 2
tap = fc.tap
BASELINE_PATH = "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies" % NS


def baseline_policy():
    """deploy/k8s/networkpolicy.yaml, in the test namespace."""
    import yaml
    with open(os.path.join(fc.SRC, "deploy/k8s/networkpolicy.yaml")) as fh:
        p = yaml.safe_load(fh)
    p["metadata"]["namespace"] = NS
    return p




class Env:
    def __init__(self, fake, token="tok"):
        """The tools' state directory and a kubeconfig for @fake, as the user @token is
        (fc.HOST_TOKEN: the host's service account, which the admission fence matches)."""
        self.fake = fake
        self.state = os.path.join(fake.dir, "namzu-state")
        os.makedirs(self.state, mode=0o700)
        cert = open(os.path.join(fake.dir, "c.pem")).read()
        import base64
        ca = base64.b64encode(cert.encode()).decode()
        self.kubeconfig = os.path.join(fake.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                    "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:%d\n"
                    "    certificate-authority-data: %s\n"
                    "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n"
                    "    namespace: %s\n"
                    "users:\n- name: u\n  user:\n    token: %s\n" % (fake.port, ca, NS, token))
        # The namespace's baseline policy, as deploy/k8s applies it: every create proves the
        # agent port private against it (spec D.9).
        fake.req("POST", BASELINE_PATH, baseline_policy())

    # The verification caches of spec D.4 (5 minutes) would hide the policy changes the tests
    # make between creates: off unless a test turns them on (test-kube-egress-e2e's case).
    cache = False

    def run(self, tool, *args, stdin=None, timeout=120):
        env = dict(os.environ, NAMZU_STATE_DIR=self.state, KUBECONFIG=self.kubeconfig,
                   NAMZU_PROGRESS="0", NAMZU_KUBE_VERIFY_CACHE="1" if self.cache else "0")
        p = subprocess.run([os.path.join(TOOLS, tool)] + list(args), input=stdin,
                           capture_output=True, text=True, env=env, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    def count(self, path):
        code, obj = self.fake.get(path)
        return len(obj.get("items") or []) if code == 200 else -1


def objects_left(f):
    """Every claim, Sandbox and pod in NS (a failed create must leave none)."""
    total = 0
    for p in (fc.E % NS + "sandboxclaims", fc.A % NS, fc.P % NS):
        code, obj = f.get(p)
        total += len([i for i in (obj.get("items") or [])
                      if not i["metadata"]["name"].startswith("pool1-")]) if code == 200 else 99
    return total


def main():
    f = fc.Fake("127.78.%d" % (os.getpid() % 200 + 1))
    try:
        e = Env(f)
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("tpl"))
        f.req("POST", fc.E % NS + "sandboxtemplates",
              fc.template("tpl-fail", {fc.ANN + "start": "fail"}))
        f.req("POST", fc.E % NS + "sandboxtemplates",
              fc.template("tpl-priv", {fc.ANN + "start": "privileged"}))
        f.req("POST", fc.E % NS + "sandboxtemplates",
              fc.template("tpl-other", {fc.ANN + "pod-name": "other"}))

        # Pool-less: a Sandbox of its own, reached at its pod IP.
        rc, out, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                             "tpl", "--agent-address", "pod-ip")
        tap(rc == 0, "pool-less create succeeds (%s)" % err.strip()[-300:])
        h = json.loads(out) if rc == 0 else {}
        kube = h.get("kubernetes", {})
        tap(kube.get("objectKind") == "Sandbox" and kube.get("object", "").startswith(
            "namzu-task-") and "token" not in out, "the handle names the Sandbox, never the token")
        code, sb = f.get(fc.A % NS + "/" + kube.get("object", "x"))
        labels = (((sb.get("spec") or {}).get("podTemplate") or {}).get("metadata") or {}).get(
            "labels") or {}
        tap(code == 200 and labels.get("sandbox.namzu.ai/template") == "tpl"
            and sb["spec"].get("shutdownPolicy") == "Delete" and sb["spec"].get("service") is True
            and "shutdownTime" in sb["spec"], "the POSTed Sandbox is spec D.6.1's")
        # The guest boot id a later resume compares (spec D.8.10), from the probe's reserve.
        try:
            with open(os.path.join(e.state, h.get("id", "x"), "handle.json")) as fh:
                boot = json.load(fh).get("private", {}).get("guestBootId", "")
        except OSError:
            boot = ""
        tap(len(boot) == 36, "the private handle records the agent's guestBootId (%r)" % boot)
        rc, out2, err2 = e.run("namzu-exec", "--sandbox", h.get("id", "x"), "--", "sh", "-c",
                               "echo hi; cat /proc/self/status | grep ^CapEff")
        tap(rc == 0 and out2.startswith("hi\n") and "0000000000000000" in out2,
            "namzu-exec runs in the pod, without capabilities (%s)" % err2.strip()[-200:])
        rc, out3, _ = e.run("namzu-exec", "--json", "--sandbox", h.get("id", "x"), "--", "true")
        tap(rc == 0 and '"exitCode":0' in out3.replace(" ", ""), "namzu-exec --json")
        # namzu-ls bounds its cluster read (5 s) and says "unresponsive" past it, which a loaded
        # sanitized run can reach: asked up to three times (a broken status never says running).
        for _ in range(3):
            rc, ls, lserr = e.run("namzu-ls")
            if rc == 0 and h.get("id", "?") in ls and '"status":"running"' in ls.replace(" ", ""):
                break
        tap(rc == 0 and h.get("id", "?") in ls and '"status":"running"' in ls.replace(" ", ""),
            "namzu-ls sees it running (%s %s)" % (ls.strip()[-300:], lserr.strip()[-200:]))
        rc, _, err4 = e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
        code, _ = f.get(fc.A % NS + "/" + kube.get("object", "x"))
        tap(rc == 0 and code == 404, "namzu-destroy deletes the Sandbox (%s)" % err4.strip())

        # The pool path: a SandboxClaim from a warm pool, reached at its service's pod IP
        # fallback? The fake's serviceFQDN does not resolve here, so pod-ip.
        f.req("POST", fc.E % NS + "sandboxwarmpools",
              {"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
               "metadata": {"name": "pool1"},
               "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "tpl"}}})
        rc, out, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                             "tpl", "--warm-pool", "pool1", "--agent-address", "pod-ip")
        tap(rc == 0, "pool create succeeds (%s)" % err.strip()[-300:])
        h = json.loads(out) if rc == 0 else {}
        claim = h.get("kubernetes", {}).get("object", "x")
        code, c = f.get(fc.E % NS + "sandboxclaims/" + claim)
        spec_ = c.get("spec") or {}
        tap(code == 200 and spec_.get("warmPoolRef") == {"name": "pool1"}
            and (spec_.get("lifecycle") or {}).get("shutdownPolicy") == "Delete"
            and "env" not in json.dumps(spec_) and "volumeClaimTemplates" not in spec_,
            "the claim is spec D.6.1's: warmPoolRef, lifecycle, never env or volumes")
        rc, out2, _ = e.run("namzu-exec", "--sandbox", h.get("id", "x"), "--", "echo", "pooled")
        tap(rc == 0 and out2 == "pooled\n", "namzu-exec in the claimed pod")
        rc, _, _ = e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
        code, _ = f.get(fc.E % NS + "sandboxclaims/" + claim)
        tap(rc == 0 and code == 404, "namzu-destroy deletes the claim")

        # The selector fallback: the pod is not named after its Sandbox.
        rc, out, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                             "tpl-other", "--agent-address", "pod-ip")
        tap(rc == 0, "a pod found through status.selector (%s)" % err.strip()[-200:])
        if rc == 0:
            e.run("namzu-destroy", "--sandbox", json.loads(out)["id"])

        # Refusals before any request (spec D.4), and failures that leave nothing behind.
        before = objects_left(f)
        for args, want in ((["--memory-mb", "64"], "cannot enforce per-sandbox memoryLimitMb"),
                           (["-e", "A=1"], "cannot enforce per-sandbox env"),
                           (["--network", "allow-all"], "cannot enforce per-sandbox egress"),
                           (["--warm-pool", "p"], None)):
            if want is None:
                continue
            rc, _, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                               "tpl", *args)
            tap(rc != 0 and want in err, "refused: %s" % want)
        cfg = os.path.join(f.dir, "cfg.json")
        with open(cfg, "w") as fh:
            json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                   "sandboxTemplateName": "tpl", "warmPoolName": "p",
                                   "runtimeClassName": "kata"}}, fh)
        rc, _, err = e.run("namzu-create", "--config", cfg)
        tap(rc != 0 and "runtimeClassName: refused together with warmPoolName" in err,
            "runtimeClassName with a warm pool is refused")
        with open(cfg, "w") as fh:
            json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                   "sandboxTemplateName": "tpl", "streamHeartbeatMs": -1}}, fh)
        rc, _, err = e.run("namzu-create", "--config", cfg)
        tap(rc != 0 and "streamHeartbeatMs" in err, "a bad streamHeartbeatMs is refused")
        tap(objects_left(f) == before, "no refusal created anything")

        rc, _, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                           "tpl-priv", "--agent-address", "pod-ip")
        tap(rc != 0 and "privileged" in err and objects_left(f) == before,
            "a privileged pod fails the probe and is deleted (%s)" % err.strip()[-200:])
        with open(cfg, "w") as fh:
            json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                   "sandboxTemplateName": "tpl-fail", "agentAddress": "pod-ip",
                                   "readyTimeoutMs": 1500}}, fh)
        rc, _, err = e.run("namzu-create", "--config", cfg)
        tap(rc != 0 and "never became Ready (1500ms)" in err and objects_left(f) == before,
            "a pod that never starts times out and is deleted (%s)" % err.strip()[-200:])
        tap(os.listdir(e.state) == [] or all(n.endswith(".destroyed") for n in
                                             os.listdir(e.state)),
            "no failed create leaves a handle")

        # Leases: nobody renews -> the cluster deletes it at shutdownTime, and a tool says so.
        with open(cfg, "w") as fh:
            json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                   "sandboxTemplateName": "tpl", "agentAddress": "pod-ip",
                                   "claimTtlSeconds": TTL}}, fh)
        rc, out, err = e.run("namzu-create", "--config", cfg)
        tap(rc == 0, "a %d s lease (%s)" % (TTL, err.strip()[-200:]))
        h = json.loads(out) if rc == 0 else {}
        obj = h.get("kubernetes", {}).get("object", "x")
        gone = f.wait(fc.A % NS + "/" + obj, lambda code, o: code == 404, secs=TTL * 5)
        tap(gone is not None, "an unrenewed sandbox is deleted by the cluster at its shutdownTime")
        rc, _, err = e.run("namzu-exec", "--sandbox", h.get("id", "x"), "--", "true")
        tap(rc != 0 and "lease ran out" in err, "a tool call after it says the lease ran out")
        rc, _, _ = e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
        tap(rc == 0, "and namzu-destroy still cleans up")

        # Renewal: tool calls inside the lease keep it alive past its first shutdownTime.
        rc, out, err = e.run("namzu-create", "--config", cfg)
        h = json.loads(out) if rc == 0 else {}
        obj = h.get("kubernetes", {}).get("object", "x")
        alive = rc == 0
        renewal_timeouts = 0
        end = time.monotonic() + TTL * 2.5
        while alive and time.monotonic() < end:
            r, _, rerr = e.run("namzu-exec", "--sandbox", h["id"], "--", "true")
            alive = r == 0
            renewal_timeouts += "lease renewal failed" in rerr and "no answer within" in rerr
            if not alive:
                print("# " + rerr.strip().replace("\n", "\n# "))
            time.sleep(0.4)
        code, _ = f.get(fc.A % NS + "/" + obj)
        # Under the sanitizers on a loaded machine the renewal PATCH can miss the spec's timeout
        # (a quarter of half the lease); that is reported, and only then is a lost lease not
        # counted against renewal. The plain build always asserts it.
        sanitized = os.environ.get("NZ_SANITIZE", "none") not in ("", "none")
        tap((alive and code == 200) or (sanitized and renewal_timeouts > 0),
            "tool calls renew the lease (alive after 2.5 leases; %d renewal timeouts)"
            % renewal_timeouts)
        e.run("namzu-destroy", "--sandbox", h.get("id", "x"))
    finally:
        f.stop()
    print("1..%d" % fc.N[0])


if __name__ == "__main__":
    main()
