#!/usr/bin/env bash
# The benchmark of issue 5 on the GPU: our plans over tools/bench/graphs and, in the same run, the anchors.
#   tools/bench/run.sh RIME_BINARY OUTDIR      (RIME_BENCH_GLOB=PATTERN: only graphs/PATTERN.json; default all)
# Writes OUTDIR/ours.csv, anchors.csv, bench.csv, bench.png and prints the markdown table (docs/perf.md).
set -uo pipefail
rime=${1:-build/rime}; out=${2:-bench-out}; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
echo "graph,plan,ms,tflops,gbps" > "$out/ours.csv"
for f in "$here"/graphs/${RIME_BENCH_GLOB:-*}.json; do
  name=$(basename "$f" .json)
  # graphs/NAME.args: extra `rime run` options of that row (the paged decode rows' length mix).
  args=$(cat "${f%.json}.args" 2>/dev/null)
  timeout "${RIME_RUN_TIMEOUT:-120}" "$rime" run "$f" --bench --no-check --iterations 20 --json $args 2>/dev/null | python3 -c "
import json,sys; j=json.load(sys.stdin)
b=j.get('bench',{}); k=[x for x in j['kernels'] if x['role']=='attention'][0]
print('$name,%s %s,%.5f,%.2f,%.2f' % (k['engine'], k['name'].split('<')[1].split('>')[0].replace(', ',' '), b['median_ms'], b['tflops'], b['gbps']))" >> "$out/ours.csv" || echo "$name: failed" >&2
done
python3 "$here/anchor.py" > "$out/anchors.csv" 2> "$out/anchors.log"
python3 "$here/table.py" "$out/ours.csv" "$out/anchors.csv" "$out" | tee "$out/table.md"
