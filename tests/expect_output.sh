#!/usr/bin/env bash
# Runs a test command and passes only if it exits 0 AND its output (stdout and stderr together)
# matches a Perl regular expression over the whole text ('.' matches newlines too, as in CTest's
# own regular expressions). CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit status.
# Usage: expect_output.sh REGEX -- command [args...]
set -u
regex="$1"
shift 2
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output"
if ((status != 0)); then
  echo "expect_output: the command exited with status $status"
  exit 1
fi
if ! REGEX="$regex" perl -0777 -ne 'exit(/$ENV{REGEX}/s ? 0 : 1)' <<<"$output"; then
  echo "expect_output: the output does not match /$regex/"
  exit 1
fi
