#!/usr/bin/env bash
# Branch exp/causal-heavy-first: the masked Hopper grids launch their row tiles heaviest first within groups of 4
# slices. What it needs on the device before it can merge, each step under its own time limit; .carry/bin/rime_main
# (main's binary) is timed beside this one.
#   tools/device/causal_order_check.sh OUTDIR
set -uo pipefail
out=${1:?usage: causal_order_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd); mkdir -p "$out"
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
tests=$root/.carry/bin/rime_gpu_tests
step() {  # step NAME SECONDS COMMAND...: one line of result, the log in OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? $(grep -E 'draws|passed|FAILED|SUMMARY' "$out/$name.log" | tail -2 | tr '\n' ' ')"
}
step ws 200 "$tests" "[ws]"
step ws_edge 60 "$tests" "[ws_edge]"
step ws_paged 120 "$tests" "[ws_paged]"
RIME_GPU_WS_DRAWS=4 step ws_racecheck 200 compute-sanitizer --tool racecheck --print-limit 5 "$tests" "[ws]"
timeout 200 "$root/tools/bench/ab.sh" 3 '*causal' "$root/.carry/bin/rime_main" "$root/.carry/bin/rime" | tee "$out/ab.txt"
