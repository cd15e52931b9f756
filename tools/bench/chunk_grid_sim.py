#!/usr/bin/env python3
"""How much of a split-KV decode's time the grid of per-sequence chunks leaves idle, by list scheduling.

The bench's paged decode rows (B 64, H_kv 8, lengths drawn uniformly in 1k-32k) run one CTA per (batch, kv head,
split chunk); a chunk is ceil(max_tiles / split) KV tiles of its sequence, clipped to the sequence's length (empty
past it). The hardware starts CTAs in launch order (split-major: z = b + split * B, then the kv head) as slots free
up. This replays that order on `slots` CTA slots (SMs x CTAs per SM), each CTA costing `c0` tiles of fixed work
plus its tiles, and prints the makespan against the ideal (all tiles spread evenly), for launch order and for
longest-first order. Used in docs/perf.md (session 12) for the one-consumer Hopper decode: 128-key tiles, two
CTAs per SM on 132 SMs.
  tools/bench/chunk_grid_sim.py [--slots 264] [--tile 128] [--c0 2] [--seeds 1 2 3]
"""
import argparse
import heapq
import random


def makespan(jobs, slots):
    heap = [0.0] * slots
    for j in jobs:
        heapq.heappush(heap, heapq.heappop(heap) + j)
    return max(heap)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slots", type=int, default=264)
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--c0", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--lo", type=int, default=1024)
    ap.add_argument("--hi", type=int, default=32768)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    a = ap.parse_args()
    print("seed split  launch-order  longest-first  (ideal / makespan)")
    for seed in a.seeds:
        rng = random.Random(seed)
        tiles = [(rng.randint(a.lo, a.hi) + a.tile - 1) // a.tile for _ in range(a.batch)]
        max_tiles = (a.hi + a.tile - 1) // a.tile
        ideal = sum(tiles) * a.kv_heads / a.slots
        for split in (1, 2, 4, 8, 16):
            chunk = (max_tiles + split - 1) // split
            jobs = [a.c0 + max(0, min(tiles[b] - s * chunk, chunk))
                    for s in range(split) for b in range(a.batch) for _ in range(a.kv_heads)]
            print(f"{seed:4d} {split:5d}  {ideal / makespan(jobs, a.slots):12.3f}  "
                  f"{ideal / makespan(sorted(jobs, reverse=True), a.slots):13.3f}")


if __name__ == "__main__":
    main()
