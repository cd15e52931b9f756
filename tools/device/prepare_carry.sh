#!/usr/bin/env bash
# Builds .carry/ (ignored by git) for the device tool: stripped binaries, the libfmt they link (the GPU image
# has none), a plan cache warmed with every kernel the GPU tests and the benchmark need, and the cuDNN
# frontend wheel for the FP8 anchor. Then: device run with carry [".carry"] and tools/device/gpu_check.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cmake --build build >/dev/null
rm -rf .carry && mkdir -p .carry/bin .carry/lib .carry/whl
cp build/rime build/tests/rime_gpu_tests .carry/bin/ && strip .carry/bin/*
cp -L "$(ldd build/rime | awk '/libfmt/ {print $3}')" .carry/lib/
export RIME_CACHE_DIR=$root/.carry/cache
RIME_GPU_TESTS_COMPILE_ONLY=1 build/tests/rime_gpu_tests "[.compile]" | tail -n 1
build/rime cache warm tools/bench/graphs/*.json tools/bench/overhead/*.json examples/*.json >/dev/null 2>&1 || true  # unsupported examples decline
if [ "${RIME_CARRY_WHEEL:-1}" = 1 ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d .carry/whl nvidia-cudnn-frontend
fi
du -sh .carry  # the device tool carries at most 64 MiB
