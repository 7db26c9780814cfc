#!/usr/bin/env bash
# scripts/build-progress (what scripts/run shows while it builds) prints each share as soon as the
# build's line for it arrives, not when the build ends: each line is written only after the share
# for the one before has been read back. Also: Make's percentages, and a failing unit's errors
# shown under Ninja.
set -u
progress="${1:-$(dirname "$0")/../scripts/build-progress}"
failed=0
coproc filter { "$progress"; }
expect() {  # LINE WANTED: writes LINE to the filter, then reads WANTED back within 20 s
  ((failed)) && return
  printf '%s\n' "$1" >&"${filter[1]}"
  local got=""
  if ! IFS= read -t 20 -r got <&"${filter[0]}" || [[ "$got" != "$2" ]]; then
    echo "FAIL: after '$1' the filter printed '${got}' (wanted '$2' before the build's next line)"
    failed=1
  fi
}
expect "[1/10] Building CXX object core/a.o" "  10%"
expect "core/a.cpp:1: error: something" "core/a.cpp:1: error: something"
expect "[5/10] Building CXX object core/b.o" "  50%"
expect "[10/10] Linking CXX executable cli/fpscope" "  100%"
exec {filter[1]}>&-
wait "$filter_PID"
make_shares=$(printf '[  3%%] a\n[ 12%%] b\nmake: noise\n[ 19%%] c\n[100%%] d\n' | "$progress" | tr '\n' ' ')
if [[ "$make_shares" != "  3%   12%   100% " ]]; then echo "FAIL: Make's lines gave '$make_shares'"; failed=1; fi
((failed)) || echo "ok: each share as its line arrives; Make's percentages; errors shown under Ninja"
exit $failed
