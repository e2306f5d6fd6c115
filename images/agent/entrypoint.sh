#!/bin/sh
# The Kubernetes agent image's entrypoint (spec reference-agent.md D.11.2).
#
#   entrypoint.sh                 resolve HOME, (as root) format-if-blank and mount
#                                 $NAMZU_WORKSPACE_DEVICE, drop to $NAMZU_AGENT_UID:GID and
#                                 exec tini -> namzu-agent
#   entrypoint.sh prestop         the workspace pod's lifecycle.preStop: sync, TERM tini, wait
#   entrypoint.sh --version|--help  namzu-agent's own (so `docker run IMAGE --version` names
#                                 the package the image carries)
set -eu

WORKSPACE_ROOT=${NAMZU_WORKSPACE_ROOT:-/workspace}
AGENT_UID=${NAMZU_AGENT_UID:-1001}
AGENT_GID=${NAMZU_AGENT_GID:-1001}
AGENT=/usr/bin/namzu-agent

fail() {
  echo "entrypoint.sh: $*" >&2
  exit 1
}

digits() {
  case $1 in
  '' | *[!0-9]*) return 1 ;;
  *) return 0 ;;
  esac
}

prestop() {
  sync -f "$WORKSPACE_ROOT" 2>/dev/null || true
  pid=${NAMZU_PRESTOP_INIT_PID:-1}
  digits "$pid" || pid=1
  name=${NAMZU_PRESTOP_INIT_NAME:-tini}
  comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
  if [ "$comm" != "$name" ]; then
    echo "entrypoint.sh: prestop: pid $pid is '$comm', not the '$name' this image starts — not signalling it; set NAMZU_PRESTOP_INIT_PID and NAMZU_PRESTOP_INIT_NAME for another init" >&2
    exit 0
  fi
  kill -TERM "$pid" 2>/dev/null || exit 0
  if digits "${NAMZU_PRESTOP_WAIT_SECONDS:-}"; then
    wait_s=$NAMZU_PRESTOP_WAIT_SECONDS
  else
    deadline_ms=${NAMZU_AGENT_SHUTDOWN_DEADLINE_MS:-15000}
    digits "$deadline_ms" || deadline_ms=15000
    wait_s=$(((deadline_ms + 999) / 1000 + 2))
  fi
  if sleep 0.1 2>/dev/null; then
    tick=0.1 ticks=$((wait_s * 10))
  else
    tick=1 ticks=$wait_s
  fi
  while [ "$ticks" -gt 0 ] && kill -0 "$pid" 2>/dev/null; do
    sleep "$tick"
    ticks=$((ticks - 1))
  done
  exit 0
}

case ${1:-} in
prestop) prestop ;;
--version | --help)
  exec "$AGENT" "$1"
  ;;
'') ;;
*) fail "unknown argument '$1' (prestop, --version or --help, or none to start the agent)" ;;
esac

digits "$AGENT_UID" || fail "NAMZU_AGENT_UID must be a number, got '$AGENT_UID'"
digits "$AGENT_GID" || fail "NAMZU_AGENT_GID must be a number, got '$AGENT_GID'"
command -v setpriv >/dev/null 2>&1 || fail "setpriv is not on PATH (util-linux)"

# ---- HOME: the passwd entry's, unless it is missing or inside the workspace; else a private
# directory in /tmp.
under_workspace() {
  case $1 in
  "$WORKSPACE_ROOT" | "$WORKSPACE_ROOT"/*) return 0 ;;
  *) return 1 ;;
  esac
}
owned() {
  [ ! -L "$1" ] && [ -d "$1" ] && [ "$(stat -c %u "$1")" = "$AGENT_UID" ]
}
adopt_home() {
  mkdir -p "$1" && chown "$AGENT_UID:$AGENT_GID" "$1" || return 1
  chmod u+rwx,go-w "$1" 2>/dev/null || true
  owned "$1"
}
home='' user=''
entry=$(getent passwd "$AGENT_UID" 2>/dev/null || true)
if [ -n "$entry" ]; then
  passwd_home=$(printf '%s\n' "$entry" | cut -d: -f6)
  if [ -n "$passwd_home" ] && ! under_workspace "$passwd_home" && adopt_home "$passwd_home"; then
    home=$passwd_home user=$(printf '%s\n' "$entry" | cut -d: -f1)
  fi
fi
if [ -z "$home" ]; then
  home=/tmp/namzu-home-$AGENT_UID
  if { [ -d "$home" ] || mkdir -m 0700 "$home" 2>/dev/null; } && chown "$AGENT_UID:$AGENT_GID" "$home" 2>/dev/null \
    && chmod 0700 "$home" && owned "$home"; then
    user=namzu
  else
    fail "no usable HOME for uid $AGENT_UID (neither its passwd entry's nor $home)"
  fi
fi
export HOME="$home" USER="$user" LOGNAME="$user"
export XDG_CACHE_HOME="$HOME/.cache" XDG_CONFIG_HOME="$HOME/.config"

# namzu-agent reads NAMZU_AGENT_UID/GID as half of its own privilege separation (docs/agent.md):
# here they name the ids this script drops to, so they stop here.
unset NAMZU_AGENT_UID NAMZU_AGENT_GID

if [ "$(id -u)" != 0 ]; then
  if [ -n "${NAMZU_WORKSPACE_DEVICE:-}" ]; then
    fail "NAMZU_WORKSPACE_DEVICE is set but this container runs as uid $(id -u): formatting and mounting the workspace disk needs root (a privileged container)"
  fi
  export NAMZU_SANDBOX_WORKSPACE="$WORKSPACE_ROOT"
  exec setpriv --no-new-privs -- /usr/bin/tini -- "$AGENT"
fi

dev=${NAMZU_WORKSPACE_DEVICE:-}
if [ -n "$dev" ] && [ -b "$dev" ]; then
  for tool in blkid dd mkfs.ext4 mount chown; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is not on PATH: refusing to touch $dev"
  done
  # Never format a disk that already has a filesystem: only blkid's "nothing found" (exit 2)
  # lets mkfs run; any other answer it cannot give refuses.
  status=0
  fstype=$(blkid -p -o value -s TYPE "$dev") || status=$?
  if [ "$status" = 0 ] && [ -n "$fstype" ]; then
    :
  elif [ "$status" = 2 ]; then
    dd if="$dev" of=/dev/null bs=512 count=1 2>/dev/null || fail "cannot read $dev: refusing to format it"
    mkfs.ext4 -F "$dev" >/dev/null || fail "mkfs.ext4 $dev failed"
  else
    fail "blkid -p $dev exited $status (output '$fstype'): refusing to format or mount it"
  fi
  mkdir -p "$WORKSPACE_ROOT"
  mount -o noatime,nodev,nosuid "$dev" "$WORKSPACE_ROOT" || fail "cannot mount $dev on $WORKSPACE_ROOT"
  chown "$AGENT_UID:$AGENT_GID" "$WORKSPACE_ROOT"
elif [ -n "$dev" ]; then
  echo "entrypoint.sh: NAMZU_WORKSPACE_DEVICE=$dev is not a block device: not mounting it" >&2
fi
export NAMZU_SANDBOX_WORKSPACE="$WORKSPACE_ROOT"
exec setpriv --reuid="$AGENT_UID" --regid="$AGENT_GID" --clear-groups --inh-caps=-all \
  --bounding-set=-all --no-new-privs -- /usr/bin/tini -- "$AGENT"
