#!/usr/bin/env python3
"""microvm:kubernetes bulk verbs (spec D.6.3) through the tools: `namzu-destroy --selector`
(releaseKubernetesTaskSandboxes: LIST the claims by label selector, DELETE each, and the local
handles go with them) and `namzu-ls --capacity` (readKubernetesTaskCapacity), against the FAKE
API server and its FAKE agent-sandbox controller (tests/fakes/); the pods' agents are real
namzu-agent processes in bwrap, everything on the host side is the real build. The printed
objects are checked against docs/cli.md. TAP output. Without bwrap/openssl the test is skipped,
except under CI=true (a failure)."""

import sys

sys.dont_write_bytecode = True  # the harness must not write into the source tree
import json
import os
import re

from kube_harness import e2e, fc  # noqa: E402  (its requirement check runs here)

NS = e2e.NS
tap = e2e.tap
CLAIMS = fc.E % NS + "sandboxclaims"
KUBE = ["--backend", "microvm:kubernetes"]


def contract(name):
    """docs/cli.md's rows of object @name: {field: (type, required)}."""
    text = open(os.path.join(fc.SRC, "docs", "cli.md")).read()
    start = text.index("### Object `%s`" % name)
    end = text.find("\n### ", start + 1)
    rows = {}
    for line in text[start:end if end > 0 else None].splitlines():
        m = re.match(r"^\| `([^`]+)` \| ([^|]+) \| (required|optional) \|", line)
        if m:
            rows[m.group(1)] = (m.group(2).strip(), m.group(3) == "required")
    return rows


def fits(obj, name):
    """@obj has exactly the documented members, each of its documented type."""
    rows = contract(name)
    kinds = {"string": str, "integer": int, "array of string": list}
    if not rows or not isinstance(obj, dict) or set(obj) - set(rows):
        return False
    for field, (kind, required) in rows.items():
        if field not in obj:
            if required:
                return False
            continue
        v = obj[field]
        if not isinstance(v, kinds[kind]) or isinstance(v, bool):
            return False
        if kind == "array of string" and not all(isinstance(x, str) for x in v):
            return False
    return True


def first(err):
    return err.strip().splitlines()[0] if err.strip() else ""


def claim_names(f):
    code, lst = f.get(CLAIMS)
    return sorted(i["metadata"]["name"] for i in lst.get("items") or []) if code == 200 else None


def requests_logged(f):
    with open(os.path.join(f.dir, "fake.log")) as fh:
        return sum(1 for line in fh if line.startswith("fake-kube-apiserver: "))


def listed_ids(e):
    rc, out, _ = e.run("namzu-ls", "--no-probe")
    return {json.loads(line)["id"] for line in out.splitlines() if line.strip()} if rc == 0 else None


def pool_settled(f, pool, ready, replicas):
    """The pool's status says @ready of @replicas, and one pod (pool3's) is Pending."""
    def ok(code, o):
        st = (o or {}).get("status") or {}
        return code == 200 and st.get("readyReplicas", 0) == ready \
            and st.get("replicas") == replicas
    if f.wait(fc.E % NS + "sandboxwarmpools/" + pool, ok, secs=60) is None:
        return False
    return f.wait(fc.P % NS, lambda code, o: code == 200 and sum(
        1 for p in o.get("items") or [] if (p.get("status") or {}).get("phase") == "Pending")
        == 1, secs=60) is not None


def fake_capacity(f, name):
    """What the fake holds, counted the way spec D.6.3 counts it."""
    _, pool = f.get(fc.E % NS + "sandboxwarmpools/" + name)
    _, cl = f.get(CLAIMS)
    _, pods = f.get(fc.P % NS)
    return {"warmPool": name,
            "readyReplicas": (pool.get("status") or {}).get("readyReplicas", 0),
            "replicas": (pool.get("spec") or {}).get("replicas"),
            "claims": sum(1 for c in cl.get("items") or []
                          if ((c.get("spec") or {}).get("warmPoolRef") or {}).get("name")
                          == name),
            "pendingPods": sum(1 for p in pods.get("items") or []
                               if (p.get("status") or {}).get("phase") == "Pending")}


def main():
    f = fc.Fake("127.81.%d" % (os.getpid() % 200 + 1))
    try:
        e = e2e.Env(f)
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("tpl"))
        f.req("POST", fc.E % NS + "sandboxtemplates",
              fc.template("tpl-stall", {fc.ANN + "start": "stall"}))
        # pool3's one pod never starts: it stays Pending, and the pool 0 ready of 1.
        for name, replicas, tpl in (("pool1", 2, "tpl"), ("pool2", 0, "tpl"),
                                    ("pool3", 1, "tpl-stall")):
            f.req("POST", fc.E % NS + "sandboxwarmpools",
                  {"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                   "kind": "SandboxWarmPool", "metadata": {"name": name},
                   "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": tpl}}})

        # Pool sandboxes with claimLabels (backend.claimLabels through --config).
        made = {}  # claim name -> (sandbox id, labels)
        for i, labels in enumerate(({"team": "a", "run": "42"}, {"team": "a", "run": "42"},
                                    {"team": "a", "run": "43"}, {"team": "b", "run": "42"})):
            cfg = os.path.join(f.dir, "cfg%d.json" % i)
            with open(cfg, "w") as fh:
                json.dump({"backend": {"tier": "microvm", "service": "kubernetes",
                                       "sandboxTemplateName": "tpl", "warmPoolName": "pool1",
                                       "agentAddress": "pod-ip", "claimLabels": labels}}, fh)
            rc, out, err = e.run("namzu-create", "--config", cfg)
            h = json.loads(out) if rc == 0 else {}
            made[h.get("kubernetes", {}).get("object", "x%d" % i)] = (h.get("id", "?"), labels)
            if rc != 0:
                print("# create %d: %s" % (i, err.strip()[-300:]))
        code, c0 = f.get(CLAIMS + "/" + next(iter(made)))
        tap(len(made) == 4 and code == 200
            and c0["metadata"].get("labels") == {"team": "a", "run": "42"},
            "four pool sandboxes, their claims carrying claimLabels")
        matched = sorted(n for n, (_, lb) in made.items() if lb == {"team": "a", "run": "42"})
        others = sorted(n for n, (_, lb) in made.items() if lb != {"team": "a", "run": "42"})
        # A claim of another pool, never bound (pool2 has no replicas): not pool1's.
        f.req("POST", CLAIMS, {"apiVersion": "extensions.agents.x-k8s.io/v1beta1",
                               "kind": "SandboxClaim",
                               "metadata": {"name": "other-pool", "labels": {"team": "c"}},
                               "spec": {"warmPoolRef": {"name": "pool2"}}})

        # An empty or all-whitespace selector: bad usage, before any request.
        before, logged = claim_names(f), requests_logged(f)
        for sel in ("", "   ", "\t"):
            rc, out, err = e.run("namzu-destroy", *KUBE, "--selector", sel)
            tap(rc == 2 and out == "" and "empty label selector" in err,
                "an empty selector %r is refused, exit 2 (%d, %s)" % (sel, rc, first(err)))
        quiet = requests_logged(f) == logged  # counted before this test's own GET below
        tap(quiet and claim_names(f) == before,
            "and no request reached the API server (claims %d before and after)" % len(before))

        # Other refusals of the bulk options.
        for args, want in (([*KUBE, "--selector", "team=a", "--sandbox", "nz-000000000000"],
                            "give one"),
                           (["--selector", "team=a"], "is a microvm:kubernetes option"),
                           (["--kubeconfig", e.kubeconfig], "goes with --selector")):
            rc, _, err = e.run("namzu-destroy", *args)
            tap(rc == 2 and want in err, "namzu-destroy %s: refused (%s)" % (
                " ".join(args[-2:]), first(err)))
        tap(claim_names(f) == before, "no refusal deleted anything")

        # A selector the API server cannot parse: its 400, a clear usage error.
        rc, out, err = e.run("namzu-destroy", *KUBE, "--selector", "team=a b")
        tap(rc == 2 and "refused the label selector" in err and claim_names(f) == before,
            "a selector the API server refuses (400) is bad usage (%d, %s)" % (rc, first(err)))

        # A selector matching nothing.
        rc, out, err = e.run("namzu-destroy", *KUBE, "--selector", "team=zzz")
        res = json.loads(out) if rc == 0 else None
        tap(rc == 0 and res == {"deleted": 0, "names": []} and claim_names(f) == before,
            "a selector matching nothing: {\"deleted\":0,\"names\":[]} (%s)" % first(err))

        # The release: exactly the matching claims, and their handles.
        ids = listed_ids(e) or set()
        rc, out, err = e.run("namzu-destroy", *KUBE, "--selector", "team=a,run=42",
                             "--kubeconfig", e.kubeconfig, "--context", "fake",
                             "--namespace", NS)
        res = json.loads(out) if rc == 0 else {}
        tap(rc == 0 and res.get("deleted") == 2 and sorted(res.get("names") or []) == matched,
            "namzu-destroy --selector prints the released claims (%s, %s)" % (out.strip(),
                                                                             first(err)))
        tap(fits(res, "kube-release-result"), "the object is docs/cli.md's kube-release-result")
        now = claim_names(f) or []
        tap(not set(matched) & set(now) and set(others) <= set(now) and "other-pool" in now,
            "exactly the matching claims are gone on the cluster, the others remain")
        left = listed_ids(e)
        gone_ids = {made[n][0] for n in matched}
        kept_ids = {made[n][0] for n in others}
        tap(left is not None and not gone_ids & left and kept_ids <= left
            and gone_ids <= ids, "their handles are gone locally, the others' remain")
        rc, out, _ = e.run("namzu-destroy", "--sandbox", sorted(gone_ids)[0])
        tap(rc == 0 and json.loads(out).get("alreadyGone") is True,
            "a released sandbox's id is a tombstone: namzu-destroy says alreadyGone")
        for n in matched:  # what the claim owned goes with it (the cluster's garbage collector)
            f.wait(fc.A % NS, lambda code, o, n=n: code == 200 and not any(
                any(r.get("name") == n for r in s["metadata"].get("ownerReferences") or [])
                for s in o.get("items") or []))

        # The capacity read, once the fake has settled.
        tap(pool_settled(f, "pool1", 2, 2) and pool_settled(f, "pool3", 0, 1),
            "the fake settles: pool1 2 of 2 ready, pool3 0 of 1, one Pending pod")
        got = {}
        for pool, expect in (("pool1", {"readyReplicas": 2, "replicas": 2, "claims": 2,
                                        "pendingPods": 1}),
                             ("pool3", {"readyReplicas": 0, "replicas": 1, "claims": 0,
                                        "pendingPods": 1})):
            want = fake_capacity(f, pool)
            rc, out, err = e.run("namzu-ls", *KUBE, "--capacity", "--warm-pool", pool)
            got = json.loads(out) if rc == 0 else {}
            tap(rc == 0 and got == want == fake_capacity(f, pool),
                "namzu-ls --capacity --warm-pool %s matches what the fake reports (%s vs %s; %s)"
                % (pool, out.strip(), want, first(err)))
            tap(want == dict(expect, warmPool=pool), "%s: %s" % (pool, expect))
        tap(fits(got, "kube-capacity"), "the object is docs/cli.md's kube-capacity")
        rc, out, err = e.run("namzu-ls", "--capacity", "--config", os.path.join(f.dir,
                                                                               "cfg0.json"))
        tap(rc == 0 and json.loads(out) == fake_capacity(f, "pool1"),
            "--config's warmPoolName names the pool (%s)" % first(err))
        rc, out, err = e.run("namzu-ls", *KUBE, "--capacity", "--warm-pool", "nopool")
        tap(rc == 1 and "not found" in err and "nopool" in err,
            "a pool that does not exist: exit 1 (%s)" % first(err))
        rc, _, err = e.run("namzu-ls", *KUBE, "--capacity")
        tap(rc == 2 and "--warm-pool" in err, "--capacity without a pool: bad usage")

        for n in others:
            e.run("namzu-destroy", "--sandbox", made[n][0])
    finally:
        f.stop()
    print("1..%d" % N())


def N():
    return fc.N[0]


if __name__ == "__main__":
    main()
