#!/usr/bin/env bash
# The test command of the README (and of CI through .ci/run): set up, build with warnings as errors, run every
# CPU test, build the find_package consumer against an install, then the same tests under ASan + UBSan.
# GPU tests are labelled `gpu`; without a GPU they report themselves skipped (see docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc)

cmake -S . -B build -G Ninja -DRIME_WERROR=ON >/dev/null
cmake --build build -j "$jobs"

echo "== install + find_package(rime) consumer"
rm -rf build/install build/consumer
cmake --install build --prefix build/install >/dev/null
cmake -S examples/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer >/dev/null
RIME_CACHE_DIR="$PWD/build/consumer-cache" build/consumer/rime_consumer | tail -n 1

if [ "${RIME_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build"
  cmake -S . -B build-asan -G Ninja -DRIME_WERROR=ON -DRIME_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-asan -j "$jobs"
  # intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS block (NVRTC's, malloc'd, since rime
  # dlopens NVRTC) whose address is 16 mod 4096 for a pre-2.25 glibc header, records a garbage range from the words
  # before it, and LeakSanitizer's tracer then segfaults scanning it at exit ("Tracer caught signal 11"): a test that
  # passed fails on where malloc happened to put that block (docs/testing.md, "The sanitizer build").
  ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi

echo "== tests"
ctest --test-dir build --output-on-failure -j "$jobs"

# The Python package as a user installs it: `pip install .` (scikit-build-core over this CMake, nanobind), then its
# tests (python/tests; those that need a GPU or torch skip with their reason).
echo "== Python package: pip install . and pytest"
if python3 -c "import nanobind, scikit_build_core, pytest" 2>/dev/null; then
  # This Python has the build tools (the GPU image: its Python is an environment with torch, and there is no package
  # registry): the package goes beside it, into build/python-target, not into it.
  rm -rf build/python-target
  python3 -m pip install -q --no-build-isolation --no-deps --target build/python-target .
  PYTHONPATH="$PWD/build/python-target${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -ra python/tests
else
  # Debian's Python is externally managed: a virtual environment with the build tools from PyPI.
  python3 -m venv build/venv
  build/venv/bin/python -m pip install -q "nanobind==3.1.0" "scikit-build-core==1.1.2" "pytest>=7"
  build/venv/bin/python -m pip install -q --no-build-isolation .
  build/venv/bin/python -m pytest -ra python/tests
fi
# On a GPU machine the ctest run above includes the quick tier of the GPU tests (label gpu); the full tier runs
# each case under its own time limit and prints per-case times.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== GPU: the quick tier ran above; the full tier: tools/device/gpu_check.sh OUTDIR full (docs/testing.md)"
fi
