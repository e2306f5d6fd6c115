#!/usr/bin/env python3
"""microvm:kubernetes workspaces (spec D.8) end to end through the tools: namzu-create
--workspace (create, and adopt by a second host), exec, a session from a second process,
namzu-suspend (quiesce, flush, pod gone, calls refused), namzu-resume (a new pod, the disk
intact), the holder-epoch fence between two holders, namzu-destroy (the fenced DELETE), and the
refusals. Against the FAKE API server and its FAKE agent-sandbox controller (tests/fakes/);
the pods' agents are real namzu-agent processes in bwrap, the PVC a directory that outlives
them. TAP output. Without bwrap/openssl the test is skipped, except under CI=true (a
failure)."""

import sys

sys.dont_write_bytecode = True  # the harness must not write into the source tree
import json
import os
import subprocess
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_harness import e2e, fc  # noqa: E402  (its requirement check runs here)

NS = e2e.NS
tap = e2e.tap
EPOCH_ANN = "sandbox.namzu.ai/holder-epoch"


def ws_template(name):
    t = fc.template(name)
    t["spec"]["volumeClaimTemplates"] = [
        {"metadata": {"name": "ws"},
         "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                  "resources": {"requests": {"storage": "1Gi"}}}}]
    t["spec"]["podTemplate"]["spec"]["containers"][0]["volumeDevices"] = [
        {"name": "ws", "devicePath": "/dev/namzu-workspace"}]
    return t


class Host(e2e.Env):
    """Another host: its own namzu state directory, the same cluster."""

    def __init__(self, fake, base):
        self.fake, self.kubeconfig = fake, base.kubeconfig
        self.state = base.state + "-" + str(id(self))
        os.makedirs(self.state, mode=0o700)


def main():
    f = fc.Fake("127.80.%d" % (os.getpid() % 200 + 1))
    try:
        a = e2e.Env(f)
        b = Host(f, a)
        f.req("POST", fc.E % NS + "sandboxtemplates", ws_template("wtpl"))
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("plain"))
        sb_path = fc.A % NS + "/namzu-ws-w1"
        kube = ["--backend", "microvm:kubernetes", "--agent-address", "pod-ip"]

        # Refusals, before anything exists.
        rc, _, err = a.run("namzu-create", *kube, "--template", "wtpl", "--workspace", "W_1")
        tap(rc != 0 and "W_1" in err and e2e.objects_left(f) == 0,
            "an invalid workspace id is refused, never sanitised (%s)" % err.strip())
        rc, _, err = a.run("namzu-create", *kube, "--template", "wtpl", "--workspace", "w1",
                           "--warm-pool", "p")
        tap(rc != 0 and "never a claim" in err, "a workspace from a warm pool is refused")
        rc, _, err = a.run("namzu-create", *kube, "--template", "plain", "--workspace", "w0")
        code, _ = f.get(fc.A % NS + "/namzu-ws-w0")
        tap(rc != 0 and "volumeClaimTemplates" in err and code == 404,
            "a template without a Block-mode disk is refused, nothing created (%s)"
            % err.strip()[-200:])
        rc, _, err = a.run("namzu-create", *kube, "--template", "plain", "--epoch", "3")
        tap(rc != 0 and "workspace" in err, "--epoch without --workspace is refused")

        # Create.
        rc, out, err = a.run("namzu-create", *kube, "--template", "wtpl", "--workspace", "w1")
        tap(rc == 0, "namzu-create --workspace creates it (%s)" % err.strip()[-300:])
        ha = json.loads(out) if rc == 0 else {}
        aid = ha.get("id", "x")
        k = ha.get("kubernetes", {})
        code, sb = f.get(sb_path)
        tap(k.get("workspace") == "w1" and k.get("origin") == "created" and code == 200
            and "shutdownTime" not in (sb.get("spec") or {})
            and (sb.get("spec") or {}).get("volumeClaimTemplates"),
            "the handle names the workspace; its Sandbox has its disk and no lease")
        rc, out, err = a.run("namzu-exec", "--sandbox", aid, "--", "sh", "-c",
                             "echo kept > /workspace/keep && cat /workspace/keep")
        tap(rc == 0 and out == "kept\n", "namzu-exec writes to the workspace (%s)" % err.strip())
        rc, out, err = a.run("namzu-attach", "--sandbox", aid, "--start-detached", "bg", "--",
                             "sleep", "100")
        rc2, out2, _ = a.run("namzu-attach", "--sandbox", aid, "--list")
        tap(rc == 0 and '"bg"' in out2, "a session from a second process (%s)" % err.strip())
        old_uid = fc_pod_uid(f)

        # Suspend.
        rc, out, err = a.run("namzu-suspend", "--sandbox", aid, "--quiesce")
        rep = json.loads(out) if rc == 0 else {}
        code, sb = f.get(sb_path)
        pcode, _ = f.get(fc.P % NS + "/namzu-ws-w1")
        tap(rc == 0 and rep.get("operatingMode") == "Suspended"
            and rep.get("quiesce", {}).get("stopped", 0) >= 1
            and rep.get("flush", {}).get("ok") is True
            and sb["spec"].get("operatingMode") == "Suspended" and pcode == 404,
            "namzu-suspend --quiesce: quiesced, flushed, patched Suspended, pod gone (%s %s)"
            % (out.strip(), err.strip()))
        rc, _, err = a.run("namzu-exec", "--sandbox", aid, "--", "true")
        tap(rc != 0 and "is suspended" in err and "namzu-resume" in err,
            "a tool call on a suspended workspace is refused, naming namzu-resume")
        rc, ls, _ = a.run("namzu-ls")
        tap(rc == 0 and '"status":"suspended"' in ls.replace(" ", ""), "namzu-ls says suspended")
        rc, out, _ = a.run("namzu-suspend", "--sandbox", aid)
        tap(rc == 0 and json.loads(out).get("alreadySuspended") is True,
            "a second namzu-suspend is a no-op")

        # Resume: a new pod, the disk intact.
        rc, out, err = a.run("namzu-resume", "--sandbox", aid)
        rep = json.loads(out) if rc == 0 else {}
        tap(rc == 0 and rep.get("woke") is True and rep.get("guestRestart") == "pod-replaced"
            and fc_pod_uid(f) not in (None, old_uid) and old_uid not in out,
            "namzu-resume wakes it on a new pod (%s %s)" % (out.strip(), err.strip()))
        rc, out, err = a.run("namzu-exec", "--sandbox", aid, "--", "cat", "/workspace/keep")
        tap(rc == 0 and out == "kept\n", "the workspace is intact on the new pod (%s)"
            % err.strip())

        # A second host adopts it; the holder-epoch fence between two holders.
        rc, out, err = b.run("namzu-create", *kube, "--template", "wtpl", "--workspace", "w1",
                             "--epoch", "9")
        hb = json.loads(out) if rc == 0 else {}
        bid = hb.get("id", "x")
        tap(rc == 0 and hb.get("kubernetes", {}).get("origin") == "adopted-running",
            "a second host adopts the running workspace (%s)" % err.strip()[-300:])
        rc, out, _ = b.run("namzu-exec", "--sandbox", bid, "--", "cat", "/workspace/keep")
        tap(rc == 0 and out == "kept\n", "and sees the same disk")
        code, sb = f.get(sb_path)
        tap((sb.get("metadata", {}).get("annotations") or {}).get(EPOCH_ANN) == "9",
            "the adopt stored its holder epoch")
        rc, _, err = a.run("namzu-suspend", "--sandbox", aid, "--epoch", "8")
        code, sb = f.get(sb_path)
        tap(rc != 0 and "behind the stored epoch 9" in err
            and sb["spec"].get("operatingMode", "Running") == "Running",
            "a holder behind the stored epoch is refused and nothing changes (%s)" % err.strip())
        # A suspend by the other holder (spec D.8.12): the first holder's next call fails to
        # dial, and its rebind finds the Sandbox Suspended: refused, naming namzu-resume, and
        # its handle says suspended from then on.
        rc, _, err = b.run("namzu-suspend", "--sandbox", bid)
        rc2, _, err2 = a.run("namzu-exec", "--sandbox", aid, "--", "true")
        rc3, ls, _ = a.run("namzu-ls")
        tap(rc == 0 and rc2 != 0 and "suspended by another holder" in err2
            and "namzu-resume" in err2 and '"status":"suspended"' in ls.replace(" ", ""),
            "a foreign suspend is noticed by the transport and refused (%s / %s)"
            % (err.strip()[-100:], err2.strip()[-200:]))
        rc, _, err = b.run("namzu-resume", "--sandbox", bid)
        tap(rc == 0, "the other holder resumes it (%s)" % err.strip()[-200:])
        # Two holders race for the fence: exactly the higher epoch is left holding it.
        pa = subprocess.Popen([os.path.join(fc.TOOLS, "namzu-resume"), "--sandbox", aid,
                               "--epoch", "11"], env=env_of(a), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        pb = subprocess.Popen([os.path.join(fc.TOOLS, "namzu-resume"), "--sandbox", bid,
                               "--epoch", "10"], env=env_of(b), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        oa, ea = pa.communicate(timeout=120)
        ob, eb = pb.communicate(timeout=120)
        code, sb = f.get(sb_path)
        stored = (sb.get("metadata", {}).get("annotations") or {}).get(EPOCH_ANN)
        tap(pa.returncode == 0 and stored == "11"
            and (pb.returncode == 0 or "behind the stored epoch 11" in eb),
            "two holders race: the higher epoch holds the fence (a: %s %s; b: %s %s)"
            % (pa.returncode, ea.strip(), pb.returncode, eb.strip()))
        rc, _, err = b.run("namzu-suspend", "--sandbox", bid)
        tap(rc != 0 and "behind the stored epoch 11" in err,
            "the overtaken holder's next write is refused (%s)" % err.strip())

        # namzu-suspend on a task sandbox is refused.
        rc, out, err = a.run("namzu-create", *kube, "--template", "plain")
        tid = json.loads(out).get("id", "x") if rc == 0 else "x"
        rc, _, err = a.run("namzu-suspend", "--sandbox", tid)
        tap(rc != 0 and "task sandbox" in err, "namzu-suspend refuses a task sandbox")
        a.run("namzu-destroy", "--sandbox", tid)

        # The Sandbox replaced under a holder (deleted, made again by another): a tool call
        # of the old holder is refused, never rebound to the new one (spec D.8.10).
        f.req("DELETE", sb_path)
        f.wait(sb_path, lambda c, o: c == 404, secs=10)
        rc, out, err = b.run("namzu-create", *kube, "--template", "wtpl", "--workspace", "w1",
                             "--epoch", "12")
        hc = json.loads(out) if rc == 0 else {}
        cid = hc.get("id", "x")
        tap(rc == 0 and hc.get("kubernetes", {}).get("origin") == "created",
            "another holder makes the workspace again (%s)" % err.strip()[-200:])
        rc, _, err = a.run("namzu-exec", "--sandbox", aid, "--", "true")
        tap(rc != 0 and "was replaced" in err,
            "the old holder's call is refused, not rebound to the new Sandbox (%s)" % err.strip())

        rc, _, err = a.run("namzu-destroy", "--sandbox", aid)
        code, _ = f.get(sb_path)
        tap(rc == 0 and code == 200 and "was replaced" in err,
            "the old holder's namzu-destroy leaves the new Sandbox alone (%s)" % err.strip())

        # Delete: the fenced DELETE takes the disk with it.
        rc, out, err = b.run("namzu-destroy", "--sandbox", cid)
        code, _ = f.get(sb_path)
        gone = f.wait("/api/v1/namespaces/%s/persistentvolumeclaims/ws-namzu-ws-w1" % NS,
                      lambda c, o: c == 404, secs=10)
        tap(rc == 0 and code == 404 and gone is not None,
            "namzu-destroy deletes the workspace and its PVC (%s)" % err.strip())
        rb, _, eb = b.run("namzu-destroy", "--sandbox", bid)
        tap(rb == 0 and e2e.objects_left(f) == 0,
            "the other handle's namzu-destroy finds it gone and cleans up (%s)" % eb.strip())
    finally:
        f.stop()
    print("1..%d" % fc.N[0])


def env_of(h):
    return dict(os.environ, NAMZU_STATE_DIR=h.state, KUBECONFIG=h.kubeconfig, NAMZU_PROGRESS="0")


def fc_pod_uid(f):
    code, p = f.get(fc.P % NS + "/namzu-ws-w1")
    return p["metadata"].get("uid") if code == 200 else None


if __name__ == "__main__":
    main()
