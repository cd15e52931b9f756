#!/usr/bin/env bash
# A/B of kernel versions in one device run: each binary carries its own engine sources (embedded), so the same
# graph planned by each runs that binary's kernel. Rounds interleave the binaries so drift hits all alike.
#   tools/bench/ab.sh ROUNDS 'GLOB' RIME_A RIME_B ...   (GLOB over tools/bench/graphs, e.g. '*_d128*')
# Prints, per graph, each binary's median ms over the rounds and its ratio to the first binary's.
set -uo pipefail
rounds=$1 glob=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
printf '%-36s' graph; for b in "$@"; do printf ' %16s' "$(basename "$b")"; done; echo
for f in "$here"/graphs/$glob.json; do
  declare -A times=()
  for ((r = 0; r < rounds; ++r)); do
    for b in "$@"; do
      ms=$(timeout "${RIME_RUN_TIMEOUT:-120}" "$b" run "$f" --bench --no-check --iterations 20 $(cat "${f%.json}.args" 2>/dev/null) 2>/dev/null |
           sed -nE 's/^bench.*median ([0-9.]+) ms.*/\1/p')
      times[$b]="${times[$b]:-} ${ms:-nan}"
    done
  done
  printf '%-36s' "$(basename "$f" .json)"
  base=""
  for b in "$@"; do
    med=$(echo "${times[$b]}" | tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    [ -z "$base" ] && base=$med
    printf ' %9.4f %5.3fx' "$med" "$(echo "$med $base" | awk '{print $1/$2}')"
  done
  echo
  unset times
done
