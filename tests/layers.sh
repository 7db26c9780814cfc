#!/usr/bin/env bash
# The import graph, enforced: core <- snapshot <- analyzer and engine (gpu) <- cli and gui, with
# nothing reaching up or sideways (the engine never includes the analyzer, nor the analyzer the
# engine), and no folder including another folder's src/. Prints each violation; fails on any.
set -u
root="$1"
cd "$root" || exit 1
failed=0
# folder (files under it) : the fpscope/<area> headers it may include
check() {
  local folder="$1" allowed="$2" prune="${3:-}"
  local files
  files=$(find "$folder" \( -path "$prune" -prune \) -o \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.inl' \) -print)
  while IFS= read -r line; do
    [[ -z "$line" ]] && continue
    local area
    area=$(sed -E 's/.*#include "fpscope\/([a-z_]+)\/.*/\1/' <<<"${line#*:}")
    if [[ " $allowed " != *" $area "* ]]; then echo "layer violation: $line"; failed=1; fi
  done < <(grep -Hn '#include "fpscope/' $files)
  # Another folder's src/, by a relative path.
  if grep -Hn '#include "\.\./' $files; then echo "layer violation: a relative include above (another folder's src/)"; failed=1; fi
}
check core "core"
check analyzer/snapshot "core snapshot"
check analyzer "core snapshot analyzer" analyzer/snapshot
check gpu "core snapshot gpu"
check cli "core snapshot analyzer gpu"
check gui "core snapshot analyzer gpu"
check samples "core snapshot analyzer gpu"
# The device step and the CUDA backend share the engine's headers, never the CPU backend's private
# ones (gpu/src/cpu/).
if grep -Hn '#include "\(.*/\)\?cpu/' gpu/src/cuda/* gpu/src/device_*; then
  echo "layer violation: the device step or the CUDA backend includes the CPU backend's private headers (above)"
  failed=1
fi
if ((failed == 0)); then echo "ok: core <- snapshot <- analyzer, gpu <- cli, gui; nothing reaches up; the device step apart from cpu/"; fi
exit $failed
