#!/usr/bin/env bash
# Installs fpscope from BUILD into a temporary prefix, then configures, builds and runs the
# consumer project against it with find_package(fpscope): the installed package works.
# Usage: run.sh BUILD_DIR CONSUMER_SOURCE_DIR [CXX_FLAGS [LINKER_FLAGS]]   (the build's own, so
# that a sanitized build's archive finds its runtime)
set -euo pipefail
build="$1" source="$2" cxx_flags="${3:-}" linker_flags="${4:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
cmake -S "$source" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$cxx_flags" -DCMAKE_EXE_LINKER_FLAGS="$linker_flags" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
echo "installed: $(cd "$work/prefix" && find . -type f | sort | tr '\n' ' ')"
"$work/build/consumer"
