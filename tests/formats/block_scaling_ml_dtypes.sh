#!/usr/bin/env bash
# fpscope quantize against NumPy + ml_dtypes (block_scaling_ml_dtypes.py); skipped (77) without ml_dtypes.
# Usage: block_scaling_ml_dtypes.sh PATH/TO/fpscope
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="$("$here/ml_dtypes_python.sh")" || exit 77
exec "$python" "$here/block_scaling_ml_dtypes.py" "$1"
