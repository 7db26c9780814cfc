#!/usr/bin/env bash
# fpscope-gui headless under Xvfb: every view's screenshot shows what the view must show; follow
# mode survives missing, malformed, truncated and rewritten logs; --export writes whole files.
set -u
gui="$1" check="$2" fpscope="$3"
source "$(dirname "$0")/xvfb_session.sh"
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
headless() { "$gui" "$@"; }

# Every view after a short demo run (an fp32 baseline, then fp16 without loss scaling).
for view in training histogram heatmap curves what-if inspector export; do
  if headless --demo --frames 3 --view "$view" --screenshot "$work/$view.png" >"$work/$view.out" 2>&1 &&
     "$check" "$work/$view.png" "$view" >"$work/$view.check"; then
    ok
  else
    fail "view $view"; cat "$work/$view.out" "$work/$view.check" 2>/dev/null
  fi
done

# The checker itself can fail: a histogram is not an inspector.
if "$check" "$work/histogram.png" inspector >/dev/null; then fail "checker passed a histogram as an inspector"; else ok; fi

# --export: the Export view's actions, whole files the CLI reads back.
mkdir -p "$work/exported"
if headless --demo --frames 2 --export "$work/exported" 2>"$work/export.err" &&
   "$fpscope" analyze "$work/exported/run.jsonl" >/dev/null &&
   "$fpscope" analyze "$work/exported/histograms.csv" >/dev/null &&
   "$check" "$work/exported/fpscope-window.png" training >/dev/null; then
  ok
else
  fail "--export"; cat "$work/export.err"
fi
if headless --demo --frames 2 --export "$work/nowhere/at/all" 2>"$work/export-bad.err"; then
  fail "--export into a missing folder succeeded"
elif grep -q "nowhere/at/all" "$work/export-bad.err" && [[ ! -e "$work/nowhere" ]]; then
  ok
else
  fail "--export into a missing folder: $(cat "$work/export-bad.err")"
fi

# Following a log written by fpscope train.
"$fpscope" train --model 16-32-10 --activation tanh --steps 40 --batch 32 --out "$work/run.jsonl" 2>/dev/null >/dev/null
if headless --follow "$work/run.jsonl" --frames 3 --view histogram --screenshot "$work/follow.png" --report >"$work/follow.out" 2>&1 &&
   grep -q "snapshots 40 " "$work/follow.out" && ! "$check" "$work/follow.png" follow-error >/dev/null; then
  ok
else
  fail "follow of a good log (40 snapshots, no error swatch)"; cat "$work/follow.out"
fi

# The loss-scale preview moves the outline by whole binades: from 2^4 to 2^10 it moves six
# binades' width (the width --report prints), to the pixel the plot's rounding allows.
"$fpscope" train --model 16-32-10 --activation relu --precision fp16 --loss-scale none --steps 20 --batch 32 \
  --out "$work/fp16.jsonl" >/dev/null 2>&1
for k in 4 10; do
  headless --follow "$work/fp16.jsonl" --frames 3 --view histogram --preview-scale "2^$k" --screenshot "$work/preview$k.png" \
    --report >"$work/preview$k.out" 2>&1
  "$check" "$work/preview$k.png" histogram-ghost >"$work/preview$k.check"
done
read -r _ _ first4 last4 < <(grep "^ghost x" "$work/preview4.check")
read -r _ _ first10 last10 < <(grep "^ghost x" "$work/preview10.check")
per_binade=$(sed -n 's/.*: \([0-9.]*\) px per binade; preview 2^10, recorded 2^0$/\1/p' "$work/preview10.out")
if [[ -n "$per_binade" && -n "${last4:-}" && -n "${last10:-}" ]] &&
   awk -v a="$((first10 - first4))" -v b="$((last10 - last4))" -v w="$per_binade" \
     'BEGIN { d = 6 * w; exit !(a >= d - 1.5 && a <= d + 1.5 && b >= d - 1.5 && b <= d + 1.5) }'; then
  ok
else
  fail "preview outline from 2^4 to 2^10: moved $((${first10:-0} - ${first4:-0})) and $((${last10:-0} - ${last4:-0})) px, $per_binade px per binade"
  cat "$work/preview4.out" "$work/preview10.out" "$work/preview4.check" "$work/preview10.check"
fi
# What a followed log's outline cannot see is said above the plot, whole: in a window 900 wide
# the sentence wraps to three lines, where TextColored cut it off at the view's edge after one.
# (The count includes the table's subnormal swatch, in the same colour: 4 wrapped, 2 were it cut off.)
headless --follow "$work/fp16.jsonl" --frames 3 --view histogram --preview-scale 2^10 --width 900 --height 700 \
  --screenshot "$work/caveat.png" >"$work/caveat.out" 2>&1
caveat_lines=$("$check" "$work/caveat.png" histogram-caveat | sed -n 's/^caveat lines //p')
if [[ -n "$caveat_lines" && "$caveat_lines" -ge 3 ]]; then ok; else fail "the preview's caveat in a narrow window: ${caveat_lines:-no} lines"; cat "$work/caveat.out"; fi
# The step slider stays in the window: on the next line where the selectors leave it no room.
if "$check" "$work/caveat.png" step-slider >"$work/step-slider.check"; then ok; else fail "the step slider in a narrow window"; cat "$work/step-slider.check"; fi
# The float inspector in a window 1000 wide: fp64's cells on two lines, none under the view's edge.
if headless --frames 3 --view inspector --width 1000 --height 800 --screenshot "$work/inspector-narrow.png" >"$work/inspector-narrow.out" 2>&1 &&
   "$check" "$work/inspector-narrow.png" inspector-narrow >"$work/inspector-narrow.check"; then
  ok
else
  fail "the float inspector in a narrow window"; cat "$work/inspector-narrow.out" "$work/inspector-narrow.check" 2>/dev/null
fi
# The What-if view 1000 wide: the formats' table, its bars narrower, ends inside the view (the advice
# column ran past its edge with 320-pixel bars).
headless --follow "$work/fp16.jsonl" --frames 3 --view what-if --width 1000 --height 800 --report >"$work/what-if-narrow.out" 2>&1
read -r table_right view_right < <(sed -n 's/^what-if table right x \([0-9]*\) of view right x \([0-9]*\)$/\1 \2/p' "$work/what-if-narrow.out")
if [[ -n "${table_right:-}" && "$table_right" -gt 0 && "$table_right" -le "$view_right" ]]; then ok; else
  fail "the What-if table in a narrow window: right x ${table_right:-?} of ${view_right:-?}"; cat "$work/what-if-narrow.out"; fi
# The preview in every state: running (frames taken while it trains on), paused, finished and
# following a log, and the bands begin at the same pixels in all four: the axis belongs to the
# format. Following a log, the outline is the recorded values shifted: it sits 2^6 / 2^0 = 6
# binades right of the recorded bars (their right ends: 6 x px-per-binade, +1 for the outline's
# stroke, +-2 px of rounding). With a trainer in the window it is the next step re-run at 2^6
# (the report says which): another step's gradients, which nothing flushes downstream now, so its
# right end lies 5 to 9 binades right of the recorded bars (up to 16 while the run trains on).
state_run=(--model 16-32-10 --activation relu --precision fp16 --loss-scale none --batch 32 --lr 1024 --loss-weight 2^-10 --seed 3)
state_view=(--view histogram --preview-scale 2^6 --frames 3 --report)
headless "${state_run[@]}" "${state_view[@]}" --start --steps 0 --at-step 20 --screenshot "$work/state-running.png" >"$work/state-running.out" 2>&1
headless "${state_run[@]}" "${state_view[@]}" --start --steps 0 --pause-at-step 20 --screenshot "$work/state-paused.png" >"$work/state-paused.out" 2>&1
headless "${state_run[@]}" "${state_view[@]}" --start --steps 20 --screenshot "$work/state-finished.png" >"$work/state-finished.out" 2>&1
"$fpscope" train "${state_run[@]}" --steps 20 --out "$work/state.jsonl" >/dev/null 2>&1
headless --follow "$work/state.jsonl" "${state_view[@]}" --screenshot "$work/state-following.png" >"$work/state-following.out" 2>&1
edges_seen=""
for state in running paused finished following; do
  "$check" "$work/state-$state.png" histogram-ghost >"$work/state-$state.check"
  read -r _ _ _ ghost_last < <(grep "^ghost x" "$work/state-$state.check")
  read -r _ _ _ bars_last < <(grep "^bars x" "$work/state-$state.check")
  edges=$(grep "^band edges" "$work/state-$state.check")
  width=$(sed -n 's/.*: \([0-9.]*\) px per binade; preview 2^6, recorded 2^0$/\1/p' "$work/state-$state.out")
  swatch_ok=1
  if [[ "$state" != following ]] && ! "$check" "$work/state-$state.png" "swatch-$state" >/dev/null; then swatch_ok=0; fi
  if [[ -n "$width" && -n "${ghost_last:-}" && -n "${bars_last:-}" && "$swatch_ok" == 1 && -n "$edges" &&
        ( -z "$edges_seen" || "$edges" == "$edges_seen" ) ]] &&
     if [[ "$state" == following ]]; then
       grep -q "^preview outline: the recorded values shifted$" "$work/state-$state.out" &&
         awk -v d="$((ghost_last - bars_last))" -v w="$width" 'BEGIN { e = 6 * w + 1; exit !(d >= e - 2 && d <= e + 2) }'
     else
       # Paused and finished re-run the same step every time; running, whichever step is next when
       # the answer is asked for: its largest gradient may stand further right.
       most=$([[ "$state" == running ]] && echo 16 || echo 9)
       grep -q "^preview outline: the next step re-run$" "$work/state-$state.out" &&
         awk -v d="$((ghost_last - bars_last))" -v w="$width" -v most="$most" 'BEGIN { exit !(d >= 5 * w - 2 && d <= most * w + 3) }'
     fi; then
    ok
  else
    fail "preview while $state: outline $((${ghost_last:-0} - ${bars_last:-0})) px right of the bars at $width px per binade; '$edges' against '$edges_seen'; swatch $swatch_ok"
    cat "$work/state-$state.out" "$work/state-$state.check"
  fi
  edges_seen="$edges"
done
# One NaN injected into fc1's weight gradient at the last step: its bar, with --tensor and --kind picking it.
"$fpscope" train "${state_run[@]}" --steps 6 --inject nan@fc1:5 --out "$work/inject.jsonl" >/dev/null 2>&1
headless --follow "$work/inject.jsonl" --tensor fc1 --kind weight_gradient --frames 3 --screenshot "$work/inject.png" >/dev/null 2>&1
if "$check" "$work/inject.png" histogram-one-nan >/dev/null; then ok; else fail "the injected NaN's bar"; "$check" "$work/inject.png" histogram-one-nan; fi
# The same log in What-if: the NaN is in none of the shares, and a line in its colour says so.
headless --follow "$work/inject.jsonl" --view what-if --frames 3 --screenshot "$work/inject-what-if.png" >/dev/null 2>&1
if "$check" "$work/inject-what-if.png" what-if-non-finite >/dev/null; then ok; else fail "What-if's line on the injected NaN"; "$check" "$work/inject-what-if.png" what-if-non-finite; fi
headless --follow "$work/run.jsonl" --view what-if --frames 3 --screenshot "$work/clean-what-if.png" >/dev/null 2>&1
if "$check" "$work/clean-what-if.png" what-if-non-finite >/dev/null; then fail "What-if names infinities or NaNs in a run without any"; else ok; fi

# The app trains a GPT: its run, exported, holds the attention tensors by name.
mkdir -p "$work/gpt"
if headless --start --model gpt:layers=1,width=16,heads=2,context=8,vocab=64 --optimizer adamw --lr 0.003 --loss-weight 1 --steps 6 \
     --batch 4 --backend cpu --view histogram --tensor h0.attn.qkv --frames 2 --export "$work/gpt" >"$work/gpt.out" 2>&1 &&
   grep -q '"model":"gpt:layers=1,width=16,heads=2,context=8,vocab=64"' "$work/gpt/run.jsonl" &&
   [[ $(grep -c '"name":"h0.attn.softmax"' "$work/gpt/run.jsonl") -eq 6 ]] &&
   "$check" "$work/gpt/fpscope-window.png" histogram >/dev/null; then
  ok
else
  fail "the app training a GPT"; cat "$work/gpt.out"; head -c 600 "$work/gpt/run.jsonl" 2>/dev/null
fi

# Left alone, a window training a run draws paced frames only: what the window system says of a
# new window (exposed, focused, the pointer entering it and where the pointer is) is not input,
# which draws at full rate for a moment (it was: 0.75 s of frames beside every run started here).
if headless --start --model 16-32-10 --steps 300 --batch 32 --backend cpu --view histogram --frames 1 --report 2>&1 |
     grep -qx 'frames at full rate after input 0'; then
  ok
else
  fail "a window left alone drew frames at full rate while training"
fi

# The views show what the run's own format does until someone picks another: a bf16 run's target
# format is bf16 (not fp16's advice for a format it does not train in); --target-format wins.
small_run=(--start --model 16-8-4 --steps 3 --batch 8 --backend cpu --view histogram --frames 1 --report)
if headless "${small_run[@]}" --precision bf16 2>&1 | grep -qx 'target format bf16' &&
   headless "${small_run[@]}" --precision fp16 2>&1 | grep -qx 'target format fp16' &&
   headless "${small_run[@]}" --precision bf16 --target-format e4m3 2>&1 | grep -qx 'target format e4m3' &&
   headless "${small_run[@]}" --precision bf16 --target-format torch.float8_e4m3fn 2>&1 | grep -qx 'target format e4m3'; then
  ok
else
  fail "the target format follows the run's precision until one is chosen (by any of its names)"
fi

# Curves on a log written with --recipe fp8-current: the chosen operand's amax and scale lines;
# a run without a recipe draws neither.
"$fpscope" train --model 16-32-10 --precision bf16 --recipe fp8-current --steps 30 --batch 32 --out "$work/fp8.jsonl" >/dev/null 2>&1
# A followed log's target format is the run's own too (this one is bf16); an fp32 run's is left
# as it was (fp16); --target-format wins.
"$fpscope" train --model 16-8-4 --precision fp32 --steps 3 --batch 8 --out "$work/fp32.jsonl" >/dev/null 2>&1
if headless --follow "$work/fp8.jsonl" --view histogram --frames 1 --report 2>&1 | grep -qx 'target format bf16' &&
   headless --follow "$work/fp32.jsonl" --view histogram --frames 1 --report 2>&1 | grep -qx 'target format fp16' &&
   headless --follow "$work/fp8.jsonl" --target-format e5m2 --view histogram --frames 1 --report 2>&1 | grep -qx 'target format e5m2'; then
  ok
else
  fail "a followed log's target format is the run's own until one is chosen"
fi
headless --follow "$work/fp8.jsonl" --view curves --frames 3 --screenshot "$work/curves-fp8.png" >/dev/null 2>&1
if "$check" "$work/curves-fp8.png" curves-fp8 >/dev/null; then ok; else fail "Curves of an FP8 run"; "$check" "$work/curves-fp8.png" curves-fp8; fi
headless --follow "$work/run.jsonl" --view curves --frames 3 --screenshot "$work/curves-plain.png" >/dev/null 2>&1
if "$check" "$work/curves-plain.png" curves-fp8 >/dev/null; then fail "Curves drew FP8 scaling for a run without a recipe"; else ok; fi

# Curves' axes hold every loss (a quarter decade's rounding and 0.05 of margin either side) and
# every loss scale (whole powers of two, one more either side): the injected NaN skips a step and
# halves the scale.
"$fpscope" train --model 16-32-10 --precision fp16 --loss-scale dynamic --steps 30 --batch 32 --inject nan@fc1:9 \
  --out "$work/axes.jsonl" >/dev/null 2>&1
read -r loss_lo loss_hi scale_lo scale_hi < <(headless --follow "$work/axes.jsonl" --view curves --frames 2 --report 2>&1 |
  sed -n 's/^curves loss axis log10 \([-0-9.]*\) \.\. \([-0-9.]*\), scale axis log2 \([-0-9]*\) \.\. \([-0-9]*\)$/\1 \2 \3 \4/p')
if grep -o '"loss":[-0-9.e+]*\|"loss_scale":[-0-9.e+]*' "$work/axes.jsonl" |
   awk -F: -v lo="${loss_lo:-x}" -v hi="${loss_hi:-x}" -v slo="${scale_lo:-x}" -v shi="${scale_hi:-x}" '
     function floor_(x) { return x == int(x) || x > 0 ? int(x) : int(x) - 1 }
     $1 == "\"loss\"" { v = log($2) / log(10); if (!n++ || v < a) a = v; if (n == 1 || v > b) b = v }
     $1 == "\"loss_scale\"" { v = log($2) / log(2); if (!m++ || v < c) c = v; if (m == 1 || v > d) d = v }
     END { ceil_d = -floor_(-d)
           exit !(n > 0 && m > 0 && c < d && lo > a - 0.31 && lo <= a - 0.049 && hi >= b + 0.049 && hi < b + 0.31 &&
                  slo == floor_(c) - 1 && shi == ceil_d + 1) }'; then
  ok
else
  fail "Curves' axes: loss log10 ${loss_lo:-?} .. ${loss_hi:-?}, scale log2 ${scale_lo:-?} .. ${scale_hi:-?} against the log's losses and scales"
fi

# The Blocks view on a log written with --record-blocks mxfp4: fc1's weights against E2M1's window
# (normal, subnormal, flushed bands and bars); a log without block statistics says so instead.
"$fpscope" train "${state_run[@]}" --steps 6 --record-blocks mxfp4 --out "$work/blocks.jsonl" >/dev/null 2>&1
headless --follow "$work/blocks.jsonl" --tensor fc1 --kind weight --view blocks --frames 3 --screenshot "$work/blocks.png" >/dev/null 2>&1
if "$check" "$work/blocks.png" blocks >/dev/null; then ok; else fail "the Blocks view"; "$check" "$work/blocks.png" blocks; fi
headless --follow "$work/inject.jsonl" --view blocks --frames 3 --screenshot "$work/no-blocks.png" >/dev/null 2>&1
if "$check" "$work/no-blocks.png" blocks >/dev/null; then fail "the Blocks view drew bands for a log without block statistics"; else ok; fi

# Interactive, driven by xdotool as a person would: a window on a followed log that has been
# read draws nothing; a click on the Curves tab wakes it (frames at full rate) and switches the
# view; the PNG button saves the window as it shows that view; Ctrl+Q quits and --report prints
# what was drawn.
# (Positions for the default 1480x900 window at UI scale 1: the Curves tab at x 507, the PNG
# button at x 843, both at y 17.)
if command -v xdotool >/dev/null; then
  # Until the app's window is on the screen (up to 20 s), and half a second more for its first frames.
  window_up() { timeout 20 xdotool search --sync --onlyvisible --name "^fpscope$" >/dev/null; sleep 0.5; }
  mkdir -p "$work/interactive"
  gui_path=$(realpath "$gui")
  (cd "$work/interactive" && exec "$gui_path" --follow "$work/state.jsonl" --report >"$work/interactive.out" 2>&1) &
  app=$!
  sleep 3
  xdotool mousemove 1550 950  # off the window: no hover, nothing to redraw
  sleep 5  # past the 5 s after which a log that stopped growing is called quiet (drawn once more)
  pid_ticks() { awk '{print $14 + $15}' "/proc/$app/stat" 2>/dev/null || echo 0; }
  t0=$(pid_ticks); sleep 3; t1=$(pid_ticks)
  xdotool mousemove 507 17 sleep 0.3 click 1 sleep 0.5 mousemove 843 17 sleep 0.3 click 1 sleep 1
  xdotool search --name "^fpscope$" windowfocus --sync  # no window manager here to give it the keyboard
  xdotool key ctrl+q
  for _ in $(seq 50); do kill -0 "$app" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$app" 2>/dev/null; then kill "$app"; quit=0; else quit=1; fi
  wait "$app" 2>/dev/null
  if [[ "$quit" == 1 && -s "$work/interactive/fpscope-curves.png" ]] && grep -q "^frames " "$work/interactive.out" &&
     grep -q "^frames at full rate after input [1-9]" "$work/interactive.out" &&
     "$check" "$work/interactive/fpscope-curves.png" curves-followed >/dev/null && (( t1 - t0 <= 15 )); then
    ok
  else
    fail "interactive: quit by Ctrl+Q $quit, $(ls "$work/interactive"), idle CPU $((t1 - t0)) ticks in 3 s"
    cat "$work/interactive.out"
  fi
  # Zoom: three wheel clicks over the histogram show about half the binades (0.8^3 of 62), around
  # the pointer; --report gives the plot's binades on exit. Then a double-click goes back to the window.
  zoom_run() {  # ACTIONS...: xdotool actions over the plot, then Ctrl+Q; prints the report's histogram line
    (cd "$work/interactive" && exec "$gui_path" --follow "$work/state.jsonl" --report >"$work/zoom.out" 2>&1) &
    local zapp=$!
    window_up
    xdotool mousemove 900 500 sleep 0.3 "$@" sleep 0.5
    xdotool search --name "^fpscope$" windowfocus --sync
    xdotool key ctrl+q
    for _ in $(seq 50); do kill -0 "$zapp" 2>/dev/null || break; sleep 0.1; done
    kill "$zapp" 2>/dev/null; wait "$zapp" 2>/dev/null
    sed -n 's/^histogram x .* over binades \(-\{0,1\}[0-9]*\) \.\. \(-\{0,1\}[0-9]*\):.*/\1 \2/p' "$work/zoom.out"
  }
  read -r plain_lo plain_end < <(zoom_run sleep 0.1)
  read -r zoom_lo zoom_end < <(zoom_run click 4 sleep 0.2 click 4 sleep 0.2 click 4)
  read -r back_lo back_end < <(zoom_run click 4 sleep 0.3 click --repeat 2 --delay 80 1)
  echo "zoom: ${plain_lo:-?}..${plain_end:-?} -> ${zoom_lo:-?}..${zoom_end:-?} -> ${back_lo:-?}..${back_end:-?}"
  if [[ -n "${plain_lo:-}" && -n "${zoom_lo:-}" ]] && (( zoom_end - zoom_lo < (plain_end - plain_lo) * 7 / 10 )) &&
     (( zoom_lo > plain_lo )) && [[ "${back_lo:-}" == "$plain_lo" && "${back_end:-}" == "$plain_end" ]]; then
    ok
  else
    fail "histogram zoom: binades ${plain_lo:-?}..${plain_end:-?} unzoomed, ${zoom_lo:-?}..${zoom_end:-?} after three wheel clicks, ${back_lo:-?}..${back_end:-?} after a double-click"
  fi

  # A red tick in Curves, pointed at and clicked, opens its step's culprit in Histogram. Where the
  # tick is comes from --report of a headless run of the same window (kept as NAME-headless.out);
  # the window's own --report goes to NAME.out. click_tick LOG STEP NAME.
  click_tick() {
    local log=$1 step=$2 name=$3 left right steps top bottom x y
    read -r left right steps top bottom < <(headless --follow "$log" --view curves --frames 3 --report 2>/dev/null |
      tee "$work/$name-headless.out" |
      sed -n 's/^curves scale plot x \([0-9.]*\) \.\. \([0-9.]*\) over steps 0 \.\. \([0-9]*\), y \([0-9.]*\) \.\. \([0-9.]*\)$/\1 \2 \3 \4 \5/p')
    [[ -n "${steps:-}" ]] || return 0
    x=$(awk -v l="$left" -v r="$right" -v n="$steps" -v s="$step" 'BEGIN { printf "%d", l + (r - l) * s / n }')
    y=$(awk -v t="$top" -v b="$bottom" 'BEGIN { printf "%d", (t + b) / 2 }')
    (cd "$work/interactive" && exec "$gui_path" --follow "$log" --view curves --report >"$work/$name.out" 2>&1) &
    local app=$!
    window_up
    xdotool mousemove "$x" "$y" sleep 0.5 click 1 sleep 0.5 mousemove 900 40 sleep 0.3 mousemove 910 45 sleep 0.5
    xdotool search --name "^fpscope$" windowfocus --sync
    xdotool key ctrl+q
    for _ in $(seq 50); do kill -0 "$app" 2>/dev/null || break; sleep 0.1; done
    kill "$app" 2>/dev/null; wait "$app" 2>/dev/null
    echo "$x $y" >"$work/$name.at"
  }

  # A skipped step's: the step (recorded by the replay though not due), the tensor and its kind.
  "$fpscope" train --model 16-32-32-10 --steps 12 --batch 32 --record-every 5 --inject nan@fc2:7 --out "$work/culprit.jsonl" >/dev/null 2>&1
  click_tick "$work/culprit.jsonl" 7 culprit
  if grep -q "^shown: histogram at step 7, fc2 weight_gradient$" "$work/culprit.out" 2>/dev/null; then
    ok
  else
    fail "a click on the skipped step's tick (at $(cat "$work/culprit.at" 2>/dev/null)) did not open its culprit: $(grep '^shown' "$work/culprit.out" 2>/dev/null)"
  fi

  # A step that did not finish (the bridge's line for a loop that raised inside it): a red tick of
  # its own, counted apart from the skipped, whose click opens its culprit at the nearest recorded step.
  { cat "$work/culprit.jsonl"
    echo '{"step": 12, "loss": null, "loss_scale": 65536.0, "skipped": false, "finished": false, "culprit": {"name": "fc1", "kind": "activation", "fault": "inf", "format": "fp16", "format_largest": 65504.0, "largest": null, "position": 3, "captured": "as_stored"}}'
  } >"$work/unfinished.jsonl"
  click_tick "$work/unfinished.jsonl" 12 unfinished
  if grep -q "^curves red ticks: 1 skipped, 1 unfinished$" "$work/unfinished-headless.out" 2>/dev/null &&
     grep -q "^shown: histogram at step 10, fc1 activation$" "$work/unfinished.out" 2>/dev/null; then
    ok
  else
    fail "an unfinished step: $(grep '^curves red ticks' "$work/unfinished-headless.out" 2>/dev/null || echo 'no red ticks reported'); a click at $(cat "$work/unfinished.at" 2>/dev/null): $(grep '^shown' "$work/unfinished.out" 2>/dev/null)"
  fi

  # Reset while a run trains: the state goes back to idle (the swatch), nothing recorded is shown.
  mkdir -p "$work/reset"
  (cd "$work/reset" && exec "$gui_path" --start --steps 0 >/dev/null 2>&1) &
  app=$!
  window_up
  xdotool mousemove 234 46 sleep 0.3 click 1 sleep 1 mousemove 843 17 sleep 0.3 click 1 sleep 1  # Reset, then PNG
  xdotool search --name "^fpscope$" windowfocus --sync
  xdotool key ctrl+q
  for _ in $(seq 50); do kill -0 "$app" 2>/dev/null || break; sleep 0.1; done
  kill "$app" 2>/dev/null; wait "$app" 2>/dev/null
  if [[ -s "$work/reset/fpscope-histogram.png" ]] && "$check" "$work/reset/fpscope-histogram.png" swatch-idle >/dev/null; then
    ok
  else
    fail "Reset while training: $(ls "$work/reset")"; [[ -s "$work/reset/fpscope-histogram.png" ]] && "$check" "$work/reset/fpscope-histogram.png" swatch-idle
  fi

  # Keys typed faster than frames are drawn all arrive: four BackSpaces 1 ms apart take 123456 to
  # 12; then Ctrl+A selects the field and typing replaces it (the number field at x 497, y 40).
  keys_run() {  # COMMAND...: typing into the number field, then Return and Ctrl+Q; prints the report's inspector line
    (cd "$work/interactive" && exec "$gui_path" --idle --view inspector --inspect 123456 --report >"$work/keys.out" 2>&1) &
    local kapp=$!
    window_up
    xdotool search --name "^fpscope$" windowfocus --sync
    xdotool mousemove 497 40 sleep 0.3 click 1 sleep 0.5
    "$@"
    xdotool sleep 0.5 key Return sleep 0.3 key ctrl+q
    for _ in $(seq 50); do kill -0 "$kapp" 2>/dev/null || break; sleep 0.1; done
    kill "$kapp" 2>/dev/null; wait "$kapp" 2>/dev/null
    grep "^inspector fp16" "$work/keys.out"
  }
  select_all_and_type() { xdotool key --delay 1 ctrl+a && xdotool type --delay 1 0.5; }
  backspaced=$(keys_run xdotool key --delay 1 End BackSpace BackSpace BackSpace BackSpace)
  replaced=$(keys_run select_all_and_type)
  if [[ "$backspaced" == "inspector fp16 0x4A00 = 12" && "$replaced" == "inspector fp16 0x3800 = 0.5" ]]; then
    ok
  else
    fail "typing: four quick BackSpaces gave '$backspaced' (wanted 12), Ctrl+A and 0.5 gave '$replaced'"
  fi

  # Mesa's software rasteriser: one render thread in a window that can train here (on a machine of
  # 4 processors or fewer, where more took the trainer's cores), Mesa's own choice (one per
  # processor) in a window following a log, and the user's LP_NUM_THREADS where set.
  render_threads() {  # APP ARGUMENTS...: the number of llvmpipe threads of a window opened with them
    (cd "$work/interactive" && exec "$gui_path" "$@" >/dev/null 2>&1) &
    local rapp=$!
    window_up
    cat /proc/$rapp/task/*/comm 2>/dev/null | grep -c '^llvmpipe'
    kill "$rapp" 2>/dev/null; wait "$rapp" 2>/dev/null
  }
  processors=$(nproc)
  if (( processors >= 2 && processors <= 4 )); then
    threads_training=$(render_threads --idle)
    threads_following=$(render_threads --follow "$work/state.jsonl")
    threads_chosen=$(LP_NUM_THREADS=2 render_threads --idle)
    if [[ "$threads_training" == 1 && "$threads_following" == "$processors" && "$threads_chosen" == 2 ]]; then
      ok
    else
      fail "software GL render threads: $threads_training in a window that trains, $threads_following following a log ($processors processors), $threads_chosen with LP_NUM_THREADS=2"
    fi
  else
    echo "$processors processors: the software GL threads check is for 2 to 4"
  fi

  # The training panel's right edge in an 800 x 600 window: 330 px by default, 80 px narrower
  # after a drag of it 80 px to the left, and a double-click on it puts the default back; in a
  # 500 px window the default leaves the views more than half.
  panel_run() {  # WIDTH ACTIONS...: xdotool actions at the panel's edge, then Ctrl+Q; prints the report's panel width
    local width=$1
    shift
    (cd "$work/interactive" && exec "$gui_path" --follow "$work/state.jsonl" --width "$width" --height 600 --report >"$work/panel.out" 2>&1) &
    local papp=$!
    window_up
    "$@"
    xdotool search --name "^fpscope$" windowfocus --sync
    xdotool key ctrl+q
    for _ in $(seq 50); do kill -0 "$papp" 2>/dev/null || break; sleep 0.1; done
    kill "$papp" 2>/dev/null; wait "$papp" 2>/dev/null
    sed -n 's/^training panel \([0-9]*\) px wide in a window \([0-9]*\) px wide$/\1 \2/p' "$work/panel.out"
  }
  # The edge: the 8 px between the panel (from x 8) and the views.
  panel_default=$(panel_run 800 xdotool mousemove 700 300 sleep 0.3)
  panel_dragged=$(panel_run 800 xdotool mousemove 342 300 sleep 0.3 mousedown 1 sleep 0.2 mousemove 322 300 sleep 0.1 mousemove 302 300 sleep 0.1 mousemove 262 300 sleep 0.3 mouseup 1 sleep 0.3 mousemove 700 300 sleep 0.3)
  panel_reset=$(panel_run 800 xdotool mousemove 342 300 sleep 0.3 mousedown 1 sleep 0.2 mousemove 262 300 sleep 0.3 mouseup 1 sleep 0.3 click --repeat 2 --delay 80 1 sleep 0.3 mousemove 700 300 sleep 0.3)
  panel_small=$(panel_run 500 xdotool mousemove 450 300 sleep 0.3)
  if [[ "$panel_default" == "330 800" && "$panel_dragged" == "250 800" && "$panel_reset" == "330 800" && "$panel_small" == "218 500" ]]; then
    ok
  else
    fail "the training panel's edge: '$panel_default' by default, '$panel_dragged' after a drag 80 px left, '$panel_reset' after a double-click, '$panel_small' in a 500 px window (panel px, window px)"
  fi
else
  echo "xdotool not found: skipping the interactive checks (scripts/install-deps installs it)"
fi

# The Float inspector: 0x3C00 is fp16's bits for 1 (not the number 15360); 1e-40 in bf16 is its
# smallest subnormal, every digit of it (no truncation); 1 + 2^-11 in fp16 is a tie that
# round-to-nearest-even settles on 1.
inspect() { headless --idle --view inspector --frames 2 --report "$@" 2>&1; }
if inspect --inspect 0x3C00 --inspect-format fp16 | grep -qx "inspector fp16 0x3C00 = 1" &&
   inspect --inspect 1e-40 --inspect-format bf16 | grep -qx "inspector bf16 0x1 = 0.0000000000000000000000000000000000000000918354961579912115600575419704879435795832466228193376178712270530013483949005603790283203125" &&
   inspect --inspect-format fp16 --arithmetic "1 + 0.00048828125" |
     grep -qx "arithmetic 1 + 0.00048828125 in fp16: 0x3C00, lower 0x3C00, upper 0x3C01, a tie: the neighbour whose last bit is even; flags inexact"; then
  ok
else
  fail "inspector: bits input, full digits, the arithmetic panel's tie"
  inspect --inspect 0x3C00 --inspect-format fp16 | grep -E "^(inspector|arithmetic)"
fi

# The inspector's rows stay where they are whatever is typed: a number, bits, an infinity, a NaN,
# a subnormal (the bit cells a person clicks next do not move), and the Arithmetic panel's result
# is in view at the default window size.
rows_seen=""
rows_ok=1
for typed in 0.1 0x7C00 inf nan -1e-40 65504; do
  out=$(inspect --inspect "$typed" --inspect-format fp16)
  rows=$(grep "^inspector rows at y" <<<"$out")
  result_y=$(sed -n 's/^arithmetic result at y \([0-9]*\) of \([0-9]*\)$/\1 \2/p' <<<"$out")
  if [[ -z "$rows" || ( -n "$rows_seen" && "$rows" != "$rows_seen" ) ]] || ! awk -v r="$result_y" 'BEGIN { split(r, a, " "); exit !(a[1] > 0 && a[1] < a[2]) }'; then
    rows_ok=0
    echo "typed $typed: '$rows' (first: '$rows_seen'); arithmetic result at '$result_y'"
  fi
  rows_seen="$rows"
done
if [[ "$rows_ok" == 1 ]]; then ok; else fail "inspector: rows moved with what was typed, or the arithmetic result out of view"; fi

# --inspect-format selects the row it names: a custom format its own row (it once selected the
# eighth named row, e5m2fnuz, since more rows came), a dtype name the named row of its format.
if inspect --inspect 300 --inspect-format e3m4 | grep -qx "inspector e3m4 0x70 = inf" &&
   inspect --inspect 300 --inspect-format float8_e4m3fn | grep -qx "inspector e4m3 0x79 = 288"; then
  ok
else
  fail "inspector: --inspect-format selects the custom row, and the named row of a dtype name"
fi

# The new formats reach the app: GraphCore's e4m3b11fnuz in the inspector (its largest, 30, is
# 0x7F), and --target-format takes the MX elements and refuses what it does not know.
if inspect --inspect 30 --inspect-format e4m3b11fnuz | grep -qx "inspector e4m3b11fnuz 0x7F = 30" &&
   headless --idle --view histogram --target-format e2m1 --frames 1 >/dev/null 2>&1 &&
   ! headless --idle --target-format e9m9 --frames 1 >/dev/null 2>"$work/target.err" && grep -q "target-format 'e9m9'" "$work/target.err"; then
  ok
else
  fail "new formats in the app: e4m3b11fnuz in the inspector, --target-format e2m1, a bad --target-format"
fi

# fpscope train and the app write the same logs for the same settings: one_driver_logs.sh.

# --ui-scale 2 in a window twice the size: a 26 px font and every length doubled, the plot included.
headless --follow "$work/fp16.jsonl" --frames 3 --view histogram --preview-scale "2^10" --ui-scale 2 --width 2960 --height 1800 \
  --report >"$work/scaled.out" 2>&1
scaled_per_binade=$(sed -n 's/.*: \([0-9.]*\) px per binade; preview 2^10, recorded 2^0$/\1/p' "$work/scaled.out")
if grep -q "^ui scale 2.00 (font 26 px)" "$work/scaled.out" && grep -q "^ui scale 1.00 (font 13 px)" "$work/preview10.out" &&
   awk -v a="${per_binade:-0}" -v b="${scaled_per_binade:-0}" 'BEGIN { exit !(a > 0 && b / a > 1.98 && b / a < 2.02) }'; then
  ok
else
  fail "--ui-scale 2: $scaled_per_binade px per binade against $per_binade at scale 1"; cat "$work/scaled.out"
fi
# ReLU's exact zeros are a bar of their own, beside the binades; a scale of 2^40 gives infinities and NaNs.
"$fpscope" train --model 16-32-10 --activation relu --precision fp16 --loss-scale 1099511627776 --steps 4 --batch 32 \
  --out "$work/blown.jsonl" >/dev/null 2>&1
headless --follow "$work/blown.jsonl" --frames 3 --view histogram --screenshot "$work/blown.png" >/dev/null 2>&1
if "$check" "$work/preview10.png" histogram-specials >/dev/null && ! "$check" "$work/preview10.png" histogram-non-finite >/dev/null &&
   "$check" "$work/blown.png" histogram-non-finite >/dev/null; then
  ok
else
  fail "zero and inf/NaN bars"; "$check" "$work/preview10.png" histogram-specials; "$check" "$work/blown.png" histogram-non-finite
fi

# Saving a followed run keeps its log byte for byte, fields fpscope does not know included.
sed 's/"skipped":/"a_field_of_tomorrow":[1,"two"],"skipped":/' "$work/run.jsonl" >"$work/extended.jsonl"
mkdir -p "$work/saved"
if headless --follow "$work/extended.jsonl" --frames 2 --export "$work/saved" 2>"$work/saved.err" && cmp -s "$work/extended.jsonl" "$work/saved/run.jsonl"; then
  ok
else
  fail "--follow --export did not save the followed log byte for byte"; cat "$work/saved.err"
fi

# A missing log and a malformed one: the error in the window and on stderr, exit 1, no crash.
headless --follow "$work/missing.jsonl" --frames 3 --screenshot "$work/missing.png" 2>"$work/missing.err"
status=$?
if [[ $status == 1 ]] && grep -q "cannot read .*missing.jsonl" "$work/missing.err" && "$check" "$work/missing.png" follow-error >/dev/null; then ok
else fail "follow of a missing log: status $status, $(cat "$work/missing.err")"; fi
printf '{"schema_version": 1}\nnot json\n' >"$work/broken.jsonl"
headless --follow "$work/broken.jsonl" --frames 3 --screenshot "$work/broken.png" 2>"$work/broken.err"
status=$?
if [[ $status == 1 ]] && grep -q "broken.jsonl:2" "$work/broken.err" && "$check" "$work/broken.png" follow-error >/dev/null; then ok
else fail "follow of a malformed log: status $status, $(cat "$work/broken.err")"; fi

# A followed log truncated and rewritten while the app runs: it stays up and ends on the last file.
cp "$work/run.jsonl" "$work/live.jsonl"
headless --follow "$work/live.jsonl" --frames 240 --report >"$work/live.out" 2>"$work/live.err" &
app=$!
sleep 1.5
: >"$work/live.jsonl"                                # truncated in place
sleep 0.5
head -c 3000 "$work/run.jsonl" >"$work/live.jsonl"   # a partial rewrite, last line cut
sleep 0.5
"$fpscope" train --model 16-32-10 --steps 25 --batch 32 --seed 3 --out "$work/live.jsonl" 2>/dev/null >/dev/null  # replaced by rename
wait $app
status=$?
if [[ $status == 0 ]] && grep -q "snapshots 25 " "$work/live.out"; then ok
else fail "follow through truncation and rewrite: status $status, $(cat "$work/live.out" "$work/live.err")"; fi

# Bad arguments: one sentence, status 2, no window needed.
for args in "--view pie" "--frames 3 --screenshot" "--screenshot x.png" "--width 10"; do
  # shellcheck disable=SC2086
  if "$gui" $args >/dev/null 2>"$work/args.err"; then fail "accepted: $args"
  elif [[ $(wc -l <"$work/args.err") == 1 ]]; then ok
  else fail "args $args: $(cat "$work/args.err")"; fi
done
# No display at all: one sentence, status 1.
if env -u DISPLAY -u WAYLAND_DISPLAY "$gui" --demo >/dev/null 2>"$work/nodisplay.err"; then fail "ran without a display"
elif grep -q "cannot open a window" "$work/nodisplay.err"; then ok
else fail "no display: $(cat "$work/nodisplay.err")"; fi

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
