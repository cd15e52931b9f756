#!/usr/bin/env python3
"""Puts a partial oracle run into the kept CSV: every row of a shape the new CSV times replaces that shape's rows in
the kept one (the other shapes keep theirs, with their own device and commit columns), in the kept file's shape
order, new shapes last.

    python3 tools/bench/oracle_merge.py docs/bench/oracle/h200.csv OUT/oracle.csv [--write]

Without --write it prints what it would replace; with it, it rewrites the kept CSV. A new CSV whose columns differ
from the kept one's is refused (an oracle of another format).
"""
import argparse
import csv
import sys


def read(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kept")
    ap.add_argument("new")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    kept_fields, kept = read(args.kept)
    new_fields, new = read(args.new)
    if kept_fields != new_fields:
        sys.exit(f"oracle_merge: {args.new}'s columns {new_fields} are not {args.kept}'s {kept_fields}")
    if not new:
        sys.exit(f"oracle_merge: {args.new} times no shape")
    new_by_shape = {}
    for r in new:
        new_by_shape.setdefault(r["shape"], []).append(r)
    out, placed = [], set()
    for r in kept:
        s = r["shape"]
        if s not in new_by_shape:
            out.append(r)
        elif s not in placed:
            out += new_by_shape[s]
            placed.add(s)
    for s, rows in new_by_shape.items():
        if s not in placed:
            out += rows
    kept_by_shape = {}
    for r in kept:
        kept_by_shape.setdefault(r["shape"], []).append(r)
    for s, rows in new_by_shape.items():
        was = kept_by_shape.get(s, [])
        print(f"{s}: {len(was)} rows ({was[0]['commit'][:7] if was else 'new'}) -> "
              f"{len(rows)} rows ({rows[0]['device']}, {rows[0]['commit'][:7]})")
    if args.write:
        with open(args.kept, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=kept_fields, lineterminator="\n")
            w.writeheader()
            w.writerows(out)
        print(f"{args.kept}: {len(kept)} rows -> {len(out)}")


if __name__ == "__main__":
    main()
