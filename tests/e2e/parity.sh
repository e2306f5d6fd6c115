#!/bin/sh
# parity.sh BACKEND: the same end-to-end run on any backend, through the tools only:
#   namzu-create -> namzu-exec (echo, exit codes, stderr, env, cwd) -> a file written and read
#   back -> a multi-MiB namzu-cp round trip (parts up, streamed down) -> an interactive
#   terminal and a detached session through namzu-attach -> a namzu-port-forward connection ->
#   namzu-quiesce -> namzu-destroy,
#   then namzu-run (create, run, destroy in one).
# Needs NZ_TOOLS_DIR (the built tools); NZ_PARITY_IMAGE for image backends (default
# namzu-worker:latest). Prints "parity: ok" last; exits non-zero at the first difference.
# Docker backends run on the bridge network with allow-all egress (a published port needs a
# route); bwrap keeps its default deny-all.
set -eu

backend=$1
tools=${NZ_TOOLS_DIR:?NZ_TOOLS_DIR must name the built tools}
image=${NZ_PARITY_IMAGE:-namzu-worker:latest}
work=$(mktemp -d /tmp/nz-parity-XXXXXX)
chmod 0755 "$work"
mkdir "$work/out" "$work/state"
chmod 0777 "$work/out"
export NAMZU_STATE_DIR="$work/state"
id=

fail() {
  echo "parity($backend): $*" >&2
  exit 1
}

cleanup() {
  if [ -n "$id" ]; then
    "$tools/namzu-destroy" --sandbox "$id" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

case $backend in
  container:docker | container:runsc)
    set -- --image "$image" --network allow-all --docker-network bridge ;;
  *)
    set -- ;;
esac
"$tools/namzu-create" --backend "$backend" --outputs "$work/out" "$@" >"$work/handle.json" \
  || fail "namzu-create failed"
id=$(sed -n 's/.*"id" *: *"\([^"]*\)".*/\1/p' "$work/handle.json")
[ -n "$id" ] || fail "no id in $(cat "$work/handle.json")"
grep -q token "$work/handle.json" && fail "the public handle carries a token"
export NAMZU_SANDBOX="$id"
x() { "$tools/namzu-exec" "$@"; }

# stdout passes through, exactly
[ "$(x -- echo hello parity)" = "hello parity" ] || fail "echo"
# exit codes, including 0, 1, 42 and a signal (128+N)
x -- true || fail "true"
rc=0; x -- false || rc=$?; [ $rc -eq 1 ] || fail "false exited $rc"
rc=0; x -- sh -c 'exit 42' || rc=$?; [ $rc -eq 42 ] || fail "exit 42 gave $rc"
rc=0; x -- sh -c 'kill -TERM $$' || rc=$?; [ $rc -eq 143 ] || fail "SIGTERM gave $rc"
rc=0; x -- /nonexistent/cmd 2>/dev/null || rc=$?; [ $rc -eq 127 ] || fail "missing command gave $rc"
# stderr is separate
[ "$(x -- sh -c 'echo to-err >&2' 2>&1 >/dev/null)" = "to-err" ] || fail "stderr"
[ -z "$(x -- sh -c 'echo to-err >&2' 2>/dev/null)" ] || fail "stderr leaked to stdout"
# env: ours arrives, the credential does not
[ "$(x -e PARITY=yes -- sh -c 'echo $PARITY')" = "yes" ] || fail "env"
[ -z "$(x -- sh -c 'env | grep -E "^NAMZU_(SANDBOX|AGENT)_" || true')" ] || fail "namzu env leaked into the command"
# cwd: relative to the workspace, created if missing
ws=$(x -- pwd)
[ "$(x -C sub/dir -- pwd)" = "$ws/sub/dir" ] || fail "cwd: $(x -C sub/dir -- pwd) vs $ws/sub/dir"
# a file written in the sandbox is read back, and lands in the host's outputs dir
x -- sh -c 'printf "line1\nline2\n" > parity.txt' || fail "write"
[ "$(x -- cat parity.txt)" = "$(printf 'line1\nline2')" ] || fail "read back"
[ "$(cat "$work/out/parity.txt")" = "$(printf 'line1\nline2')" ] || fail "not in outputs"
# a multi-MiB file goes in (in parts) and comes out (streamed) with the same sha256
head -c 5243011 /dev/urandom >"$work/big.bin"
sum=$(sha256sum <"$work/big.bin" | cut -d' ' -f1)
"$tools/namzu-cp" --part-kib 512 "$work/big.bin" :big.bin >/dev/null || fail "namzu-cp up"
[ "$(x -- sha256sum big.bin | cut -d' ' -f1)" = "$sum" ] || fail "sha256 inside after namzu-cp up"
"$tools/namzu-cp" :big.bin "$work/big.back" >/dev/null || fail "namzu-cp down"
[ "$(sha256sum <"$work/big.back" | cut -d' ' -f1)" = "$sum" ] || fail "namzu-cp round trip differs"
# an interactive terminal: our stdin is its input, its shell's status is ours; the $((...))
# shows the shell ran the line (the terminal's echo only repeats it)
rc=0; out=$(printf 'echo in-the-$((6*7)); exit 5\n' | "$tools/namzu-attach" --terminal) || rc=$?
[ $rc -eq 5 ] || fail "terminal exited $rc"
case $out in *in-the-42*) ;; *) fail "terminal output: $out" ;; esac
# a session started detached is followed to its end by another process
"$tools/namzu-attach" --start-detached job -- sh -c 'echo from-the-session; exit 3' >/dev/null \
  || fail "start-detached"
rc=0; out=$("$tools/namzu-attach" --session job) || rc=$?
[ $rc -eq 3 ] || fail "session follow exited $rc"
case $out in *from-the-session*) ;; *) fail "session output: $out" ;; esac
# namzu-port-forward: a loopback server inside, reached from the host's loopback; the host's
# half-close reaches it and its answer still comes back
"$tools/namzu-attach" --start-detached pf -- python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8300)); s.listen()
while True:
    c, _ = s.accept(); n = 0
    while True:
        b = c.recv(65536)
        if not b: break
        n += len(b)
    c.sendall(b"got %d" % n); c.close()' >/dev/null || fail "start-detached pf"
for i in $(seq 50); do
  x -- python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8300))' 2>/dev/null && break
  sleep 0.1
done
"$tools/namzu-port-forward" 0:8300 >"$work/pf.json" 2>"$work/pf.err" & pf=$!
for i in $(seq 100); do [ -s "$work/pf.json" ] && break; sleep 0.1; done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$work/pf.json")
[ -n "$port" ] || fail "namzu-port-forward: $(cat "$work/pf.json" "$work/pf.err")"
reply=$(head -c 1000000 /dev/zero | python3 -c '
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
c.sendall(sys.stdin.buffer.read()); c.shutdown(socket.SHUT_WR); print(c.recv(100).decode())' "$port")
[ "$reply" = "got 1000000" ] || fail "port-forward reply: $reply; $(cat "$work/pf.err")"
kill -TERM $pf; wait $pf || fail "namzu-port-forward exited $? on SIGTERM"
# quiesce stops what runs (a detached session here), and commands start again afterwards
"$tools/namzu-attach" --start-detached idle -- sleep 300 >/dev/null || fail "start-detached idle"
q=$("$tools/namzu-quiesce") || fail "namzu-quiesce: $q"
case $q in *'"ok":true'*'"stopped":'*sleep*) ;; *) fail "quiesce result: $q" ;; esac
[ "$(x -- echo after-quiesce)" = "after-quiesce" ] || fail "exec after quiesce"
# destroy is checked and final
"$tools/namzu-destroy" --sandbox "$id" >/dev/null || fail "namzu-destroy"
rc=0; x -- true 2>/dev/null || rc=$?; [ $rc -ne 0 ] || fail "exec after destroy succeeded"
id=
# namzu-run: a sandbox of its own for one command, its output and status, stdin, a timeout,
# and nothing left in the state directory afterwards
run() { "$tools/namzu-run" --backend "$backend" --outputs "$work/out" "$@"; }
rc=0; out=$(run "$@" -- sh -c 'echo one-shot; exit 6') || rc=$?
[ $rc -eq 6 ] && [ "$out" = "one-shot" ] || fail "namzu-run gave $rc: $out"
[ "$(echo piped-in | run "$@" -i -- cat)" = "piped-in" ] || fail "namzu-run -i"
rc=0; run "$@" --timeout 1s -- sleep 60 2>/dev/null || rc=$?
[ $rc -eq 124 ] || fail "namzu-run --timeout gave $rc"
# (not the tombstones a destroy leaves, nz-<id>.destroyed)
[ -z "$(ls "$work/state" | grep '^nz-' | grep -v '[.]destroyed$' || true)" ] \
  || fail "namzu-run left $(ls "$work/state")"
echo "parity: ok ($backend)"
