"""fake_kube_controller: a FAKE agent-sandbox controller, for namzu's tests only.

It stands in for kubernetes-sigs/agent-sandbox v1.0.2 (spec D.5, D.6, D.8) and for the
kube-controller-manager's garbage collector, inside fake-kube-apiserver.py (--controller). It
is not that controller: it implements, with its semantics, exactly what namzu's Kubernetes
backend reads, and nothing more (no Service objects, no scheduling, no watches):

  - Sandbox (agents.x-k8s.io/v1beta1), spec.operatingMode Running (absent = Running): a Pod of
    the Sandbox's name (fresh uid, podTemplate labels + agents.x-k8s.io/sandbox-name-hash, an
    ownerReference to the Sandbox) whose agent is a real namzu-agent under bubblewrap (host
    network, listening on the pod IP 127.A.B.N:1024 through an inherited socket, bind token =
    the pod uid, private /tmp, /workspace = the PVC's or the pod's directory). When it answers
    healthz: pod Running/podIP/podIPs/Ready, Sandbox status conditions Ready, podIPs,
    service, serviceFQDN, selector. Suspended: the pod is deleted; back to Running: a new pod
    (new uid). A deleted pod is recreated. spec.shutdownTime passed: the Sandbox is deleted.
  - spec.volumeClaimTemplates: PVC <vct>-<sandbox> and a directory under --state-dir.
  - SandboxWarmPool: spec.replicas warm Sandboxes <pool>-<5 chars>; status.readyReplicas.
  - SandboxClaim with spec.warmPoolRef: adopts a ready warm Sandbox (or makes one cold),
    applies spec.additionalPodMetadata.labels, status Ready + status.sandbox; lifecycle
    shutdownTime + shutdownPolicy Delete deletes it.
  - garbage collection: an object whose owners (by uid) are all gone is deleted.
  - failure modes from annotations fake-controller.namzu.test/* on the SandboxTemplate (or the
    Sandbox): start: fail|stall|no-uid|privileged, pod-name: other, service: none,
    claim: reject|drop-labels (the claim's additionalPodMetadata.labels never reach the pod).
  - timings: annotation fake-controller.namzu.test/start-ms on the pod, bind-ms on a claim.
  - admin: POST /fake/pods/NS/NAME/lose kills the agent and marks the pod Failed (answered
    once the agent's port refuses);
    POST /fake/pods/NS/NAME/replace deletes the pod (the controller makes a new one, new uid,
    on the same IP) and /move does the same on another IP (the old one stays unused).
"""

import datetime
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import threading
import time
import uuid

ANN = "fake-controller.namzu.test/"
HASH_LABEL = "agents.x-k8s.io/sandbox-name-hash"
TEMPLATE_LABEL = "sandbox.namzu.ai/template"
SBX = ("agents.x-k8s.io", "v1beta1", "sandboxes")
TPL = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxtemplates")
POOL = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxwarmpools")
CLAIM = ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims")
POD = ("", "v1", "pods")
PVC = ("", "v1", "persistentvolumeclaims")
PORT = 1024


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s):
    try:
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        return None


def name_hash(name):
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def healthz(ip, port, timeout=0.5):
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            body = json.dumps({"op": "healthz"}).encode()
            s.sendall(b"%08x\n" % len(body) + body)
            data = s.recv(9)
            return len(data) == 9
    except OSError:
        return False


class Agent:
    def __init__(self, proc, ip, t0):
        self.proc, self.ip, self.t0 = proc, ip, t0
        self.ready_ms = None

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def wait_gone(self):
        """bwrap's --new-session puts the agent in a session of its own: it dies with the
        outer bwrap (--die-with-parent, then its pid namespace), but after kill() has reaped
        that. Waits (bounded) until its port refuses; never with the store's lock held."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.ip, PORT), timeout=0.2).close()
            except ConnectionRefusedError:
                return
            except OSError:
                pass
            time.sleep(0.01)


class Controller:
    def __init__(self, api, agent, subnet, state_dir):
        self.api, self.agent_bin, self.subnet = api, agent, subnet
        self.state_dir = state_dir
        self.agents = {}  # (ns, podname) -> Agent
        self.ips = {}  # (ns, podname) -> ip
        self.seen = {}  # uid -> monotonic time first seen
        self.cond = api.CHANGED
        os.makedirs(state_dir, exist_ok=True)

    # store helpers (called with the lock held)
    def get(self, gvp, ns, name):
        return self.api.STORE.get(gvp + (ns, name))

    def items(self, gvp):
        return [o for k, o in list(self.api.STORE.items()) if k[:3] == gvp]

    def put(self, gvp, obj, create=False):
        m = obj["metadata"]
        if create:
            m.setdefault("uid", str(uuid.uuid4()))
            m["creationTimestamp"] = now_rfc3339()
            m["generation"] = 1
        m["resourceVersion"] = self.api.next_rv()
        self.api.STORE[gvp + (m["namespace"], m["name"])] = obj
        self.cond.notify_all()

    def delete(self, gvp, ns, name):
        self.api.STORE.pop(gvp + (ns, name), None)
        if gvp == POD:
            self.stop_agent(ns, name)
        self.cond.notify_all()

    def stop_agent(self, ns, name):
        a = self.agents.pop((ns, name), None)
        if a:
            a.kill()
        self.ips.pop((ns, name), None)

    def knobs(self, sbx):
        """The failure annotations: the Sandbox's, else its template's."""
        ns = sbx["metadata"]["namespace"]
        out = {}
        labels = ((sbx.get("spec") or {}).get("podTemplate") or {}).get("metadata", {}).get(
            "labels") or {}
        tname = labels.get(TEMPLATE_LABEL) or (sbx["metadata"].get("labels") or {}).get(
            TEMPLATE_LABEL)
        tpl = self.get(TPL, ns, tname) if tname else None
        for src in (tpl, sbx):
            for k, v in ((src or {}).get("metadata", {}).get("annotations") or {}).items():
                if k.startswith(ANN):
                    out[k[len(ANN):]] = v
        return out

    def next_ip(self):
        used = set(self.ips.values())
        for n in range(2, 255):
            ip = "%s.%d" % (self.subnet, n)
            if ip not in used:
                return ip
        raise RuntimeError("fake controller: no free pod IP in %s.0/24" % self.subnet)

    def start_agent(self, ns, podname, token, workspace, knobs):
        ip = self.next_ip()
        self.ips[(ns, podname)] = ip
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((ip, PORT))
        lsock.listen(64)
        fd = lsock.fileno()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "NAMZU_AGENT_BIND_TOKEN": token,
               "NAMZU_AGENT_LISTEN_FD": str(fd), "HOME": "/workspace"}
        if knobs.get("start") == "fail":
            argv = ["/bin/false"]
        elif knobs.get("start") == "privileged":
            env["HOME"] = env["NAMZU_SANDBOX_WORKSPACE"] = workspace
            argv = [self.agent_bin]  # no bwrap: the privilege probe sees the host's caps
        else:
            # a root of its own: the host's system directories read-only, the agent's build
            # tree at its path (its libraries' RPATH), a private /tmp, the workspace
            argv = ["bwrap", "--unshare-user", "--unshare-pid", "--unshare-ipc",
                    "--die-with-parent", "--cap-drop", "ALL", "--new-session"]
            for d in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"):
                if os.path.exists(d):
                    argv += ["--ro-bind", d, d]
            build = os.path.dirname(os.path.dirname(os.path.realpath(self.agent_bin)))
            # /tmp first: a build tree under /tmp (a fresh clone there) must not be hidden
            argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                     "--ro-bind", build, build, "--bind", workspace, "/workspace",
                     "--chdir", "/workspace", os.path.realpath(self.agent_bin)]
        log = open(os.path.join(self.state_dir, "agent-%s-%s.log" % (ns, podname)), "ab")
        # No preexec_fn: Python then starts the child with vfork instead of a fork of this
        # whole process, and this runs with the store's lock held (API requests wait).
        proc = subprocess.Popen(argv, env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, start_new_session=True)
        log.close()
        lsock.close()
        a = Agent(proc, ip, time.monotonic())
        self.agents[(ns, podname)] = a
        if knobs.get("start") not in ("fail", "stall"):
            threading.Thread(target=self.wait_ready, args=(a,), daemon=True).start()
        return ip

    def wait_ready(self, a):
        while a.proc.poll() is None:
            if healthz(a.ip, PORT):
                with self.cond:
                    a.ready_ms = int((time.monotonic() - a.t0) * 1000)
                    self.cond.notify_all()
                return
            time.sleep(0.02)

    # reconcile (lock held)
    def reconcile(self):
        store = self.api.STORE
        self.gc()
        nowt = time.time()
        for c in self.items(CLAIM):
            life = (c.get("spec") or {}).get("lifecycle") or {}
            t = parse_time(life.get("shutdownTime"))
            if t is not None and life.get("shutdownPolicy") in ("Delete", "DeleteForeground") \
                    and t <= nowt:
                self.delete(CLAIM, c["metadata"]["namespace"], c["metadata"]["name"])
        for s in self.items(SBX):
            t = parse_time((s.get("spec") or {}).get("shutdownTime"))
            if t is not None and t <= nowt:
                self.delete(SBX, s["metadata"]["namespace"], s["metadata"]["name"])
        self.gc()
        for p in self.items(POOL):
            self.reconcile_pool(p)
        for c in self.items(CLAIM):
            self.reconcile_claim(c)
        for s in self.items(SBX):
            self.reconcile_sandbox(s)
        # agents whose pod object is gone (DELETE through the API)
        for (ns, name) in list(self.agents):
            if POD + (ns, name) not in store:
                self.stop_agent(ns, name)

    def gc(self):
        uids = {o["metadata"].get("uid") for o in self.api.STORE.values()}
        changed = True
        while changed:
            changed = False
            for k, o in list(self.api.STORE.items()):
                refs = o["metadata"].get("ownerReferences") or []
                if refs and not any(r.get("uid") in uids for r in refs):
                    self.delete(k[:3], k[3], k[4])
                    if k[:3] == PVC:  # the volume goes with its claim
                        shutil.rmtree(self.pvc_dir(k[3], k[4]), ignore_errors=True)
                    elif k[:3] == POD:  # a pool-less pod's workspace goes with its Sandbox
                        shutil.rmtree(os.path.join(self.state_dir, "pods", k[3],
                                                   refs[0].get("name", "")),
                                      ignore_errors=True)
                    uids.discard(o["metadata"].get("uid"))
                    changed = True

    def pvc_dir(self, ns, pvc):
        return os.path.join(self.state_dir, "pvc", ns, pvc)

    def owner_ref(self, kind, av, o):
        return {"apiVersion": av, "kind": kind, "name": o["metadata"]["name"],
                "uid": o["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    def find_pod(self, s):
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        sel = name_hash(name)
        for p in self.items(POD):
            if p["metadata"]["namespace"] == ns and \
                    (p["metadata"].get("labels") or {}).get(HASH_LABEL) == sel and \
                    any(r.get("name") == name and r.get("kind") == "Sandbox"
                        for r in p["metadata"].get("ownerReferences") or []):
                return p
        return None

    def reconcile_sandbox(self, s):
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        spec = s.get("spec") or {}
        uid = s["metadata"]["uid"]
        self.seen.setdefault(uid, time.monotonic())
        knobs = self.knobs(s)
        workspace = os.path.join(self.state_dir, "pods", ns, name)
        for v in spec.get("volumeClaimTemplates") or []:
            pname = "%s-%s" % (v["metadata"]["name"], name)
            workspace = self.pvc_dir(ns, pname)
            if self.get(PVC, ns, pname) is None:
                self.put(PVC, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                               "metadata": {"name": pname, "namespace": ns,
                                            "ownerReferences": [self.owner_ref(
                                                "Sandbox", "agents.x-k8s.io/v1beta1", s)]},
                               "spec": v.get("spec") or {}, "status": {"phase": "Bound"}},
                         create=True)
        os.makedirs(workspace, exist_ok=True)
        pod = self.find_pod(s)
        running = spec.get("operatingMode", "Running") == "Running"
        if not running:
            if pod:
                self.delete(POD, ns, pod["metadata"]["name"])
            self.set_sandbox_status(s, None, None)
            return
        if pod is None:
            pt = spec.get("podTemplate") or {}
            labels = dict((pt.get("metadata") or {}).get("labels") or {})
            labels[HASH_LABEL] = name_hash(name)
            podname = name
            if knobs.get("pod-name") == "other" or knobs.get("start") == "no-uid":
                podname = name + "-" + "".join(random.choices(string.ascii_lowercase, k=5))
            meta = {"name": podname, "namespace": ns, "labels": labels,
                    "annotations": dict((pt.get("metadata") or {}).get("annotations") or {}),
                    "ownerReferences": [self.owner_ref("Sandbox", "agents.x-k8s.io/v1beta1",
                                                       s)]}
            token = str(uuid.uuid4())
            if knobs.get("start") != "no-uid":
                meta["uid"] = token
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                   "spec": copy_spec(pt.get("spec")), "status": {"phase": "Pending"}}
            self.stop_agent(ns, podname)
            self.start_agent(ns, podname, token, workspace, knobs)
            self.put(POD, pod, create=True)
            if knobs.get("start") == "no-uid":
                pod["metadata"].pop("uid", None)
        self.update_pod(s, pod, knobs)

    def update_pod(self, s, pod, knobs):
        ns, pname = pod["metadata"]["namespace"], pod["metadata"]["name"]
        a = self.agents.get((ns, pname))
        st = pod.get("status") or {}
        if st.get("phase") == "Failed":
            self.set_sandbox_status(s, pod, None)
            return
        if a is None:
            return
        if knobs.get("start") == "fail" and a.proc.poll() is not None:
            if st.get("phase") != "Failed":
                pod["status"] = {"phase": "Failed", "reason": "Error",
                                 "message": "fake-controller: start: fail"}
                self.put(POD, pod)
            return
        if a.ready_ms is None or st.get("phase") == "Running":
            if st.get("phase") == "Running":
                self.set_sandbox_status(s, pod, a)
            return
        pod["status"] = {"phase": "Running", "podIP": a.ip, "podIPs": [{"ip": a.ip}],
                         "conditions": [{"type": "Ready", "status": "True",
                                         "lastTransitionTime": now_rfc3339()}]}
        ms = int((time.monotonic() - self.seen.get(s["metadata"]["uid"], a.t0)) * 1000)
        pod["metadata"].setdefault("annotations", {})[ANN + "start-ms"] = str(ms)
        self.put(POD, pod)
        self.set_sandbox_status(s, pod, a)

    def set_sandbox_status(self, s, pod, a):
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        old = s.get("status") or {}
        st = {"selector": "%s=%s" % (HASH_LABEL, name_hash(name))}
        ready = a is not None and pod is not None
        cond = {"type": "Ready", "status": "True" if ready else "False",
                "reason": "DependenciesReady" if ready else "DependenciesNotReady"}
        prev = [c for c in old.get("conditions") or [] if c.get("type") == "Ready"]
        cond["lastTransitionTime"] = prev[0]["lastTransitionTime"] if prev and \
            prev[0].get("status") == cond["status"] else now_rfc3339()
        st["conditions"] = [cond]
        if ready:
            st["podIPs"] = [a.ip]
            if self.knobs(s).get("service") != "none":
                st["service"] = name
                st["serviceFQDN"] = "%s.%s.svc.cluster.local" % (name, ns)
        if st != old:
            s["status"] = st
            self.put(SBX, s)

    def reconcile_pool(self, p):
        ns, pname = p["metadata"]["namespace"], p["metadata"]["name"]
        spec = p.get("spec") or {}
        tname = (spec.get("sandboxTemplateRef") or {}).get("name")
        tpl = self.get(TPL, ns, tname) if tname else None
        mine = [s for s in self.items(SBX) if s["metadata"]["namespace"] == ns and any(
            r.get("uid") == p["metadata"]["uid"]
            for r in s["metadata"].get("ownerReferences") or [])]
        want = int(spec.get("replicas") or 0)
        if tpl is not None:
            for _ in range(want - len(mine)):
                tspec = tpl.get("spec") or {}
                pt = json.loads(json.dumps(tspec.get("podTemplate") or {}))
                pt.setdefault("metadata", {}).setdefault("labels", {})[TEMPLATE_LABEL] = tname
                name = pname + "-" + "".join(random.choices(string.ascii_lowercase, k=5))
                sspec = {"podTemplate": pt, "operatingMode": "Running"}
                if tspec.get("volumeClaimTemplates"):
                    sspec["volumeClaimTemplates"] = tspec["volumeClaimTemplates"]
                s = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                     "metadata": {"name": name, "namespace": ns,
                                  "labels": {TEMPLATE_LABEL: tname},
                                  "ownerReferences": [self.owner_ref(
                                      "SandboxWarmPool", "extensions.agents.x-k8s.io/v1beta1",
                                      p)]},
                     "spec": sspec}
                self.put(SBX, s, create=True)
                mine.append(s)
        ready = sum(1 for s in mine if is_ready(s))
        st = {"replicas": len(mine), "readyReplicas": ready}
        if p.get("status") != st:
            p["status"] = st
            self.put(POOL, p)

    def reconcile_claim(self, c):
        ns, cname = c["metadata"]["namespace"], c["metadata"]["name"]
        uid = c["metadata"]["uid"]
        self.seen.setdefault(uid, time.monotonic())
        spec = c.get("spec") or {}
        st = c.get("status") or {}
        if any(x.get("type") == "Ready" and x.get("reason") == "InvalidMetadata"
               for x in st.get("conditions") or []):
            return
        pool = self.get(POOL, ns, (spec.get("warmPoolRef") or {}).get("name") or "")
        mine = [s for s in self.items(SBX) if s["metadata"]["namespace"] == ns and any(
            r.get("uid") == uid for r in s["metadata"].get("ownerReferences") or [])]
        if pool is None and not mine:
            return
        tname = ((pool or {}).get("spec") or {}).get("sandboxTemplateRef", {}).get("name")
        tpl = self.get(TPL, ns, tname) if tname else None
        tknobs = {k[len(ANN):]: v for k, v in
                  ((tpl or {}).get("metadata", {}).get("annotations") or {}).items()
                  if k.startswith(ANN)}
        if tknobs.get("claim") == "reject":
            c["status"] = {"conditions": [{
                "type": "Ready", "status": "False", "reason": "InvalidMetadata",
                "message": "fake-controller: claim: reject (additionalPodMetadata refused)",
                "lastTransitionTime": now_rfc3339()}]}
            self.put(CLAIM, c)
            return
        ref = self.owner_ref("SandboxClaim", "extensions.agents.x-k8s.io/v1beta1", c)
        if not mine:
            warm = [s for s in self.items(SBX) if s["metadata"]["namespace"] == ns and any(
                r.get("uid") == pool["metadata"]["uid"]
                for r in s["metadata"].get("ownerReferences") or [])]
            warm.sort(key=lambda s: not is_ready(s))
            if warm:
                s = warm[0]
                s["metadata"]["ownerReferences"] = [ref]
                self.put(SBX, s)
            else:
                return  # the pool makes one; adopt it on a later pass
            mine = [s]
            self.reconcile_pool(pool)
        s = mine[0]
        extra = ((spec.get("additionalPodMetadata") or {}).get("labels")) or {}
        pod = self.find_pod(s)
        # claim: drop-labels stands for a controller whose allowed-label-domains lack the
        # labels' domain but that binds the claim anyway
        if pod is not None and extra and tknobs.get("claim") != "drop-labels":
            labels = pod["metadata"].setdefault("labels", {})
            if any(labels.get(k) != v for k, v in extra.items()):
                labels.update(extra)
                self.put(POD, pod)
        if is_ready(s) and not any(x.get("type") == "Ready" and x.get("status") == "True"
                                   for x in st.get("conditions") or []):
            sst = s["status"]
            sb = {"name": s["metadata"]["name"], "podIPs": sst.get("podIPs") or []}
            if sst.get("serviceFQDN"):
                sb["serviceFQDN"] = sst["serviceFQDN"]
            c["status"] = {"conditions": [{"type": "Ready", "status": "True",
                                           "reason": "SandboxReady",
                                           "lastTransitionTime": now_rfc3339()}],
                           "sandbox": sb}
            ms = int((time.monotonic() - self.seen[uid]) * 1000)
            c["metadata"].setdefault("annotations", {})[ANN + "bind-ms"] = str(ms)
            self.put(CLAIM, c)

    # admin (lock held)
    def admin(self, method, parts):
        if method == "POST" and len(parts) == 5 and parts[:2] == ["fake", "pods"] \
                and parts[4] == "lose":
            ns, name = parts[2], parts[3]
            pod = self.get(POD, ns, name)
            if pod is None:
                return 404, {"error": "no such pod"}
            a = self.agents.get((ns, name))
            if a:
                a.kill()
            pod["status"] = {"phase": "Failed", "reason": "Lost",
                             "message": "fake-controller: the pod was lost"}
            self.put(POD, pod)
            # answered once the agent is gone (the caller runs this after the lock)
            return 200, {"lost": name}, (a.wait_gone if a else None)
        if method == "POST" and len(parts) == 5 and parts[:2] == ["fake", "pods"] \
                and parts[4] in ("replace", "move"):
            ns, name = parts[2], parts[3]
            if self.get(POD, ns, name) is None:
                return 404, {"error": "no such pod"}
            ip = self.ips.get((ns, name))
            self.delete(POD, ns, name)
            if parts[4] == "move" and ip:
                self.ips[("", "retired " + ip)] = ip  # next_ip passes over it
            return 200, {"replaced": name, "ip": ip}
        return 404, {"error": "no such fake endpoint"}

    def run(self):
        with self.cond:
            while True:
                try:
                    self.reconcile()
                except Exception as e:  # keep the controller alive; say what went wrong
                    import sys
                    import traceback
                    sys.stderr.write("fake-controller: %r\n%s" % (e, traceback.format_exc()))
                self.cond.wait(0.05)

    def kill_all(self):
        for a in list(self.agents.values()):
            a.kill()


def copy_spec(spec):
    return json.loads(json.dumps(spec or {}))


def is_ready(s):
    return any(x.get("type") == "Ready" and x.get("status") == "True"
               for x in (s.get("status") or {}).get("conditions") or [])


def start(api, agent, subnet, state_dir):
    c = Controller(api, agent, subnet, state_dir)
    threading.Thread(target=c.run, daemon=True).start()
    return c
