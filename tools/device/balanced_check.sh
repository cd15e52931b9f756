#!/usr/bin/env bash
# The balanced split-KV decode (for_each_balanced_item: the one-consumer Hopper kernel and the mma.sync kernel) on
# the device, each step under its own time limit (a balanced kernel that hangs must not take the call's budget:
# docs/testing.md, session 12). Expects the carried layout of gpu_check.sh, and .carry/bin/rime_main (the binary to
# compare with, e.g. main's) for the bench phase.
#   tools/device/balanced_check.sh tests|bench OUTDIR
set -uo pipefail
phase=${1:?usage: balanced_check.sh tests|bench OUTDIR} out=${2:?usage: balanced_check.sh tests|bench OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
bin=$root/.carry/bin tests=$root/.carry/bin/rime_gpu_tests
many="the balanced one-consumer decode over more pieces per CTA than its list holds"
mkdir -p "$out"
step() {  # step NAME SECONDS COMMAND...: one line of result, the log in OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: rc $rc $((SECONDS - t0)) s $(grep -E 'draws|passed|FAILED|SUMMARY|ERROR SUMMARY|Hazard' "$out/$name.log" | tail -2 | tr '\n' ' ')"
  return $rc
}
if [ "$phase" = tests ]; then
  step many_pieces 90 "$tests" "$many" || { echo "stop: the balanced kernel fails or hangs"; exit 1; }
  step ws_paged 150 "$tests" "[sm90_paged]" || exit 1
  step paged_ragged 200 "$tests" "[paged],[ragged],[split],[graph],[checked]"
  for tool in memcheck racecheck synccheck; do
    step "many_pieces_$tool" 60 compute-sanitizer --tool "$tool" --print-limit 5 "$tests" "$many"
  done
  step examples 60 "$tests" "[examples]"
  RIME_GPU_SWEEP=60 step sweep 150 "$tests" "[sweep]"
else
  # The paged decode rows (1, 4 and 8 tokens): the two binaries one after the other per row, then this binary's
  # rows with the copy anchor in the same call (each row's data generation takes ~25 s).
  g=$root/tools/bench/graphs
  for row in p16_q8 p16 p16_q4; do
    for b in rime_main rime; do
      echo "$row $b: $(timeout 60 "$bin/$b" run "$g/fp8_paged_decode_b64_h32g8_$row.json" --bench --no-check \
        --iterations 20 $(cat "$g/fp8_paged_decode_b64_h32g8_$row.args") 2>&1 | grep -E '^bench|rror' | head -1)"
    done
  done | tee "$out/ab_paged.txt"
  RIME_BENCH_GLOB='fp8_paged_decode_b64_h32g8_p*' RIME_ANCHOR_ONLY=paged_decode timeout 280 "$root/tools/bench/run.sh" \
    "$bin/rime" "$out/bench" > /dev/null 2>&1
  grep -E "decode|copy" "$out/bench/table.md"
fi
