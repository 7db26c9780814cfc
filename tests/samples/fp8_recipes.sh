#!/usr/bin/env bash
# sample_fp8_recipes' claims: FP8 with no scale flushes >= 90% of the output gradients and does not
# learn (> 1.5x fp32's loss); current scaling ends within 5% of fp32 flushing < 1% of them, delayed
# scaling within 10% flushing < 5% (its first steps run on a scale of 1 while the history fills);
# MXFP8 flushes < 1% of them and ends within 10% of fp32; MXFP4 flushes >= 10% of them, at least ten
# times MXFP8's share.
set -uo pipefail
"$1" | awk '
  { print }
  function pct(s) { sub(/%/, "", s); return s + 0 }
  /^fp32 / { fp32 = $2 }
  /^bf16 \+ fp8-unscaled/ { unscaled = $4; unscaled_flush = pct($7) }
  /^bf16 \+ fp8-delayed/ { delayed = $4; delayed_flush = pct($7) }
  /^bf16 \+ fp8-current/ { current = $4; current_flush = pct($7) }
  /^bf16 \+ mxfp8/ { mx8 = $4; mx8_flush = pct($7) }
  /^bf16 \+ mxfp4/ { mx4_flush = pct($7) }
  END {
    ok = fp32 > 0 && unscaled_flush >= 90 && unscaled > 1.5 * fp32 && current_flush < 1 && current <= 1.05 * fp32 && current >= 0.95 * fp32 &&
         delayed_flush < 5 && delayed <= 1.10 * fp32 && delayed >= 0.90 * fp32 && mx8_flush < 1 && mx8 <= 1.10 * fp32 &&
         mx4_flush >= 10 && mx4_flush >= 10 * mx8_flush
    printf "fp32 %s; fp8 unscaled %s (%.2f%% flushed), delayed %s (%.2f%%), current %s (%.2f%%); mxfp8 %s (%.2f%%); mxfp4 %.2f%% flushed: %s\n",
           fp32, unscaled, unscaled_flush, delayed, delayed_flush, current, current_flush, mx8, mx8_flush, mx4_flush, ok ? "reproduced" : "NOT reproduced"
    exit ok ? 0 : 1 }'
