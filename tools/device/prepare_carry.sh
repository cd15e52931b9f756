#!/usr/bin/env bash
# Builds .carry/ (ignored by git) for the device tool: stripped binaries, the libfmt they link (the GPU image
# has none), a plan cache warmed with the kernels the benchmarks time (a compile must not land in a timing), and the cuDNN
# frontend wheel for the FP8 anchor. Then: device run with carry [".carry"] and tools/device/gpu_check.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cmake --build build >/dev/null
rm -rf .carry && mkdir -p .carry/bin .carry/lib .carry/whl
cp build/rime build/tests/rime_gpu_tests .carry/bin/ && strip .carry/bin/*
cp -L "$(ldd build/rime | awk '/libfmt/ {print $3}')" .carry/lib/
export RIME_CACHE_DIR=$root/.carry/cache
# Only the benchmark's and the examples' kernels: the GPU tests' ~300 kernels would push .carry past the 64 MiB the
# device tool carries, and the test binary compiles them there on 16 threads in seconds.
build/rime cache warm tools/bench/graphs/*.json tools/bench/overhead/*.json examples/*.json >/dev/null
if [ "${RIME_CARRY_WHEEL:-1}" = 1 ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d .carry/whl nvidia-cudnn-frontend
fi
du -sh .carry  # the device tool carries at most 64 MiB
