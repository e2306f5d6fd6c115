#!/usr/bin/env python3
"""microvm:kubernetes: every verb through the tools on one pod, the rebind of spec D.7 after
the pod is replaced (the same IP: the old token is refused `unauthorized`; another IP: the dial
fails), and a pod lost in the middle of an exec reported rather than hung. Against the FAKE API
server and its FAKE agent-sandbox controller (tests/fakes/); the pods' agents are real
namzu-agent processes in bwrap, everything on the host side is the real build. TAP output.
Without bwrap/openssl the test is skipped, except under CI=true (a failure)."""

import sys

sys.dont_write_bytecode = True  # the harness must not write into the source tree
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_harness import e2e, fc  # noqa: E402  (its requirement check runs here)

NS = e2e.NS
tap = e2e.tap
XID = "exec_0b5e7a52-63a4-4a8e-9f31-2d6c0f1e9a77"


def pod_of(f, name):
    code, p = f.get(fc.P % NS + "/" + name)
    return p if code == 200 else {}


def wait_replaced(f, name, old_uid):
    """The controller's new pod for Sandbox @name: another uid, Ready."""
    return f.wait(fc.P % NS + "/" + name,
                  lambda code, p: code == 200 and p["metadata"].get("uid") not in (None, old_uid)
                  and any(c.get("type") == "Ready" and c.get("status") == "True"
                          for c in (p.get("status") or {}).get("conditions") or []))


def git_server(tmp):
    """A bare repository r.git with one commit, served by git-http.py on 127.0.0.1."""
    up = os.path.join(tmp, "up")
    work = os.path.join(tmp, "work")
    os.makedirs(up)
    genv = dict(os.environ, GIT_CONFIG_GLOBAL=os.path.join(tmp, "gitconfig"),
                GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@t")
    open(genv["GIT_CONFIG_GLOBAL"], "w").close()
    for argv in (["git", "init", "-q", "-b", "main", work],
                 ["sh", "-c", "echo seeded > %s/README" % work],
                 ["git", "-C", work, "add", "README"],
                 ["git", "-C", work, "commit", "-q", "-m", "one"],
                 ["git", "clone", "-q", "--bare", work, os.path.join(up, "r.git")]):
        subprocess.run(argv, check=True, env=genv, capture_output=True)
    p = subprocess.Popen([sys.executable, os.path.join(fc.SRC, "tests/integration/git-http.py"),
                          up, "127.0.0.1"], stdout=subprocess.PIPE, text=True, env=genv,
                         stderr=subprocess.DEVNULL)
    port = p.stdout.readline().strip()
    return p, "http://127.0.0.1:%s/r.git" % port


def main():
    f = fc.Fake("127.79.%d" % (os.getpid() % 200 + 1))
    tmp = tempfile.mkdtemp(prefix="nz-kube-verbs-")
    git = None
    try:
        e = e2e.Env(f)
        f.req("POST", fc.E % NS + "sandboxtemplates", fc.template("tpl"))
        rc, out, err = e.run("namzu-create", "--backend", "microvm:kubernetes", "--template",
                             "tpl", "--agent-address", "pod-ip")
        tap(rc == 0, "create (%s)" % err.strip()[-300:])
        h = json.loads(out) if rc == 0 else {}
        sid = h.get("id", "x")
        obj = h.get("kubernetes", {}).get("object", "x")

        def ex(*argv, **kw):
            return e.run("namzu-exec", "--sandbox", sid, "--", *argv, **kw)

        # Rebind (spec D.7), same IP: the old token is refused, the pod re-read, the call
        # made again once with the new pod's uid.
        rc, out, err = ex("sh", "-c", "echo one > /workspace/marker; echo one")
        tap(rc == 0 and out == "one\n", "exec before the pod is replaced (%s)" % err.strip())
        old = pod_of(f, obj)
        old_uid, old_ip = old.get("metadata", {}).get("uid"), old.get("status", {}).get("podIP")
        f.req("POST", "/fake/pods/%s/%s/replace" % (NS, obj))
        new = wait_replaced(f, obj, old_uid) or {}
        tap(new.get("status", {}).get("podIP") == old_ip,
            "the controller replaced the pod on the same IP (a new uid)")
        rc, out, err = ex("echo", "after-replace")
        tap(rc == 0 and out == "after-replace\n",
            "exec after the replacement: `unauthorized`, rebind, one retry (%s)" % err.strip())
        rc, out, err = ex("echo", "again")
        tap(rc == 0 and out == "again\n" and err == "", "the handle keeps the new token")

        # Rebind, another IP: the dial fails, the pod is re-read at its new address.
        old_uid, old_ip = new.get("metadata", {}).get("uid"), new.get("status", {}).get("podIP")
        f.req("POST", "/fake/pods/%s/%s/move" % (NS, obj))
        new = wait_replaced(f, obj, old_uid) or {}
        tap(new.get("status", {}).get("podIP") not in (None, old_ip),
            "the controller replaced the pod on another IP")
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--list")
        tap(rc == 0 and json.loads(out or "null") is not None,
            "namzu-attach --list after the move: dial failure, rebind (%s)" % err.strip())

        # namzu-exec --detach, then namzu-attach --execution from a second process.
        rc, out, err = e.run("namzu-exec", "--sandbox", sid, "--detach", "--id", XID, "--",
                             "sh", "-c", "echo first; sleep 1; echo second; exit 3")
        tap(rc == 0 and XID in out, "namzu-exec --detach (%s)" % err.strip())
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--execution", XID)
        tap(rc == 3 and out == "first\nsecond\n",
            "namzu-attach --execution follows it to its exit status (%d, %r, %s)"
            % (rc, out, err.strip()))
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--execution", XID, "--from",
                             "6")
        tap(rc == 3 and out == "second\n", "and replays from a byte offset")

        # Sessions and terminals.
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--start-detached", "s1", "--",
                             "sh", "-c", "echo in-session; sleep 0.3")
        tap(rc == 0 and '"s1"' in out, "namzu-attach --start-detached (%s)" % err.strip())
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--session", "s1")
        tap(rc == 0 and "in-session" in out, "namzu-attach --session follows it (%s)"
            % err.strip())
        rc, out, _ = e.run("namzu-attach", "--sandbox", sid, "--list")
        tap(rc == 0 and '"s1"' in out, "namzu-attach --list names it")
        rc, out, err = e.run("namzu-attach", "--sandbox", sid, "--terminal", "--", "/bin/sh",
                             stdin="echo term-$((40+2))\nexit\n")
        tap(rc == 0 and "term-42" in out, "namzu-attach --terminal (%d, %s)" % (rc, err.strip()))

        # namzu-quiesce stops what runs, then flushes.
        e.run("namzu-attach", "--sandbox", sid, "--start-detached", "s2", "--", "sleep", "100")
        rc, out, err = e.run("namzu-quiesce", "--sandbox", sid, "--flush")
        q = json.loads(out) if rc == 0 else {}
        tap(rc == 0 and any("sleep" in (s.get("command") or "")
                            for s in q.get("quiesce", {}).get("stopped", []))
            and q.get("flush", {}).get("ok") is True,
            "namzu-quiesce --flush stops the session's sleep (%s)" % err.strip())

        # namzu-cp, a file each way and a tree.
        src = os.path.join(tmp, "in.bin")
        with open(src, "wb") as fh:
            fh.write(os.urandom(300000))
        rc, out, err = e.run("namzu-cp", "--sandbox", sid, src, ":in.bin")
        rc2, out2, _ = ex("sha256sum", "/workspace/in.bin")
        want = subprocess.run(["sha256sum", src], capture_output=True, text=True).stdout.split()[0]
        tap(rc == 0 and rc2 == 0 and out2.split()[0] == want, "namzu-cp into the pod (%s)"
            % err.strip())
        back = os.path.join(tmp, "back.bin")
        rc, _, err = e.run("namzu-cp", "--sandbox", sid, ":in.bin", back)
        tap(rc == 0 and open(back, "rb").read() == open(src, "rb").read(),
            "namzu-cp out of the pod (%s)" % err.strip())
        ex("sh", "-c", "mkdir -p t/d && echo x > t/d/f && ln -s d/f t/l")
        rc, _, err = e.run("namzu-cp", "--sandbox", sid, "-r", ":t", os.path.join(tmp, "t"))
        tap(rc == 0 and open(os.path.join(tmp, "t/d/f")).read() == "x\n"
            and os.readlink(os.path.join(tmp, "t/l")) == "d/f", "namzu-cp -r out of the pod (%s)"
            % err.strip())

        # namzu-seed clones over HTTP inside the pod (host network in the fake).
        git, url = git_server(tmp)
        seed = os.path.join(tmp, "seed.json")
        with open(seed, "w") as fh:
            json.dump({"name": "s", "repositories": [{"name": "r", "url": url, "ref": "main"}]},
                      fh)
        rc, out, err = e.run("namzu-seed", "--sandbox", sid, "--root", "/workspace/src", seed)
        r = json.loads(out) if out.strip() else {}
        tap(rc == 0 and [x.get("status") for x in r.get("repositories", [])] == ["cloned"],
            "namzu-seed clones (%d, %s)" % (rc, err.strip()[-300:]))
        rc, out, _ = ex("cat", "/workspace/src/r/README")
        rc2, out2, _ = e.run("namzu-seed", "--sandbox", sid, "--root", "/workspace/src", seed)
        tap(rc == 0 and out == "seeded\n" and rc2 == 0 and '"present"' in out2,
            "the clone is there, and a second call finds it present")

        env = dict(os.environ, NAMZU_STATE_DIR=e.state, KUBECONFIG=e.kubeconfig,
                   NAMZU_PROGRESS="0")
        # SIGINT cancels the remote command and waits for the agent to confirm (spec D.7).
        p = subprocess.Popen([os.path.join(fc.TOOLS, "namzu-exec"), "--sandbox", sid, "--",
                              "sh", "-c", "echo started; exec sleep 77"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = p.stdout.readline()
        p.send_signal(signal.SIGINT)
        try:
            p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
        rc, out, _ = ex("sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '")
        tap(first == "started\n" and p.returncode == 130 and "sleep 77" not in out,
            "SIGINT cancels the command in the pod, confirmed (exit %s)" % p.returncode)

        # A pod lost in the middle of an exec: reported, never a hang.
        p = subprocess.Popen([os.path.join(fc.TOOLS, "namzu-exec"), "--sandbox", sid, "--",
                              "sh", "-c", "echo started; exec sleep 60"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = p.stdout.readline()
        f.req("POST", "/fake/pods/%s/%s/lose" % (NS, obj))
        try:
            _, perr = p.communicate(timeout=40)
            tap(first == "started\n" and p.returncode not in (0, None) and perr.strip() != "",
                "a pod lost mid-exec is reported (%s: %s)" % (p.returncode, perr.strip()[-300:]))
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            tap(False, "a pod lost mid-exec is reported (it hung)")

        rc, _, err = e.run("namzu-destroy", "--sandbox", sid)
        tap(rc == 0 and e2e.objects_left(f) == 0, "namzu-destroy leaves no object (%s)"
            % err.strip())
    finally:
        if git is not None:
            git.kill()
            git.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        f.stop()
    print("1..%d" % fc.N[0])


if __name__ == "__main__":
    main()
