#!/usr/bin/env bash
# fpscope-gui's responsiveness under Xvfb (software GL), with its baselines in the same run:
#  1. median frame time of every view while following a run log of 10,000 steps x 8 tensors;
#  2. training throughput with the app open vs headless `fpscope train`, same settings.
# Usage: bench/gui_responsiveness.sh BUILD_DIR
set -euo pipefail
build="${1:-build}"
gui="$build/gui/fpscope-gui"
fpscope="$build/cli/fpscope"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
headless() { xvfb-run -a -s "-screen 0 1600x1000x24" "$gui" "$@"; }

"$fpscope" train --model 64-64-10 --steps 10000 --batch 32 --out "$work/big.jsonl" >/dev/null 2>&1
echo "frame times, following 10,000 steps x 8 tensors (64-64-10: 2 layers x 4 kinds), 300 frames each:"
for view in histogram heatmap curves what-if inspector export; do
  printf '  %-10s ' "$view"
  headless --follow "$work/big.jsonl" --frames 300 --view "$view" --report 2>/dev/null | sed -E 's/ +snapshots.*//'
done

settings=(--model 784-256-256-10 --activation relu --precision fp16 --loss-scale dynamic --steps 400 --batch 128 --lr 0.01 --seed 1)
rate_cli() { "$fpscope" train "${settings[@]}" "$@" 2>&1 | tr '\r' '\n' | grep -Eo '[0-9.]+ steps/s' | tail -1 | cut -d' ' -f1; }
echo "training throughput, ${settings[*]}:"
for run in 1 2 3; do
  plain=$(rate_cli)
  logged=$(rate_cli --out "$work/cli.jsonl")
  app=$(headless "${settings[@]}" --loss-weight-log2 0 --start --frames 1 --view heatmap --report 2>/dev/null | grep -Eo '\(([0-9.]+) steps/s' | tr -d '(' | cut -d' ' -f1)
  awk -v p="$plain" -v l="$logged" -v a="$app" 'BEGIN {
    printf "  run %d: fpscope train %.1f steps/s (no log), %.1f (writing the log); fpscope-gui %.1f: %.2fx and %.2fx\n", '"$run"', p, l, a, a / p, a / l }'
done
