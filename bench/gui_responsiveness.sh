#!/usr/bin/env bash
# fpscope-gui's responsiveness under Xvfb (software GL), with its baselines in the same run:
#  1. frame times (median, p95) and peak memory of every view after following run logs of
#     10,000 and 100,000 steps x 8 tensors (the log is read on its own thread; long runs are
#     thinned to the app's snapshot budget);
#  2. CPU use of an idle window (a followed log that has stopped growing), against one core;
#  3. training throughput with the app open vs headless `fpscope train`, same settings: five
#     rounds, the app first in every other one, each round's ratios and their medians (the
#     machine's speed drifts by more than the app costs, so one pair says little).
# Usage: bench/gui_responsiveness.sh BUILD_DIR [--throughput-only]
set -euo pipefail
if [[ "${1:-}" == --idle-cpu ]]; then
  # Idle: the window stays open on the followed log (no --frames); once it has read the log and
  # settled, its CPU time over 10 s from /proc (clock ticks; 100% = one core). Run under xvfb-run.
  "$2" --follow "$3" --view histogram >/dev/null 2>&1 &
  pid=$!
  sleep 20
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep 10
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "idle window (the 100,000-step log read, nothing changing): %.1f%% of one core over 10 s\n", 100 * t / hz / 10 }'
  exit 0
fi
build="${1:-build}"
gui="$build/gui/fpscope-gui"
fpscope="$build/cli/fpscope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
headless() { xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$@"; }
load() { awk '{ printf "load average %s (1 min), %s (5 min)", $1, $2 }' /proc/loadavg; }
echo "$(nproc) cores; $(load) before"

throughput_only=false
[[ "${2:-}" == --throughput-only ]] && throughput_only=true
$throughput_only || for steps in 10000 100000; do
  "$fpscope" train --model 64-64-10 --steps "$steps" --batch 32 --out "$work/big.jsonl" >/dev/null 2>&1
  echo "following $steps steps x 8 tensors (64-64-10: 2 layers x 4 kinds), 300 frames each ($(load)):"
  for view in histogram heatmap curves what-if blocks inspector export; do
    printf '  %-10s ' "$view"
    headless --follow "$work/big.jsonl" --frames 300 --view "$view" --report 2>/dev/null |
      awk '/^frames [0-9]/ { sub(/ +snapshots.*/, ""); frames = $0 } /^memory/ { sub(/^memory: /, ""); memory = $0 } END { print frames "; " memory }'
  done
done

$throughput_only || xvfb-run -a -s "-screen 0 1600x1000x24" bash "$0" --idle-cpu "$gui" "$work/big.jsonl"

for settings_name in mlp gpt; do
if [[ $settings_name == mlp ]]; then
  settings=(--model 784-256-256-10 --activation relu --precision fp16 --loss-scale dynamic --steps 1500 --batch 128 --lr 0.01 --seed 1)
else  # the GPT at its own defaults (AdamW, batches of 16 sequences, the loss unweighted)
  settings=(--model gpt:layers=2,width=128,heads=4,context=64 --precision bf16 --steps 300 --seed 1)
fi
# The app and fpscope train share their defaults (training_defaults), so the same settings
# train the same run in both.
# train prints its steps/s only to a terminal: `script` gives it one.
rate_cli() {
  script -qec "$(printf '%q ' "$fpscope" train "${settings[@]}" "$@")" /dev/null 2>&1 | tr '\r' '\n' | grep -Eo '[0-9.]+ steps/s' | tail -1 | cut -d' ' -f1
}
echo "training throughput, ${settings[*]}:"
rate_app() {
  headless "${settings[@]}" --start --frames 1 --view heatmap --report 2>/dev/null | grep -Eo '\(([0-9.]+) steps/s' | tr -d '(' | cut -d' ' -f1
}
ratios=()
for run in 1 2 3 4 5; do
  if (( run % 2 == 0 )); then
    app=$(rate_app); plain=$(rate_cli); logged=$(rate_cli --out "$work/cli.jsonl")
  else
    plain=$(rate_cli); logged=$(rate_cli --out "$work/cli.jsonl"); app=$(rate_app)
  fi
  awk -v p="$plain" -v l="$logged" -v a="$app" -v r="$run" 'BEGIN {
    printf "  round %d%s: fpscope train %.1f steps/s (no log), %.1f (writing the log); fpscope-gui %.1f: %.2fx and %.2fx\n", r, (r % 2 == 0 ? " (app first)" : ""), p, l, a, a / p, a / l }'
  ratios+=("$(awk -v p="$plain" -v l="$logged" -v a="$app" 'BEGIN { printf "%.4f %.4f", a / p, a / l }')")
done
printf '%s\n' "${ratios[@]}" | sort -n -k1,1 | awk 'NR == 3 { printf "  median of the rounds: %.2fx of fpscope train without a log, ", $1 }'
printf '%s\n' "${ratios[@]}" | sort -n -k2,2 | awk 'NR == 3 { printf "%.2fx of it writing the log\n", $2 }'
done
echo "$(load) after"
