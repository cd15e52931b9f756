#!/usr/bin/env bash
# Builds the libFuzzer target with clang (ASan + UBSan) and fuzzes the JSON entry point for a bounded time.
#   tests/fuzz/run.sh [SECONDS]        default 60; the issue's acceptance run used 600
# Seeds: tests/fuzz/corpus (checked in) plus the examples. New inputs go to a scratch corpus under the build
# folder, so a run never rewrites the checked-in one; copy interesting finds in by hand.
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${RIME_FUZZ_BUILD_DIR:-$root/build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz: clang++ is needed (apt-get install clang)"; exit 1; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRIME_BUILD_FUZZERS=ON -DRIME_BUILD_TESTS=OFF -DRIME_BUILD_TOOLS=OFF -DRIME_SANITIZE=ON >/dev/null
cmake --build "$build" --target rime_fuzz_json >/dev/null
scratch="$build/corpus"
mkdir -p "$scratch"
cp -n "$root"/tests/fuzz/corpus/* "$root"/examples/*.json "$scratch"/ 2>/dev/null || true
echo "fuzz: running rime_fuzz_json for ${seconds}s"
"$build/rime_fuzz_json" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -dict="$root/tests/fuzz/json.dict" -artifact_prefix="$build/" -print_final_stats=1 "$scratch" 2>&1 | tail -n 25
