#!/usr/bin/env bash
# The main job of the README: set up, build, and run `rime` on its embedded default graph.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j "$(nproc)"
./build/rime "$@"
