#!/usr/bin/env python3
"""The scores of docs/heuristics.md from the oracle's CSV (tools/bench/oracle.cpp, `rime_oracle`): per shape, the heuristics'
configuration against the fastest one timed, for the shapes a fit may use and for the held-out ones apart.

    python3 tools/bench/heuristics_report.py ORACLE.csv [ORACLE2.csv ...] [--decisions DECISIONS.csv | --rime-oracle BIN]
                                             [--update DOC | --check DOC]

docs/heuristics.md: python3 tools/bench/heuristics_report.py docs/bench/oracle/h200.csv --rime-oracle build/rime_oracle \
                        --update docs/heuristics.md

Targets (issue 39): the heuristics' time within 5% of the oracle's on >= 90% of the shapes, never worse than 15%,
on both sets. Several CSVs (a run split with --shapes) are read as one.

--decisions: score the heuristics of this tree instead of those that ran with the oracle: DECISIONS.csv is
`rime_oracle --dry-run` (each shape's decision, planned on the CPU), and each decision's time is the oracle's time of
that configuration. A decision the oracle never timed is an error: the configurations a tree can choose are the
candidates the oracle times, so this happens only when the rows changed, and then the oracle must run again.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

from generated_doc import emit

WITHIN, WORST = 1.05, 1.15


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += list(csv.DictReader(f))
    return rows


def config(r):
    return f"{r['row']} {r['tile']} x{r['consumers']} split {r['split']}"


def key(r):
    return (r["row"], r["tile"], str(r["consumers"]), str(r["split"]))


def load_decisions(path):
    """shape -> (row, tile, consumers, split) from `rime_oracle --dry-run` (the decision spans four columns)."""
    out = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines[1:]:
        cells = line.split(",")
        if len(cells) != 8:
            raise SystemExit(f"heuristics_report: {path}: not a `rime_oracle --dry-run` line: {line}")
        out[cells[0]] = tuple(cells[4:8])
    return out


def per_shape(rows, decisions=None):
    shapes = {}
    for r in rows:
        s = shapes.setdefault(r["shape"], {"set": r["set"], "kind": r["kind"], "runs": [], "heuristic": None})
        r = dict(r, ms=float(r["ms"]))
        if r["heuristic"] == "1" and decisions is None:
            s["heuristic"] = r
        # The heuristics' row also times a configuration: one run per configuration, the candidate's when both are.
        if not any(key(o) == key(r) for o in s["runs"]):
            s["runs"].append(r)
    if decisions is not None:
        missing = sorted(set(shapes) - set(decisions))
        if missing:
            raise SystemExit(f"heuristics_report: no decision for {', '.join(missing)}")
        untimed = []
        for name, s in shapes.items():
            timed = [r for r in s["runs"] if key(r) == decisions[name]]
            if timed:
                s["heuristic"] = timed[0]
            else:
                untimed.append(f"{name} ({' '.join(decisions[name])})")
        if untimed:
            raise SystemExit("heuristics_report: decisions the oracle never timed (run it again): " + "; ".join(untimed))
    out = []
    for name, s in shapes.items():
        if s["heuristic"] is None:
            raise SystemExit(f"heuristics_report: {name} has no row of the heuristics' configuration")
        best = min(s["runs"], key=lambda r: r["ms"])
        out.append({"shape": name, "set": s["set"], "kind": s["kind"], "candidates": len(s["runs"]),
                    "heuristic": s["heuristic"], "best": best, "loss": s["heuristic"]["ms"] / best["ms"]})
    return out


def summary(shapes):
    n = len(shapes)
    within = sum(1 for s in shapes if s["loss"] <= WITHIN)
    worst = max((s["loss"] for s in shapes), default=float("nan"))
    met = n > 0 and within >= 0.9 * n and worst <= WORST
    return n, within, worst, met


def report(rows, decisions):
    """The generated part of docs/heuristics.md, as a list of lines."""
    out = []
    timed = per_shape(rows)
    shapes = per_shape(rows, decisions) if decisions is not None else timed
    devices = sorted({(r["device"], r["sm_count"]) for r in rows})
    commits = sorted({r["commit"] for r in rows})
    out.append(f"Timed on {', '.join(f'{d} ({n} SMs)' for d, n in devices)} at commit {', '.join(commits)}: "
               f"{len(shapes)} shapes, {len(rows)} timings. Loss: the heuristics' time over the fastest "
               "configuration's. Targets: within 5% on at least 90% of the shapes and never past 15%, on the shapes "
               "a fit may use and on the held-out ones alike.\n")
    out.append("| heuristics | set | shapes | within 5% | worst loss | target met |")
    out.append("|---|---|---|---|---|---|")
    sets = [("as timed (the oracle's commit)", timed)]
    if decisions is not None:
        sets.append(("this tree (`rime_oracle --dry-run`)", shapes))
    for label, group in sets:
        for name in ("fit", "held_out"):
            n, within, worst, met = summary([s for s in group if s["set"] == name])
            out.append(f"| {label} | {name} | {n} | {within} ({within / max(n, 1):.0%}) | {worst:.3f}x | "
                       f"{'yes' if met else 'no'} |")
    out.append("\nBy kind, this tree's heuristics:\n")
    out.append("| kind | shapes | within 5% | worst loss |")
    out.append("|---|---|---|---|")
    for kind in sorted({s["kind"] for s in shapes}):
        n, within, worst, _ = summary([s for s in shapes if s["kind"] == kind])
        out.append(f"| {kind} | {n} | {within} | {worst:.3f}x |")
    out.append("\nThe worst shapes, this tree's heuristics:\n")
    out.append("| shape | set | heuristics | ms | fastest | ms | loss |")
    out.append("|---|---|---|---|---|---|---|")
    for s in sorted(shapes, key=lambda s: -s["loss"])[:12]:
        h, b = s["heuristic"], s["best"]
        out.append(f"| {s['shape']} | {s['set']} | {config(h)} | {h['ms']:.4f} | {config(b)} | {b['ms']:.4f} | "
                   f"{s['loss']:.3f}x |")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--decisions", help="`rime_oracle --dry-run` output: score this tree's decisions")
    ap.add_argument("--rime-oracle", help="a rime_oracle binary: run its --dry-run for --decisions")
    ap.add_argument("--update", metavar="DOC", help="replace the generated part of DOC (docs/heuristics.md)")
    ap.add_argument("--check", metavar="DOC", help="exit 1 when the generated part of DOC differs")
    args = ap.parse_args(argv)
    rows = load(args.csv)
    if not rows:
        raise SystemExit("heuristics_report: no rows")
    decisions = None
    if args.rime_oracle:
        sms = sorted({r["sm_count"] for r in rows})
        if len(sms) != 1:
            raise SystemExit("heuristics_report: the CSVs hold several devices; score one at a time")
        dry = subprocess.run([args.rime_oracle, "--dry-run", "--sms", sms[0]], check=True, capture_output=True,
                             text=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(dry)
        decisions = load_decisions(f.name)
        os.unlink(f.name)
    elif args.decisions:
        decisions = load_decisions(args.decisions)
    return emit(report(rows, decisions), args.update, args.check, "heuristics_report.py",
                "tools/bench/heuristics_report.py ... --update {doc}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
