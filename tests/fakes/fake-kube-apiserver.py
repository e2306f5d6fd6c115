#!/usr/bin/env python3
"""fake-kube-apiserver: a FAKE Kubernetes API server, for namzu's tests only.

No Kubernetes cluster can run on the test machines, so this stands in for one
(DESIGN.md "Real parts, tested for real": a fake says so). It implements, with
the real API server's semantics, exactly what namzu's Kubernetes client uses
and nothing more:

  - HTTPS (TLS via python's ssl) with a certificate the test makes; clients
    authenticate with a bearer token (--token USER=TOKEN) or a client
    certificate signed by --client-ca (the user is its CN); anything else is
    401 Unauthorized. --forbid NAMESPACE answers 403 Forbidden there (a
    stand-in for RBAC).
  - the objects of spec D.5 in a namespaced store: pods (/api/v1), the
    agent-sandbox CRDs (sandboxes, sandboxtemplates, sandboxwarmpools,
    sandboxclaims), persistentvolumeclaims, networkpolicies and
    ciliumnetworkpolicies;
  - GET (one object, or a List with ?labelSelector= equality terms; a term that is no
    label key and value is 400 BadRequest, as the real parser answers), POST
    (uid, resourceVersion, creationTimestamp assigned; 409 AlreadyExists; 422
    Invalid for a missing name or a kind/apiVersion that is not the
    resource's), PATCH with application/merge-patch+json (RFC 7386, a stale
    metadata.resourceVersion is 409 Conflict) and application/json-patch+json
    (RFC 6902 add/remove/replace/test; a failed test is 422), other patch
    types 415; DELETE with DeleteOptions.preconditions (resourceVersion, uid:
    409 on a mismatch); 404 NotFound; errors as metav1.Status objects;
    - /version, /api and /apis discovery documents enough for kubectl.
  - GET /api/v1/namespaces/NAME: every namespace exists (kubectl reads it),
    unless --stored-namespaces: then Namespace is a stored object like the
    others;
  - what deploy/k8s holds, for tests/k8s/test-deploy-k8s.sh (kubectl apply):
    serviceaccounts, roles, rolebindings, and the cluster-scoped namespaces,
    clusterroles, clusterrolebindings, runtimeclasses,
    validatingadmissionpolicies and validatingadmissionpolicybindings
    (/api/v1/PLURAL[/NAME], /apis/GROUP/VERSION/PLURAL[/NAME]);
  - --stall NAMESPACE: requests there get no answer (for client timeouts);
    the handler gives up after 60 s so nothing lingers;
  - --gone NAMESPACE: requests there are answered 410 Gone (what a watch or a
    list with an expired continue token gets; namzu treats it like 404).
  - --forbid-resource PLURAL: every request on that resource (cluster-scoped ones
    included, e.g. validatingadmissionpolicies) is answered 403 Forbidden, as
    RBAC answers a host that lacks the verb; POST /fake/forbid-resource/PLURAL
    and DELETE /fake/forbid-resource/PLURAL switch it on and off at run time.
  - the per-sandbox egress admission fence (spec D.10.9,
    deploy/k8s/validatingadmissionpolicy-cilium.yaml): while a
    ValidatingAdmissionPolicy namzu-per-sandbox-egress and its binding
    namzu-per-sandbox-egress-binding (policyName that policy, validationActions
    Deny) are stored, a CiliumNetworkPolicy CREATE, UPDATE (PATCH) or DELETE by
    the user system:serviceaccount:namzu-sandboxes:namzu-sandbox-host in a
    namespace the binding's namespaceSelector.matchLabels select (a namespace is
    labelled kubernetes.io/metadata.name=NAME) is judged by the policy's rules
    1-7, written here in Python rather than CEL, and denied as the real API
    server denies it: 422 Invalid, "... ValidatingAdmissionPolicy 'NAME' with
    binding 'BINDING' denied request: <the rule's message>". Other users and
    namespaces are not matched, as matchConditions and the binding say.

It prints "fake-kube-apiserver listening on 127.0.0.1:PORT" once bound (port 0
picks one) and exits on SIGTERM.
"""

import argparse
import copy
import datetime
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CORE = ("", "v1")
RESOURCES = {
    # (group, version, plural): (kind, namespaced)
    ("", "v1", "pods"): "Pod",
    ("", "v1", "persistentvolumeclaims"): "PersistentVolumeClaim",
    ("agents.x-k8s.io", "v1beta1", "sandboxes"): "Sandbox",
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxtemplates"): "SandboxTemplate",
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxwarmpools"): "SandboxWarmPool",
    ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"): "SandboxClaim",
    ("networking.k8s.io", "v1", "networkpolicies"): "NetworkPolicy",
    ("cilium.io", "v2", "ciliumnetworkpolicies"): "CiliumNetworkPolicy",
    # what deploy/k8s holds besides (tests/k8s/test-deploy-k8s.sh applies it with kubectl)
    ("", "v1", "serviceaccounts"): "ServiceAccount",
    ("rbac.authorization.k8s.io", "v1", "roles"): "Role",
    ("rbac.authorization.k8s.io", "v1", "rolebindings"): "RoleBinding",
    # cluster-scoped (CLUSTER_SCOPED): stored with namespace ""
    ("", "v1", "namespaces"): "Namespace",
    ("rbac.authorization.k8s.io", "v1", "clusterroles"): "ClusterRole",
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"): "ClusterRoleBinding",
    ("node.k8s.io", "v1", "runtimeclasses"): "RuntimeClass",
    ("admissionregistration.k8s.io", "v1",
     "validatingadmissionpolicies"): "ValidatingAdmissionPolicy",
    ("admissionregistration.k8s.io", "v1",
     "validatingadmissionpolicybindings"): "ValidatingAdmissionPolicyBinding",
}
CLUSTER_SCOPED = {
    ("", "v1", "namespaces"),
    ("rbac.authorization.k8s.io", "v1", "clusterroles"),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
    ("node.k8s.io", "v1", "runtimeclasses"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"),
}

# spec D.10.9: the per-sandbox egress fence the fake enforces (see the docstring).
PSE_POLICY = "namzu-per-sandbox-egress"
PSE_BINDING = PSE_POLICY + "-binding"
PSE_USER = "system:serviceaccount:namzu-sandboxes:namzu-sandbox-host"
PSE_LABEL = "sandbox.namzu.ai/per-sandbox-egress"
PSE_OWNER_API = ("extensions.agents.x-k8s.io/v1beta1", "agents.x-k8s.io/v1beta1")
PSE_KUBE_DNS = {"k8s:io.kubernetes.pod.namespace": "kube-system", "k8s:k8s-app": "kube-dns"}
PSE_REFUSED_PEERS = ("toCIDR", "toCIDRSet", "toEntities", "toServices", "toGroups", "toNodes",
                     "toRequires")
_LBL = r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?"
PSE_MATCH_NAME = re.compile(r"%s([.]%s)*" % (_LBL, _LBL))
PSE_MATCH_PATTERN = re.compile(r"[*][.]%s([.]%s)+" % (_LBL, _LBL))
ADMISSION = ("admissionregistration.k8s.io", "v1")

LOCK = threading.Lock()
CHANGED = threading.Condition(LOCK)  # notified on every write (the fake controller waits on it)
CONTROLLER = [None]
STORE = {}  # (group, version, plural, ns, name) -> object
FORBID_RESOURCES = set()  # plurals answered 403 (--forbid-resource, /fake/forbid-resource)
RV = [0]
ARGS = None


def next_rv():
    RV[0] += 1
    return str(RV[0])


def api_version(group, version):
    return version if group == "" else group + "/" + version


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details is not None:
        s["details"] = details
    return code, s


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class PatchError(Exception):
    pass


def pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer " + repr(path))
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc, ops):
    """RFC 6902: add, remove, replace, test (what namzu sends: test + add)."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise PatchError("a JSON patch is a list of operations")
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("an operation needs op and path")
        parts = pointer(op["path"])
        if not parts:
            raise PatchError("the whole document cannot be patched")
        parent = doc
        for p in parts[:-1]:
            if isinstance(parent, dict) and p in parent:
                parent = parent[p]
            elif isinstance(parent, list) and p.isdigit() and int(p) < len(parent):
                parent = parent[int(p)]
            else:
                raise PatchError("path %s does not exist" % op["path"])
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            cur = parent.get(last, None) if isinstance(parent, dict) else None
            if not isinstance(parent, dict) or last not in parent or cur != op.get("value"):
                raise PatchError("testing value %s failed" % op["path"])
        elif kind in ("add", "replace"):
            if "value" not in op:
                raise PatchError("%s needs a value" % kind)
            if isinstance(parent, dict):
                if kind == "replace" and last not in parent:
                    raise PatchError("replace: %s does not exist" % op["path"])
                parent[last] = copy.deepcopy(op["value"])
            elif isinstance(parent, list):
                if last == "-":
                    parent.append(copy.deepcopy(op["value"]))
                else:
                    parent.insert(int(last), copy.deepcopy(op["value"]))
            else:
                raise PatchError("path %s does not exist" % op["path"])
        elif kind == "remove":
            if not isinstance(parent, dict) or last not in parent:
                raise PatchError("remove: %s does not exist" % op["path"])
            del parent[last]
        else:
            raise PatchError("operation %s is not supported" % kind)
    return doc


LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def selector_error(sel):
    """Why the API server would answer 400 to this equality-based selector, or None."""
    for term in (sel or "").split(",") if sel else []:
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
        elif "=" in term:
            k, v = term.split("=", 1)
            v = v[1:] if v.startswith("=") else v
        else:
            k, v = term[1:] if term.startswith("!") else term, ""
        if not LABEL_KEY.match(k.strip()) or not LABEL_VALUE.match(v.strip()):
            return "unable to parse requirement: %r is not a label selector term" % term
    return None


def selector_matches(sel, labels):
    if not sel:
        return True
    for term in sel.split(","):
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            k, v = k.strip(), v.strip().lstrip("=")
            if labels.get(k) != v:
                return False
        elif labels.get(term) is None:
            return False
    return True


def _is_str(v):
    return isinstance(v, str)


def _egress_rule_ok(r):
    """Rule 6 on one egress rule: no CIDR, entity, service, group, node or requires peer;
    either toFQDNs (without toEndpoints), or toEndpoints that are all kube-dns on port 53."""
    if not isinstance(r, dict) or any(k in r for k in PSE_REFUSED_PEERS):
        return False
    if "toFQDNs" in r:
        return "toEndpoints" not in r
    eps, tps = r.get("toEndpoints"), r.get("toPorts")
    return (isinstance(eps, list) and len(eps) > 0
            and all(isinstance(e, dict) and "matchExpressions" not in e
                    and e.get("matchLabels") == PSE_KUBE_DNS for e in eps)
            and isinstance(tps, list) and len(tps) > 0
            and all(isinstance(tp, dict) and isinstance(tp.get("ports"), list)
                    and len(tp["ports"]) > 0
                    and all(isinstance(p, dict) and p.get("port") == "53" for p in tp["ports"])
                    for tp in tps))


def _fqdns_ok(r):
    """Rule 7 on one egress rule: a non-empty toFQDNs, each entry exactly one of a host
    matchName or a '*.<domain>' matchPattern."""
    if "toFQDNs" not in r:
        return True
    f = r["toFQDNs"]
    return isinstance(f, list) and len(f) > 0 and all(
        isinstance(e, dict) and (
            ("matchName" in e and "matchPattern" not in e and _is_str(e["matchName"])
             and PSE_MATCH_NAME.fullmatch(e["matchName"]) is not None)
            or ("matchPattern" in e and "matchName" not in e and _is_str(e["matchPattern"])
                and PSE_MATCH_PATTERN.fullmatch(e["matchPattern"]) is not None))
        for e in f)


def per_sandbox_rule_failed(target, writing):
    """spec D.10.9 rules 1-7 on a CiliumNetworkPolicy (the old object on DELETE, where only
    rules 1-3 apply): the 0-based index of the first rule it fails, or None. What CEL could
    not evaluate (a missing field, a wrong type) fails, as failurePolicy Fail does."""
    meta = target.get("metadata") if isinstance(target, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") if _is_str(meta.get("name")) else ""
    owners = meta.get("ownerReferences") or []
    o = owners[0] if isinstance(owners, list) and len(owners) == 1 \
        and isinstance(owners[0], dict) else None
    spec = target.get("spec") or {}
    spec = spec if isinstance(spec, dict) else {}
    sel = spec.get("endpointSelector") or {}
    egress = spec.get("egress") or []
    if not name.startswith("namzu-sbx-"):
        return 0
    if o is None or not _is_str(o.get("uid")) or not o["uid"] \
            or name != "namzu-sbx-" + o["uid"]:
        return 1
    if o.get("kind") not in ("SandboxClaim", "Sandbox") \
            or o.get("apiVersion") not in PSE_OWNER_API or o.get("blockOwnerDeletion") is True:
        return 2
    if not writing:
        return None
    ml = sel.get("matchLabels") if isinstance(sel, dict) else None
    if not isinstance(ml, dict) or list(ml) != [PSE_LABEL] or ml[PSE_LABEL] != o.get("name") \
            or "matchExpressions" in sel:
        return 3
    if any(k in spec for k in ("specs", "ingress", "ingressDeny", "egressDeny",
                               "nodeSelector")) or not isinstance(egress, list) or not egress:
        return 4
    if not all(_egress_rule_ok(r) for r in egress):
        return 5
    if not all(_fqdns_ok(r) for r in egress):
        return 6
    return None


def admission_denied(who, operation, ns, target):
    """The fence as the API server applies it (lock held): None when the request is not
    matched or passes, else the 422 Status of a ValidatingAdmissionPolicy denial."""
    policy = STORE.get(ADMISSION + ("validatingadmissionpolicies", "", PSE_POLICY))
    binding = STORE.get(ADMISSION + ("validatingadmissionpolicybindings", "", PSE_BINDING))
    if policy is None or binding is None or who != PSE_USER:
        return None
    bspec = binding.get("spec") or {}
    if bspec.get("policyName") != PSE_POLICY or "Deny" not in (
            bspec.get("validationActions") or []):
        return None
    want = ((bspec.get("matchResources") or {}).get("namespaceSelector") or {}).get(
        "matchLabels") or {}
    if any({"kubernetes.io/metadata.name": ns}.get(k) != v for k, v in want.items()):
        return None
    failed = per_sandbox_rule_failed(target, operation != "DELETE")
    if failed is None:
        return None
    rules = (policy.get("spec") or {}).get("validations") or []
    msg = rules[failed].get("message") if failed < len(rules) and isinstance(
        rules[failed], dict) else None
    name = ((target or {}).get("metadata") or {}).get("name") or ""
    return status(422, "Invalid",
                  '%s "%s" is invalid: : ValidatingAdmissionPolicy \'%s\' with binding \'%s\' '
                  "denied request: %s" % ("ciliumnetworkpolicies.cilium.io", name, PSE_POLICY,
                                          PSE_BINDING,
                                          msg or "failed expression %d" % (failed + 1)))


def parse_path(path):
    """-> (group, version, plural, ns, name) or None; ns is "" for a cluster-scoped resource."""
    parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if 1 <= len(rest) <= 2 and (group, version, rest[0]) in CLUSTER_SCOPED:
        return group, version, rest[0], "", rest[1] if len(rest) == 2 else None
    if len(rest) < 3 or rest[0] != "namespaces" or len(rest) > 4:
        return None
    ns, plural = rest[1], rest[2]
    name = rest[3] if len(rest) == 4 else None
    if (group, version, plural) not in RESOURCES or (group, version, plural) in CLUSTER_SCOPED:
        return None
    return group, version, plural, ns, name


def discovery(path):
    if path == "/version":
        return {"major": "1", "minor": "30", "gitVersion": "v1.30.0-namzu-fake",
                "platform": "linux/amd64"}
    if path == "/api":
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                "serverAddress": "127.0.0.1"}]}
    groups = {}
    for (g, v, _), _k in RESOURCES.items():
        if g:
            groups.setdefault(g, v)
    if path == "/apis":
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [{"name": g, "versions": [{"groupVersion": g + "/" + v, "version": v}],
                            "preferredVersion": {"groupVersion": g + "/" + v, "version": v}}
                           for g, v in sorted(groups.items())]}
    for g, v in list(groups.items()) + [CORE]:
        prefix = "/api/v1" if g == "" else "/apis/%s/%s" % (g, v)
        if path == prefix:
            return {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": api_version(g, v),
                    "resources": [{"name": p, "singularName": k.lower(),
                                   "namespaced": (rg, rv, p) not in CLUSTER_SCOPED,
                                   "kind": k,
                                   "verbs": ["create", "delete", "get", "list", "patch"]}
                                  for (rg, rv, p), k in RESOURCES.items()
                                  if rg == g and rv == v]}
    return None


class TLSServer(ThreadingHTTPServer):
    """Each connection's TLS handshake runs in its own thread, as Go's net/http does: a
    handshake done by accept() (a wrapped listening socket) would make every client wait for
    the slowest one, and a loaded sanitized client is slow."""
    daemon_threads = True

    def __init__(self, address, handler, ctx):
        super().__init__(address, handler)
        self.ctx = ctx

    def finish_request(self, request, client_address):
        request.settimeout(60)  # a client that never finishes its handshake is dropped
        try:
            tls = self.ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            tls.settimeout(None)
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    # TCP_NODELAY, as Go's net/http (the real kube-apiserver) has by default: the headers and
    # the body go out as two writes, and with Nagle the body waits for the client's delayed
    # ACK of the headers (~40 ms per response on Linux).
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        sys.stderr.write("fake-kube-apiserver: %s %s\n" % (self.command, fmt % args))

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def user(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):]
            for u, t in ARGS.token:
                if t == token:
                    return u
            return None  # a wrong token is refused even with a client certificate
        cert = self.connection.getpeercert()
        if cert:
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        return v
        return None

    def body(self):
        n = int(self.headers.get("Content-Length", "0") or "0")
        raw = self.rfile.read(n) if n > 0 else b""
        if not raw:
            return None
        return json.loads(raw)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        try:
            payload = self.body()
        except (ValueError, UnicodeDecodeError):
            return self.send_json(*status(400, "BadRequest", "the body is not JSON"))
        who = self.user()
        if who is None:
            return self.send_json(*status(401, "Unauthorized", "Unauthorized"))
        if self.command == "GET":
            doc = discovery(url.path)
            if doc is not None:
                return self.send_json(200, doc)
        ns_parts = url.path.strip("/").split("/")
        if ns_parts[:2] == ["fake", "forbid-resource"] and len(ns_parts) == 3 \
                and self.command in ("POST", "DELETE"):
            with LOCK:
                if self.command == "POST":
                    FORBID_RESOURCES.add(ns_parts[2])
                else:
                    FORBID_RESOURCES.discard(ns_parts[2])
                return self.send_json(200, {"forbidden": sorted(FORBID_RESOURCES)})
        if ns_parts[0] == "fake" and CONTROLLER[0] is not None:
            with LOCK:
                answer = CONTROLLER[0].admin(self.command, ns_parts)
            # what an admin verb waits for after its change, without the store's lock
            if len(answer) > 2 and answer[2] is not None:
                answer[2]()
            return self.send_json(*answer[:2])
        if self.command == "GET" and len(ns_parts) == 4 and ns_parts[:3] == ["api", "v1",
                                                                               "namespaces"] \
                and not ARGS.stored_namespaces:
            return self.send_json(200, {"kind": "Namespace", "apiVersion": "v1",
                                        "metadata": {"name": ns_parts[3]},
                                        "status": {"phase": "Active"}})
        target = parse_path(url.path)
        if target is None:
            return self.send_json(*status(404, "NotFound", "the server could not find the "
                                                           "requested resource"))
        group, version, plural, ns, name = target
        if ns in ARGS.stall:
            time.sleep(60)
            return None
        if ns in ARGS.gone:
            return self.send_json(*status(410, "Gone", "the requested resource is gone"))
        with LOCK:
            forbidden = plural in FORBID_RESOURCES or ns in ARGS.forbid
        if forbidden:
            where = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
            return self.send_json(*status(
                403, "Forbidden",
                '%s "%s" is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s'
                % (plural, name or "", who, self.command.lower(), plural, group, where)))
        with LOCK:
            code, obj = self.serve(group, version, plural, ns, name, query, payload, who)
            if self.command != "GET":
                CHANGED.notify_all()
        return self.send_json(code, obj)

    def serve(self, group, version, plural, ns, name, query, payload, who):
        kind = RESOURCES[(group, version, plural)]
        av = api_version(group, version)
        key = (group, version, plural, ns, name)
        gr = plural if group == "" else plural + "." + group
        not_found = status(404, "NotFound", '%s "%s" not found' % (gr, name),
                           {"name": name, "group": group, "kind": plural})
        if self.command == "GET" and name is None:
            sel = query.get("labelSelector", [""])[0]
            if selector_error(sel):
                return status(400, "BadRequest", selector_error(sel))
            items = [copy.deepcopy(o) for (g, v, p, n, _), o in sorted(STORE.items())
                     if (g, v, p, n) == (group, version, plural, ns)
                     and selector_matches(sel, o["metadata"].get("labels") or {})]
            return 200, {"kind": kind + "List", "apiVersion": av,
                         "metadata": {"resourceVersion": str(RV[0])}, "items": items}
        if self.command == "GET":
            return (200, copy.deepcopy(STORE[key])) if key in STORE else not_found
        if self.command == "POST" and name is None:
            if not isinstance(payload, dict):
                return status(400, "BadRequest", "the body is not an object")
            meta = payload.get("metadata") or {}
            oname = meta.get("name")
            if payload.get("kind") != kind or payload.get("apiVersion") != av:
                return status(422, "Invalid", "%s is invalid: kind/apiVersion must be %s %s"
                              % (kind, av, kind))
            if not oname:
                return status(422, "Invalid", "%s.%s is invalid: metadata.name: Required value"
                              % (kind, av))
            if meta.get("namespace") not in (None, ns):
                return status(400, "BadRequest", "the namespace of the object does not match "
                                                 "the namespace of the request")
            okey = (group, version, plural, ns, oname)
            if plural == "ciliumnetworkpolicies":  # admission runs before the store's 409
                denied = admission_denied(who, "CREATE", ns, dict(payload, metadata=dict(
                    meta, namespace=ns)))
                if denied is not None:
                    return denied
            if okey in STORE:
                return status(409, "AlreadyExists", '%s "%s" already exists' % (gr, oname),
                              {"name": oname, "group": group, "kind": plural})
            obj = copy.deepcopy(payload)
            m = obj.setdefault("metadata", {})
            if ns:
                m["namespace"] = ns
            m["uid"] = str(uuid.uuid4())
            m["resourceVersion"] = next_rv()
            m["generation"] = 1
            m["creationTimestamp"] = datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
            STORE[okey] = obj
            return 201, copy.deepcopy(obj)
        if name is None:
            return status(405, "MethodNotAllowed", "the server does not allow this method on "
                                                   "the requested resource")
        if key not in STORE:
            return not_found
        cur = STORE[key]
        if self.command == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == "application/merge-patch+json":
                if not isinstance(payload, dict):
                    return status(400, "BadRequest", "a merge patch is a JSON object")
                want = (payload.get("metadata") or {}).get("resourceVersion")
                if want is not None and want != cur["metadata"]["resourceVersion"]:
                    return status(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                                  "the object has been modified; please apply your changes to "
                                  "the latest version and try again" % (gr, name))
                new = merge_patch(cur, payload)
            elif ctype == "application/json-patch+json":
                try:
                    new = json_patch(cur, payload)
                except PatchError as e:
                    return status(422, "Invalid", 'the server rejected our request due to an '
                                  'error in our request: %s' % e)
            else:
                return status(415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted "
                              "media types include: application/json-patch+json, "
                              "application/merge-patch+json")
            meta = new.get("metadata") or {}
            if meta.get("name") != name or meta.get("uid") != cur["metadata"]["uid"]:
                return status(422, "Invalid", "%s \"%s\" is invalid: metadata: name and uid "
                              "are immutable" % (kind, name))
            if plural == "ciliumnetworkpolicies":
                denied = admission_denied(who, "UPDATE", ns, new)
                if denied is not None:
                    return denied
            new["metadata"]["resourceVersion"] = next_rv()
            STORE[key] = new
            return 200, copy.deepcopy(new)
        if self.command == "DELETE":
            pre = (payload or {}).get("preconditions") or {}
            if "resourceVersion" in pre and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                return status(409, "Conflict", "Operation cannot be fulfilled on %s \"%s\": "
                              "Precondition failed: ResourceVersion in precondition: %s, "
                              "ResourceVersion in object meta: %s"
                              % (gr, name, pre["resourceVersion"],
                                 cur["metadata"]["resourceVersion"]))
            if "uid" in pre and pre["uid"] != cur["metadata"]["uid"]:
                return status(409, "Conflict", "Operation cannot be fulfilled on %s \"%s\": "
                              "Precondition failed: UID in precondition: %s, UID in object "
                              "meta: %s" % (gr, name, pre["uid"], cur["metadata"]["uid"]))
            if plural == "ciliumnetworkpolicies":
                denied = admission_denied(who, "DELETE", ns, cur)
                if denied is not None:
                    return denied
            del STORE[key]
            if plural == "pods":
                return 200, cur
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success",
                         "details": {"name": name, "group": group, "kind": plural,
                                     "uid": cur["metadata"]["uid"]}}
        return status(405, "MethodNotAllowed", "the server does not allow this method on the "
                                               "requested resource")

    def handle_timed(self):
        """handle_any, and then how long the fake spent on it (its own handling, a wait for the
        store's lock included) as a log line of its own: bench/bench-kube.py counts that time
        as the fake's share of a sample, not the host's."""
        t0 = time.monotonic()
        try:
            self.handle_any()
        finally:
            sys.stderr.write("fake-kube-apiserver-ms: %.3f\n" % ((time.monotonic() - t0) * 1000))

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = handle_timed


def main():
    global ARGS
    ap = argparse.ArgumentParser(description="a FAKE Kubernetes API server for namzu's tests")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca")
    ap.add_argument("--token", action="append", default=[],
                    type=lambda s: tuple(s.split("=", 1)), help="USER=TOKEN")
    ap.add_argument("--forbid", action="append", default=[], help="a namespace answered 403")
    ap.add_argument("--forbid-resource", action="append", default=[],
                    help="a resource (plural) answered 403, cluster-scoped ones included")
    ap.add_argument("--stall", action="append", default=[], help="a namespace never answered")
    ap.add_argument("--gone", action="append", default=[], help="a namespace answered 410")
    ap.add_argument("--stored-namespaces", action="store_true",
                    help="namespaces are objects kubectl creates (by default every namespace "
                         "exists and is not stored)")
    ap.add_argument("--object", action="append", default=[],
                    help="a JSON file of an object to store at start (namespaced)")
    ap.add_argument("--controller", action="store_true",
                    help="run the fake agent-sandbox controller (fake_kube_controller.py)")
    ap.add_argument("--agent", help="the namzu-agent the controller runs in each pod")
    ap.add_argument("--pod-subnet", help="127.A.B: pods get 127.A.B.2, .3, ...")
    ap.add_argument("--state-dir", help="the controller's PVC and pod directories")
    ARGS = ap.parse_args()
    FORBID_RESOURCES.update(ARGS.forbid_resource)
    for path in ARGS.object:
        with open(path) as f:
            obj = json.load(f)
        av = obj["apiVersion"]
        group, version = ("", av) if "/" not in av else av.split("/", 1)
        plural = [p for (g, v, p), k in RESOURCES.items()
                  if (g, v) == (group, version) and k == obj["kind"]][0]
        m = obj["metadata"]
        m.setdefault("uid", str(uuid.uuid4()))
        m["resourceVersion"] = next_rv()
        STORE[(group, version, plural, m["namespace"], m["name"])] = obj

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    if ARGS.client_ca:
        ctx.load_verify_locations(ARGS.client_ca)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    httpd = TLSServer(("127.0.0.1", ARGS.port), Handler, ctx)

    if ARGS.controller:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import fake_kube_controller
        CONTROLLER[0] = fake_kube_controller.start(sys.modules[__name__], ARGS.agent,
                                                   ARGS.pod_subnet, ARGS.state_dir)

    def stop(*_):
        if CONTROLLER[0] is not None:
            with LOCK:
                CONTROLLER[0].kill_all()
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print("fake-kube-apiserver listening on 127.0.0.1:%d" % httpd.server_address[1], flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
