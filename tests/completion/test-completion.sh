#!/usr/bin/env bash
# Drives completions/namzu with bash-completion's helpers against the built tools and a fake
# namzu-ls, and checks COMPREPLY. Args: SOURCE_DIR TOOLS_DIR. TAP output.
src=$1 tools=$2
bc=${NZ_BASH_COMPLETION:-/usr/share/bash-completion/bash_completion}
if [[ ! -r $bc ]]; then
    if [[ -n $CI ]]; then echo "1..1"; echo "not ok 1 bash-completion missing ($bc)"; exit 1; fi
    echo "1..0 # SKIP bash-completion not installed"; exit 0
fi
fake=$(mktemp -d); trap 'rm -rf "$fake"' EXIT
cat > "$fake/namzu-ls" <<'EOS'
#!/bin/sh
echo '{"id":"sbx-alpha","backend":"container:bwrap","status":"running"}'
echo '{"id":"sbx-beta","backend":"container:docker","status":"dead"}'
echo '{"id":"$(touch /tmp/pwned)","backend":"container:bwrap"}'
EOS
chmod +x "$fake/namzu-ls"
export PATH="$fake:$tools:$PATH"
source "$bc"
source "$src/completions/namzu"
n=0 fail=0
comp() { # expected-substring-list... -- words...
    local want=() w
    while [[ $1 != -- ]]; do want+=("$1"); shift; done; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    _namzu "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    n=$((n + 1))
    for w in "${want[@]}"; do
        if [[ " ${COMPREPLY[*]} " != *" $w "* ]]; then
            echo "not ok $n '$*' lacks $w (got: ${COMPREPLY[*]})"; fail=1; return
        fi
    done
    echo "ok $n $*"
}
echo "1..7"
comp --sandbox -- namzu-exec --s
comp container:bwrap container:docker container:runsc -- namzu-create --backend ""
comp profile check proxy relay set isolate -- namzu-egress ""
comp sbx-alpha sbx-beta -- namzu-exec --sandbox ""
comp --no-tcp --unix -- namzu-egress proxy --
comp validate translate -- namzu-egress profile ""
n=$((n + 1))
if [[ -e /tmp/pwned ]] || [[ " ${COMPREPLY[*]} " == *'$('* ]]; then echo "not ok $n an id with shell syntax was offered"; fail=1; else echo "ok $n ids with shell syntax are dropped"; fi
exit $fail
