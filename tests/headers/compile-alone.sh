#!/bin/sh
# compile-alone: every header under lib/ compiles on its own, as the first and only include
# of a translation unit, with the project's warnings as errors. A header that leans on what its
# includer happened to include first fails here, named. lib/lite's headers (the tier of
# namzu-exec's static front) compile with no GLib on the include path at all, and see only
# lib/lite. TAP, one line a header.
# Usage: compile-alone.sh SOURCE_ROOT BUILD_ROOT CC [CC ARGS...]
set -u
src=$1 build=$2
shift 2
flags=$(pkg-config --cflags glib-2.0 gio-2.0 gio-unix-2.0 json-glib-1.0 libsoup-3.0 gnutls yaml-0.1 \
  libseccomp libnl-3.0 libnl-route-3.0) || { echo "Bail out! pkg-config failed"; exit 1; }
incs="-I$build"
for d in $(cd "$src" && find lib -name '*.h' -exec dirname {} + | sort -u); do
  incs="$incs -I$src/$d"
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
headers=$(cd "$src" && find lib -name '*.h' | sort)
n=$(echo "$headers" | wc -l)
[ "$n" -gt 0 ] || { echo "Bail out! no headers under $src/lib"; exit 1; }
echo "1..$n"
i=0 failed=0
for h in $headers; do
  i=$((i + 1))
  printf '#include "%s"\n' "$src/$h" > "$tmp/t.c"
  case $h in
    lib/lite/*) hflags="" hincs="-I$build -I$src/lib/lite" ;;
    *) hflags=$flags hincs=$incs ;;
  esac
  # shellcheck disable=SC2086 # flags are words
  if out=$("$@" -std=gnu11 -fsyntax-only -Wall -Wextra -Werror -Wno-unused-parameter \
      -Wno-missing-field-initializers -Wstrict-prototypes -Wshadow \
      -DGLIB_VERSION_MIN_REQUIRED=GLIB_VERSION_2_74 -DGLIB_VERSION_MAX_ALLOWED=GLIB_VERSION_2_74 \
      -DJSON_VERSION_MIN_REQUIRED=JSON_VERSION_1_6 -DJSON_VERSION_MAX_ALLOWED=JSON_VERSION_1_6 \
      -DSOUP_VERSION_MIN_REQUIRED=SOUP_VERSION_3_2 -DSOUP_VERSION_MAX_ALLOWED=SOUP_VERSION_3_2 \
      $hincs $hflags "$tmp/t.c" 2>&1); then
    echo "ok $i - $h"
  else
    failed=$((failed + 1))
    echo "not ok $i - $h"
    echo "$out" | sed 's/^/# /'
  fi
done
[ "$failed" -eq 0 ]
