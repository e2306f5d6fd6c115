#!/usr/bin/env bash
# The Kubernetes agent image (images/agent, spec reference-agent.md D.11) against the real
# dockerd: --version names the package; no setuid file; as root the entrypoint drops to uid 1001
# with no capabilities and no-new-privs under tini, resolves HOME, and the agent answers
# healthz and a token-gated execute over TCP from the host (published on 127.0.0.1 only); the
# non-root path works and refuses NAMZU_WORKSPACE_DEVICE; the HOME fallback; `prestop` TERMs
# tini (and so the agent) and exits 0, and does not signal a pid that is not tini; a blank loop
# device is formatted and mounted, and one with a filesystem is mounted without mkfs.
# Args: PROJECT_VERSION. The image is $NAMZU_AGENT_IMAGE (default namzu-agent:latest). TAP.
# Under CI=true a missing daemon, image, root or loop device is a failure, never a skip.
set -u
version=$1
image=${NAMZU_AGENT_IMAGE:-namzu-agent:latest}
label=ai.namzu.test=test-agent-image
token=agentimg-token-$$-$RANDOM
n=0 failed=0

bail() { # reason: a missing prerequisite
  if [[ -n ${CI:-} ]]; then echo "1..1"; echo "not ok 1 $1"; exit 1; fi
  echo "1..0 # SKIP $1"
  exit 0
}
command -v docker >/dev/null || bail "docker is not installed"
docker info >/dev/null 2>&1 || bail "the docker daemon does not answer"
docker image inspect "$image" >/dev/null 2>&1 || bail "no image $image (scripts/build-images)"
[[ $(id -u) == 0 ]] || bail "not root (losetup)"

tmp=$(mktemp -d)
loops=()
cleanup() {
  docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

ok() { # description, condition already evaluated in $?
  local rc=$? what=$1
  n=$((n + 1))
  if [[ $rc == 0 ]]; then echo "ok $n $what"; else echo "not ok $n $what"; failed=1; fi
}
fail_with() { # what, detail...
  n=$((n + 1))
  echo "not ok $n $1"
  shift
  printf '#   %s\n' "$@"
  failed=1
}
check() { # description, haystack, needle...: every needle is in haystack
  local what=$1 hay=$2 needle
  shift 2
  for needle in "$@"; do
    if [[ $hay != *"$needle"* ]]; then
      fail_with "$what" "wanted: $needle" "got: $hay"
      return
    fi
  done
  n=$((n + 1))
  echo "ok $n $what"
}

run_agent() { # name, docker run options...: starts it detached and waits for its ready line
  local name=$1
  shift
  docker run -d --name "$name" --label "$label" "$@" "$image" >/dev/null || return 1
  for _ in $(seq 100); do
    if docker logs "$name" 2>&1 | grep -q '^namzu-agent listening on'; then return 0; fi
    [[ $(docker inspect -f '{{.State.Running}}' "$name") == true ]] || break
    sleep 0.1
  done
  docker logs "$name" >&2
  return 1
}
# A run that must end by itself (a refusal): its output, and its exit status in $rc (124 when it
# had not ended after 60 s, i.e. it went on to start the agent).
refused_run() { # name, docker run options...
  local name=$1
  shift
  docker run -d --name "$name" --label "$label" "$@" "$image" >/dev/null
  rc=$(timeout 60 docker wait "$name") || rc=124
  docker logs "$name" 2>&1
  docker rm -f "$name" >/dev/null 2>&1
}
host_port() { docker port "$1" 1024/tcp | sed -n 's/^127\.0\.0\.1:\([0-9]*\)$/\1/p' | head -n1; }

# One frame to the agent at 127.0.0.1:PORT, everything it answers (frames unparsed) on stdout.
frame() { # port, json
  timeout 20 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "%08x\n%s" "${#2}" "$2" >&3
    cat <&3' _ "$1" "$2"
}
# What sh -c SCRIPT run by the agent printed (stdout and stderr deltas, joined, \n decoded), then
# "exit=N" from its result, or the agent's error frame as it came.
agent_sh() { # port, token, script
  local raw
  raw=$(frame "$1" "{\"op\":\"execute\",\"token\":\"$2\",\"body\":{\"command\":\"sh\",\"args\":[\"-c\",\"$3\"]}}")
  if [[ $raw != *'"type":"result"'* ]]; then
    echo "$raw"
    return
  fi
  printf '%b' "$(grep -o '"data":"[^"]*"' <<<"$raw" | sed 's/^"data":"//; s/"$//' | tr -d '\n')"
  grep -o '"exitCode":[0-9-]*' <<<"$raw" | sed 's/"exitCode":/exit=/'
}
status_of() { # container, pid, field
  docker exec "$1" sh -c "sed -n 's/^$3:[[:space:]]*//p' /proc/$2/status"
}
agent_pid() { docker exec "$1" sh -c 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = namzu-agent ] && echo ${p#/proc/}; done' | head -n1; }

echo "1..28"

# ---- the package ---------------------------------------------------------------------------
out=$(docker run --rm "$image" --version 2>&1)
check "--version prints namzu-agent $version" "$out" "namzu-agent $version"
[[ $(docker image inspect -f '{{ index .Config.Labels "org.opencontainers.image.version" }}' "$image") == "$version" ]]
ok "the image's version label is $version"
out=$(docker run --rm "$image" --help 2>&1)
check "--help is namzu-agent's" "$out" "NAMZU_AGENT_TCP_PORT" "NAMZU_AGENT_BIND_TOKEN"
out=$(docker run --rm --entrypoint sh "$image" -c 'find / -xdev -perm /6000 -type f' 2>&1)
[[ -z $out ]]
ok "no setuid or setgid file in the image ($out)"

# ---- root: drop to 1001 under tini ---------------------------------------------------------
if run_agent nz-agentimg-root -p 127.0.0.1::1024 -e NAMZU_AGENT_BIND_TOKEN="$token"; then
  c=nz-agentimg-root
  [[ $(docker exec $c cat /proc/1/comm) == tini ]]
  ok "as root: pid 1 is tini"
  pid=$(agent_pid $c)
  [[ -n $pid && $(docker exec $c sh -c "awk '{print \$4}' /proc/$pid/stat") == 1 ]]
  ok "as root: namzu-agent ($pid) is tini's child"
  check "as root: the agent runs as uid/gid 1001" \
    "$(status_of $c "$pid" Uid) $(status_of $c "$pid" Gid)" $'1001\t1001\t1001\t1001 1001\t1001\t1001\t1001'
  [[ $(status_of $c "$pid" NoNewPrivs) == 1 ]]
  ok "as root: the agent has NoNewPrivs 1"
  [[ $(status_of $c "$pid" CapEff) == 0000000000000000 && $(status_of $c "$pid" CapBnd) == 0000000000000000 \
    && $(status_of $c "$pid" CapPrm) == 0000000000000000 && $(status_of $c "$pid" Groups) == "" ]]
  ok "as root: no capabilities, not even in the bounding set, and no supplementary groups"
  [[ $(status_of $c 1 Uid) == $'1001\t1001\t1001\t1001' && $(status_of $c 1 NoNewPrivs) == 1 ]]
  ok "as root: tini itself runs as 1001 with NoNewPrivs"
  port=$(host_port $c)
  out=$(frame "$port" '{"op":"healthz"}')
  check "healthz over TCP from the host" "$out" '"ok":true' '"protocolVersion":2'
  out=$(agent_sh "$port" "$token" 'echo uid=$(id -u) HOME=$HOME USER=$USER LOGNAME=$LOGNAME; echo $XDG_CACHE_HOME $XDG_CONFIG_HOME; stat -c home=%u:%a $HOME; stat -c ws=%u $PWD')
  check "execute with the token: uid 1001, HOME from passwd, XDG under it, in /workspace" "$out" \
    'uid=1001 HOME=/home/namzu USER=namzu LOGNAME=namzu' '/home/namzu/.cache /home/namzu/.config' \
    'home=1001:755' 'ws=1001' 'exit=0'
  out=$(agent_sh "$port" "wrong-$token" 'id')
  check "execute with another token is unauthorized" "$out" '"error":"unauthorized"'
  # prestop: TERM to tini, which forwards it; the agent's shutdown ends with exit 0 and so does
  # tini. docker exec itself dies with the container (pid 1 gone), so its status is not asked.
  docker exec $c /entrypoint.sh prestop >/dev/null 2>&1
  [[ $(timeout 60 docker wait $c) == 0 ]]
  ok "prestop: tini and the agent stop, with exit status 0"
else
  for _ in $(seq 10); do fail_with "as root: the agent did not start" "$(docker logs nz-agentimg-root 2>&1)"; done
fi

# ---- prestop's pid check --------------------------------------------------------------------
# A pid 1 that a TERM would end (it traps it), so a signal sent after all would show.
docker run -d --name nz-agentimg-sleep --label "$label" --entrypoint sh "$image" \
  -c 'trap "exit 7" TERM; while :; do sleep 0.1; done' >/dev/null
err=$(docker exec nz-agentimg-sleep /entrypoint.sh prestop 2>&1)
rc=$?
[[ $rc == 0 && $(docker inspect -f '{{.State.Running}}' nz-agentimg-sleep) == true ]]
ok "prestop: pid 1 that is not tini is not signalled and prestop exits 0 (rc $rc)"
check "prestop: says why" "$err" "entrypoint.sh: prestop: pid 1 is 'sh', not the 'tini' this image starts — not signalling it"
# A tini that is not pid 1: prestop TERMs it, waits for it to go and exits 0.
docker run -d --name nz-agentimg-tini --label "$label" --entrypoint sh "$image" \
  -c '/usr/bin/tini -s -- sleep 600 & echo $! > /tmp/tini.pid; wait $!; echo "tini exited $?" > /tmp/done; exec sleep 600' >/dev/null
for _ in $(seq 50); do docker exec nz-agentimg-tini test -s /tmp/tini.pid && break; sleep 0.1; done
tpid=$(docker exec nz-agentimg-tini cat /tmp/tini.pid)
docker exec -e NAMZU_PRESTOP_INIT_PID="$tpid" nz-agentimg-tini /entrypoint.sh prestop
rc=$?
[[ $rc == 0 ]]
ok "prestop: exits 0 once the tini it signalled is gone"
check "prestop: tini got SIGTERM (128+15)" "$(docker exec nz-agentimg-tini cat /tmp/done 2>&1)" "tini exited 143"

# ---- non-root --------------------------------------------------------------------------------
if run_agent nz-agentimg-user --user 1001:1001 -p 127.0.0.1::1024 -e NAMZU_AGENT_BIND_TOKEN="$token"; then
  c=nz-agentimg-user
  pid=$(agent_pid $c)
  [[ $(docker exec $c cat /proc/1/comm) == tini && $(status_of $c "$pid" Uid) == $'1001\t1001\t1001\t1001' \
    && $(status_of $c "$pid" NoNewPrivs) == 1 ]]
  ok "--user 1001: tini -> namzu-agent as 1001 with NoNewPrivs"
  out=$(agent_sh "$(host_port $c)" "$token" 'echo HOME=$HOME USER=$USER')
  check "--user 1001: HOME from passwd" "$out" 'HOME=/home/namzu USER=namzu' 'exit=0'
else
  fail_with "--user 1001: the agent did not start" "$(docker logs nz-agentimg-user 2>&1)"
  fail_with "--user 1001: HOME"
fi
refused_run nz-agentimg-userdev --user 1001:1001 -e NAMZU_AGENT_BIND_TOKEN="$token" \
  -e NAMZU_WORKSPACE_DEVICE=/dev/namzu-workspace >"$tmp/out"
out=$(cat "$tmp/out")
[[ $rc == 1 ]]
ok "--user 1001 with NAMZU_WORKSPACE_DEVICE: exit 1 (rc $rc)"
check "--user 1001 with NAMZU_WORKSPACE_DEVICE: says why" "$out" \
  "entrypoint.sh: NAMZU_WORKSPACE_DEVICE is set but this container runs as uid 1001"

# ---- HOME inside the workspace: /tmp/namzu-home-1001 instead ---------------------------------
if run_agent nz-agentimg-home -p 127.0.0.1::1024 -e NAMZU_AGENT_BIND_TOKEN="$token" -e NAMZU_WORKSPACE_ROOT=/home; then
  out=$(agent_sh "$(host_port nz-agentimg-home)" "$token" 'echo HOME=$HOME USER=$USER LOGNAME=$LOGNAME; stat -c %u:%a $HOME')
  check "a passwd HOME under NAMZU_WORKSPACE_ROOT is not adopted: /tmp/namzu-home-1001, 0700" "$out" \
    'HOME=/tmp/namzu-home-1001 USER=namzu LOGNAME=namzu' '1001:700' 'exit=0'
else
  fail_with "HOME fallback: the agent did not start" "$(docker logs nz-agentimg-home 2>&1)"
fi

# ---- the workspace disk: a loop device -------------------------------------------------------
truncate -s 64M "$tmp/disk"
loop=$(losetup -f --show "$tmp/disk" 2>&1)
if [[ $loop != /dev/loop* ]]; then
  for _ in $(seq 5); do fail_with "losetup: $loop"; done
else
  loops+=("$loop")
  disk=(--device "$loop:/dev/namzu-workspace" --cap-add SYS_ADMIN -e NAMZU_WORKSPACE_DEVICE=/dev/namzu-workspace
    -p 127.0.0.1::1024 -e NAMZU_AGENT_BIND_TOKEN="$token")
  if run_agent nz-agentimg-disk1 "${disk[@]}"; then
    out=$(agent_sh "$(host_port nz-agentimg-disk1)" "$token" 'grep -w /workspace /proc/mounts; stat -c %u:%g /workspace; echo kept > /workspace/marker && echo wrote')
    check "a blank disk is formatted ext4 and mounted noatime,nodev,nosuid on /workspace, owned by 1001" "$out" \
      '/dev/namzu-workspace /workspace ext4 rw,nosuid,nodev,noatime' '1001:1001' 'wrote' 'exit=0'
    docker rm -f nz-agentimg-disk1 >/dev/null
  else
    fail_with "a blank disk: the agent did not start" "$(docker logs nz-agentimg-disk1 2>&1)"
  fi
  if run_agent nz-agentimg-disk2 "${disk[@]}"; then
    out=$(agent_sh "$(host_port nz-agentimg-disk2)" "$token" 'cat /workspace/marker')
    check "a disk with a filesystem is mounted without mkfs: the file written before is there" "$out" 'kept' 'exit=0'
    docker rm -f nz-agentimg-disk2 >/dev/null
  else
    fail_with "a formatted disk: the agent did not start" "$(docker logs nz-agentimg-disk2 2>&1)"
  fi
  # blkid neither finds a filesystem nor says "nothing found" (exit 2): refuse, touch nothing.
  # A blkid that fails otherwise (exit 4, "usage or other error") is bound over the image's.
  printf '#!/bin/sh\nexit 4\n' >"$tmp/blkid"
  chmod 0755 "$tmp/blkid"
  truncate -s 64M "$tmp/disk2"
  loop=$(losetup -f --show "$tmp/disk2")
  loops+=("$loop")
  disk[1]="$loop:/dev/namzu-workspace"
  before=$(sha256sum <"$tmp/disk2")
  refused_run nz-agentimg-blkid -v "$tmp/blkid:/usr/sbin/blkid:ro" "${disk[@]}" >"$tmp/out"
  out=$(cat "$tmp/out")
  [[ $rc == 1 && $(sha256sum <"$tmp/disk2") == "$before" ]]
  ok "blkid exiting 4 on the disk: refused (exit 1) and the disk is left blank (rc $rc)"
  check "blkid exiting 4: says why, and the agent does not start" "$out" \
    "entrypoint.sh: blkid -p /dev/namzu-workspace exited 4 (output ''): refusing to format or mount it"
  [[ $out != *"namzu-agent listening"* ]]
  ok "blkid exiting 4: the agent does not start"
fi
exit $failed
