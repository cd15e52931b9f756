set -u
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 RIME_SOURCE_DIR=$PWD RIME_CACHE_DIR=$PWD/.carry/cache
RIME_GPU_SWEEP=120 timeout 150 .carry/bin/rime_gpu_tests "[sweep],[split],[graph],[block_scale],[examples]" 2>&1 | grep -E "sweep:|block-scaled:|passed|failed|FAILED|with expansion|seed" | tail -8
RIME_GPU_SWEEP=12 timeout 90 compute-sanitizer --tool memcheck --print-limit 5 .carry/bin/rime_gpu_tests "[split],[wgmma]" 2>&1 | tail -3
python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/whl/*.whl && export PYTHONPATH=/tmp/site
timeout 240 tools/bench/run.sh .carry/bin/rime $OUT 2>&1 | tail -24
timeout 150 tools/bench/overhead.sh .carry/bin/rime $OUT 3 2>&1 | tail -4
