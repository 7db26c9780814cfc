#!/usr/bin/env bash
# End-to-end checks of the fpscope command: outputs, exit statuses, error sentences.
set -u
fpscope="$1"
passed=0
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# expect NAME STATUS PATTERN -- command...   (stdout+stderr must match the extended regex)
check() {
  local name="$1" want_status="$2" pattern="$3"
  shift 4
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ "$status" == "$want_status" ]] && grep -Eq -- "$pattern" <<<"$out"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: status $status (wanted $want_status), pattern '$pattern'"
    echo "$out" | head -20
  fi
}

# a bad input: non-zero status, nothing on stdout, exactly one line on stderr naming the input.
check_bad() {
  local name="$1" needle="$2"
  shift 3
  local out err status
  out=$("$@" 2>"$work/err" </dev/null)
  status=$?
  err=$(cat "$work/err")
  if [[ "$status" != 0 && -z "$out" && $(wc -l <"$work/err") == 1 && "$err" == *"$needle"* ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $name: status $status, stdout '$out', stderr '$err'"
  fi
}

check inspect-overflow 0 'hex +0x7C00' -- "$fpscope" inspect 65520 --format fp16
check inspect-overflow-flags 0 'flags +overflow inexact' -- "$fpscope" inspect 65520 --format fp16
check inspect-subnormal 0 'hex +0x0001' -- "$fpscope" inspect 5.96e-8 --format fp16
check inspect-subnormal-class 0 'class +subnormal' -- "$fpscope" inspect 5.96e-8 --format fp16
check inspect-three-bf16 0 'hex +0x3DCD' -- "$fpscope" inspect 0.1 --format bf16 --format fp16 --format e4m3
check inspect-three-fp16 0 'stored +0\.0999755859375' -- "$fpscope" inspect 0.1 --format bf16 --format fp16 --format e4m3
check inspect-three-e4m3 0 'hex +0x1D' -- "$fpscope" inspect 0.1 --format bf16 --format fp16 --format e4m3
check inspect-error 0 'absolute -0\.0000244140625 \(stored minus written, every digit\), relative 2\.441e-04' -- "$fpscope" inspect 0.1 --format fp16
check inspect-error-none 0 'error +none: the value is stored exactly' -- "$fpscope" inspect 3 --format e2m1
check inspect-error-flushed 0 'absolute 0\.00000001 \(stored minus written, every digit\), relative 1\.000e\+00' -- "$fpscope" inspect -1e-8 --format fp16
check inspect-error-below-binary64 0 'relative 9\.763e-01' -- "$fpscope" inspect 2.5e-324 --format fp64
check inspect-bits 0 'stored +1$' -- "$fpscope" inspect --bits 0x3C00 --format fp16
check inspect-hexfloat 0 'stored +0\.1875' -- "$fpscope" inspect 0x1.8p-3 --format fp32
check inspect-negative-zero 0 'bits +1 \| 00000 \| 0000000000' -- "$fpscope" inspect -0 --format fp16
check inspect-nan 0 'class +quiet NaN' -- "$fpscope" inspect nan --format fp16
check inspect-round-up 0 'hex +0x2E67' -- "$fpscope" inspect 0.1 --format fp16 --round ru
check inspect-colour-forced 0 $'\x1b\\[3' -- "$fpscope" inspect 1 --format fp16 --color always
# Piped output carries no colour escapes.
if [[ "$("$fpscope" inspect 1 --format fp16)" == *$'\x1b'* ]]; then
  failed=$((failed + 1)); echo "FAIL inspect-plain-when-piped: escape codes in piped output"
else
  passed=$((passed + 1))
fi
check table-fp16 0 'fp16 +1\.5\.10 +15 +-14 +15 +2\^-24' -- "$fpscope" table fp16
check table-e4m3 0 'e4m3 .* 448 .* float8_e4m3fn$' -- "$fpscope" table e4m3
check table-dtype 0 '^e4m3ieee .* 240 .* float8_e4m3$' -- "$fpscope" table float8_e4m3
check table-mxfp4 0 '^mxfp4 +e2m1 +E8M0 \(2\^-127\.\.2\^127\) +32 +6 +2\^-1 +4 +4\.250$' -- "$fpscope" table mxfp4
check table-mxint8 0 '^mxint8 +int8 .* 1\.984375 +2\^-6 +7 +8\.250$' -- "$fpscope" table mxint8 e8m0
check table-e8m0 0 'e8m0: the MX scale, 8 exponent bits, no sign, no mantissa, bias 127' -- "$fpscope" table e8m0
check table-exact 0 'min subnormal +2\^-24 = 0\.000000059604644775390625' -- "$fpscope" table fp16 --exact

printf '1.0\n0.1\n65520\n-0\n' >"$work/values"
check convert-values 0 '^1$' -- bash -c "'$fpscope' convert --from fp32 --to fp16 <'$work/values' | head -1"
check convert-bits 0 '^0x3C00 1$' -- bash -c "printf '0x3F800000\n' | '$fpscope' convert --from fp32 --to fp16 --output both"
check convert-flags 0 '^inf overflow inexact$' -- bash -c "printf '65520\n' | '$fpscope' convert --from fp64 --to fp16 --flags"
check convert-widen 0 '^0x3FF0000000000000$' -- bash -c "printf '0x3C00\n' | '$fpscope' convert --from fp16 --to fp64"
check convert-e4m3-saturate 0 '^0x7E$' -- bash -c "printf '0x7F800000\n' | '$fpscope' convert --from fp32 --to e4m3 --saturate"

check_bad bad-number "'banana'" -- "$fpscope" inspect banana
check_bad bad-format "'fp17'" -- "$fpscope" inspect 1 --format fp17
check_bad bad-mode "'sideways'" -- "$fpscope" inspect 1 --round sideways
check_bad bad-bits "does not fit" -- "$fpscope" inspect --bits 0x123456 --format fp16
check_bad bad-table-format "'half-float'" -- "$fpscope" table half-float
check_bad bad-convert-line "line 2" -- bash -c "printf '1\nbanana\n' | '$fpscope' convert --from fp32 --to fp16"
check_bad bad-convert-width "line 1" -- bash -c "printf '0x12345\n' | '$fpscope' convert --from fp16 --to fp32"
check_bad bad-verify-function "'f16_frobnicate'" -- "$fpscope" verify f16_frobnicate
check_bad bad-verify-line "line 2: malformed case '3C00 zz'" -- bash -c "printf '3C00 3C00 4000 00\n3C00 zz\n' | '$fpscope' verify f16_add"
check verify-failure-shown 1 'ours 4000 flags 00 \(none\), expected 4001' -- bash -c "printf '3C00 3C00 4001 00\n' | '$fpscope' verify f16_add"
check verify-options 0 '^1 passed, 0 failed$' -- bash -c "printf '3C01 3C00 01\n' | '$fpscope' verify f16_roundToInt -rminMag -exact"
check verify-int 0 '^1 passed, 0 failed$' -- bash -c "printf '4100 00000002 00\n' | '$fpscope' verify f16_to_i32 -rnear_even"
check verify-compare 0 '^1 passed, 0 failed$' -- bash -c "printf '7E00 3C00 0 10\n' | '$fpscope' verify f16_lt"

# analyze and export on a small run log and a hand-written .npy file.
cat >"$work/run.jsonl" <<'LOG'
{"schema_version": 1, "source": "test", "model": "tiny", "precision": "fp16", "format": "fp16", "rounding": "rne", "scaler": "none"}
{"step": 0, "loss": 2.0, "loss_scale": 1, "skipped": false, "tensors": [{"name": "fc1", "kind": "activation_gradient", "bins": [[-30, 5], [-20, 10], [-2, 1]], "zero": 4}]}
{"step": 1, "loss": 1.5, "loss_scale": 1, "skipped": false, "tensors": [{"name": "fc1", "kind": "activation_gradient", "bins": [[-30, 5], [-20, 10], [-2, 1]], "zero": 4}]}
LOG
check analyze-table 0 'fc1 activation_gradient +40 +1 +2\^-2 +2\^-30 +45\.00% +50\.00% +0\.00% +2\^16' -- "$fpscope" analyze "$work/run.jsonl"
check analyze-scaled 0 'fc1 activation_gradient +40 .* 20\.00% +25\.00%' -- "$fpscope" analyze "$work/run.jsonl" --scale 2^8
check analyze-json 0 '"advice": "2\^16"' -- "$fpscope" analyze "$work/run.jsonl" --json
# Without --format, analyze and export ask about the format the run was cast to (a bf16 run: bf16,
# where nothing of this flushes), else fp16, and say why; --format wins.
sed 's/"fp16"/"bf16"/g' "$work/run.jsonl" >"$work/run-bf16.jsonl"
sed 's/"fp16"/"fp32"/g' "$work/run.jsonl" >"$work/run-fp32.jsonl"
check analyze-run-format 0 "^format bf16 \(the run's own; --format asks about another\)" -- "$fpscope" analyze "$work/run-bf16.jsonl"
check analyze-run-format-table 0 'fc1 activation_gradient +40 +1 +2\^-2 +2\^-30 +20\.00% +0\.00% +0\.00% +none needed' -- "$fpscope" analyze "$work/run-bf16.jsonl"
check analyze-run-format-json 0 '"format_chosen_by": "run"' -- "$fpscope" analyze "$work/run-bf16.jsonl" --json
check analyze-run-format-json-reason 0 '"format_reason": "the run.s own"' -- "$fpscope" analyze "$work/run-bf16.jsonl" --json
check analyze-format-option-wins 0 'fc1 activation_gradient +40 +1 +2\^-2 +2\^-30 +45\.00% +50\.00%' -- "$fpscope" analyze "$work/run-bf16.jsonl" -f fp16
check analyze-fp32-run-default 0 '^format fp16 \(the default: the run trained in float32; ' -- "$fpscope" analyze "$work/run-fp32.jsonl"
sed 's/"fp16"/"fp64"/g' "$work/run.jsonl" >"$work/run-fp64.jsonl"
check analyze-fp64-run-default 0 '^format fp16 \(the default: the run trained in float64; ' -- "$fpscope" analyze "$work/run-fp64.jsonl"
check analyze-fp32-and-fp64-runs 0 '^format fp16 \(the default: the runs trained in float32 and float64; ' -- "$fpscope" analyze "$work/run-fp64.jsonl" "$work/run-fp32.jsonl"
sed 's/"fp16"/"fp17"/g' "$work/run.jsonl" >"$work/run-fp17.jsonl"
check analyze-unknown-run-format 0 "^format fp16 \(the default: the run log names a format fpscope does not know, 'fp17'; " -- "$fpscope" analyze "$work/run-fp17.jsonl"
check analyze-unknown-among-runs 0 "^format fp16 \(the default: the run logs name a format fpscope does not know, 'fp17'; " -- "$fpscope" analyze "$work/run-fp17.jsonl" "$work/run-bf16.jsonl"
check analyze-runs-disagree 0 '^format fp16 \(the default: the run logs name different formats, bf16 and fp16; ' -- "$fpscope" analyze "$work/run-bf16.jsonl" "$work/run.jsonl"
# A log whose writer only assumed its format (the bridge, where nothing said it): the default, said
# so, also beside a run whose format is known; a format_assumed that is not true or false is refused.
sed '1s/"format": "bf16"/"format": "bf16", "format_assumed": true/' "$work/run-bf16.jsonl" >"$work/run-assumed.jsonl"
check analyze-assumed-format 0 '^format fp16 \(the default: the run log does not say what the run cast to; ' -- "$fpscope" analyze "$work/run-assumed.jsonl"
check analyze-assumed-format-json 0 '"format_reason": "the default: the run log does not say what the run cast to"' -- "$fpscope" analyze "$work/run-assumed.jsonl" --json
check analyze-assumed-among-runs 0 '^format fp16 \(the default: a run log does not say what its run cast to; ' -- "$fpscope" analyze "$work/run-assumed.jsonl" "$work/run-bf16.jsonl"
sed '1s/"format": "bf16"/"format": "bf16", "format_assumed": "yes"/' "$work/run-bf16.jsonl" >"$work/run-assumed-bad.jsonl"
check_bad bad-format-assumed "the header's 'format_assumed' must be true or false, not string" -- "$fpscope" analyze "$work/run-assumed-bad.jsonl"
check export-run-format 0 '>bf16, the values as recorded' -- bash -c "'$fpscope' export '$work/run-bf16.jsonl' --svg '$work/run-bf16.svg' && cat '$work/run-bf16.svg'"
# A format the run did not cast to is shaded as the default, and the plot says so.
check export-default-format 0 '>fp16 \(the default: the run trained in float32\), the values as recorded' -- bash -c "'$fpscope' export '$work/run-fp32.jsonl' --svg '$work/run-fp32.svg' && cat '$work/run-fp32.svg'"
check export-assumed-format 0 '>fp16 \(the default: the run log does not say what the run cast to\), the values' -- bash -c "'$fpscope' export '$work/run-assumed.jsonl' --svg '$work/run-assumed.svg' && cat '$work/run-assumed.svg'"
check export-format-asked 0 '>e4m3, the values as recorded' -- bash -c "'$fpscope' export '$work/run-fp32.jsonl' -f e4m3 --svg '$work/run-e4m3.svg' && cat '$work/run-e4m3.svg'"
check_bad bad-analyze-format "unknown format 'fp17'" -- "$fpscope" analyze "$work/run-bf16.jsonl" -f fp17
check export-csv 0 '^step,tensor,kind,scale,captured,binade,count$' -- bash -c "'$fpscope' export '$work/run.jsonl' --csv '$work/run.csv' && head -1 '$work/run.csv'"
check analyze-csv 0 'fc1 activation_gradient +40 +1 +2\^-2 +2\^-30 +45\.00%' -- "$fpscope" analyze "$work/run.csv"
printf 'step,tensor,binade,count\n1,fc1,-3,4\n' >"$work/bad.csv"
check_bad bad-csv-column "bad.csv:1: missing column 'kind'" -- "$fpscope" analyze "$work/bad.csv"
check export-svg 0 '^<svg xmlns' -- bash -c "'$fpscope' export '$work/run.jsonl' --svg '$work/h.svg' --scale 2^8 && head -c 14 '$work/h.svg'"
check export-heatmap 0 'smallest subnormal' -- bash -c "'$fpscope' export '$work/run.jsonl' --svg '$work/m.svg' --plot heatmap && cat '$work/m.svg'"
check export-png 0 'PNG image data, 1920 x 940' -- bash -c "'$fpscope' export '$work/run.jsonl' --png '$work/h.png' && file '$work/h.png'"
check_bad bad-plot "'pie'" -- "$fpscope" export "$work/run.jsonl" --svg "$work/p.svg" --plot pie
check_bad bad-tensor "no recorded tensor named 'fc9'" -- "$fpscope" export "$work/run.jsonl" --svg "$work/p.svg" --tensor fc9
# A float32 .npy written byte by byte: 1.0, 0.25, 0 -> binades 0 and -2, one zero.
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"; printf '\x00\x00\x80\x3f\x00\x00\x80\x3e\x00\x00\x00\x00'; } >"$work/t.npy"
check analyze-npy 0 '^t other +3 +1 +2\^0 +2\^-2 +33\.33%' -- "$fpscope" analyze "$work/t.npy"
check analyze-npy-advice-words 0 '^advice for the tensors \(as if they were gradients\): ' -- "$fpscope" analyze "$work/t.npy"
# FP8 codes as ml_dtypes saves them (void, one byte each): e4m3 1.0, 0.5, 0, 448.
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<V1', 'fortran_order': False, 'shape': (4,), }"; printf '\x38\x30\x00\x7e'; } >"$work/t8.npy"
check analyze-npy-codes 0 '^t8 other +4 +1 +2\^8 +2\^-1 +25\.00%' -- "$fpscope" analyze "$work/t8.npy" --as float8_e4m3fn -f e4m3
check_bad bad-analyze-npy-codes "pass --as FORMAT" -- "$fpscope" analyze "$work/t8.npy"
check_bad bad-analyze-npy-code "element 0 is 0x38, not a 4-bit e2m1 code" -- "$fpscope" analyze "$work/t8.npy" --as e2m1
check quantize-npy-codes 0 'flushed to zero 2 \(50\.0000%\)' -- "$fpscope" quantize "$work/t8.npy" --as float8_e4m3fn -f mxfp4 --block 4
# Block scaling: a (2, 4) float32 tensor in blocks of 4. Row 0: 1, 0.25, 0, -3 (amax 3: the OCP
# floor rule scales by 2^-7, every element exact). Row 1: 500, 1, 2^-20, 0 (amax 500: scale 2^0,
# 500 saturates to E4M3's 448 and 2^-20 flushes; round-up scales by 2^1 and saturates nothing).
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
  printf '\x00\x00\x80\x3f\x00\x00\x80\x3e\x00\x00\x00\x00\x00\x00\x40\xc0\x00\x00\xfa\x43\x00\x00\x80\x3f\x00\x00\x80\x35\x00\x00\x00\x00'; } >"$work/q.npy"
# An error relative to values that are all zero (or to no finite value) is no number: said so.
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"; printf '\x00\x00\x00\x00\x00\x00\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00'; } >"$work/z.npy"
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"; printf '\x00\x00\xc0\x7f\x00\x00\xc0\x7f\x00\x00\x80\x7f\x00\x00\xc0\x7f'; } >"$work/n.npy"
check quantize-error-all-zero 0 '^error: max 0, RMS 0 over 4 finite values \(all zero\)$' -- "$fpscope" quantize "$work/z.npy" -f mxfp8 --block 4
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }"; printf '\x00\x00\x60\x40'; } >"$work/one.npy"
check quantize-error-one-value 0 '^error: max 0\.5, RMS 0\.5 \(0\.1429 of the values. RMS\) over 1 finite value$' -- "$fpscope" quantize "$work/one.npy" -f mxfp4
check quantize-error-none-finite 0 '^error: none measured \(no finite values\)$' -- "$fpscope" quantize "$work/n.npy" -f mxfp8 --block 4
check quantize-error-all-zero-json 0 '"relative_rms_error": null' -- "$fpscope" quantize "$work/z.npy" -f mxfp8 --block 4 --json
check analyze-error-all-zero 0 '^z +floor +4 .* 0 +0 +-$' -- "$fpscope" analyze "$work/z.npy" -f mxfp8 --block 4 --compare-scale-rules
check quantize-floor 0 'flushed to zero 1 \(12\.5000%\), made subnormal 0 \(0\.0000%\), saturated 1 \(12\.5000%\)' -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4
check quantize-round-up 0 'flushed to zero 1 \(12\.5000%\), made subnormal 0 \(0\.0000%\), saturated 0 ' -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4 --scale-rule round-up
check quantize-error 0 'error: max 52, ' -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4
check quantize-scales 0 '^ *120 +127$' -- bash -c "'$fpscope' quantize '$work/q.npy' -f mxfp8 --block 4 --scales '$work/qs.npy' --codes '$work/qc.npy' --out '$work/qd.npy' >/dev/null && tail -c 2 '$work/qs.npy' | od -An -tu1"
check quantize-codes 0 '^ *112 +96 +0 +252 +126 +56 +0 +0$' -- bash -c "tail -c 8 '$work/qc.npy' | od -An -tu1"
check quantize-dequantized 0 '^ *1 +0\.25 +0 +-3 +448 +1 +0 +0$' -- bash -c "tail -c 32 '$work/qd.npy' | od -An -tf4 -w32 | tr -s ' '"
check dequantize-round-trip 0 'same' -- bash -c "'$fpscope' dequantize '$work/qc.npy' --scales '$work/qs.npy' -f mxfp8 --block 4 --out '$work/qb.npy' && cmp '$work/qb.npy' '$work/qd.npy' && echo same"
check analyze-compare-rules 0 '^q +round-up +8 +1 \(50\.0%\) +0 +12\.5000% +0\.0000% +0\.0000%' -- "$fpscope" analyze "$work/q.npy" -f mxfp8 --block 4 --compare-scale-rules
check analyze-block-floor 0 '^q +floor +8 +0 \(0\.0%\) +0 +12\.5000% +0\.0000% +12\.5000% +2\^-7\.\.2\^0' -- "$fpscope" analyze "$work/q.npy" -f mxfp8 --block 4
check quantize-nvfp4 0 'tensor scale 5\.376 \(0x1\.5810' -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4
# The same tensor with a NaN for row 0's zero: the tensor scale still comes from the finite values
# (amax 500), row 0's block is a NaN block and row 1's codes are what they were (a NaN used to
# make the tensor scale 1).
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
  printf '\x00\x00\x80\x3f\x00\x00\x80\x3e\x00\x00\xc0\x7f\x00\x00\x40\xc0\x00\x00\xfa\x43\x00\x00\x80\x3f\x00\x00\x80\x35\x00\x00\x00\x00'; } >"$work/qn.npy"
check quantize-nvfp4-nan 0 '^tensor scale 5\.376 \(0x1\.581062p\+2\), from the values. amax 500 \(1 NaN or infinite value left out: its block scale is NaN\)$' -- "$fpscope" quantize "$work/qn.npy" -f nvfp4 --block 4
check analyze-npy-not-numbers 0 '^qn other: 1 of its values is infinite or NaN \(0 infinities, 1 NaN\): counted in values, in none of the shares$' -- "$fpscope" analyze "$work/qn.npy" -f fp16
check quantize-nvfp4-nan-blocks 0 'NaN blocks 1, zeros 1$' -- "$fpscope" quantize "$work/qn.npy" -f nvfp4 --block 4
check quantize-nvfp4-nan-json 0 '"non_finite_values": 1,' -- "$fpscope" quantize "$work/qn.npy" -f nvfp4 --block 4 --json
check quantize-nvfp4-nan-other-block 0 'same' -- bash -c "'$fpscope' quantize '$work/qn.npy' -f nvfp4 --block 4 --codes '$work/qnc.npy' >/dev/null && '$fpscope' quantize '$work/q.npy' -f nvfp4 --block 4 --codes '$work/qnc0.npy' >/dev/null && [ \"\$(tail -c 4 '$work/qnc.npy' | od -An -tx1)\" = \"\$(tail -c 4 '$work/qnc0.npy' | od -An -tx1)\" ] && echo same"
# 3e38 (0x7F61B1E6), 1, 0.5, 0.25 in one MXFP4 block: round-up's scale 2^126 makes 3e38 the value
# 2^128, beyond float32: its error is exact (2^128 - 3e38 = 4.02824e+37), and the value counted.
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }"
  printf '\xe6\xb1\x61\x7f\x00\x00\x80\x3f\x00\x00\x00\x3f\x00\x00\x80\x3e'; } >"$work/big.npy"
check quantize-beyond-float32 0 '^beyond float32.s largest: 1 quantized value \(infinities when dequantized' -- "$fpscope" quantize "$work/big.npy" -f mxfp4 --block 4 --scale-rule round-up
check quantize-beyond-float32-error 0 '^error: max 4\.02824e\+37, ' -- "$fpscope" quantize "$work/big.npy" -f mxfp4 --block 4 --scale-rule round-up
check analyze-beyond-float32 0 '^big +round-up +4 +1 \(100\.0%\) .* 4\.028e\+37 ' -- "$fpscope" analyze "$work/big.npy" -f mxfp4 --block 4 --compare-scale-rules
check analyze-beyond-float32-note 0 '^big under rceil: 1 quantized value beyond float32.s largest' -- "$fpscope" analyze "$work/big.npy" -f mxfp4 --block 4 --compare-scale-rules
# NVFP4 under a given amax (100, the values' own 500): tensor scale 2688 / 100; block 2's scale
# saturates at 448 (0x7E) and its 500 with it; block 1's is 13 (0x55), its -3 rounding to -6.
check quantize-tensor-amax 0 '^tensor scale 26\.88 \(0x1\.ae147ap\+4\), from the given amax 100; the values. own amax: 500 \(5x the given\)$' -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4 --tensor-amax 100
check quantize-tensor-amax-counts 0 'flushed to zero 2 \(25\.0000%\), made subnormal 1 \(12\.5000%\), saturated 1 \(12\.5000%\)' -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4 --tensor-amax 0x1.9p+6
check quantize-tensor-amax-scales 0 '^ *55 +7e$' -- bash -c "'$fpscope' quantize '$work/q.npy' -f nvfp4 --block 4 --tensor-amax 100 --scales '$work/qas.npy' --codes '$work/qac.npy' --out '$work/qad.npy' >/dev/null && tail -c 2 '$work/qas.npy' | od -An -tx1"
check quantize-tensor-amax-round-trip 0 'same' -- bash -c "'$fpscope' dequantize '$work/qac.npy' --scales '$work/qas.npy' -f nvfp4 --block 4 --tensor-scale 0x1.ae147ap+4 --out '$work/qab.npy' && cmp '$work/qab.npy' '$work/qad.npy' && echo same"
check quantize-tensor-amax-own 0 '^tensor scale 5\.376 \(0x1\.581062p\+2\), from the given amax 500; the values. own amax: 500 \(the same\)$' -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4 --tensor-amax 500
check analyze-tensor-amax 0 '^q +e4m3 +8 +0 \(0\.0%\) +0 +25\.0000% +12\.5000% +12\.5000% ' -- "$fpscope" analyze "$work/q.npy" -f nvfp4 --block 4 --tensor-amax 100
check analyze-tensor-amax-header 0 'under the tensor scale 26\.88 \(0x1\.ae147ap\+4\) of the given amax 100$' -- "$fpscope" analyze "$work/q.npy" -f nvfp4 --block 4 --tensor-amax 100
check_bad bad-analyze-tensor-amax-mx "--tensor-amax sets NVFP4's tensor scale; mxfp4 has none" -- "$fpscope" analyze "$work/q.npy" -f mxfp4 --block 4 --tensor-amax 100
check_bad bad-analyze-tensor-amax-element "--tensor-amax sets NVFP4's tensor scale: it applies with -f nvfp4" -- "$fpscope" analyze "$work/q.npy" -f fp16 --tensor-amax 100
check_bad bad-analyze-tensor-amax-log "--tensor-amax needs the values themselves" -- "$fpscope" analyze "$work/run.jsonl" -f nvfp4 --tensor-amax 100
check_bad bad-quantize-tensor-amax-mx "--tensor-amax sets NVFP4's tensor scale; mxfp8-e4m3 has none" -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4 --tensor-amax 100 --out "$work/never-q.npy"
check_bad bad-dequantize-tensor-scale "--tensor-scale '0x1.ae147ap+4x' is not a finite positive float32 (as quantize printed it)" -- "$fpscope" dequantize "$work/qac.npy" --scales "$work/qas.npy" -f nvfp4 --block 4 --tensor-scale 0x1.ae147ap+4x --out "$work/never-q.npy"
check_bad bad-quantize-tensor-amax-value "--tensor-amax 'inf' is not a finite positive float32" -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4 --tensor-amax inf --out "$work/never-q.npy"
cp "$work/q.npy" "$work/q-before.npy"
check_bad bad-quantize-same-file "q.npy" -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4 --out "$work/q.npy"
check_bad bad-quantize-nvfp4-rule "--scale-rule chooses MX (E8M0) scales" -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --scale-rule even
check_bad bad-quantize-format "unknown block-scaled format 'mxfp5'" -- "$fpscope" quantize "$work/q.npy" -f mxfp5 --out "$work/never-q.npy"
check_bad bad-quantize-block "--block '0'" -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 0 --out "$work/never-q.npy"
check_bad bad-quantize-cols-1d "need a 2-D tensor" -- "$fpscope" quantize "$work/t.npy" -f mxfp8 --axis cols --out "$work/never-q.npy"
{ printf '\x93NUMPY\x01\x00\x76\x00'; printf "%-117s\n" "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }"; printf '\x00\x00\x00\x00\x00\x00\xf0\x3f'; } >"$work/d.npy"
check_bad bad-quantize-float64 "holds float64 values" -- "$fpscope" quantize "$work/d.npy" -f mxfp8 --out "$work/never-q.npy"
check_bad bad-dequantize-other-format "qc.npy: element 0 is 0x70, not a 4-bit mxfp4 element code (codes made for another format?)" -- "$fpscope" dequantize "$work/qc.npy" --scales "$work/qs.npy" -f mxfp4 --block 4 --out "$work/never-q.npy"
check_bad bad-dequantize-tensor-scale-mx "--tensor-scale is NVFP4's; mxfp8-e4m3 has none" -- "$fpscope" dequantize "$work/qc.npy" --scales "$work/qs.npy" -f mxfp8 --block 4 --tensor-scale 2 --out "$work/never-q.npy"
check_bad bad-dequantize-nvfp4-no-tensor-scale "nvfp4 codes need the tensor scale quantize printed for them: --tensor-scale S" -- "$fpscope" dequantize "$work/qac.npy" --scales "$work/qas.npy" -f nvfp4 --block 4 --out "$work/never-q.npy"
# Square tiles: q.npy is 2 x 4, blocks of 2 make 2 x 2 tiles. The left tile (1, 0.25 over 500, 1)
# takes 500's scale 2^0 (code 127) for all four, where row 0's block alone would take 2^-8; the
# right tile (0, -3 over 2^-20, 0) takes -3's 2^-7 (code 120).
check quantize-tiles 0 'blocks of 2 along rows, each scaled by its 2x2 tile.s amax' -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 2 --tiles
check quantize-tiles-scales 0 '^ *127 +120 +127 +120$' -- bash -c "'$fpscope' quantize '$work/q.npy' -f mxfp8 --block 2 --tiles --scales '$work/qts.npy' >/dev/null && tail -c 4 '$work/qts.npy' | od -An -tu1"
check quantize-tiles-cols 0 'same' -- bash -c "'$fpscope' quantize '$work/q.npy' -f mxfp8 --block 2 --tiles --codes '$work/qtr.npy' >/dev/null && '$fpscope' quantize '$work/q.npy' -f mxfp8 --block 2 --tiles --axis cols --codes '$work/qtc.npy' >/dev/null && cmp '$work/qtr.npy' '$work/qtc.npy' && echo same"
check analyze-tiles 0 '^q +floor +8 +0 \(0\.0%\) +0 +12\.5000% +0\.0000% +12\.5000% +2\^-7\.\.2\^0' -- "$fpscope" analyze "$work/q.npy" -f mxfp8 --block 2 --tiles
check analyze-tiles-header 0 '^format mxfp8-e4m3, blocks of 2 along rows, each scaled by its 2x2 tile.s amax, ' -- "$fpscope" analyze "$work/q.npy" -f mxfp8 --block 2 --tiles
check_bad bad-analyze-tiles-log "--tiles needs the values themselves (.npy tensors)" -- "$fpscope" analyze "$work/run.jsonl" -f mxfp4 --tiles
check_bad bad-analyze-tiles-element "--compare-scale-rules, --tiles, --block and --scale-rule apply to block-scaled formats" -- "$fpscope" analyze "$work/q.npy" -f fp16 --tiles
check_bad bad-quantize-tiles-1d "square tiles (--tiles) need a 2-D tensor" -- "$fpscope" quantize "$work/t.npy" -f mxfp8 --tiles --out "$work/never-q.npy"
check_bad bad-quantize-tiles-amax "--tiles makes NVFP4's tensor scale from the values' own amax" -- "$fpscope" quantize "$work/q.npy" -f nvfp4 --block 4 --tiles --tensor-amax 100 --out "$work/never-q.npy"
check_bad bad-dequantize-shape "need scales of shape (2, 2)" -- "$fpscope" dequantize "$work/qc.npy" --scales "$work/qs.npy" -f mxfp8 --block 2 --out "$work/never-q.npy"
check_bad bad-analyze-block-log "the run logs hold no block statistics: record them with fpscope train --record-blocks mxfp4" -- "$fpscope" analyze "$work/run.jsonl" -f mxfp4
if cmp -s "$work/q.npy" "$work/q-before.npy" && ! ls "$work"/never-q.npy >/dev/null 2>&1; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)); echo "FAIL bad-quantize-untouched: the input changed or an output was left behind"
fi
# One scale semantics (run log v2): a gradient recorded at 2^8 and an activation; a hypothetical
# loss scale moves the gradient only, and the recorded scale is divided out first.
cat >"$work/v2.jsonl" <<'LOG'
{"schema_version": 2, "source": "test", "run_id": "00112233445566778899aabbccddeeff"}
{"step": 0, "loss": 2.0, "loss_scale": 256, "skipped": true}
{"step": 1, "loss": 1.5, "loss_scale": 256, "skipped": false, "tensors": [{"name": "fc1", "kind": "activation_gradient", "scale": 256, "captured": "before_cast", "bins": [[-22, 5], [-12, 10], [6, 1]]}, {"name": "fc1", "kind": "activation", "scale": 1, "captured": "as_stored", "bins": [[-30, 5], [-20, 10], [-2, 1]]}]}
LOG
check semantics-as-recorded 0 'fc1 activation_gradient +16 +2\^8 +2\^-2 +2\^-30 +0\.00% +31\.25% +0\.00%' -- "$fpscope" analyze "$work/v2.jsonl"
check semantics-same-at-recorded-scale 0 'fc1 activation_gradient +16 +2\^8 +2\^-2 +2\^-30 +0\.00% +31\.25% +0\.00%' -- "$fpscope" analyze "$work/v2.jsonl" --scale 2^8
check semantics-gradient-at-1 0 'fc1 activation_gradient +16 +2\^8 +2\^-2 +2\^-30 +31\.25% +62\.50%' -- "$fpscope" analyze "$work/v2.jsonl" --scale 1
check semantics-activation-never-moves 0 'fc1 activation \* +16 +1 +2\^-2 +2\^-30 +31\.25% +62\.50% +0\.00% +-' -- "$fpscope" analyze "$work/v2.jsonl" --scale 2^12
check semantics-as-stored-said 0 'captured as stored' -- "$fpscope" analyze "$work/v2.jsonl"
check semantics-auto-from-gradients 0 'advice for the gradients: 2\^16 \(set by fc1 activation_gradient\)' -- "$fpscope" analyze "$work/v2.jsonl" --scale auto
check semantics-bf16-none-needed 0 'advice for the gradients: none needed' -- "$fpscope" analyze "$work/v2.jsonl" --format bf16 --scale auto
check analyze-kind-filter 0 '^fc1 activation \*' -- bash -c "'$fpscope' analyze '$work/v2.jsonl' --kind activation | grep -v gradient"
check analyze-tensor-glob 0 'no tensor matches' -- bash -c "'$fpscope' analyze '$work/v2.jsonl' --tensor 'fc9*' 2>&1; true"
printf '{"schema_version": 7}\n' >"$work/future.jsonl"
check_bad bad-run-schema "future.jsonl:1: unknown schema version 7" -- "$fpscope" analyze "$work/future.jsonl"
check_bad bad-run-missing "absent.jsonl" -- "$fpscope" analyze "$work/absent.jsonl"
check_bad bad-scale "--scale '3'" -- "$fpscope" analyze "$work/run.jsonl" --scale 3
check_bad bad-export "future.jsonl:1" -- "$fpscope" export "$work/future.jsonl" --csv "$work/never.csv"
if [[ -e "$work/never.csv" ]] || ls "$work"/never.csv.tmp* >/dev/null 2>&1; then
  failed=$((failed + 1)); echo "FAIL bad-export-no-output: a partial CSV was left behind"
else
  passed=$((passed + 1))
fi

# train: a short run writes a run log that analyze reads; bad options leave no log behind.
check train-runs 0 '^60 steps, final loss [0-9.]+, loss scale [0-9]+, skipped steps [0-9]+$' -- bash -c "'$fpscope' train --model 16-32-4 --steps 60 --batch 32 --record-every 20 --out '$work/train.jsonl' 2>/dev/null"
check train-log-read 0 'fc2 activation_gradient +384 ' -- "$fpscope" analyze "$work/train.jsonl"
check train-same-seed-same-log 0 '^same$' -- bash -c "'$fpscope' train --model 16-32-4 --steps 60 --batch 32 --record-every 20 --out '$work/again.jsonl' >/dev/null 2>&1 && cmp -s <(sed -E 's/\"run_id\":\"[0-9a-f]{32}\",?//' '$work/train.jsonl') <(sed -E 's/\"run_id\":\"[0-9a-f]{32}\",?//' '$work/again.jsonl') && echo same"
check_bad bad-train-model "'16-x-4'" -- "$fpscope" train --model 16-x-4 --out "$work/never1.jsonl"
check_bad bad-train-scale-negative "'-4'" -- "$fpscope" train --loss-scale -4 --out "$work/never2.jsonl"
check_bad bad-train-scale-zero "'0'" -- "$fpscope" train --loss-scale 0 --out "$work/never3.jsonl"
check_bad bad-train-cuda "--backend cuda: " -- "$fpscope" train --backend cuda --out "$work/never4.jsonl"
# Block statistics recorded while training: what MXFP8 would flush and saturate, per tensor.
check train-record-blocks 0 '^fc1 weight +3 +1536 +0 ' -- bash -c "'$fpscope' train --model 16-32-4 --steps 60 --batch 32 --record-every 20 --record-blocks mxfp8-e4m3 --out '$work/blocks.jsonl' >/dev/null 2>&1 && '$fpscope' analyze '$work/blocks.jsonl' -f mxfp8-e4m3"
check train-record-blocks-same-run 0 '^same$' -- bash -c "cmp -s <('$fpscope' export '$work/train.jsonl' --csv -) <('$fpscope' export '$work/blocks.jsonl' --csv -) && echo same"
check export-blocks-csv 0 '^0,fc1,weight,mxfp8-e4m3,32,floor,total,elements,512$' -- "$fpscope" export "$work/blocks.jsonl" --blocks-csv -
check export-blocks-csv-sums 0 '^ok$' -- bash -c "'$fpscope' export '$work/blocks.jsonl' --blocks-csv - | awk -F, '\$7==\"relative_exponent\" {r[\$1\",\"\$2\",\"\$3]+=\$9} \$7==\"total\" && \$8==\"zeros\" {z[\$1\",\"\$2\",\"\$3]=\$9} \$7==\"total\" && \$8==\"elements\" {e[\$1\",\"\$2\",\"\$3]=\$9} END {for (k in e) if (r[k]+z[k]!=e[k]) bad=1; print (bad || length(e)==0) ? \"bad\" : \"ok\"}'"
check_bad bad-export-blocks-none "holds no block statistics" -- "$fpscope" export "$work/train.jsonl" --blocks-csv "$work/never11.csv"
check train-adamw 0 '^60 steps, final loss [0-9.]+, loss scale [0-9]+, skipped steps 0$' -- bash -c "'$fpscope' train --model 16-32-4 --steps 60 --batch 32 --optimizer adamw --lr 0.003 --weight-decay 0.01 --clip-grad-norm 1 --out '$work/adamw.jsonl' 2>/dev/null"
check train-momentum-learns 0 '^learns$' -- bash -c "'$fpscope' train --model 16-32-4 --steps 60 --batch 32 --optimizer momentum --lr 0.1 --loss-weight 1 --loss-scale dynamic --out '$work/momentum.jsonl' >/dev/null 2>&1 && '$fpscope' export '$work/momentum.jsonl' --csv - >/dev/null && python3 -c \"import json; l=[json.loads(x) for x in open('$work/momentum.jsonl')][1:]; print('learns' if l[-1]['loss'] < 0.2 * l[0]['loss'] else 'stuck')\""
# A new run log replaces only an earlier run log: a tensor named by mistake is left byte for byte.
printf 'not a run log\n' > "$work/precious.txt"
check_bad bad-train-out-not-a-log "--out $work/precious.txt exists and is not an fpscope run log" -- "$fpscope" train --model 16-32-4 --steps 1 --out "$work/precious.txt"
check train-out-not-a-log-kept 0 '^kept$' -- bash -c "[[ \$(cat '$work/precious.txt') == 'not a run log' ]] && echo kept"
# A new checkpoint likewise replaces only an earlier checkpoint.
check_bad bad-train-checkpoint-not-one "--checkpoint $work/precious.txt exists and is not an fpscope checkpoint" -- "$fpscope" train --model 16-32-4 --steps 2 --checkpoint-every 1 --checkpoint "$work/precious.txt" --out "$work/never19.jsonl"
check train-checkpoint-not-one-kept 0 '^kept$' -- bash -c "[[ \$(cat '$work/precious.txt') == 'not a run log' ]] && echo kept"
# An export or a tensor replaces only an earlier file of its kind: a run log, a checkpoint, a
# tensor or any other file named by mistake is refused before anything is read, and left byte for byte.
cp "$work/adamw.jsonl" "$work/other-run.jsonl"
check_bad bad-export-csv-over-a-log "--steps-csv $work/other-run.jsonl exists and is not a CSV file" -- "$fpscope" export "$work/train.jsonl" --steps-csv "$work/other-run.jsonl"
check_bad bad-export-svg-over-text "--svg $work/precious.txt exists and is not an SVG image" -- "$fpscope" export "$work/train.jsonl" --svg "$work/precious.txt"
check_bad bad-export-png-over-a-tensor "--png $work/q.npy exists and is not a PNG image" -- "$fpscope" export "$work/train.jsonl" --png "$work/q.npy"
check_bad bad-quantize-out-over-a-log "--out $work/other-run.jsonl exists and is not a .npy array" -- "$fpscope" quantize "$work/q.npy" -f mxfp8 --block 4 --out "$work/other-run.jsonl"
check_bad bad-dequantize-out-over-text "--out $work/precious.txt exists and is not a .npy array" -- "$fpscope" dequantize "$work/qc.npy" --scales "$work/qs.npy" -f mxfp8 --block 4 --out "$work/precious.txt"
check exports-kept 0 '^kept$' -- bash -c "cmp -s '$work/adamw.jsonl' '$work/other-run.jsonl' && [[ \$(cat '$work/precious.txt') == 'not a run log' ]] && echo kept"
# ... and an earlier export of its kind is replaced.
check export-replaces-its-kind 0 '^replaced$' -- bash -c "'$fpscope' export '$work/train.jsonl' --steps-csv '$work/again.csv' && '$fpscope' export '$work/adamw.jsonl' --steps-csv '$work/again.csv' && '$fpscope' export '$work/train.jsonl' --png '$work/again.png' && '$fpscope' export '$work/train.jsonl' --png '$work/again.png' && '$fpscope' export '$work/train.jsonl' --svg '$work/again.svg' && '$fpscope' export '$work/train.jsonl' --plot heatmap --svg '$work/again.svg' && [[ \$(wc -l < '$work/again.csv') == 61 ]] && echo replaced"
check_bad bad-train-optimizer "unknown optimizer 'adam'" -- "$fpscope" train --optimizer adam --out "$work/never12.jsonl"
check_bad bad-train-weight-decay-sgd "--weight-decay is AdamW's decoupled decay" -- "$fpscope" train --weight-decay 0.1 --out "$work/never13.jsonl"
check_bad bad-train-betas "--betas '0.9' is not B1,B2" -- "$fpscope" train --optimizer adamw --betas 0.9 --out "$work/never14.jsonl"
check_bad bad-train-record-blocks-format "unknown block-scaled format 'mxfp5'" -- "$fpscope" train --record-blocks mxfp5 --out "$work/never8.jsonl"
# The GPT: a short run that analyze reads by its tensors' names, a run cut by a checkpoint and
# resumed (on other thread counts) that writes the uninterrupted run's log, and --export-inputs' arrays.
gpt=(--model gpt:layers=2,width=16,heads=2,context=8,vocab=64 --batch 4 --precision fp16 --loss-scale dynamic)
check train-gpt 0 '^6 steps, final loss [0-9.]+, loss scale 65536, skipped steps 0$' -- bash -c "'$fpscope' train ${gpt[*]} --steps 6 --record-every 3 --out '$work/gpt.jsonl' 2>/dev/null"
check train-gpt-analyze 0 'h1\.attn\.scores +activation +576 ' -- "$fpscope" analyze "$work/gpt.jsonl"
check train-gpt-resume 0 '^same$' -- bash -c "'$fpscope' train ${gpt[*]} --steps 3 --record-every 3 --checkpoint-every 3 --threads 1 --out '$work/gpt-cut.jsonl' >/dev/null 2>&1 &&
  '$fpscope' train ${gpt[*]} --steps 6 --record-every 3 --checkpoint-every 3 --threads 3 --out '$work/gpt-cut.jsonl' --resume >/dev/null 2>&1 &&
  cmp -s <(sed -E 's/\"run_id\":\"[0-9a-f]{32}\",?//' '$work/gpt.jsonl') <(sed -E 's/\"run_id\":\"[0-9a-f]{32}\",?//' '$work/gpt-cut.jsonl') && echo same"
# One, two and seven threads give a whole run's bits (the element-wise passes, the synthetic
# batches and the products are all sliced without regard to the thread count): the MLP at the
# defaults (tanh, fp16) and in bf16 with GELU, the GPT (GELU, softmax, AdamW), and a bf16 MLP whose
# first product one thread makes in one call and more threads in slices; every step recorded.
check train-threads-same-bits 0 '^same same same same$' -- bash -c "
  runs=('--model 64-1024-10 --batch 64' '--model 64-1024-10 --batch 64 --precision bf16 --activation gelu' '${gpt[*]}'
        '--model 784-512-10 --batch 64 --precision bf16')
  for r in 0 1 2 3; do
    for t in 1 2 7; do '$fpscope' train \${runs[r]} --steps 4 --threads \$t --out '$work/threads-'\$r-\$t.jsonl >/dev/null 2>&1 || exit 1; done
    strip() { sed -E 's/\"run_id\":\"[0-9a-f]{32}\",?//' \"\$1\"; }
    cmp -s <(strip '$work/threads-'\$r-1.jsonl) <(strip '$work/threads-'\$r-2.jsonl) &&
      cmp -s <(strip '$work/threads-'\$r-1.jsonl) <(strip '$work/threads-'\$r-7.jsonl) && printf same || printf differ
    [[ \$r == 3 ]] || printf ' '
  done"
check train-gpt-recipe 0 '^24 h1\.mlp\.proj output_gradient e5m2$' -- bash -c "'$fpscope' train ${gpt[*]} --recipe fp8-delayed --steps 3 --out '$work/gpt-fp8.jsonl' >/dev/null 2>&1 &&
  python3 -c 'import json,sys; s=[json.loads(l) for l in open(sys.argv[1])][-1][\"scaling\"]; o=[x for x in s if x[\"operand\"]==\"output_gradient\"][0]; print(len(s), o[\"name\"], o[\"operand\"], o[\"format\"])' '$work/gpt-fp8.jsonl'"
# Its steps and its FP8 scaling as tidy CSV, each row the log's own numbers read back exactly.
check export-steps-csv 0 '^ok 3$' -- bash -c "'$fpscope' export '$work/gpt-fp8.jsonl' --steps-csv - | python3 -c '
import csv, json, sys
rows = list(csv.DictReader(sys.stdin))
log = [json.loads(l) for l in open(sys.argv[1])][1:]
good = [(int(r[\"step\"]), float(r[\"loss\"]), float(r[\"loss_scale\"]), r[\"skipped\"] == \"1\") for r in rows] == [(l[\"step\"], l[\"loss\"], l[\"loss_scale\"], l[\"skipped\"]) for l in log]
print(\"ok\" if good else \"bad\", len(rows))
' '$work/gpt-fp8.jsonl'"
check export-scaling-csv 0 '^ok 72$' -- bash -c "'$fpscope' export '$work/gpt-fp8.jsonl' --scaling-csv - | python3 -c '
import csv, json, sys
rows = list(csv.DictReader(sys.stdin))
log = [(str(l[\"step\"]), s[\"name\"], s[\"operand\"], s[\"format\"], s[\"amax\"], s[\"scale\"], s[\"elements\"], s[\"flushed_to_zero\"], s[\"saturated\"])
       for l in (json.loads(x) for x in list(open(sys.argv[1]))[1:]) for s in l[\"scaling\"]]
got = [(r[\"step\"], r[\"tensor\"], r[\"operand\"], r[\"format\"], float(r[\"amax\"]), float(r[\"scale\"]), int(r[\"elements\"]), int(r[\"flushed_to_zero\"]), int(r[\"saturated\"])) for r in rows]
print(\"ok\" if got == log else \"bad\", len(rows))
' '$work/gpt-fp8.jsonl'"
# analyze sums the FP8 operands' casts over every step: its JSON against the log's own entries.
check analyze-fp8-operands 0 '^ok 24$' -- bash -c "'$fpscope' analyze '$work/gpt-fp8.jsonl' --json | python3 -c '
import json, sys
got = {(o[\"tensor\"], o[\"operand\"]): (o[\"steps\"], o[\"count\"], o[\"flushed_to_zero\"], o[\"saturated\"], o[\"amax_max\"], o[\"scale_last\"]) for o in json.load(sys.stdin)[\"fp8_operands\"]}
want = {}
for line in list(open(sys.argv[1]))[1:]:
    for o in json.loads(line)[\"scaling\"]:
        k = (o[\"name\"], o[\"operand\"]); s, n, f, sat, a, _ = want.get(k, (0, 0, 0, 0, 0.0, 0.0))
        want[k] = (s + 1, n + o[\"elements\"], f + o[\"flushed_to_zero\"], sat + o[\"saturated\"], max(a, o[\"amax\"]), o[\"scale\"])
print(\"ok\" if got == want else \"bad\", len(got))
' '$work/gpt-fp8.jsonl'"
check analyze-fp8-table 0 '^h1\.mlp\.proj output_gradient +e5m2 +3 ' -- "$fpscope" analyze "$work/gpt-fp8.jsonl"
check_bad bad-export-scaling-none "holds no FP8 scaling" -- "$fpscope" export "$work/train.jsonl" --scaling-csv "$work/never16.csv"
check_bad bad-export-two-outputs "export needs exactly one of" -- "$fpscope" export "$work/train.jsonl" --steps-csv "$work/never17.csv" --csv "$work/never18.csv"
check train-gpt-mxfp4 0 '^3 steps, final loss [0-9.]+, loss scale [0-9]+, skipped steps 0$' -- bash -c "'$fpscope' train ${gpt[*]} --recipe mxfp4 --steps 3 --out '$work/gpt-mx.jsonl' 2>/dev/null"
# Its GEMM operands' block statistics in --blocks-csv: one total of elements per (step, layer,
# operand) that the log holds, each equal to the log's, and relative exponents plus zeros summing to it.
check export-blocks-csv-operands 0 '^ok [1-9][0-9]*$' -- bash -c "'$fpscope' export '$work/gpt-mx.jsonl' --blocks-csv - | python3 -c '
import csv, json, sys
rows = list(csv.DictReader(sys.stdin))
log = {}
for line in open(sys.argv[1]):
    record = json.loads(line)
    for o in record.get(\"block_operands\", []):
        log[(str(record[\"step\"]), o[\"name\"], \"operand_\" + o[\"operand\"])] = o[\"blocks\"][\"elements\"]
total = {(r[\"step\"], r[\"tensor\"], r[\"kind\"]): int(r[\"count\"]) for r in rows if r[\"series\"] == \"total\" and r[\"bin\"] == \"elements\"}
zeros = {(r[\"step\"], r[\"tensor\"], r[\"kind\"]): int(r[\"count\"]) for r in rows if r[\"series\"] == \"total\" and r[\"bin\"] == \"zeros\"}
relative = {}
for r in rows:
    if r[\"series\"] == \"relative_exponent\": relative[(r[\"step\"], r[\"tensor\"], r[\"kind\"])] = relative.get((r[\"step\"], r[\"tensor\"], r[\"kind\"]), 0) + int(r[\"count\"])
good = log and total == log and all(relative.get(k, 0) + zeros[k] == n for k, n in total.items())
print(\"ok\" if good else \"bad\", len(total))
' '$work/gpt-mx.jsonl'"
# NVFP4 with its weights in 16 x 16 tiles: named in the header; a run cut by a checkpoint goes on
# only with the same --weight-blocks.
check train-gpt-weight-tiles 0 '"recipe":"nvfp4 \(weights in 16x16 tiles\)"' -- bash -c "'$fpscope' train ${gpt[*]} --recipe nvfp4 --weight-blocks 2d --steps 2 --checkpoint-every 2 --out '$work/gpt-tiles.jsonl' >/dev/null 2>&1 && head -1 '$work/gpt-tiles.jsonl'"
check_bad bad-train-weight-tiles-resume "was written by a run with other settings" -- "$fpscope" train ${gpt[*]} --recipe nvfp4 --steps 4 --checkpoint-every 2 --out "$work/gpt-tiles.jsonl" --resume
# analyze says the weights were one copy in square tiles only of a run whose header says so.
check analyze-weight-tiles 0 'own reduction axis \(the weights in square tiles: one copy both their products share\), elements' -- "$fpscope" analyze "$work/gpt-tiles.jsonl" -f nvfp4
check analyze-no-weight-tiles 0 'blocked along its own reduction axis, elements rounded' -- "$fpscope" analyze "$work/gpt-mx.jsonl" -f mxfp4
check train-gradient-round 0 '"recipe":"nvfp4 \(weights in 16x16 tiles, gradients rounded stochastic\)","rounding":"rne"' -- bash -c "'$fpscope' train ${gpt[*]} --recipe nvfp4 --weight-blocks 2d --gradient-round stochastic --steps 1 --out '$work/gpt-sr.jsonl' >/dev/null 2>&1 && head -1 '$work/gpt-sr.jsonl'"
check train-hadamard 0 '"recipe":"nvfp4 \(weights in 16x16 tiles, gradients rounded stochastic, weight gradients. operands through a random Hadamard transform\)"' -- bash -c "'$fpscope' train ${gpt[*]} --recipe nvfp4 --weight-blocks 2d --gradient-round stochastic --hadamard --steps 1 --out '$work/gpt-rht.jsonl' >/dev/null 2>&1 && head -1 '$work/gpt-rht.jsonl'"
check_bad bad-train-hadamard "--hadamard turns the weight gradient's operands for the block-scaled recipes" -- "$fpscope" train --recipe fp8-delayed --hadamard --out "$work/never18.jsonl"
check_bad bad-train-gradient-round "--gradient-round sets how a recipe's output-gradient operands round: use it with --recipe" -- "$fpscope" train --gradient-round stochastic --out "$work/never17.jsonl"
check_bad bad-train-weight-blocks "unknown --weight-blocks '3d': expected 1d or 2d" -- "$fpscope" train --recipe nvfp4 --weight-blocks 3d --out "$work/never15.jsonl"
check_bad bad-train-weight-blocks-recipe "--weight-blocks 2d sets the block-scaled recipes" -- "$fpscope" train --recipe fp8-current --weight-blocks 2d --out "$work/never16.jsonl"
check analyze-recipe-operands 0 '^h0\.attn\.qkv weight +3 +' -- "$fpscope" analyze "$work/gpt-mx.jsonl" -f mxfp4
check analyze-recipe-operands-json 0 '"recipe_operands": \[' -- "$fpscope" analyze "$work/gpt-mx.jsonl" -f mxfp4 --json
check train-gpt-export 0 '^exported 28 2 2$' -- bash -c "'$fpscope' train ${gpt[*]} --steps 2 --export-inputs '$work/gpt-export' >/dev/null 2>&1 &&
  echo exported \$(ls '$work/gpt-export' | grep -vc -- '-0000') \$(ls '$work/gpt-export' | grep -c '^inputs-') \$(ls '$work/gpt-export' | grep -c '^targets-')"
# --shadow: each recorded step again in float32 without casts, recorded as "<name> (fp32 shadow)";
# analyze advises from the shadows and says so.
check train-shadow 0 '^advice for the gradients: 2\^[0-9]+ \(set by fc[0-9] \(fp32 shadow\) [a-z_]+, from the run.s fp32 shadow\)$' -- bash -c \
  "'$fpscope' train --model 16-32-10 --steps 6 --record-every 3 --shadow --out '$work/shadow.jsonl' >/dev/null && [[ \$(grep -c 'fp32 shadow' '$work/shadow.jsonl') == 2 ]] &&
   '$fpscope' analyze '$work/shadow.jsonl' | grep '^advice'"
# E8M0, the MX block scale, in inspect and convert (ml_dtypes' float8_e8m0fnu): 3 rounds to 2^2
# (1.5 x 2^k and up goes up: the kept significand is odd), 1.49999999999999999 to 2^0 from its
# every digit (not through float32's nearest, the tie 1.5); -1 and 0 are NaN; codes read back.
check inspect-e8m0 0 '^  hex         0x81$' -- "$fpscope" inspect 3 -f e8m0
check inspect-e8m0-digits 0 '^  stored      2\^0 = 1$' -- "$fpscope" inspect 1.49999999999999999 -f float8_e8m0fnu
check convert-to-e8m0 0 '^0x81 4 0x7F 1 0xFF nan 0xFF nan 0xFE 1.7014118e\+38 $' -- bash -c \
  "printf '3\\n1\\n-1\\n0\\n0x1p127\\n' | '$fpscope' convert --from fp32 --to e8m0 --output both | tr '\\n' ' '"
check convert-from-e8m0 0 '^2 nan 5.877472e-39 $' -- bash -c "printf '0x80\\n0xFF\\n0x00\\n' | '$fpscope' convert --from e8m0 --to fp32 --output value | tr '\\n' ' '"
check_bad bad-train-record-blocks-rule "a scale rule chooses MX (E8M0) scales; nvfp4 has one" -- "$fpscope" train --record-blocks nvfp4:even --out "$work/never9.jsonl"
# A recipe on the CUDA backend is refused only where no device answers (as any run there), never for being one.
check_bad bad-train-recipe-cuda "--backend cuda: " -- "$fpscope" train --backend cuda --recipe mxfp4 --out "$work/never10.jsonl"
check analyze-says-blocks-recorded 0 '^the run log also holds block statistics of mxfp8-e4m3: -f mxfp8-e4m3 analyses them\.$' -- "$fpscope" analyze "$work/blocks.jsonl"
check analyze-no-blocks-not-said 1 '^0$' -- bash -c "'$fpscope' analyze '$work/train.jsonl' | grep -c 'block statistics'"
# A checkpoint and log written before run logs named their products (fpscope at 22363b8, 8-8-2,
# 4 steps, a checkpoint every 2, with that version's defaults lr 1024 and loss weight 2^-10, given
# here as options): resumed, the run goes on in its log, whose header keeps its first form, and
# the checkpoints it writes resume too.
mkdir "$work/legacy" && cp "$(dirname "$0")/fixtures/legacy.jsonl" "$(dirname "$0")/fixtures/legacy.jsonl.ckpt" "$work/legacy/"
fpscope_path=$(realpath "$fpscope")
check resume-older-checkpoint 0 '^8 steps, .*; header unchanged$' -- bash -c "cd '$work/legacy' && head -1 legacy.jsonl >header.before &&
  '$fpscope_path' train --model 8-8-2 --lr 1024 --loss-weight 2^-10 --steps 6 --checkpoint-every 2 --backend cpu --out legacy.jsonl --resume >/dev/null &&
  '$fpscope_path' train --model 8-8-2 --lr 1024 --loss-weight 2^-10 --steps 8 --checkpoint-every 2 --backend cpu --out legacy.jsonl --resume | tail -1 | tr -d '\n' &&
  [[ \$(grep -c '\"step\"' legacy.jsonl) == 8 ]] && head -1 legacy.jsonl | cmp -s - header.before && echo '; header unchanged'"
check_bad bad-analyze-no-blocks "the run logs hold no block statistics" -- "$fpscope" analyze "$work/train.jsonl" -f mxfp8-e4m3
check_bad bad-export-binades "--binades '18..-48' is not LO..HI" -- "$fpscope" export "$work/train.jsonl" --png "$work/never.png" --binades 18..-48
# MNIST-format IDX files: 20 examples of 4x4 pixels, 3 classes; images gzipped, labels plain.
mkdir -p "$work/mnist"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x14\x00\x00\x00\x04\x00\x00\x00\x04'; head -c 320 /dev/urandom; } | gzip >"$work/mnist/train-images-idx3-ubyte.gz"
{ printf '\x00\x00\x08\x01\x00\x00\x00\x14'; for i in $(seq 20); do printf "\\x0$((i % 3))"; done; } >"$work/mnist/train-labels-idx1-ubyte"
check train-mnist 0 '^30 steps, final loss' -- bash -c "'$fpscope' train --data 'mnist:$work/mnist' --model 16-8-3 --steps 30 --batch 8 2>/dev/null"
check_bad bad-train-mnist-model "does not fit the data" -- "$fpscope" train --data "mnist:$work/mnist" --model 784-8-10 --out "$work/never5.jsonl"
check_bad bad-train-mnist-missing "train-images-idx3-ubyte(.gz): not found" -- "$fpscope" train --data "mnist:$work/nowhere" --out "$work/never6.jsonl"
head -c 100 "$work/mnist/train-labels-idx1-ubyte" | head -c 12 >"$work/mnist/short" && mkdir -p "$work/bad" && cp "$work/mnist/train-images-idx3-ubyte.gz" "$work/bad/" && head -c 15 "$work/mnist/train-labels-idx1-ubyte" >"$work/bad/train-labels-idx1-ubyte"
check_bad bad-train-mnist-truncated "truncated" -- "$fpscope" train --data "mnist:$work/bad" --model 16-8-3 --out "$work/never7.jsonl"
if ls "$work"/never*.jsonl >/dev/null 2>&1; then
  failed=$((failed + 1)); echo "FAIL bad-train-no-log: a run log was left behind"
else
  passed=$((passed + 1))
fi

echo "$passed passed, $failed failed"
[[ $failed == 0 ]]
