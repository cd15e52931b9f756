#!/usr/bin/env python3
"""Mutation testing of the stage sources: put one realistic one-line bug into a source at a time, rebuild, run the
CPU tests, and list the bugs no test caught (the survivors). Not part of CI: each mutation costs an incremental
rebuild and a test run (about two minutes on a 2-core machine for the whole ctest suite).

    tools/mutate/mutate.py [--build build] [--sample N] [--seed S] [--site PATH:LINE] [--ctest-args ...] [--list]
                           PATH...

PATH: source files or folders (their .cpp / .hpp files). The mutations, one per candidate site:
  boundary      <  <=  >  >=  flipped to their neighbour (a flipped boundary comparison)
  equality      == and != swapped
  logic         && and || swapped
  off-by-one    + 1 / - 1 swapped
  bound         std::min and std::max swapped
  early-return  a `return false;` / `return true;` flipped
Lines that are comments, preprocessor directives, static_asserts or inside string literals are left alone. Each
mutation is applied to the file on disk, built with `cmake --build BUILD`, tested with `ctest --test-dir BUILD`, and
the file is restored before the next (also on an interrupt). A mutation that does not build is not counted.
"""
import argparse
import pathlib
import random
import re
import shlex
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (class, pattern, replacement): each match of the pattern on a line is one candidate site.
OPERATORS = [
    ("boundary", re.compile(r"(?<![<>=!-])<=(?!=)"), "<"),
    ("boundary", re.compile(r"(?<![<>=!-])>=(?!=)"), ">"),
    ("boundary", re.compile(r"(?<=[\w)\]]) < (?=[\w(])"), " <= "),
    ("boundary", re.compile(r"(?<=[\w)\]]) > (?=[\w(])"), " >= "),
    ("equality", re.compile(r" == "), " != "),
    ("equality", re.compile(r" != "), " == "),
    ("logic", re.compile(r" && "), " || "),
    ("logic", re.compile(r" \|\| "), " && "),
    ("off-by-one", re.compile(r" \+ 1\b"), " - 1"),
    ("off-by-one", re.compile(r" - 1\b"), " + 1"),
    ("bound", re.compile(r"\bstd::min\b"), "std::max"),
    ("bound", re.compile(r"\bstd::max\b"), "std::min"),
    ("early-return", re.compile(r"\breturn false;"), "return true;"),
    ("early-return", re.compile(r"\breturn true;"), "return false;"),
]


def code_part(line):
    """The line with string literals and a trailing // comment blanked (same length), so that no site is in them."""
    out, in_str, i = [], False, 0
    while i < len(line):
        c = line[i]
        if in_str:
            if c == "\\":
                out.append("  ")
                i += 2
                continue
            if c == '"':
                in_str = False
            out.append(" " if c != '"' else c)
        elif c == '"':
            in_str = True
            out.append(c)
        elif line.startswith("//", i):
            out.append(" " * (len(line) - i))
            break
        else:
            out.append(c)
        i += 1
    return "".join(out)


def sites(path):
    """Every candidate mutation of a file: (path, line number, class, mutated line)."""
    found = []
    in_block_comment = False
    for n, line in enumerate(path.read_text().split("\n"), 1):
        stripped = line.strip()
        if in_block_comment:
            in_block_comment = "*/" not in stripped
            continue
        if stripped.startswith("/*"):
            in_block_comment = "*/" not in stripped
            continue
        if not stripped or stripped.startswith(("//", "#", "static_assert", "*")):
            continue
        code = code_part(line)
        for cls, pattern, repl in OPERATORS:
            for m in pattern.finditer(code):
                found.append((path, n, cls, line[:m.start()] + repl + line[m.end():]))
    return found


def run(cmd, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return -1, "timed out", time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--build", default="build", help="the configured build directory (default build)")
    ap.add_argument("--sample", type=int, help="test this many sites, drawn at random (default: all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--ctest-args", default="-j2 -LE gpu", help="arguments to ctest (default: -j2 -LE gpu)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per build or test run")
    ap.add_argument("--list", action="store_true", help="list the sites and stop")
    ap.add_argument("--site", action="append", default=[],
                    help="only the mutations of this line, PATH:LINE (repeatable): to re-run survivors")
    args = ap.parse_args()

    files = []
    for p in args.paths:
        p = (ROOT / p).resolve()
        files += sorted(x for x in p.rglob("*") if x.suffix in (".cpp", ".hpp")) if p.is_dir() else [p]
    candidates = [s for f in files for s in sites(f)]
    if args.site:
        wanted = {(str((ROOT / w.rsplit(":", 1)[0]).resolve()), int(w.rsplit(":", 1)[1])) for w in args.site}
        candidates = [s for s in candidates if (str(s[0]), s[1]) in wanted]
    if args.sample and args.sample < len(candidates):
        candidates = random.Random(args.seed).sample(candidates, args.sample)
        candidates.sort(key=lambda s: (str(s[0]), s[1]))
    print(f"{len(candidates)} mutations in {len(files)} files")
    if args.list:
        try:
            for path, n, cls, new in candidates:
                print(f"{path.relative_to(ROOT)}:{n} [{cls}] {new.strip()}")
        except BrokenPipeError:  # the list piped into head
            pass
        return 0

    rc, out, _ = run(["cmake", "--build", args.build], args.timeout)
    if rc != 0:
        print("the unmutated tree does not build:\n" + out[-2000:])
        return 2
    ctest = ["ctest", "--test-dir", args.build, *shlex.split(args.ctest_args)]
    # A selection that runs no test would call every mutant a survivor.
    rc, out, _ = run([*ctest, "-N"], args.timeout)
    if rc != 0 or re.search(r"Total Tests: 0\b", out):
        print(f"ctest {args.ctest_args} selects no test:\n{out[-2000:]}")
        return 2
    # Killed (SIGTERM) as when interrupted: the mutated file is restored before exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    killed, survived, unbuilt = [], [], []
    for k, (path, n, cls, new) in enumerate(candidates, 1):
        original = path.read_text()
        lines = original.split("\n")
        where = f"{path.relative_to(ROOT)}:{n} [{cls}] {new.strip()}"
        try:
            lines[n - 1] = new
            path.write_text("\n".join(lines))
            rc, out, build_s = run(["cmake", "--build", args.build], args.timeout)
            if rc != 0:
                unbuilt.append(where)
                verdict = "does not build"
            else:
                rc, out, test_s = run(ctest, args.timeout)
                (killed if rc != 0 else survived).append(where)
                verdict = f"{'killed' if rc != 0 else 'SURVIVED'} ({build_s:.0f} s build, {test_s:.0f} s tests)"
        finally:
            path.write_text(original)
        print(f"[{k}/{len(candidates)}] {where}: {verdict}", flush=True)
    run(["cmake", "--build", args.build], args.timeout)  # the restored tree's build, for whoever comes next
    print(f"\n{len(killed)} killed, {len(survived)} survived, {len(unbuilt)} did not build")
    for s in survived:
        print(f"survivor: {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
