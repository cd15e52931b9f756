#!/usr/bin/env bash
# Issue 6's benchmark: the block-scaled O epilogue's cost against the plain FP8-O plan of the same shape.
#   tools/bench/overhead.sh RIME_BINARY OUTDIR [ROUNDS]
# Each round times the base graph (tools/bench/graphs) and its NVFP4 and MXFP8 variants (tools/bench/overhead)
# back to back, so that clock drift between processes falls on all three alike; the medians over the rounds
# are compared. Writes OUTDIR/overhead.csv and prints a markdown table.
set -uo pipefail
rime=${1:-build/rime}; out=${2:-bench-out}; rounds=${3:-3}; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
echo "shape,variant,round,ms" > "$out/overhead.csv"
time_one() {
  timeout "${RIME_RUN_TIMEOUT:-120}" "$rime" run "$1" --bench --no-check --iterations 30 --json 2>/dev/null |
    python3 -c "import json,sys; print('%.5f' % json.load(sys.stdin)['bench']['median_ms'])"
}
for shape in fp8_b2_h40_s2100_d128 fp8_b1_h40_s7800_d128; do
  for r in $(seq "$rounds"); do
    echo "$shape,fp8,$r,$(time_one "$here/graphs/$shape.json")" >> "$out/overhead.csv"
    for mode in nvfp4 mxfp8; do
      echo "$shape,$mode,$r,$(time_one "$here/overhead/${shape}_$mode.json")" >> "$out/overhead.csv"
    done
  done
done
python3 - "$out/overhead.csv" <<'PY' | tee "$out/overhead.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
shapes = sorted({r["shape"] for r in rows}, key=lambda s: [r["shape"] for r in rows].index(s))
print("| shape | FP8 O ms | NVFP4 O ms | NVFP4 overhead | MXFP8 O ms | MXFP8 overhead |")
print("|---|---|---|---|---|---|")
for s in shapes:
    med = {v: statistics.median(float(r["ms"]) for r in rows if r["shape"] == s and r["variant"] == v)
           for v in ("fp8", "nvfp4", "mxfp8")}
    print(f"| {s} | {med['fp8']:.4f} | {med['nvfp4']:.4f} | {100 * (med['nvfp4'] / med['fp8'] - 1):+.1f}% "
          f"| {med['mxfp8']:.4f} | {100 * (med['mxfp8'] / med['fp8'] - 1):+.1f}% |")
PY
