#!/usr/bin/env python3
"""Summarizes ncu's warp-state samples by SASS instruction: where a kernel's warps spend their time.

  ncu --section SourceCounters ... -o REP <command>            (on the GPU machine)
  ncu -i REP.ncu-rep --page source --csv --print-source sass > SASS.csv
  tools/sass/ncu_regions.py SASS.csv [--region NAME:FIRST:LAST ...] [--top N] [--list]

Prints the stall reasons over all samples, the samples per opcode, and for each --region (instruction indices
FIRST <= i < LAST, 0 = the first instruction of the CSV; --list prints every instruction with its index, its share of
the samples, its execution count and its two largest stall reasons) the share of all samples and the region's own
stall mix. Read stall reasons at the instruction (docs/testing.md): on sm_90 a warp suspended in an mbarrier try_wait
counts as long scoreboard, and the wait for a wgmma (WARPGROUP.DEPBAR) as barrier.
"""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--region", action="append", default=[], help="NAME:FIRST:LAST (instruction indices)")
    ap.add_argument("--top", type=int, default=12, help="opcodes and instructions to print")
    ap.add_argument("--list", action="store_true", help="every instruction with its samples")
    args = ap.parse_args()

    rows = list(csv.reader(open(args.csv)))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if header_at is None:
        sys.exit("ncu_regions.py: no 'Address' header row (was the CSV written with --page source --print-source sass?)")
    hdr, data = rows[header_at], [r for r in rows[header_at + 1:] if len(r) > 2]
    col = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples_col = col["Warp Stall Sampling (All Samples)"]

    def num(r, c):
        try:
            return int(float(r[c] or 0))
        except ValueError:
            return 0

    def mix(rs):
        c = collections.Counter()
        for r in rs:
            for s in stalls:
                c[s[len("stall_"):]] += num(r, col[s])
        n = sum(c.values()) or 1
        return ", ".join(f"{k} {100 * v / n:.1f}%" for k, v in c.most_common(6))

    total = sum(num(r, samples_col) for r in data) or 1
    print(f"{len(data)} instructions, {total} samples; stalls: {mix(data)}")
    by_op = collections.Counter()
    for r in data:
        words = r[col["Source"]].split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "?")
        by_op[op.split(".")[0]] += num(r, samples_col)
    print("by opcode: " + ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in by_op.most_common(args.top)))
    for spec in args.region:
        name, first, last = spec.rsplit(":", 2)
        rs = data[int(first):int(last)]
        share = sum(num(r, samples_col) for r in rs)
        print(f"{name} [{first}, {last}): {100 * share / total:.2f}% of samples; {mix(rs)}")
    if args.list:
        for i, r in enumerate(data):
            top = sorted(((num(r, col[s]), s[len("stall_"):]) for s in stalls), reverse=True)[:2]
            print(f"{i:5d} {100 * num(r, samples_col) / total:5.2f}% ex={num(r, col['Instructions Executed']):9d} "
                  f"{top[0][1]}:{top[0][0]} {top[1][1]}:{top[1][0]} | {r[col['Source']].strip()}")


if __name__ == "__main__":
    main()
