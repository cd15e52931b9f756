#!/usr/bin/env python3
"""Launch order of a masked (causal) prefill grid: list scheduling of its CTAs on the GPU's SMs.

Row tile q of a causal grid has q + 1 KV tiles (128-row CTAs, 128-key tiles). CTAs start in launch order, each on
the SM that frees first (one CTA per SM, as the two- and three-consumer Hopper kernels run). Prints the makespan
over the ideal (all work spread evenly) for: the grid in blockIdx order (x = row tile fastest: every slice's
heaviest tiles last, so the grid ends on a tail of heavy CTAs), row tiles reversed within each slice, heaviest first
over the whole grid (the CTAs in flight then span every head: no K/V reuse in L2), and heaviest first within groups
of a few (kv head, batch) slices (engines/sdpa_sm90/kernel.cuh, grid_work, for masked grids without per-batch
lengths). o: per-CTA overhead in KV tiles (prologue and epilogue).

Then the position of the partial row tile in a three-consumer grid (192-row tiles, 64-key tiles; S4096 leaves a
tile of 64 live rows): at the end of the rows its one live consumer runs all 64 KV tiles while the other two keep
ghost turns; at the start it runs one. A KV tile costs a(k) with k consumers working (a(3) = 1: the chain is
latency-bound, so one consumer alone runs its tile in less than a full tile's time; a(1) is not measured, so three
values are shown). Compared in launch order (what masked grids with per-batch lengths run) and heaviest first in
groups of 4.
  python3 tools/bench/causal_order_sim.py
"""
import heapq


def makespan(costs, sms=132):
    free = [0.0] * sms
    heapq.heapify(free)
    for c in costs:
        heapq.heappush(free, heapq.heappop(free) + c)
    return max(free)


def orders(slices, nq, o, group):
    cost = [q + 1 + o for q in range(nq)]
    launch = [cost[q] for _ in range(slices) for q in range(nq)]
    reversed_in_slice = [cost[nq - 1 - q] for _ in range(slices) for q in range(nq)]
    global_heavy = [cost[q] for q in reversed(range(nq)) for _ in range(slices)]
    grouped = [cost[q] for g0 in range(0, slices, group) for q in reversed(range(nq))
               for _ in range(g0, min(g0 + group, slices))]
    return sum(launch) / 132, [("blockIdx order", launch), ("reversed in each slice", reversed_in_slice),
                               ("heaviest first, whole grid", global_heavy),
                               (f"heaviest first, groups of {group}", grouped)]


def three_consumer_cost(row0, S, a, o):
    """A CTA of rows [row0, row0 + 192): each consumer's 64 rows see the KV tiles up to its last live row."""
    n = []
    for c in range(3):
        first, last = row0 + 64 * c, min(row0 + 64 * c + 63, S - 1)
        n.append(0 if last < max(first, 0) else last // 64 + 1)
    return o + sum(a[sum(1 for x in n if x > t)] for t in range(max(n)))


def partial_tile_position(slices, S, a1, o=1.0):
    a = (0.0, a1, (1 + a1) / 2 + 0.05, 1.0)
    nq = (S + 191) // 192
    pad = nq * 192 - S
    out = {}
    for name, shift in (("partial tile last", 0), ("partial tile first", pad)):
        cost = [three_consumer_cost(q * 192 - shift, S, a, o) for q in range(nq)]
        launch = [cost[q] for _ in range(slices) for q in range(nq)]
        grouped = [cost[q] for g0 in range(0, slices, 4) for q in reversed(range(nq))
                   for _ in range(g0, min(g0 + 4, slices))]
        out[name] = (makespan(launch), makespan(grouped))
    return out


if __name__ == "__main__":
    for B, H, S in ((4, 32, 4096), (1, 32, 16384)):
        for o in (0, 1, 2):
            ideal, rows = orders(B * H, S // 128, o, 4)
            print(f"B{B} H{H} S{S} overhead {o}: " +
                  ", ".join(f"{name} {makespan(c) / ideal:.4f}" for name, c in rows))
    for a1 in (0.4, 0.55, 0.7):
        m = partial_tile_position(4 * 32, 4096, a1)
        base = m["partial tile last"][0]
        print(f"B4 H32 S4096, three consumers, a(1) {a1}: " +
              ", ".join(f"{name} {m[name][0] / base:.4f} in launch order, {m[name][1] / base:.4f} heaviest first"
                        for name in m))
