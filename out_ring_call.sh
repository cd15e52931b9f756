set -u
OUT=$1; t0=$SECONDS
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
scripts/setup.sh > $OUT/setup.log 2>&1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build -j 16 --target rime_gpu_tests rime_cli > $OUT/build.log 2>&1; echo "build $? at $((SECONDS - t0)) s"; grep -E "error" $OUT/build.log | head -5
export RIME_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))") NCCL_NVLS_ENABLE=0
timeout 90 build/tests/rime_gpu_tests "[ring]" 2>&1 | grep -vE "^\s*$" | tail -22
echo "ring at $((SECONDS - t0)) s"
timeout 30 build/tests/rime_gpu_tests "[cp]" 2>&1 | tail -3
timeout 40 build/rime run tools/bench/graphs/bf16_b4_h32_s4096_d128_causal.json --ranks 1 --bench 2>&1 | tail -6
echo "done at $((SECONDS - t0)) s"
