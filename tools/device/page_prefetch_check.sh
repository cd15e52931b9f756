#!/usr/bin/env bash
# Branch exp/ws-page-prefetch: the Hopper producer loads tile j + 1's page ids when it issues tile j. What it needs on
# the device before it can merge, each step under its own time limit; .carry/bin/rime_main (main's binary) is timed
# beside this one on the paged rows this engine serves (the 8-token decode, the paged causal prefill).
#   tools/device/page_prefetch_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: page_prefetch_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd); mkdir -p "$out"
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
tests=$root/.carry/bin/rime_gpu_tests bin=$root/.carry/bin
step() {  # step NAME SECONDS COMMAND...: one line of result, the log in OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? $(grep -E 'draws|passed|FAILED|SUMMARY' "$out/$name.log" | tail -2 | tr '\n' ' ')"
}
step ws_paged 150 "$tests" "[ws_paged]"
step paged 150 "$tests" "[paged],[checked]"
RIME_GPU_WS_PAGED_DRAWS=6 step ws_paged_racecheck 200 compute-sanitizer --tool racecheck --print-limit 5 "$tests" "[ws_paged]"
RIME_GPU_WS_PAGED_DRAWS=6 step ws_paged_synccheck 200 compute-sanitizer --tool synccheck --print-limit 5 "$tests" "[ws_paged]"
g=$root/tools/bench/graphs
for row in fp8_paged_decode_b64_h32g8_p16_q8 fp8_paged_prefill_b4_h32_s4096_p64_causal; do
  for b in rime_main rime rime_main rime; do
    echo "$row $b: $(timeout 60 "$bin/$b" run "$g/$row.json" --bench --no-check --iterations 20 $(cat "$g/$row.args" 2>/dev/null) \
      2>&1 | grep -E '^bench|rror' | head -1)"
  done
done | tee "$out/ab.txt"
