#!/usr/bin/env bash
# sample_fp8_recipes' claims, for the MLP's table and again for the GPT's (rows marked "gpt"): FP8
# with no scale flushes >= 90% of the output gradients and does not learn (> 1.5x fp32's loss);
# current scaling ends within 5% of fp32 flushing < 1% of them, delayed scaling within 10% flushing
# < 5% (its first steps run on a scale of 1 while the history fills); MXFP8 flushes < 1% of them and
# ends within 10% of fp32; MXFP4 flushes >= 10% of them, at least ten times MXFP8's share. NVIDIA's
# NVFP4 recipe flushes a smaller share of the output gradients than plain NVFP4 (rounded
# stochastically, a value below the grid's first step stays nonzero with a chance in proportion to
# its size) and a larger share of the weights (a 16 x 16 tile's scale follows the largest of 256
# values, a block's the largest of 16).
set -uo pipefail
"$1" | awk '
  { print }
  function pct(s) { sub(/%/, "", s); return s + 0 }
  # A row of either table: its model ("mlp" or "gpt"), then the run name and numbers from field `at`.
  function row(model, at) {
    if ($(at) == "fp32") fp32[model] = $(at + 1)
    if ($(at + 2) == "fp8-unscaled") { unscaled[model] = $(at + 3); unscaled_flush[model] = pct($(at + 6)) }
    if ($(at + 2) == "fp8-delayed") { delayed[model] = $(at + 3); delayed_flush[model] = pct($(at + 6)) }
    if ($(at + 2) == "fp8-current") { current[model] = $(at + 3); current_flush[model] = pct($(at + 6)) }
    if ($(at + 2) == "mxfp8") { mx8[model] = $(at + 3); mx8_flush[model] = pct($(at + 6)) }
    if ($(at + 2) == "mxfp4") mx4_flush[model] = pct($(at + 6))
    if ($(at + 2) == "nvfp4") { nv_weights[model] = pct($(at + 5)); nv_gradients[model] = pct($(at + 6)) }
    if ($(at + 2) == "nvfp4," && $(at + 3) == "NVIDIA'"'"'s") { nvidia_weights[model] = pct($(at + 6)); nvidia_gradients[model] = pct($(at + 7)) }
  }
  /^(fp32|bf16) / { row("mlp", 1) }
  /^gpt (fp32|bf16) / { row("gpt", 2) }
  function check(m) {
    ok = fp32[m] > 0 && unscaled_flush[m] >= 90 && unscaled[m] > 1.5 * fp32[m] && current_flush[m] < 1 && current[m] <= 1.05 * fp32[m] &&
         current[m] >= 0.95 * fp32[m] && delayed_flush[m] < 5 && delayed[m] <= 1.10 * fp32[m] && delayed[m] >= 0.90 * fp32[m] &&
         mx8_flush[m] < 1 && mx8[m] <= 1.10 * fp32[m] && mx4_flush[m] >= 10 && mx4_flush[m] >= 10 * mx8_flush[m] &&
         (m in nvidia_gradients) && nvidia_gradients[m] < nv_gradients[m] && nvidia_weights[m] > nv_weights[m]
    printf "%s: fp32 %s; fp8 unscaled %s (%.2f%% flushed), delayed %s (%.2f%%), current %s (%.2f%%); mxfp8 %s (%.2f%%); mxfp4 %.2f%% flushed; nvfp4 gradients %.2f%%, weights %.2f%% flushed, NVIDIA'"'"'s recipe %.2f%%, %.2f%%: %s\n",
           m, fp32[m], unscaled[m], unscaled_flush[m], delayed[m], delayed_flush[m], current[m], current_flush[m], mx8[m], mx8_flush[m],
           mx4_flush[m], nv_gradients[m], nv_weights[m], nvidia_gradients[m], nvidia_weights[m], ok ? "reproduced" : "NOT reproduced"
    return ok
  }
  END { mlp = check("mlp"); gpt = check("gpt"); exit mlp && gpt ? 0 : 1 }'
