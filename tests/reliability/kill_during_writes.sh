#!/usr/bin/env bash
# SIGKILL at random moments while fpscope checkpoints and while it exports: every file left is the
# previous one or the new one, never a part; a run resumed after every kill ends with the same
# bytes as one never interrupted.
set -u
fpscope="$1"
kills="${2:-25}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
failed=0
RANDOM=7  # the same moments every run

settings=(train --model 32-256-256-10 --activation tanh --batch 64 --round stochastic --steps 2000 --checkpoint-every 1)
"$fpscope" "${settings[@]}" --out reference.jsonl >/dev/null 2>&1 || { echo "FAIL: the uninterrupted run"; exit 1; }
train=("${settings[@]}" --out run.jsonl)

killed=0
resume=()
for ((attempt = 0; attempt < 200; ++attempt)); do
  "$fpscope" "${train[@]}" "${resume[@]}" >/dev/null 2>"err.txt" &
  pid=$!
  sleep "0.$((RANDOM % 40 + 5))"
  if kill -9 "$pid" 2>/dev/null; then
    wait "$pid" 2>/dev/null
    killed=$((killed + 1))
    if [[ -e run.jsonl.ckpt ]]; then
      resume=(--resume)
    fi
    ((killed < kills)) && continue
  fi
  # The last run (or the one that finished before the kill) goes to the end.
  wait "$pid" 2>/dev/null
  status=$?
  if ((killed < kills && status != 0)); then echo "FAIL: a run ended by itself with status $status: $(tail -c 300 err.txt)"; failed=1; fi
  "$fpscope" "${train[@]}" --resume >/dev/null 2>>"err.txt" || { echo "FAIL: resume after $killed kills: $(cat err.txt)"; failed=1; }
  break
done
if cmp -s run.jsonl reference.jsonl; then
  echo "ok: $killed kills during training with a checkpoint every step; the resumed log equals the uninterrupted one ($(wc -l <run.jsonl) lines)"
else
  echo "FAIL: after $killed kills the resumed log differs from the uninterrupted one"; failed=1
fi

# Export: the old file or the new one, byte for byte.
"$fpscope" export reference.jsonl --png new.png >/dev/null 2>&1 && "$fpscope" export reference.jsonl --csv new.csv >/dev/null 2>&1 || { echo "FAIL: export"; exit 1; }
echo "old contents" >old.txt
for kind in png csv; do
  torn=0
  for ((i = 0; i < kills; ++i)); do
    cp old.txt "out.$kind"
    "$fpscope" export reference.jsonl "--$kind" "out.$kind" >/dev/null 2>&1 &
    pid=$!
    sleep "0.0$((RANDOM % 60 + 1))"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if ! cmp -s "out.$kind" old.txt && ! cmp -s "out.$kind" "new.$kind"; then torn=$((torn + 1)); fi
  done
  if ((torn == 0)); then echo "ok: $kills kills during export --$kind: always the old file or the new one"
  else echo "FAIL: $torn of $kills kills during export --$kind left a torn file"; failed=1; fi
done
# What the kills left behind (NAME.tmp-PID) goes with the next write of the same file.
"$fpscope" export reference.jsonl --png out.png >/dev/null 2>&1 && "$fpscope" export reference.jsonl --csv out.csv >/dev/null 2>&1
left=$(find . -name '*.tmp-*' | wc -l)
if ((left == 0)); then echo "ok: no temporary files left behind"
else echo "FAIL: $left temporary files left behind: $(find . -name '*.tmp-*' | head -3)"; failed=1; fi
exit $failed
