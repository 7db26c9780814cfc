#!/usr/bin/env bash
# Every narrow format against ml_dtypes (tests/exhaustive/ml_dtypes_formats.cpp): all 2^32 float32
# inputs, or with --sample every rounding boundary (seconds; CI runs it). ml_dtypes comes from
# PyPI (tests/formats/ml_dtypes_python.sh says where it is looked for); without it this says so
# and exits 77 (skipped).
# Usage: ml_dtypes_sweep.sh PATH/TO/exhaustive_ml_dtypes_formats [--sample]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="$("$here/ml_dtypes_python.sh")" || exit 77
tables="$(mktemp "${TMPDIR:-/tmp}/fpscope-ml-dtypes.XXXXXX")"
trap 'rm -f "$tables"' EXIT
"$python" "$here/ml_dtypes_tables.py" "$tables" ${2:+"$2"} || exit $?
"$1" "$tables"
