#!/usr/bin/env python3
"""Launch order of a masked (causal) prefill grid: list scheduling of its CTAs on the GPU's SMs.

Row tile q of a causal grid has q + 1 KV tiles (128-row CTAs, 128-key tiles). CTAs start in launch order, each on
the SM that frees first (one CTA per SM, as the two- and three-consumer Hopper kernels run). Prints the makespan
over the ideal (all work spread evenly) for: the grid in blockIdx order (x = row tile fastest: every slice's
heaviest tiles last, so the grid ends on a tail of heavy CTAs), row tiles reversed within each slice, heaviest first
over the whole grid (the CTAs in flight then span every head: no K/V reuse in L2), and heaviest first within groups
of a few (kv head, batch) slices (engines/sdpa_sm90/kernel.cuh, grid_work, for masked grids without per-batch
lengths). o: per-CTA overhead in KV tiles (prologue and epilogue).
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


if __name__ == "__main__":
    for B, H, S in ((4, 32, 4096), (1, 32, 16384)):
        for o in (0, 1, 2):
            ideal, rows = orders(B * H, S // 128, o, 4)
            print(f"B{B} H{H} S{S} overhead {o}: " +
                  ", ".join(f"{name} {makespan(c) / ideal:.4f}" for name, c in rows))
