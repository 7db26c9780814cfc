#!/usr/bin/env bash
# The bad-input catalogue: malformed files, flags, numbers, format names, empty and huge inputs
# through every command. Each must get one sentence on stderr, a non-zero status below 128 (no
# crash), nothing on stdout, and no output file.
set -u
fpscope="$1"
gui="${2:-}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
passed=0
failed=0

# bad NAME NEEDLE [OUTPUT_FILE] -- command... (stdin from $stdin, /dev/null by default)
stdin=/dev/null
bad() {
  local name="$1" needle="$2" output="$3"
  shift 4
  local status lines
  "$@" <"$stdin" >"out.txt" 2>"err.txt"
  status=$?
  lines=$(wc -l <err.txt)
  if ((status == 0 || status >= 128)); then
    echo "FAIL $name: status $status"; failed=$((failed + 1))
  elif [[ -s out.txt ]]; then
    echo "FAIL $name: wrote to stdout: $(head -c 200 out.txt)"; failed=$((failed + 1))
  elif ((lines != 1)); then
    echo "FAIL $name: $lines lines on stderr: $(head -c 400 err.txt)"; failed=$((failed + 1))
  elif ! grep -qF -- "$needle" err.txt; then
    echo "FAIL $name: stderr lacks '$needle': $(cat err.txt)"; failed=$((failed + 1))
  elif (($(wc -c <err.txt) > 600)); then
    echo "FAIL $name: a sentence of $(wc -c <err.txt) bytes"; failed=$((failed + 1))
  elif [[ -n "$output" && -e "$output" ]]; then
    echo "FAIL $name: left $output behind"; failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
  stdin=/dev/null
}

# Files to feed.
"$fpscope" train --model 8-16-4 --steps 5 --batch 8 --out good.jsonl >/dev/null 2>&1
: >empty.jsonl
head -c 100000 /dev/urandom >random.bin
printf '{"schema_version": 1, "source": "x"}\n{"step": 0, "loss": 1, "loss_scale": 1, "skipped": false, "tensors": [{"name": "a", "kind": "activation", "bins": [[-20, "many"]]}]}\n{"step": 1}\n' >badbins.jsonl
printf '{"schema_version": 1}\n{"step": 0, "loss": 1, "loss_scale": 1, "skipped": false, "tensors": [{"name": "a", "kind": "gradient_of_doom", "bins": []}]}\n{"step": 1}\n' >badkind.jsonl
printf '{"schema_version": 1}\n{"step": 0, "loss": 1, "loss_scale": 1, "skipped": false, "tensors": [{"name": "a", "kind": "activation", "bins": [[999, 1]]}]}\n{"step": 1}\n' >badbinade.jsonl
printf 'step,tensor,kind,binade,count\n0,fc1,activation,-3,twelve\n' >badcount.csv
printf 'step,tensor,kind,binade,count\n0,fc1,activation,-3\n' >shortrow.csv
printf '\x93NUMPY\x01\x00\x10\x00{"descr": "<f4"}\n' >badheader.npy
printf "\x93NUMPY\x01\x00\x36\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }    \n" >short.npy
printf "\x93NUMPY\x01\x00\x36\x00{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }      \n12345678" >complex.npy
printf "\x93NUMPY\x01\x00\x36\x00{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }     \n" >negative.npy
head -c 3000000 /dev/zero | tr '\0' '7' >huge_number.txt
{ head -c 3000000 /dev/zero | tr '\0' '7'; echo x; } >huge_bad.txt
printf '0.1\n0.2\nbanana\n' >values.txt
printf '3C00 3C00 4000 00\n3C00 zz 4000 00\n' >cases.txt
printf '3C00 3C00\n' >fewfields.txt
mkdir -p mnist_short && printf '\x00\x00\x08\x03\x00\x00\x00\x10' | gzip >mnist_short/train-images-idx3-ubyte.gz
printf '\x00\x00\x08\x01\x00\x00\x00\x10' >mnist_short/train-labels-idx1-ubyte
"$fpscope" train --model 8-16-4 --steps 4 --checkpoint-every 2 --out ck.jsonl >/dev/null 2>&1
head -c 100 ck.jsonl.ckpt >torn.ckpt
cp ck.jsonl.ckpt flipped.ckpt && printf 'X' | dd of=flipped.ckpt bs=1 seek=60 conv=notrunc 2>/dev/null

# inspect
bad inspect-word "banana" "" -- "$fpscope" inspect banana
bad inspect-empty "needs a VALUE" "" -- "$fpscope" inspect ""
bad inspect-two-points "1.2.3" "" -- "$fpscope" inspect 1.2.3
bad inspect-bad-hex "0x1.gp3" "" -- "$fpscope" inspect 0x1.gp3
bad inspect-huge-exponent-text "1e" "" -- "$fpscope" inspect 1e
bad inspect-format "fp17" "" -- "$fpscope" inspect 1 --format fp17
bad inspect-custom-format "e12m3" "" -- "$fpscope" inspect 1 --format e12m3
bad inspect-mode "rn" "" -- "$fpscope" inspect 1 --round rn
bad inspect-bits-too-wide "does not fit" "" -- "$fpscope" inspect --bits 0x1FFFF --format fp16
bad inspect-bits-not-hex "0xZZ" "" -- "$fpscope" inspect --bits 0xZZ --format fp16
bad inspect-huge-number "(100001 characters)" "" -- "$fpscope" inspect "$(head -c 100000 huge_number.txt)x"
# table
bad table-format "float8" "" -- "$fpscope" table float8
# convert
stdin=values.txt; bad convert-bad-line "banana" "" -- "$fpscope" convert --from fp32 --to fp16
bad convert-format "fp99" "" -- "$fpscope" convert --from fp32 --to fp99
stdin=huge_bad.txt; bad convert-huge-line "line 1" "" -- "$fpscope" convert --from fp32 --to fp16
# verify
stdin=cases.txt; bad verify-bad-hex "zz" "" -- "$fpscope" verify f16_add
stdin=fewfields.txt; bad verify-few-fields "3C00 3C00" "" -- "$fpscope" verify f16_add
bad verify-function "f16_frobnicate" "" -- "$fpscope" verify f16_frobnicate
stdin=random.bin; bad verify-binary-garbage "malformed case" "" -- "$fpscope" verify f16_mul
# analyze
bad analyze-missing "nothing.jsonl" "" -- "$fpscope" analyze nothing.jsonl
bad analyze-empty "empty.jsonl" "" -- "$fpscope" analyze empty.jsonl
bad analyze-random "random.bin" "" -- "$fpscope" analyze random.bin
bad analyze-bad-count "badbins.jsonl:2" "" -- "$fpscope" analyze badbins.jsonl
bad analyze-bad-kind "gradient_of_doom" "" -- "$fpscope" analyze badkind.jsonl
bad analyze-bad-binade "badbinade.jsonl:2" "" -- "$fpscope" analyze badbinade.jsonl
bad analyze-csv-count "twelve" "" -- "$fpscope" analyze badcount.csv
bad analyze-csv-short "shortrow.csv" "" -- "$fpscope" analyze shortrow.csv
bad analyze-npy-header "badheader.npy" "" -- "$fpscope" analyze badheader.npy
bad analyze-npy-short "short.npy" "" -- "$fpscope" analyze short.npy
bad analyze-npy-complex "c8" "" -- "$fpscope" analyze complex.npy
bad analyze-npy-negative "negative.npy" "" -- "$fpscope" analyze negative.npy
bad analyze-scale "2^x" "" -- "$fpscope" analyze good.jsonl --scale 2^x
bad analyze-format "fp8" "" -- "$fpscope" analyze good.jsonl --format fp8
# export
bad export-missing "nothing.jsonl" "out.csv" -- "$fpscope" export nothing.jsonl --csv out.csv
bad export-random "random.bin" "out.png" -- "$fpscope" export random.bin --png out.png
bad export-folder-missing "no/such/folder" "" -- "$fpscope" export good.jsonl --svg no/such/folder/plot.svg
bad export-tensor "fc9" "out.svg" -- "$fpscope" export good.jsonl --svg out.svg --tensor fc9
# train
bad train-model "784-x-10" "never.jsonl" -- "$fpscope" train --model 784-x-10 --out never.jsonl
bad train-model-one-layer "784" "never.jsonl" -- "$fpscope" train --model 784 --out never.jsonl
bad train-model-huge "99999999" "never.jsonl" -- "$fpscope" train --model 8-99999999-4 --out never.jsonl
bad train-activation "sigmoid" "never.jsonl" -- "$fpscope" train --activation sigmoid --out never.jsonl
bad train-precision "fp8" "never.jsonl" -- "$fpscope" train --precision fp8 --out never.jsonl
bad train-scale-zero "--loss-scale '0'" "never.jsonl" -- "$fpscope" train --loss-scale 0 --out never.jsonl
bad train-scale-negative "--loss-scale '-8'" "never.jsonl" -- "$fpscope" train --loss-scale=-8 --out never.jsonl
bad train-scale-nan "--loss-scale 'nan'" "never.jsonl" -- "$fpscope" train --loss-scale nan --out never.jsonl
bad train-steps "--steps '0'" "never.jsonl" -- "$fpscope" train --steps 0 --out never.jsonl
bad train-steps-text "--steps" "never.jsonl" -- "$fpscope" train --steps many --out never.jsonl
bad train-data "imagenet" "never.jsonl" -- "$fpscope" train --data imagenet --out never.jsonl
bad train-mnist-truncated "truncated" "never.jsonl" -- "$fpscope" train --data mnist:mnist_short --model 16-8-3 --out never.jsonl
bad train-backend "tpu" "never.jsonl" -- "$fpscope" train --backend tpu --out never.jsonl
bad train-inject "nan@fc9:1" "never.jsonl" -- "$fpscope" train --model 8-16-4 --inject nan@fc9:1 --out never.jsonl
bad train-inject-value "zero@fc1:1" "never.jsonl" -- "$fpscope" train --model 8-16-4 --inject zero@fc1:1 --out never.jsonl
bad train-resume-missing "never.jsonl.ckpt" "never.jsonl" -- "$fpscope" train --resume --out never.jsonl
bad train-resume-torn "torn.ckpt" "" -- "$fpscope" train --model 8-16-4 --steps 4 --checkpoint-every 2 --out ck.jsonl --checkpoint torn.ckpt --resume
bad train-resume-flipped "checksum" "" -- "$fpscope" train --model 8-16-4 --steps 4 --checkpoint-every 2 --out ck.jsonl --checkpoint flipped.ckpt --resume
bad train-resume-other "other settings" "" -- "$fpscope" train --model 8-16-4 --steps 4 --checkpoint-every 2 --out ck.jsonl --seed 9 --resume
bad unknown-command "frobnicate" "" -- "$fpscope" frobnicate
bad unknown-flag "--colour" "" -- "$fpscope" inspect 1 --colour always
# the app: bad arguments are refused before any window opens
if [[ -n "$gui" ]]; then
  bad gui-view "pie" "" -- "$gui" --view pie
  bad gui-scale "3000" "" -- "$gui" --loss-scale 3000
  bad gui-precision "fp12" "" -- "$gui" --precision fp12
  bad gui-screenshot-alone "--frames" "" -- "$gui" --screenshot x.png
fi

# The files the user had are untouched.
if [[ -s good.jsonl ]] && "$fpscope" analyze good.jsonl >/dev/null 2>&1; then passed=$((passed + 1)); else echo "FAIL: good.jsonl changed"; failed=$((failed + 1)); fi
echo "$passed passed, $failed failed"
((failed == 0))
