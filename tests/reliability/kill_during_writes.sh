#!/usr/bin/env bash
# SIGKILL at random moments while fpscope checkpoints, while it exports and while the app exports:
# every file left is the previous one or the new one, never a part; a run resumed after every kill
# ends with the same bytes as one never interrupted (but for the header's run id, which is each
# run's own).
set -u
fpscope="$1"
kills="${2:-25}"
gui="${3:-}"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
x_server_pid=""
trap 'kill $x_server_pid 2>/dev/null; rm -rf "$work"' EXIT
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
without_run_id() { sed -E 's/"run_id":"[0-9a-f]{32}",?//' "$1"; }
if cmp -s <(without_run_id run.jsonl) <(without_run_id reference.jsonl); then
  echo "ok: $killed kills during training with a checkpoint every step; the resumed log equals the uninterrupted one ($(wc -l <run.jsonl) lines)"
else
  echo "FAIL: after $killed kills the resumed log differs from the uninterrupted one"; failed=1
fi

# Where a writer is killed. Where strace may trace: on entering each call the writer makes on its
# way to replacing files -- every write, fsync, link of the unnamed temporary and rename, one run
# per call -- so that each state between two of them is left once (random moments land in the
# reading nearly always: a file's writing is a few milliseconds at the end). Elsewhere: `kills`
# random moments over the writer's whole run, as long as it was seen to take.
write_calls=write,pwrite64,fsync,fdatasync,linkat,rename,renameat,renameat2
can_inject=0
command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null && can_inject=1
# kill_writer SECONDS RESET CHECK COMMAND...: RESET, then COMMAND killed, then CHECK, at each kill
# point (SECONDS: how long COMMAND took whole); sets kill_runs and kill_how.
kill_writer() {
  local seconds=$1 reset=$2 check=$3 call n pid
  shift 3
  kill_runs=0
  if ((can_inject)); then
    kill_how="at each of its writes, fsyncs, links and renames"
    "$reset"
    strace -f -qq -o "$work/calls.txt" -e trace="$write_calls" "$@" >/dev/null 2>&1
    while read -r call n; do
      "$reset"
      # (In a group whose standard error goes nowhere: bash's "Killed" for strace, which ends as its
      # tracee did, with it.)
      { strace -f -qq -o /dev/null -e trace="$call" -e inject="$call:signal=KILL:when=$n" "$@" >/dev/null 2>&1 || :; } 2>/dev/null
      "$check"
      kill_runs=$((kill_runs + 1))
    done < <(sed -nE 's/^([0-9]+) +([a-z0-9_]+)\(.*/\1 \2/p' "$work/calls.txt" | sort | uniq -c |
             awk '{ if ($1 > most[$3]) most[$3] = $1 } END { for (c in most) for (n = 1; n <= most[c]; ++n) print c, n }')
  else
    kill_how="at random moments (strace cannot trace here)"
    for ((i = 0; i < kills; ++i)); do
      "$reset"
      "$@" >/dev/null 2>&1 &
      pid=$!
      random_sleep "$seconds"
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      "$check"
      kill_runs=$((kill_runs + 1))
    done
  fi
}
random_sleep() { sleep "$(awk -v s="$1" -v r="$RANDOM" 'BEGIN { printf "%.3f", 1.2 * s * r / 32768 }')"; }  # SECONDS: 0 to 1.2 x SECONDS
timed() {  # COMMAND...: runs it; sets took (seconds)
  local start=$EPOCHREALTIME
  "$@"
  local status=$?
  took=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  return $status
}

# Export: the old file or the new one, byte for byte.
# The old files are an earlier export of each kind (an export replaces only a file of its kind),
# of the run's first steps.
head -n 4 reference.jsonl >older.jsonl
for kind in png csv; do
  timed "$fpscope" export reference.jsonl "--$kind" "new.$kind" >/dev/null 2>&1 && "$fpscope" export older.jsonl "--$kind" "old.$kind" >/dev/null 2>&1 &&
    ! cmp -s "old.$kind" "new.$kind" || { echo "FAIL: export --$kind"; exit 1; }
  reset_export() { cp "old.$kind" "out.$kind"; }
  check_export() {
    if cmp -s "out.$kind" "new.$kind"; then new=$((new + 1)); elif ! cmp -s "out.$kind" "old.$kind"; then torn=$((torn + 1)); fi
  }
  torn=0 new=0
  kill_writer "$took" reset_export check_export "$fpscope" export reference.jsonl "--$kind" "out.$kind"
  if ((torn == 0 && kill_runs > 0)); then echo "ok: $kill_runs kills during export --$kind, $kill_how: always the old file or the new one ($new new)"
  else echo "FAIL: $torn of $kill_runs kills during export --$kind left a torn file"; failed=1; fi
  "$fpscope" export reference.jsonl "--$kind" "out.$kind" >/dev/null 2>&1 && cmp -s "out.$kind" "new.$kind" || { echo "FAIL: export --$kind after the kills"; failed=1; }
done

# The app's Export (--export DIR after the followed log is read): each of its three files is the
# old one or the new one.
app_files=(run.jsonl histograms.csv fpscope-window.png)
if [[ -n "$gui" ]]; then
  # Under AddressSanitizer (scripts/test-sanitizers) the app's leak check is off, as in
  # gui_smoke.sh: Mesa's driver, unloaded at exit, leaves allocations LeakSanitizer cannot name.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
  # One X server for every window the test opens, where there is no display.
  if [[ -z "${DISPLAY:-}" ]]; then
    source "$here/../x_server.sh"
    start_x_server "$work" || { echo "FAIL: Xvfb did not start: $(cat "$work/xvfb.log")"; exit 1; }
    export DISPLAY="$x_display"
  fi
  mkdir -p app_new app_out app_old
  timed "$gui" --follow reference.jsonl --frames 2 --export app_new >/dev/null 2>&1 &&
    "$gui" --follow older.jsonl --frames 2 --export app_old >/dev/null 2>&1 || { echo "FAIL: the app's export"; exit 1; }
  app_seconds=$took
  reset_app() { for name in "${app_files[@]}"; do cp "app_old/$name" "app_out/$name"; done; }
  check_app() {
    for name in "${app_files[@]}"; do
      if cmp -s "app_out/$name" "app_new/$name"; then new=$((new + 1))
      elif ! cmp -s "app_out/$name" "app_old/$name"; then torn=$((torn + 1)); echo "torn: $name"; fi
    done
  }
  torn=0 new=0
  kill_writer "$app_seconds" reset_app check_app "$gui" --follow reference.jsonl --frames 2 --export app_out
  if ((torn == 0 && kill_runs > 0)); then echo "ok: $kill_runs kills during the app's export, $kill_how: always the old files or the new ones ($new of $((3 * kill_runs)) new)"
  else echo "FAIL: $torn files torn by $kill_runs kills during the app's export"; failed=1; fi
  "$gui" --follow reference.jsonl --frames 2 --export app_out >/dev/null 2>&1 || { echo "FAIL: the app's export after the kills"; failed=1; }
fi

# A run replacing an earlier log on a disk that fills, killed at random moments: the earlier log
# is never lost -- at its name, or (killed mid-run) beside it as NAME.previous -- and what is at
# the name is it or the new run's log, never a mix.
if unshare -m true 2>/dev/null; then
  cp reference.jsonl earlier.jsonl
  cat >fill.sh <<'SCRIPT'
set -u
fpscope="$1" kills="$2"
mkdir -p small && mount -t tmpfs -o size=384k tmpfs small || exit 2
lost=0 mixed=0 kept=0
for ((i = 0; i < kills; ++i)); do
  rm -f small/*
  head -n 40 earlier.jsonl >small/run.jsonl
  cp small/run.jsonl old.jsonl
  "$fpscope" train --steps 100000 --out small/run.jsonl >/dev/null 2>&1 &
  pid=$!
  sleep "0.$(printf %02d $((RANDOM % 50)))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  if cmp -s small/run.jsonl old.jsonl; then kept=$((kept + 1))
  elif ! cmp -s small/run.jsonl.previous old.jsonl; then lost=$((lost + 1))
  elif cmp -s <(head -c "$(wc -c <old.jsonl)" small/run.jsonl) old.jsonl; then mixed=$((mixed + 1))
  fi
done
echo "$lost $mixed $kept"
SCRIPT
  read -r lost mixed kept < <(RANDOM=11 unshare -m bash fill.sh "$fpscope" "$kills")
  if [[ "${lost:-x}" == 0 && "${mixed:-x}" == 0 ]]; then
    echo "ok: $kills kills of a run replacing a log on a disk that fills: the earlier log never lost ($kept times still in place)"
  else echo "FAIL: $kills kills of a run replacing a log on a disk that fills: ${lost:-?} lost, ${mixed:-?} mixed"; failed=1; fi
else
  echo "unshare -m is not allowed here: the full-disk kills are skipped"
fi

# Two writers racing on one log and one checkpoint, killed at random: one of them owns both, the
# other is refused; whatever the kills leave resumes (the log and its checkpoint agree) and the
# run then ends as the uninterrupted one.
race=(train --model 32-256-256-10 --activation tanh --batch 64 --round stochastic --steps 150 --checkpoint-every 1 --out race.jsonl)
timed "$fpscope" "${race[@]::${#race[@]}-2}" --out race_reference.jsonl >/dev/null 2>&1
race_seconds=$took
bad_race=0
for ((i = 0; i < kills; ++i)); do
  rm -f race.jsonl race.jsonl.ckpt race.jsonl.previous
  "$fpscope" "${race[@]}" >/dev/null 2>race1.err &
  first=$!
  "$fpscope" "${race[@]}" >/dev/null 2>race2.err &
  second=$!
  random_sleep "$race_seconds"  # over the run's whole length
  kill -9 "$first" "$second" 2>/dev/null
  wait "$first" "$second" 2>/dev/null
  if [[ -e race.jsonl.ckpt ]]; then
    "$fpscope" "${race[@]}" --resume >/dev/null 2>race3.err || { bad_race=$((bad_race + 1)); echo "race $i: $(cat race3.err)"; continue; }
  else
    "$fpscope" "${race[@]}" >/dev/null 2>race3.err || { bad_race=$((bad_race + 1)); echo "race $i: $(cat race3.err)"; continue; }
  fi
  cmp -s <(without_run_id race.jsonl) <(without_run_id race_reference.jsonl) || { bad_race=$((bad_race + 1)); echo "race $i: the log differs"; }
done
if ((bad_race == 0)); then echo "ok: $kills kills of two writers racing on one log and one checkpoint: each time one owned both, and the run went on to the uninterrupted log"
else echo "FAIL: $bad_race of $kills races left a log and checkpoint that do not go on"; failed=1; fi

# The app's export into the folder of a run being written: refused while the run writes, and
# killed at each of its kill points (kill_writer); the run's log stays its own file, and is whole
# when the run is stopped.
if [[ -n "$gui" ]]; then
  mkdir -p busy
  "$fpscope" train --model 32-256-256-10 --batch 64 --steps 100000000 --record-every 100 --out busy/run.jsonl >/dev/null 2>busy.err &
  writer=$!
  for _ in $(seq 100); do [[ -s busy/run.jsonl ]] && break; sleep 0.05; done
  inode=$(stat -c %i busy/run.jsonl)
  "$gui" --follow reference.jsonl --frames 2 --export busy >/dev/null 2>app.err
  refused_status=$?
  nothing() { :; }
  kill_writer "$app_seconds" nothing nothing "$gui" --follow reference.jsonl --frames 2 --export busy
  kill -INT "$writer"
  wait "$writer"
  status=$?
  if [[ "$refused_status" == 1 ]] && grep -q "another fpscope process is writing it" app.err &&
     [[ "$(stat -c %i busy/run.jsonl)" == "$inode" && ! -e busy/histograms.csv && ! -e busy/fpscope-window.png ]] &&
     "$fpscope" analyze busy/run.jsonl >/dev/null 2>&1; then
    echo "ok: the app's export into the folder of a run being written refused ($kill_runs kills of it, $kill_how): the run's log its own and whole (stopped with status $status)"
  else
    echo "FAIL: the app's export into a run's folder (status $refused_status: $(cat app.err)) replaced or broke the run's log"; failed=1
  fi
fi

# What the kills left behind (.NAME.fpscope-tmp-XXXXXXXXXXXX, only if a kill fell between naming a
# temporary and renaming it) goes with the next write of the same file.
"$fpscope" export reference.jsonl --png out.png >/dev/null 2>&1 && "$fpscope" export reference.jsonl --csv out.csv >/dev/null 2>&1
"$fpscope" train --model 8-8-2 --steps 1 --checkpoint-every 1 --out run.jsonl >/dev/null 2>&1
left=$(find . -name '*.fpscope-tmp-*' | wc -l)
if ((left == 0)); then echo "ok: no temporary files left behind"
else echo "FAIL: $left temporary files left behind: $(find . -name '*.fpscope-tmp-*' | head -3)"; failed=1; fi
exit $failed
