#!/usr/bin/env bash
# Builds the GPU test binary and the CLI with some rows' fields changed, for a hidden test that runs only once a
# row serves its graphs (docs/testing.md: [.ws_paged] needs "paged_kv" on the Hopper rows), or to time a routing
# before committing it. The build happens in a throwaway worktree of HEAD; nothing in this checkout changes.
# Output: .carry/bin/rime_gpu_tests_<name> and .carry/bin/rime_<name>.
#   tools/device/flipped_rows_tests.sh NAME FIELD[=JSON][,FIELD[=JSON]...] ROW [ROW...]   (a bare FIELD: true)
#   e.g. tools/device/flipped_rows_tests.sh ws_paged paged_kv sdpa_sm90_fp8 sdpa_sm90_f16
#        tools/device/flipped_rows_tests.sh ws_q8 paged_kv,min_packed_rows=32 sdpa_sm90_fp8
set -euo pipefail
name=${1:?usage: flipped_rows_tests.sh NAME FIELD[=JSON][,...] ROW...}; field=${2:?fields}; shift 2
[ $# -ge 1 ] || { echo "flipped_rows_tests.sh: name at least one row" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
tree=$(mktemp -d /tmp/rime-flip.XXXXXX)
trap 'git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
git -C "$root" worktree add --detach "$tree" HEAD >/dev/null
for row in "$@"; do
  python3 - "$tree/rows/$row.json" "$field" <<'PY'
import json, sys
path, fields = sys.argv[1], sys.argv[2]
row = json.load(open(path))
for item in fields.split(","):
    field, _, value = item.partition("=")
    row[field] = json.loads(value) if value else True
    print(f"{path}: {field} = {json.dumps(row[field])}")
with open(path, "w") as f:
    json.dump(row, f, indent=2)
    f.write("\n")
PY
done
export PATH=/usr/local/cuda/bin:$PATH
cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$tree/build" --target rime_gpu_tests rime_cli >/dev/null
mkdir -p "$root/.carry/bin"
cp "$tree/build/tests/rime_gpu_tests" "$root/.carry/bin/rime_gpu_tests_$name"
cp "$tree/build/rime" "$root/.carry/bin/rime_$name"
strip "$root/.carry/bin/rime_gpu_tests_$name" "$root/.carry/bin/rime_$name"
echo "built .carry/bin/rime_gpu_tests_$name and .carry/bin/rime_$name"
