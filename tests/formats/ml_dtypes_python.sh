#!/usr/bin/env bash
# Prints a Python that has numpy and ml_dtypes (from PyPI), or says there is none and exits 77
# (skipped). Looked for in $FPSCOPE_ML_DTYPES_PYTHON, the small venv scripts/test makes
# (~/.cache/fpscope/venv-ml-dtypes), scripts/test-torch's venv, and /usr/bin/python3.
for candidate in "${FPSCOPE_ML_DTYPES_PYTHON:-}" "$HOME/.cache/fpscope/venv-ml-dtypes/bin/python" \
                 "${FPSCOPE_TORCH_VENV:-$HOME/.cache/fpscope/venv-torch}/bin/python" /usr/bin/python3; do
  if [[ -n "$candidate" && -x "$candidate" ]] && "$candidate" -c "import ml_dtypes, numpy" 2>/dev/null; then
    echo "$candidate"
    exit 0
  fi
done
echo "ml_dtypes is not installed (scripts/test makes a small venv with it when PyPI answers): skipping the comparison" >&2
exit 77
