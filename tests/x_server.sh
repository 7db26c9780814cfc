# Sourced by the tests that open the app's window. start_x_server DIR starts a virtual X server
# (Xvfb, 1600 x 1000) on a display it picks itself (-displayfd: two tests starting one at once
# never take the same), waits until it accepts connections, and sets x_display (":N") and
# x_server_pid; its log is DIR/xvfb.log. Returns 1 when the server did not start within 10 s.
# The caller exports DISPLAY="$x_display" if the whole test is to use it, and kills x_server_pid.
start_x_server() {
  local dir="$1" number=""
  : >"$dir/xvfb.display"
  Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp 3>"$dir/xvfb.display" >"$dir/xvfb.log" 2>&1 &
  x_server_pid=$!
  for _ in $(seq 200); do
    read -r number <"$dir/xvfb.display" 2>/dev/null
    [[ -n "$number" ]] && break
    kill -0 "$x_server_pid" 2>/dev/null || break
    sleep 0.05
  done
  [[ -n "$number" ]] || return 1
  x_display=":$number"
}
