#!/usr/bin/env bash
# Everything a GPU session checks, in one command for the device tool (a cold start costs a minute, so batch):
# a smoke run of the examples, the GPU tests, compute-sanitizer (memcheck on a subset; racecheck and synccheck on
# a few warp-specialized draws), the benchmark with its anchors, the block-scaled epilogue's overhead and the split
# oracle. Every step runs under a time limit, so that a hang costs its limit and not the session.
# Expects the carried layout of docs/testing.md: .carry/bin (rime, rime_gpu_tests), .carry/lib (libfmt),
# .carry/cache (pre-warmed), optionally .carry/whl (the cuDNN frontend wheel for the FP8 anchor).
#   tools/device/gpu_check.sh OUTDIR [smoke|tests|edge|memcheck|racecheck|synccheck|ws_paged|bench|ab|overhead|oracle]...
# ab: tools/bench/ab.sh over .carry/bin/rime followed by every other .carry/bin/rime_* (kernel versions built
# here), RIME_AB_ROUNDS rounds (3) on the graphs of RIME_AB_GLOB (the prefill rows).
set -uo pipefail
out=${1:?usage: gpu_check.sh OUTDIR [steps]}; shift
steps=${*:-smoke tests memcheck bench overhead oracle}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
if ls "$root"/.carry/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$root"/.carry/whl/*.whl && export PYTHONPATH=/tmp/site
fi
tests=$root/.carry/bin/rime_gpu_tests
for step in $steps; do
  case $step in
    smoke)
      for f in "$root"/examples/*.json "$root"/tools/bench/graphs/*_d256.json; do
        printf '%s: ' "$(basename "$f")"
        timeout 90 "$root/.carry/bin/rime" run "$f" 2>&1 | grep -E "^check|^plan|failed|error|Error" | tr '\n' ' '
        echo " [exit ${PIPESTATUS[0]}]"
      done 2>&1 | tee "$out/smoke.log" ;;
    tests) timeout 480 stdbuf -oL "$tests" --durations yes 2>&1 | tee "$out/gpu_tests.log" |
             grep -E "sweep:|draws:|block-scaled:|MXFP8 inputs:|mx wide:|All tests|FAILED|failed|passed \(" | tail -30 ;;
    edge) timeout 300 "$tests" "[sm90_edge]" 2>&1 | tee "$out/edge.log" | tail -4 ;;
    memcheck) RIME_GPU_SWEEP=12 RIME_GPU_SM90_DRAWS=12 RIME_GPU_PAGED_DRAWS=6 RIME_GPU_RAGGED_DRAWS=8 timeout 400 \
                compute-sanitizer --tool memcheck --print-limit 5 "$tests" \
                "[sweep],[split],[block_scale],[mx],[wgmma],[sm90],[sm90_edge],[paged],[ragged],[checked]" 2>&1 |
                tee "$out/memcheck.log" | tail -5 ;;
    # The warp-specialized draws of [sm90], and the ragged draws planned on that engine.
    racecheck|synccheck)
      for filter in "[sm90]" "ragged batches against the CPU reference and the padded plan"; do
        RIME_GPU_SM90_DRAWS=${RIME_SANITIZER_DRAWS:-4} RIME_GPU_RAGGED_DRAWS=16 RIME_GPU_RAGGED_ENGINE=sdpa_sm90 \
          timeout 500 compute-sanitizer --tool "$step" --print-limit 5 "$tests" "$filter" 2>&1
      done | tee "$out/$step.log" | grep -E "draws:|SUMMARY" ;;
    # Paged K/V on the warp-specialized engine: every draw, then memcheck, racecheck and synccheck on a few (the
    # producer's per-page TMA path).
    ws_paged)
      timeout 300 "$tests" "[sm90_paged]" 2>&1 | tee "$out/ws_paged.log" | grep -E "draws:|passed|failed|FAILED" | tail -4
      for tool in memcheck racecheck synccheck; do
        RIME_GPU_SM90_PAGED_DRAWS=4 timeout 300 compute-sanitizer --tool "$tool" --print-limit 5 "$tests" "[sm90_paged]" 2>&1 |
          tee "$out/ws_paged_$tool.log" | grep -E "SUMMARY" | sed "s/^/$tool: /"
      done ;;
    bench) timeout 500 "$root/tools/bench/run.sh" "$root/.carry/bin/rime" "$out" 2>&1 | tail -40 ;;
    ab) timeout 560 "$root/tools/bench/ab.sh" "${RIME_AB_ROUNDS:-3}" "${RIME_AB_GLOB:-*_s[0-9]*}" "$root/.carry/bin/rime" \
          $(ls "$root"/.carry/bin/rime_* | grep -v rime_gpu_tests) 2>&1 | tee "$out/ab.txt" ;;
    overhead) timeout 300 "$root/tools/bench/overhead.sh" "$root/.carry/bin/rime" "$out" 2>&1 | tail -6 ;;
    oracle) timeout 300 "$root/tools/bench/split_oracle.sh" "$root/.carry/bin/rime" "$root"/tools/bench/graphs/*decode*.json \
              "$root/examples/fp8_decode_gqa.json" 2>&1 | tee "$out/split_oracle.csv" ;;
  esac
done
