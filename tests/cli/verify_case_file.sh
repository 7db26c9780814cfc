#!/usr/bin/env bash
# One TestFloat case file through `fpscope verify`: the file must decompress whole, verify must
# exit 0, and it must report every case of the file as passed (a case skipped is a failure).
# Usage: verify_case_file.sh FPSCOPE FILE.gz FUNCTION ROUNDING_FLAG
set -uo pipefail
fpscope="$1" file="$2" function="$3" flag="$4"
cases=$(gzip -dc "$file" | grep -c .) || { echo "FAIL: $file does not decompress"; exit 1; }
result=$(gzip -dc "$file" | "$fpscope" verify "$function" "$flag" | tail -n 1)
status=$?
echo "$result"
if ((status != 0)); then echo "FAIL: verify (or gzip) exited with status $status"; exit 1; fi
if [[ "$result" != "$cases passed, 0 failed" ]]; then echo "FAIL: expected '$cases passed, 0 failed' for the $cases cases of $file"; exit 1; fi
echo "ok: all $cases cases of $(basename "$file")"
