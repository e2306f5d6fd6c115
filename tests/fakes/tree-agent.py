#!/usr/bin/env python3
"""tree-agent: a FAKE guest agent for namzu-cp -r's hostile-reply tests.

It stands in for a sandbox whose workload took over its agent (which the tests cannot build
on purpose) and answers a directory copy out of the sandbox with a scripted listing. The
wire is the real one (spec A.2: 8 hex digits, a newline, the JSON payload; the zero-length
terminator); it implements exactly the ops a copy out uses and nothing else:

  healthz           features with read-file-stream and file-ops
  stat-file         /w/d is a directory (mode 0755); anything else ENOENT
  list-files        root /w/d, the entries of SCENARIO (below), truncated false
  read-file-stream  the bytes "pwned\\n" for any path (meta, one data frame, end, terminator)

  tree-agent.py unix:/PATH SCENARIO     prints "listening on unix:/PATH" once bound

Every scenario but "good" is hostile: a host that writes anything outside the destination, or
anything at all for a listing it should refuse, fails the test that drives this fake.
"""
import base64
import json
import os
import socket
import sys

ROOT = "/w/d"


def d(path):
    return {"path": path, "type": "directory", "size": 0, "mode": 0o755, "mtimeMs": 0}


def f(path):
    return {"path": path, "type": "file", "size": 6, "mode": 0o644, "mtimeMs": 0}


def l(path, target):
    return {"path": path, "type": "symlink", "size": 0, "mode": 0o777, "mtimeMs": 0,
            "target": target}


SCENARIOS = {
    # The control: a listing a host must copy whole.
    "good": [d(ROOT + "/a"), f(ROOT + "/a/x"), l(ROOT + "/a/up", "../../..")],
    # Out of the root, by .. or by another absolute path.
    "dotdot": [f(ROOT + "/../../escape")],
    "dotdot-inner": [d(ROOT + "/a"), f(ROOT + "/a/../../escape")],
    "outside": [f("/w/other/escape")],
    "prefix": [f(ROOT + "x/escape")],
    "the-root": [f(ROOT)],
    "dot": [f(ROOT + "/./escape")],
    "empty-component": [f(ROOT + "//escape")],
    # Writes below an entry that is not a directory of the listing.
    "below-symlink": [l(ROOT + "/a", "/tmp"), f(ROOT + "/a/escape")],
    "below-symlink-dir": [l(ROOT + "/a", "/tmp"), d(ROOT + "/a/sub")],
    "below-file": [f(ROOT + "/a"), f(ROOT + "/a/escape")],
    "unlisted-parent": [f(ROOT + "/nowhere/escape")],
    # The same name twice (a directory, then a link over it).
    "twice": [d(ROOT + "/a"), l(ROOT + "/a", "/tmp")],
    # Another root than the one asked for.
    "other-root": "other-root",
}


def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    n = int(head[:8], 16)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def put(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(b"%08x\n" % len(data) + data)


def serve(conn, scenario):
    req = read_frame(conn)
    if req is None:
        return
    msg = json.loads(req)
    op, body = msg.get("op"), msg.get("body") or {}
    if op == "healthz":
        put(conn, {"ok": True, "protocolVersion": 2, "gb": "boot",
                   "features": ["write-file-parts", "read-file-stream", "file-ops"]})
    elif op == "stat-file":
        if body.get("path") in ("d", ROOT):
            put(conn, {"ok": True, "entry": d(ROOT)})
        else:
            put(conn, {"ok": False, "error": "ENOENT: no such file or directory, lstat"})
    elif op == "list-files":
        entries = SCENARIOS[scenario]
        root = ROOT
        if entries == "other-root":
            root, entries = "/", [d("/etc"), f("/etc/escape")]
        put(conn, {"ok": True, "root": root, "entries": entries, "truncated": False})
    elif op == "read-file-stream":
        data = b"pwned\n"
        put(conn, {"type": "meta", "sizeBytes": len(data), "offset": 0, "length": len(data)})
        put(conn, {"type": "data", "data": base64.b64encode(data).decode()})
        put(conn, {"type": "end", "bytesSent": len(data)})
        conn.sendall(b"00000000\n")
    else:
        put(conn, {"ok": False, "error": "unknown_op: %s" % op})


def main():
    endpoint, scenario = sys.argv[1], sys.argv[2]
    if not endpoint.startswith("unix:") or scenario not in SCENARIOS:
        sys.exit("usage: tree-agent.py unix:/PATH SCENARIO (%s)" % " ".join(SCENARIOS))
    path = endpoint[5:]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    print("listening on " + endpoint, flush=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            try:
                serve(conn, scenario)
            except (OSError, ValueError):
                pass


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
