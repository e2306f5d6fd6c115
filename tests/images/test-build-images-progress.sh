#!/usr/bin/env bash
# scripts/build-images' progress: on a terminal (a real pseudo-terminal from script(1)) its step
# lines carry the time so far; in a pipe, and with NAMZU_PROGRESS=0 on a terminal, they do not.
# Runs the real script against the real daemon with the images already built (CI builds them
# first), so each run only checks them. Args: SOURCE_DIR. TAP output.
src=$1
debs=${NAMZU_DEBS:-$src/_debs}
need() {
    if [[ -n $CI ]]; then echo "1..1"; echo "not ok 1 $1"; exit 1; fi
    echo "1..0 # SKIP $1"; exit 0
}
[[ $(id -u) == 0 ]] || need "build-images runs as root"
docker info >/dev/null 2>&1 || need "no docker daemon"
ls "$debs"/namzu-worker_*.deb >/dev/null 2>&1 || need "no packages in $debs (scripts/build-debs)"
command -v script >/dev/null || need "script(1) (util-linux) is not installed"
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
run() { # NAME ENV-ASSIGNMENTS...: build-images on a pty, its output in $out/NAME
    local name=$1; shift
    env "$@" script -qec "$(printf '%q ' "$src/scripts/build-images" "$debs")" /dev/null \
        > "$out/$name" 2>&1
}
n=0 fail=0
check() { # DESCRIPTION COMMAND...
    local what=$1; shift
    n=$((n + 1))
    if "$@"; then echo "ok $n $what"; else echo "not ok $n $what"; fail=1; fi
}
echo "1..5"
run tty
check "on a terminal it ends with its done line" grep -q 'build-images: .*done:' "$out/tty"
check "on a terminal every step line has the elapsed time" \
    bash -c '! grep "^build-images: " "$1" | grep -qv "^build-images: \[[0-9]*:[0-9][0-9]\] "' _ "$out/tty"
"$src/scripts/build-images" "$debs" 2>&1 | cat > "$out/pipe"
check "in a pipe it ends with its done line" grep -q '^build-images: done:' "$out/pipe"
check "in a pipe no step line has a time" bash -c '! grep -q "^build-images: \[" "$1"' _ "$out/pipe"
run off NAMZU_PROGRESS=0
check "NAMZU_PROGRESS=0 on a terminal: no time" \
    bash -c 'grep -q "^build-images: done:" "$1" && ! grep -q "build-images: \[" "$1"' _ "$out/off"
exit $fail
