#!/usr/bin/env bash
# Branch exp/dense-balanced: what the balanced grid on every FP8 split decode (dense, one length, included) needs
# on the device before it can merge, each step under its own time limit. Expects the carried layout of
# gpu_check.sh, and .carry/bin/rime_main (main's binary) to time beside this one.
#   tools/device/dense_balanced_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: dense_balanced_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
tests=$root/.carry/bin/rime_gpu_tests
step() {  # step NAME SECONDS COMMAND...: one line of result, the log in OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? $(grep -E 'draws|passed|FAILED|SUMMARY' "$out/$name.log" | tail -2 | tr '\n' ' ')"
}
step split 200 "$tests" "[split],[examples],[graph]"
step paged 200 "$tests" "[paged],[checked]"
RIME_GPU_SWEEP=60 step sweep 300 "$tests" "[sweep]"
step split_memcheck 300 compute-sanitizer --tool memcheck --print-limit 5 "$tests" "[split]"
[ -x "$root/.carry/bin/rime_main" ] &&
  timeout 150 "$root/tools/bench/ab.sh" 5 'fp8_decode_b*' "$root/.carry/bin/rime_main" "$root/.carry/bin/rime" |
  tee "$out/ab_dense_decode.txt"
RIME_BENCH_GLOB='fp8_decode_b*' RIME_ANCHOR_ONLY=decode_b timeout 200 "$root/tools/bench/run.sh" "$root/.carry/bin/rime" \
  "$out/bench" > /dev/null 2>&1
cat "$out/bench/table.md" 2>/dev/null | grep -E "^\| fp8_decode|copy_fp8"
