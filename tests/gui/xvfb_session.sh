# Sourced by the GUI tests: skips (exit 77) without Xvfb; else makes $work, starts one virtual X
# server on a free display for the whole test (DISPLAY exported), and removes both at exit.
# Under AddressSanitizer the leak check is off for what the tests run: Mesa's driver, unloaded at
# exit, leaves allocations LeakSanitizer can only attribute to "<unknown module>"; every other
# error is still checked (the data side is leak-checked by gpu_tests, analyzer_tests, the CLI's).
if ! command -v Xvfb >/dev/null; then
  echo "Xvfb not found: skipping the GUI tests (scripts/install-deps installs xvfb)"
  exit 77
fi
work=$(mktemp -d)
display=99
while [[ -e /tmp/.X$display-lock ]]; do display=$((display + 1)); done
Xvfb ":$display" -screen 0 1600x1000x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [[ -e /tmp/.X11-unix/X$display ]] && break; sleep 0.05; done
export DISPLAY=":$display"
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
