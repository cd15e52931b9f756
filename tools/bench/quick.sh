#!/usr/bin/env bash
# Times our plans on the bench graphs with `rime run --bench` (no reference check). Usage: quick.sh RIME [GLOB]
rime=${1:-build/rime}; glob=${2:-*}
for f in "$(dirname "$0")"/graphs/$glob.json; do
  line=$(timeout "${RIME_RUN_TIMEOUT:-120}" "$rime" run "$f" --bench --no-check --iterations 20 2>&1 | grep -E "^bench|^plan:" | tr '\n' ' ')
  printf '%-40s %s\n' "$(basename "$f" .json)" "$line"
done
