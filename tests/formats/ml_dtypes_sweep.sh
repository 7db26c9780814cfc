#!/usr/bin/env bash
# Every narrow format against ml_dtypes, exhaustively (tests/exhaustive/ml_dtypes_formats.cpp).
# ml_dtypes comes from PyPI: scripts/test-torch's venv has it (FPSCOPE_TORCH_VENV to point
# elsewhere); without it this says so and exits 77 (skipped).
# Usage: ml_dtypes_sweep.sh PATH/TO/exhaustive_ml_dtypes_formats
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=""
for candidate in "${FPSCOPE_TORCH_VENV:-$HOME/.cache/fpscope/venv-torch}/bin/python" /usr/bin/python3; do
  if [[ -x "$candidate" ]] && "$candidate" -c "import ml_dtypes, numpy" 2>/dev/null; then python="$candidate"; break; fi
done
if [[ -z "$python" ]]; then
  echo "ml_dtypes is not installed (scripts/test-torch makes a venv with it): skipping the comparison"
  exit 77
fi
tables="$(mktemp "${TMPDIR:-/tmp}/fpscope-ml-dtypes.XXXXXX")"
trap 'rm -f "$tables"' EXIT
"$python" "$here/ml_dtypes_tables.py" "$tables" || exit $?
"$1" "$tables"
