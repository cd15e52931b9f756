#!/usr/bin/env python3
"""Compares the SASS of kernel specializations between two source trees (say main and a branch's worktree).

  tools/sass/compare.py TREE_A TREE_B --ws '2, 2, 128, 128, 128, 2' [--ws ...] [--inst HEADER:INSTANTIATION ...]

Each tree's engines/ is compiled by nvcc for sm_90a (-cubin, -Xptxas -v), one translation unit of explicit
instantiations per tree, and disassembled by nvdisasm. Per kernel it prints the instruction count of each tree, how
many instruction lines differ (addresses and branch-label numbers removed; the whole kernel, however long), and
ptxas's spill bytes. `--ws ARGS` names an sdpa_sm90 specialization by its template arguments (kIn, kOut, kDqk,
kDv, kFeatures, kC; the features are the RIME_F_* bits, e.g. 128 scale_o, 33394 the balanced paged decode);
`--inst` any other: a header under engines/ and what follows `template __global__ void` (with its parameter list).
`--dump DIR` also writes each kernel's compared lines to DIR/KERNEL.a and .b, for diff.

Where the SASS of a kernel is the same in both trees, the kernel that ran on the GPU in one tree is the kernel of
the other: docs/testing.md says which claims rest on this. Exits 1 when some kernel differs, 0 when none does.

nvdisasm: $NVDISASM, else on PATH, else /usr/local/cuda/bin. This machine's toolkit lacks it (the GPU machine has
it); the `nvidia-cuda-nvdisasm` wheel on PyPI holds one (unzip the wheel, nvidia/cu13/bin/nvdisasm).
"""
import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

WS_HEADER = "sdpa_sm90/kernel.cuh"


def find_nvdisasm():
    for cand in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    sys.exit("compare.py: no nvdisasm (set NVDISASM; see the docstring for where to get one)")


def compile_tree(tree, headers, insts, workdir, tag):
    src = os.path.join(workdir, f"{tag}.cu")
    with open(src, "w") as f:
        for h in sorted(set(headers)):
            f.write(f'#include "{h}"\n')
        for i in insts:
            f.write(f"template __global__ void {i};\n")
    cubin = os.path.join(workdir, f"{tag}.cubin")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    r = subprocess.run([nvcc, "-arch=sm_90a", "-std=c++17", "-cubin", "-Xptxas", "-v", "-I", os.path.join(tree, "engines"),
                        "-o", cubin, src], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare.py: nvcc failed for {tree}:\n{r.stderr[-4000:]}")
    # ptxas -v: "Compiling entry function 'NAME'" then its "... bytes spill stores, ... bytes spill loads".
    spills, current = {}, None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            spills[current] = (int(m.group(1)), int(m.group(2)))
    return cubin, spills


def disassemble(nvdisasm, cubin):
    """{mangled kernel name: [instruction text]}, addresses, labels and comments dropped."""
    out = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    kernels, current = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            current = m.group(1)
            kernels[current] = []
            continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m and current:
            # Branch targets are label numbers, which shift with any change elsewhere in the file.
            kernels[current].append(re.sub(r"\.L_x_\d+", ".L", m.group(1)))
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--ws", action="append", default=[], help="sdpa_sm90 template arguments, e.g. '2, 2, 128, 128, 128, 2'")
    ap.add_argument("--inst", action="append", default=[], help="HEADER:INSTANTIATION (after 'template __global__ void')")
    ap.add_argument("--dump", metavar="DIR", help="also write each kernel's SASS lines (as compared) to DIR/NAME.a / .b")
    a = ap.parse_args()
    headers = [WS_HEADER] if a.ws else []
    insts = [f"rime_dev::sdpa_sm90_fwd<{w}>(const __grid_constant__ SdpaSm90Params)" for w in a.ws]
    for spec in a.inst:
        header, _, inst = spec.partition(":")
        headers.append(header)
        insts.append(inst)
    if not insts:
        ap.error("name at least one kernel (--ws or --inst)")
    nvdisasm = find_nvdisasm()
    with tempfile.TemporaryDirectory() as work:
        cubin_a, spills_a = compile_tree(a.tree_a, headers, insts, work, "a")
        cubin_b, spills_b = compile_tree(a.tree_b, headers, insts, work, "b")
        sass_a, sass_b = disassemble(nvdisasm, cubin_a), disassemble(nvdisasm, cubin_b)
    differ = 0
    print(f"{'kernel':<60} {'A instr':>8} {'B instr':>8} {'differ':>7}  spill st/ld A -> B")
    for name in sorted(set(sass_a) | set(sass_b)):
        ia, ib = sass_a.get(name, []), sass_b.get(name, [])
        n = sum(1 for l in difflib.unified_diff(ia, ib, lineterm="", n=0)
                if l[:1] in "+-" and not l.startswith(("+++", "---")))
        differ += n > 0
        sa, sb = spills_a.get(name, (0, 0)), spills_b.get(name, (0, 0))
        short = re.sub(r"^_ZN8rime_dev\d+", "", name)[:60]
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            for tag, lines in (("a", ia), ("b", ib)):
                with open(os.path.join(a.dump, f"{short}.{tag}"), "w") as f:
                    f.write("\n".join(lines) + "\n")
        print(f"{short:<60} {len(ia):>8} {len(ib):>8} {n:>7}  {sa[0]}/{sa[1]} -> {sb[0]}/{sb[1]}")
    print(f"{differ} of {len(set(sass_a) | set(sass_b))} kernels differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
