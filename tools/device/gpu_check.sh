#!/usr/bin/env bash
# Everything a GPU session checks, in one command for the device tool (a cold start costs a minute, so batch).
# Every step runs under a time limit of its own, so that a hang costs its limit and not the session.
#   tools/device/gpu_check.sh OUTDIR [build|smoke|quick|full|memcheck|racecheck|synccheck|bench|ab|overhead|heuristics|tune|ranks|python|transformers|accuracy|pack]...
#   build      configure and build here (16 cores: ~1 minute from a bare checkout), into build/
#   smoke      `rime run` of every example and the D 256 bench graphs
#   quick      the quick tier of the GPU tests (<= 2 minutes on the H200): every row, engine, dtype family and output
#              kind at least once, then the coverage check; what to run after any kernel change
#   full       the full tier (<= 6 minutes): each test case its own process under its own limit (no cliff: a hang
#              or a slow case costs that case), the per-case times with their kernel compiles (count and summed
#              seconds) in OUTDIR/full_cases.txt, every line of OUTDIR/full.log stamped with its case's seconds,
#              then the coverage check over the union of the cases
#   memcheck   compute-sanitizer memcheck on a few draws of every suite; racecheck / synccheck on the
#              warp-specialized kernel's draws and the ragged draws planned on it
#   bench ab overhead   tools/bench (the anchored table, an A/B of rime_* binaries, the block-scaled O's cost)
#   heuristics the heuristics' oracle (tools/bench/oracle.cpp) into OUTDIR/oracle.csv: RIME_COMMIT=SHA (the tree's
#              commit, kept in the CSV), RIME_ORACLE_SHAPES=I:J for a part of its shapes (`rime_oracle --list`),
#              RIME_ORACLE_TIMEOUT its limit in seconds (560)
#   tune       `rime tune` of two graphs, their plans' explanations (tuned), `rime cache ls`, `cache clear --tuned`
#   ranks      `rime run --ranks N --bench` (context parallelism, one process per GPU) on dense decode and prefill
#              graphs and tools/bench/cp/'s speed rows, N every GPU of the machine (RIME_RANKS to choose): each rank
#              against the whole graph's reference and the single-GPU plan
#   python     the package installed with pip (no build isolation: the image has its build tools) into a virtual
#              environment over the system's torch, its tests (the GPU and torch ones included), examples/python/,
#              then tools/bench/python_overhead.py (host cost per eager call against torch SDPA and cuDNN's pygraph)
#   transformers  tools/bench/transformers_generate.py (generate with rime, sdpa on cuDNN and flash, and eager: tokens/s,
#              prefill, decode per token, attention's share) into OUTDIR/transformers_generate.csv; after `python`
#   accuracy   tools/bench/transformers_accuracy.py (rime, sdpa and eager against float32 attention in a model; where a
#              left-padded batch's greedy tokens first part from each prompt's alone) into OUTDIR/accuracy.txt;
#              after `python`
#   pack       every file in OUTDIR into one archive, OUTDIR/all.tar.gz (the device tool brings back at most 8 files
#              of a call: a bench alone writes 7); last
# Binaries come from build/ (or .carry/bin when a session carried them: tools/device/prepare_carry.sh).
set -uo pipefail
out=${1:?usage: gpu_check.sh OUTDIR [steps]}; shift
steps=${*:-build smoke quick memcheck}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
bin=$root/build
[ -x "$root/.carry/bin/rime" ] && bin=$root/.carry/bin
export LD_LIBRARY_PATH=$root/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export RIME_SOURCE_DIR=$root RIME_CACHE_DIR=${RIME_CACHE_DIR:-$root/.carry/cache}
if ls "$root"/.carry/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site "$root"/.carry/whl/*.whl && export PYTHONPATH=/tmp/site
fi
# NCCL for the context-parallel test: the toolkit's or the nvidia-nccl wheel's (torch's environment) libnccl.so.2.
# NVLink multicast stays off on the lent machines, in this process and every child.
export NCCL_NVLS_ENABLE=0
if [ -z "${RIME_NCCL_LIBRARY:-}" ]; then
  RIME_NCCL_LIBRARY=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib', 'libnccl.so.2'))" 2>/dev/null)
  [ -f "$RIME_NCCL_LIBRARY" ] || RIME_NCCL_LIBRARY=$(ldconfig -p 2>/dev/null | sed -n 's/.*libnccl.so.2 .*=> //p' | head -1)
  [ -n "$RIME_NCCL_LIBRARY" ] && export RIME_NCCL_LIBRARY
fi
tests() { if [ -x "$bin/rime_gpu_tests" ]; then echo "$bin/rime_gpu_tests"; else echo "$bin/tests/rime_gpu_tests"; fi; }

# Each line of standard input with the seconds (to 0.1 s) since the first was read in front of it.
stamp() {
  local t0=${EPOCHREALTIME/./} line t
  while IFS= read -r line; do
    t=$(( (${EPOCHREALTIME/./} - t0) / 100000 ))
    printf '%4d.%d %s\n' "$((t / 10))" "$((t % 10))" "$line"
  done
}

# The test cases' names, one a line (Catch2 v3 lists them as XML; v2 has --list-test-names-only).
case_names() {
  "$(tests)" --list-tests --reporter xml 2>/dev/null | sed -n 's:.*<Name>\(.*\)</Name>.*:\1:p' |
    sed 's/&quot;/"/g; s/&apos;/'"'"'/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\&/g'
  "$(tests)" --list-test-names-only 2>/dev/null | sed '/^$/d'
}

for step in $steps; do
  case $step in
    build)
      t0=$SECONDS
      (cd "$root" && scripts/setup.sh && export PATH=/usr/local/cuda/bin:$PATH &&
        cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build build -j "$(nproc)" --target rime_cli rime_gpu_tests rime_oracle) > "$out/build.log" 2>&1
      echo "build: exit $? in $((SECONDS - t0)) s"; tail -3 "$out/build.log" ;;
    smoke)
      for f in "$root"/examples/*.json "$root"/tools/bench/graphs/*_d256.json; do
        printf '%s: ' "$(basename "$f")"
        timeout 90 "$bin/rime" run "$f" 2>&1 | grep -E "^check|^plan|failed|error|Error" | tr '\n' ' '
        echo " [exit ${PIPESTATUS[0]}]"
      done 2>&1 | tee "$out/smoke.log" ;;
    quick)
      t0=$SECONDS
      RIME_GPU_TIER=quick timeout 300 stdbuf -oL "$(tests)" --durations yes > "$out/quick.log" 2>&1
      echo "quick tier: exit $? in $((SECONDS - t0)) s"
      grep -E "^[0-9.]+ s: |coverage:|test cases|assertions|FAILED" "$out/quick.log" | tail -40 ;;
    full)
      cov=$out/coverage.txt
      rm -f "$cov" "$out/full.log"
      t0=$SECONDS
      case_names > "$out/case_names.txt"
      while IFS= read -r name; do
        spec=$(printf '%s' "$name" | sed 's/[],[\\]/\\&/g')  # Catch2 test specs: \ escapes , [ ] and \ itself
        c0=$SECONDS
        # Each line stamped with the seconds since the case began, and the compiles logged (RIME_LOG=info), so that
        # full.log shows where a case's time goes: the kernels' compiles, the GPU runs or the CPU references.
        RIME_LOG=info RIME_GPU_COVERAGE_FILE=$cov timeout "${RIME_CASE_TIMEOUT:-300}" stdbuf -oL "$(tests)" "$spec" \
          2>&1 | stamp > "$out/case.log"
        rc=${PIPESTATUS[0]}
        cat "$out/case.log" >> "$out/full.log"
        compiles=$(sed -n 's/.*compiled .* in \([0-9]*\) ms for .*/\1/p' "$out/case.log" |
                   awk '{ n++; s += $1 } END { printf "%3d compiles %6.1f s", n, s / 1000 }')
        printf '%5d s  exit %-3s %s  %s\n' "$((SECONDS - c0))" "$rc" "$compiles" "$name"
      done < "$out/case_names.txt" | tee "$out/full_cases.txt"
      rm -f "$out/case.log"
      echo "full tier: $(wc -l < "$out/full_cases.txt") cases in $((SECONDS - t0)) s; failed: $(grep -vc ' exit 0 ' "$out/full_cases.txt")"
      sed -E 's/^ *[0-9]+\.[0-9] //' "$out/full.log" |
        grep -E "^(sweep|ws|sm90|warp-specialized|paged|ragged|16-bit|block-scaled|MXFP8|mx wide|head dims)[^:]*:" | tail -20
      "$(tests)" --rime-coverage "$cov" | tail -2 ;;
    memcheck)
      RIME_GPU_SWEEP=12 RIME_GPU_SM90_DRAWS=12 RIME_GPU_PAGED_DRAWS=6 RIME_GPU_RAGGED_DRAWS=8 RIME_GPU_Q16_DRAWS=8 \
        timeout 400 compute-sanitizer --tool memcheck --print-limit 5 "$(tests)" \
        "[sweep],[split],[block_scale],[mx],[sm90],[sm90_edge],[paged],[ragged],[q16],[checked]" 2>&1 |
        tee "$out/memcheck.log" | tail -5
      # The NCCL paths ([cp], [ring]) apart: NCCL's communicator init probes kernel images built for other
      # architectures and handles the cudaErrorNoKernelImageForDevice it gets, which memcheck would count as errors.
      RIME_GPU_TIER=full timeout 120 compute-sanitizer --tool memcheck --report-api-errors no --print-limit 5 \
        "$(tests)" "[cp],[ring]" 2>&1 | tee "$out/memcheck_nccl.log" | tail -3 ;;
    # The warp-specialized draws of [sm90], the ragged draws planned on that engine, and the 16-bit Q over FP8 K/V
    # draws (the in-place widening, the Q split). 12 [sm90] draws, so that 16-bit one-consumer kernels are among
    # them (draws 6 and 10: decodes; the first four hold none).
    racecheck|synccheck)
      for filter in "[sm90]" "ragged batches against the CPU reference and the padded plan" "[sm90_paged]" "[q16]"; do
        RIME_GPU_SM90_DRAWS=${RIME_SANITIZER_DRAWS:-12} RIME_GPU_SM90_PAGED_DRAWS=4 RIME_GPU_RAGGED_DRAWS=16 \
          RIME_GPU_Q16_DRAWS=${RIME_SANITIZER_DRAWS:-12} \
          RIME_GPU_RAGGED_ENGINE=sdpa_sm90 timeout 300 compute-sanitizer --tool "$step" --print-limit 5 "$(tests)" \
          "$filter" 2>&1
      done | tee "$out/$step.log" | grep -E "draws:|SUMMARY" ;;
    bench) timeout 500 "$root/tools/bench/run.sh" "$bin/rime" "$out" 2>&1 | tail -40 ;;
    ab) timeout 560 "$root/tools/bench/ab.sh" "${RIME_AB_ROUNDS:-3}" "${RIME_AB_GLOB:-*_s[0-9]*}" "$bin/rime" \
          $(ls "$bin"/rime_* | grep -v rime_gpu_tests) 2>&1 | tee "$out/ab.txt" ;;
    overhead) timeout 300 "$root/tools/bench/overhead.sh" "$bin/rime" "$out" 2>&1 | tail -6 ;;
    heuristics)
      timeout "${RIME_ORACLE_TIMEOUT:-560}" "$root/build/rime_oracle" --commit "${RIME_COMMIT:?heuristics: set RIME_COMMIT to the commit of the tree}" \
        ${RIME_ORACLE_SHAPES:+--shapes "$RIME_ORACLE_SHAPES"} > "$out/oracle.csv" 2> "$out/oracle.log"
      echo "oracle: exit $?, $(($(wc -l < "$out/oracle.csv") - 1)) rows"; tail -3 "$out/oracle.log" ;;
    ranks)
      # Decode (K/V sharded) and the prefill ring (zig-zag shards), each rank checked against the whole graph's
      # reference (sampled rows) and timed against the single-GPU plan; then the issue's speed rows
      # (tools/bench/cp/), the 128k prefills unchecked (their reference rows take minutes on the CPU).
      n=${RIME_RANKS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
      for f in "$root/examples/fp8_decode_gqa.json" "$root/tools/bench/graphs/bf16_decode_b8_h32g8_skv32768.json" \
               "$root/tools/bench/graphs/bf16_b4_h32_s4096_d128_causal.json" \
               "$root/tools/bench/graphs/bf16_b4_h32_s4096_d128.json" \
               "$root/tools/bench/graphs/fp8_b4_h32_s4096_d128_causal.json" \
               "$root/tools/bench/cp/fp8_decode_b1_h32g8_skv1048576.json"; do
        timeout 180 "$bin/rime" run "$f" --ranks "${n:-1}" --bench; echo "[ranks $n exit $?] $(basename "$f")"
      done 2>&1 | tee "$out/ranks.log"
      for f in "$root"/tools/bench/cp/*_s131072_*.json; do
        timeout 180 "$bin/rime" run "$f" --ranks "${n:-1}" --bench --no-check --iterations 5
        echo "[ranks $n exit $?] $(basename "$f")"
      done 2>&1 | tee -a "$out/ranks.log" ;;
    tune)
      # rime tune end to end: time and record two graphs, plan them (the explanation says tuned), list, clear.
      export RIME_CACHE_DIR=/tmp/rime-tune-cache
      for f in "$root/examples/fp8_decode_gqa.json" "$root/tools/bench/graphs/bf16_decode_b8_h32g8_skv32768.json"; do
        timeout 240 "$bin/rime" tune "$f" --iterations 20 2>> "$out/tune_progress.log"; echo "[tune exit $?]"
        tail -4 "$out/tune_progress.log"
        "$bin/rime" plan "$f" --explain | grep -E "^  (row|tile|split_kv|tuned) "
      done 2>&1 | tee "$out/tune.log"
      "$bin/rime" cache ls | grep -E "^tuned/|tuned choices" | tee -a "$out/tune.log"
      "$bin/rime" cache clear --tuned | tee -a "$out/tune.log"
      export RIME_CACHE_DIR=$root/.carry/cache ;;
    python)
      t0=$SECONDS
      # Beside the image's Python (itself an environment with torch: a venv over it would not see its packages).
      rm -rf /tmp/rime-py
      (cd "$root" && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/rime-py .) \
        > "$out/pip.log" 2>&1
      echo "pip install: exit $? in $((SECONDS - t0)) s"
      export PYTHONPATH=/tmp/rime-py${PYTHONPATH:+:$PYTHONPATH}
      py=python3
      (cd "$root" && RIME_CLI=$bin/rime timeout 400 $py -m pytest -ra -q python/tests) 2>&1 | tee "$out/pytest.log" |
        tail -15
      for f in "$root"/examples/python/*.py; do
        echo "== $(basename "$f")"
        timeout 120 $py "$f" 2>&1 | tail -14
        echo "[exit ${PIPESTATUS[0]}]"
      done 2>&1 | tee "$out/examples_python.log"
      timeout 120 $py "$root/tools/bench/python_overhead.py" --csv "$out/python_overhead.csv" 2>&1 |
        tee "$out/python_overhead.md" ;;
    transformers)
      export PYTHONPATH=/tmp/rime-py${PYTHONPATH:+:$PYTHONPATH}
      timeout 500 python3 "$root/tools/bench/transformers_generate.py" --csv "$out/transformers_generate.csv" 2>&1 |
        tee "$out/transformers_generate.log" ;;
    accuracy)
      export PYTHONPATH=/tmp/rime-py${PYTHONPATH:+:$PYTHONPATH}
      timeout 300 python3 "$root/tools/bench/transformers_accuracy.py" 2>&1 | grep -v Warning |
        tee "$out/accuracy.txt" ;;
    pack)
      tar czf /tmp/gpu_check_all.tar.gz -C "$out" --exclude=./all.tar.gz . &&
        find "$out" -mindepth 1 -delete && mv /tmp/gpu_check_all.tar.gz "$out/all.tar.gz"
      echo "pack: exit $?, $out/all.tar.gz" ;;
    *) echo "gpu_check.sh: unknown step '$step'"; exit 2 ;;
  esac
done
