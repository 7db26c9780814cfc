#!/usr/bin/env bash
# The paper's effect on the GPT, as sample_gpt_paper_effect prints it: fp16 without scaling flushes
# >= 20% of the nonzero activation gradients and ends clearly worse (> 1.5x fp32's loss); dynamic
# scaling ends within 2% of fp32; the attention scores' gradients are among those that flush most.
set -uo pipefail
"$1" | awk '
  { print }
  /^fp32 / { fp32 = $2 }
  /^fp16, no loss scaling/ { unscaled = $5; flushed = $6 + 0 }
  /^fp16, dynamic/ { dynamic = $4 }
  /^  h[0-9]+\.attn\.scores / { scores = 1 }
  END { ok = fp32 > 0 && flushed >= 20 && unscaled > 1.5 * fp32 && dynamic <= 1.02 * fp32 && dynamic >= 0.98 * fp32 && scores;
        printf "fp32 %s, fp16 unscaled %s (%.2f%% flushed), fp16 dynamic %s, attention scores among the worst: %s: %s\n",
               fp32, unscaled, flushed, dynamic, scores ? "yes" : "no", ok ? "reproduced" : "NOT reproduced";
        exit ok ? 0 : 1 }'
