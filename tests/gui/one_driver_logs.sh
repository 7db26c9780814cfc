#!/usr/bin/env bash
# One training driver: fpscope train --out and fpscope-gui's headless --export write the same run
# log, byte for byte but for the run id, for the same settings -- the example's defaults, a GPT's
# own defaults, and runs that set the precision, the scaler, the recording interval, a recipe and
# an injected fault.
set -u
gui="$1" fpscope="$2"
source "$(dirname "$0")/xvfb_session.sh"
passed=0
failed=0

without_run_id() { sed 's/"run_id":"[0-9a-f]*"/"run_id":""/' "$1"; }

# same NAME STEPS [OPTION ...]: both front ends train STEPS steps with the options.
same() {
  local name="$1" steps="$2"
  shift 2
  mkdir -p "$work/$name"
  if ! "$fpscope" train "$@" --steps "$steps" --out "$work/$name/cli.jsonl" >"$work/$name/cli.out" 2>&1; then
    failed=$((failed + 1)); echo "FAIL $name: fpscope train failed"; cat "$work/$name/cli.out"; return
  fi
  if ! "$gui" --start "$@" --steps "$steps" --frames 1 --width 640 --height 400 --export "$work/$name" >"$work/$name/app.out" 2>&1; then
    failed=$((failed + 1)); echo "FAIL $name: fpscope-gui failed"; cat "$work/$name/app.out"; return
  fi
  if [[ $(wc -l <"$work/$name/cli.jsonl") -eq $((steps + 1)) ]] &&
     cmp -s <(without_run_id "$work/$name/cli.jsonl") <(without_run_id "$work/$name/run.jsonl"); then
    passed=$((passed + 1)); echo "ok   $name: $((steps + 1)) lines, the same bytes"
  else
    failed=$((failed + 1)); echo "FAIL $name: the logs differ"
    diff <(without_run_id "$work/$name/cli.jsonl") <(without_run_id "$work/$name/run.jsonl") | head -4 | cut -c1-300
  fi
}

gpt=gpt:layers=1,width=16,heads=2,context=8,vocab=64
same example 12
same mlp-bf16-dynamic 10 --model 16-32-10 --precision bf16 --loss-scale dynamic --record-every 3 --batch 32
same mlp-pure-static-inject 8 --model 16-32-10 --activation relu --precision fp16-pure --loss-scale 2^12 --inject inf@fc2:4 --batch 32
same mlp-recipe 6 --model 16-32-10 --precision bf16 --recipe fp8-delayed --amax-history 4 --optimizer adamw --weight-decay 0.01 --lr 0.01
same gpt-defaults 6 --model "$gpt"
same gpt-fp16-dynamic 6 --model "$gpt" --precision fp16 --loss-scale dynamic --record-every 2 --round stochastic --seed 9

echo "one driver: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
