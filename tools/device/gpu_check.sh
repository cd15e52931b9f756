#!/usr/bin/env bash
# Everything a GPU session checks, in one command for the device tool (a cold start costs a minute, so batch):
# the GPU tests, a compute-sanitizer memcheck subset, the benchmark with its anchors, the block-scaled epilogue's
# overhead and the split oracle.
# Expects the carried layout of docs/testing.md: .carry/bin (rime, rime_gpu_tests), .carry/lib (libfmt),
# .carry/cache (pre-warmed), optionally .carry/whl (the cuDNN frontend wheel for the FP8 anchor).
#   tools/device/gpu_check.sh OUTDIR [tests|memcheck|bench|overhead|oracle]...   (default: all five)
set -uo pipefail
out=${1:?usage: gpu_check.sh OUTDIR [steps]}; shift
steps=${*:-tests memcheck bench overhead oracle}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=$root/.carry/cache
if ls "$root"/.carry/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$root"/.carry/whl/*.whl && export PYTHONPATH=/tmp/site
fi
for step in $steps; do
  case $step in
    tests) stdbuf -oL "$root/.carry/bin/rime_gpu_tests" --durations yes 2>&1 | tee "$out/gpu_tests.log" | tail -25 ;;
    memcheck) RIME_GPU_SWEEP=12 compute-sanitizer --tool memcheck --print-limit 5 "$root/.carry/bin/rime_gpu_tests" \
                "[sweep],[split],[block_scale],[mx],[wgmma]" 2>&1 | tee "$out/memcheck.log" | tail -5 ;;
    bench) "$root/tools/bench/run.sh" "$root/.carry/bin/rime" "$out" 2>&1 | tail -30 ;;
    overhead) "$root/tools/bench/overhead.sh" "$root/.carry/bin/rime" "$out" 2>&1 | tail -6 ;;
    oracle) "$root/tools/bench/split_oracle.sh" "$root/.carry/bin/rime" "$root"/tools/bench/graphs/*decode*.json \
              "$root/examples/fp8_decode_gqa.json" 2>&1 | tee "$out/split_oracle.csv" ;;
  esac
done
