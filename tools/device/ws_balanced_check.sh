#!/usr/bin/env bash
# Branch exp/ws-balanced: the device checks its balanced one-consumer decode needs before it can merge, each step
# under its own time limit (its first form hung: docs/testing.md, session 12). Expects the carried layout of
# gpu_check.sh; .carry/bin/rime_main (optional) is main's binary, timed beside this one on the 8-token row.
#   tools/device/ws_balanced_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: ws_balanced_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
bin=$root/.carry/bin tests=$root/.carry/bin/rime_gpu_tests
many="the balanced one-consumer decode over more pieces per CTA than its list holds"
step() {  # step NAME SECONDS COMMAND...: one line of result, the log in OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: rc $rc $(grep -E 'draws:|passed|FAILED|SUMMARY' "$out/$name.log" | tail -2 | tr '\n' ' ')"
  return $rc
}
step many_pieces 60 "$tests" "$many" || { echo "stop: the balanced kernel fails or hangs"; exit 1; }
step ws_paged 150 "$tests" "[ws_paged]"
step paged_ragged 200 "$tests" "[paged],[ragged],[split],[graph]"
for tool in memcheck racecheck synccheck; do
  step "many_pieces_$tool" 120 compute-sanitizer --tool "$tool" --print-limit 5 "$tests" "$many"
done
g=$root/tools/bench/graphs/fp8_paged_decode_b64_h32g8_p16_q8
for b in "$bin/rime_main" "$bin/rime"; do
  [ -x "$b" ] || continue
  echo "$(basename "$b") q8: $(timeout 90 "$b" run "$g.json" --bench --no-check --iterations 20 $(cat "$g.args") 2>&1 |
    grep -E '^bench|rror' | head -1)"
done
