#!/usr/bin/env python3
# git-http.py ROOT ADDR: git's smart HTTP protocol for the seed tests, served from the bare
# repositories in ROOT on ADDR (port 0). Prints the bound port on stdout once listening (the
# test reads it instead of sleeping), then serves until killed.
#
# Each request runs the real `git http-backend` as a CGI program; this file only moves bytes
# between HTTP and CGI. Threaded, so a request held inside upload-pack (a test's
# uploadpack.packObjectsHook, read from this process's GIT_CONFIG_GLOBAL) does not stall the
# others. Whole bodies are buffered: the test repositories are a few kilobytes.
import http.server
import os
import subprocess
import sys

root, addr = sys.argv[1], sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length", "0")))
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def cgi(self):
        path, _, query = self.path.partition("?")
        body = self.read_body()
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   GATEWAY_INTERFACE="CGI/1.1", REQUEST_METHOD=self.command,
                   PATH_INFO=path, QUERY_STRING=query, REMOTE_ADDR=self.client_address[0],
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)))
        for key, value in self.headers.items():
            if key.lower() not in ("content-type", "content-length", "transfer-encoding"):
                env["HTTP_" + key.upper().replace("-", "_")] = value
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             stdout=subprocess.PIPE, check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = cgi
    do_POST = cgi

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer((addr, 0), Handler)
server.daemon_threads = True
print(server.server_port, flush=True)
server.serve_forever()
