#!/usr/bin/env bash
# Quality of the split-KV heuristic against the oracle (SPEC section 8): for each graph, time every split the
# row allows with `rime run --split S --bench` and compare the heuristic's choice with the fastest.
#   tools/bench/split_oracle.sh RIME GRAPH...      (on a GPU; prints CSV: graph,chosen,chosen_ms,best,best_ms,loss)
rime=${1:?usage: split_oracle.sh RIME GRAPH...}; shift
echo "graph,chosen,chosen_ms,best,best_ms,loss"
for g in "$@"; do
  args=$(cat "${g%.json}.args" 2>/dev/null)  # graphs/NAME.args: the row's extra `rime run` options
  chosen=$("$rime" plan "$g" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['decision']['split_kv'])")
  best=""; best_ms=""; chosen_ms=""
  for s in 1 2 4 8 16 32 64 128; do
    ms=$(timeout "${RIME_RUN_TIMEOUT:-120}" "$rime" run "$g" --split "$s" --bench --no-check --iterations 20 --json $args 2>/dev/null |
         python3 -c "import json,sys; j=json.load(sys.stdin); print(j['bench']['median_ms'])" 2>/dev/null) || continue
    [ -z "$ms" ] && continue
    [ "$s" = "$chosen" ] && chosen_ms=$ms
    if [ -z "$best_ms" ] || python3 -c "import sys; sys.exit(0 if $ms < $best_ms else 1)"; then best=$s; best_ms=$ms; fi
  done
  loss=$(python3 -c "print('%.3f' % ($chosen_ms / $best_ms))" 2>/dev/null)
  echo "$(basename "$g" .json),$chosen,$chosen_ms,$best,$best_ms,$loss"
done
