# Sourced by the GUI tests: skips (exit 77) without Xvfb; else makes $work, starts one virtual X
# server for the whole test (tests/x_server.sh; DISPLAY exported), and removes both at exit.
# Under AddressSanitizer the leak check is off for what the tests run: Mesa's driver, unloaded at
# exit, leaves allocations LeakSanitizer can only attribute to "<unknown module>"; every other
# error is still checked (the data side is leak-checked by gpu_tests, analyzer_tests, the CLI's).
if ! command -v Xvfb >/dev/null; then
  echo "Xvfb not found: skipping the GUI tests (scripts/install-deps installs xvfb)"
  exit 77
fi
source "$(dirname "${BASH_SOURCE[0]}")/../x_server.sh"
work=$(mktemp -d)
x_server_pid=""
trap 'kill $x_server_pid 2>/dev/null; rm -rf "$work"' EXIT
start_x_server "$work" || { echo "Xvfb did not start: $(cat "$work/xvfb.log")"; exit 1; }
export DISPLAY="$x_display"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
