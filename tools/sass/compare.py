#!/usr/bin/env python3
"""Compares the SASS of kernel specializations between two source trees (say main and a branch's worktree).

  tools/sass/compare.py TREE_A TREE_B --ws 'e4m3, e4m3, 128, 128, stats | mask, two_consumers' [--ws ...]
                        [--inst HEADER:INSTANTIATION ...] [--specs FILE] [--param-shift REGEX:FROM:DELTA ...] [--ptx]

Each tree's engines/ is compiled by nvcc for sm_90a (-cubin, -Xptxas -v), one translation unit per kernel as NVRTC
compiles a plan's kernel (`--batch N`: N explicit instantiations a unit, faster; a kernel's code can then depend on
the others in its unit: 2 of 489 paged kernels differed in one unit of 489 and matched alone), `--jobs` units at
once, and disassembled by nvdisasm. Per kernel it prints the instruction count of each tree, how
many instruction lines differ (addresses and branch-label numbers removed; the whole kernel, however long), and
ptxas's spill bytes.

`--ws ARGS` names an sdpa_sm90 specialization by its template arguments (kIn, kOut, kDqk, kDv, kFeatures, kC), in
numbers or in the names of kernel expressions (engines/common/params.h, rime_names); each tree gets them as
numbers and under its own kernel name (sdpa_sm90_fwd, or sdpa_ws_fwd in trees before the engine had one name), and
kernels are matched across trees by their template arguments. `--inst` names any other kernel: a header under
engines/ and what follows `template __global__ void` (with its parameter list). `--specs FILE` reads every
specialization the rows can choose, as `rime_tests "[.specializations]"` prints them (`SPEC HEADER<tab>NAME<tab>PARAMS`).
`--param-shift REGEX:FROM:DELTA` adds DELTA to every constant-bank offset c[0x0][X] >= FROM in TREE_A's kernels
whose mangled name matches REGEX: the comparison across a change that moved kernel parameters by a fixed amount
(a field removed from SdpaParams). `--dump DIR` also writes each kernel's compared lines to DIR/KERNEL.a and .b.

Where the SASS of a kernel is the same in both trees, the kernel that ran on the GPU in one tree is the kernel of
the other. Exits 1 when some kernel differs, 0 when none does.

`--ptx` compares the PTX instead (nvcc -ptx: no ptxas, no nvdisasm, a few seconds a kernel): the stricter test, since
the same PTX (register names included) is the same input to ptxas, so the same SASS. A restructuring of the source
that keeps every kernel's PTX is proven to keep its SASS without disassembling; where PTX differs, compare the SASS.

nvdisasm: $NVDISASM, else on PATH, else /usr/local/cuda/bin. This machine's toolkit lacks it (the GPU machine has
it); the `nvidia-cuda-nvdisasm` wheel on PyPI holds one (unzip the wheel, nvidia/cu13/bin/nvdisasm).
"""
import argparse
import concurrent.futures
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

WS_HEADER = "sdpa_sm90/kernel.cuh"

# The spellings of template arguments in kernel expressions (engines/common/params.h, rime_names), as numbers.
NAMES = {"fp16": 0, "bf16": 1, "e4m3": 2, "e5m2": 3, "fp32": 4, "nvfp4": 5, "mxfp8": 6,
         "no_features": 0, "sink": 1, "stats": 2, "amax_o": 4, "amax_s": 8, "split": 16, "padding": 32, "mask": 64,
         "scale_o": 128, "mx_inputs": 256, "paged": 512, "ragged_q": 1024, "ragged_kv": 2048, "kv_fp8": 4096,
         "kv_e5m2": 8192, "q_bf16": 16384, "balanced": 32768, "starts": 65536, "softcap": 131072,
         "one_consumer": 1, "two_consumers": 2, "three_consumers": 3}


def numeric_args(args):
    """'e4m3, bf16, 128, 128, stats | mask, two_consumers' -> '2, 1, 128, 128, 66, 2'."""
    out = []
    for a in args.split(","):
        value = 0
        for term in a.split("|"):
            term = term.strip()
            value |= int(term) if term.lstrip("-").isdigit() else NAMES[term]
        out.append(str(value))
    return ", ".join(out)


def tree_names(tree):
    """The sdpa_sm90 kernel's name and parameter type in a tree, and the combine kernel's name."""
    with open(os.path.join(tree, "engines", WS_HEADER)) as f:
        ws = f.read()
    with open(os.path.join(tree, "engines", "combine", "kernel.cuh")) as f:
        combine = f.read()
    kernel = "sdpa_sm90_fwd" if "sdpa_sm90_fwd(" in ws else "sdpa_ws_fwd"
    params = "SdpaSm90Params" if "SdpaSm90Params" in ws else "SdpaWsParams"
    return kernel, params, "combine_splits" if "combine_splits(" in combine else "sdpa_combine"


def canonical_name(mangled):
    """A kernel's mangled name with the per-tree spellings of one kernel made one (the template arguments stay)."""
    m = re.sub(r"\d+sdpa_(?:ws|sm90)_fwd", "13sdpa_sm90_fwd", mangled)
    m = re.sub(r"\d+Sdpa(?:Ws|Sm90)Params", "14SdpaSm90Params", m)
    return re.sub(r"\d+(?:sdpa_combine|combine_splits)", "14combine_splits", m)


def specs_file(path):
    """(header, kernel, numeric arguments, parameter type) of each `SPEC HEADER<tab>NAME<tab>PARAMS` line."""
    out = []
    with open(path) as f:
        for line in f:
            if not line.startswith("SPEC "):
                continue
            header, name, params = line[5:].rstrip("\n").split("\t")
            m = re.match(r"(rime_dev::\w+)<(.*)>$", name)
            out.append((header, m.group(1), numeric_args(m.group(2)), params))
    return out


def find_nvdisasm():
    for cand in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    sys.exit("compare.py: no nvdisasm (set NVDISASM; see the docstring for where to get one)")


def compile_unit(tree, headers, insts, workdir, tag, ptx=False):
    """One translation unit of explicit instantiations: (output path, {kernel: (spill stores, spill loads)})."""
    kernel, params, combine = tree_names(tree)
    src = os.path.join(workdir, f"{tag}.cu")
    with open(src, "w") as f:
        for h in sorted(set(headers)):
            f.write(f'#include "{h}"\n')
        for i in insts:
            i = i.replace("@SM90_KERNEL@", kernel).replace("@SM90_PARAMS@", params).replace("@COMBINE@", combine)
            f.write(f"template __global__ void {i};\n")
    cubin = os.path.join(workdir, f"{tag}.{'ptx' if ptx else 'cubin'}")
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    mode = ["-ptx"] if ptx else ["-cubin", "-Xptxas", "-v"]
    r = subprocess.run([nvcc, "-arch=sm_90a", "-std=c++17", *mode, "-I", os.path.join(tree, "engines"),
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
            spills[canonical_name(current)] = (int(m.group(1)), int(m.group(2)))
    return cubin, spills


def compile_tree(tree, units, workdir, tag, jobs, read, ptx=False):
    """Every unit of (headers, instantiations) of one tree compiled, `jobs` at once, and read by `read` (the
    disassembler or the PTX reader): ({kernel: lines}, {kernel: spills})."""
    def one(n):
        headers, insts = units[n]
        out, spills = compile_unit(tree, headers, insts, workdir, f"{tag}{n}", ptx)
        return read(out), spills
    kernels, spills = {}, {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for k, sp in pool.map(one, range(len(units))):
            kernels.update(k)
            spills.update(sp)
    return kernels, spills


def disassemble(nvdisasm, cubin, shifts=()):
    """{canonical kernel name: [instruction text]}, addresses, labels and comments dropped; `shifts` (regex, from,
    delta) move constant-bank offsets of matching kernels."""
    out = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True, check=True).stdout
    kernels, current = {}, None
    for line in out.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            mangled = m.group(1)
            current = canonical_name(mangled)
            kernels[current] = []
            active = [(int(lo, 0), int(d)) for rx, lo, d in shifts if re.search(rx, mangled)]
            continue
        m = re.match(r"\s+/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m and current:
            # Branch targets are label numbers, which shift with any change elsewhere in the file; calls and
            # returns name the kernel's own symbol, which a rename changes.
            # nvdisasm pads its annotations to the longest symbol name: whitespace is not compared.
            text = re.sub(r"\s+", " ", canonical_name(re.sub(r"\.L_x_\d+", ".L", m.group(1))))
            for lo, delta in active:
                def moved(c, lo=lo, delta=delta):
                    offset = int(c.group(1), 16)
                    return f"c[0x0][{hex(offset + delta) if offset >= lo else hex(offset)}]"
                text = re.sub(r"c\[0x0\]\[(0x[0-9a-f]+)\]", moved, text)
            kernels[current].append(text)
    return kernels


def ptx_kernels(path):
    """{canonical kernel name: [PTX lines]} of a .ptx file, comments and blank lines dropped."""
    kernels, current = {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*\.visible \.entry (\S+)\(", line) or re.match(r"\s*\.entry (\S+)\(", line)
            if m:
                current = canonical_name(m.group(1))
                kernels[current] = []
            text = re.sub(r"//.*", "", line).strip()
            if current and text:
                kernels[current].append(canonical_name(text))
    return kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree_a")
    ap.add_argument("tree_b")
    ap.add_argument("--ws", action="append", default=[], help="sdpa_sm90 template arguments, e.g. '2, 2, 128, 128, 128, 2'")
    ap.add_argument("--inst", action="append", default=[], help="HEADER:INSTANTIATION (after 'template __global__ void')")
    ap.add_argument("--specs", help="a file of SPEC lines (rime_tests '[.specializations]')")
    ap.add_argument("--param-shift", action="append", default=[], metavar="REGEX:FROM:DELTA",
                    help="add DELTA to constant-bank offsets >= FROM in TREE_A's kernels matching REGEX")
    ap.add_argument("--dump", metavar="DIR", help="also write each kernel's SASS lines (as compared) to DIR/NAME.a / .b")
    ap.add_argument("--ptx", action="store_true", help="compare the PTX (no ptxas, no nvdisasm)")
    ap.add_argument("--batch", type=int, default=1, help="kernels per translation unit (1: as NVRTC compiles them)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="translation units compiled at once")
    a = ap.parse_args()
    headers = [WS_HEADER] * len(a.ws)  # one per instantiation
    insts = [f"rime_dev::@SM90_KERNEL@<{numeric_args(w)}>(const __grid_constant__ @SM90_PARAMS@)" for w in a.ws]
    for spec in a.inst:
        header, _, inst = spec.partition(":")
        headers.append(header)
        insts.append(inst)
    if a.specs:
        for header, name, args, params in specs_file(a.specs):
            headers.append(header)
            name = {"rime_dev::sdpa_sm90_fwd": "rime_dev::@SM90_KERNEL@",
                    "rime_dev::combine_splits": "rime_dev::@COMBINE@"}.get(name, name)
            params = params.replace("SdpaSm90Params", "@SM90_PARAMS@")
            insts.append(f"{name}<{args}>(const {params})")
    shifts = [tuple(x.rsplit(":", 2)) for x in a.param_shift]
    if not insts:
        ap.error("name at least one kernel (--ws or --inst)")
    pairs = list(zip(headers, insts))  # a unit includes the headers of its own kernels
    batch = max(1, a.batch)
    units = [([h for h, _ in pairs[i:i + batch]], [x for _, x in pairs[i:i + batch]]) for i in range(0, len(pairs), batch)]
    jobs = max(1, a.jobs)
    with tempfile.TemporaryDirectory() as work:
        if a.ptx:
            sass_a, spills_a = compile_tree(a.tree_a, units, work, "a", jobs, ptx_kernels, ptx=True)
            sass_b, spills_b = compile_tree(a.tree_b, units, work, "b", jobs, ptx_kernels, ptx=True)
        else:
            nvdisasm = find_nvdisasm()
            sass_a, spills_a = compile_tree(a.tree_a, units, work, "a", jobs, lambda c: disassemble(nvdisasm, c, shifts))
            sass_b, spills_b = compile_tree(a.tree_b, units, work, "b", jobs, lambda c: disassemble(nvdisasm, c))
    differ = 0
    print(f"{'kernel':<90} {'A instr':>8} {'B instr':>8} {'differ':>7}  spill st/ld A -> B")
    for name in sorted(set(sass_a) | set(sass_b)):
        ia, ib = sass_a.get(name, []), sass_b.get(name, [])
        n = sum(1 for l in difflib.unified_diff(ia, ib, lineterm="", n=0)
                if l[:1] in "+-" and not l.startswith(("+++", "---")))
        differ += n > 0
        sa, sb = spills_a.get(name, (0, 0)), spills_b.get(name, (0, 0))
        short = re.sub(r"^_ZN8rime_dev\d+", "", name)[:90]
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            for tag, lines in (("a", ia), ("b", ib)):
                with open(os.path.join(a.dump, f"{short}.{tag}"), "w") as f:
                    f.write("\n".join(lines) + "\n")
        print(f"{short:<90} {len(ia):>8} {len(ib):>8} {n:>7}  {sa[0]}/{sa[1]} -> {sb[0]}/{sb[1]}")
    print(f"{differ} of {len(set(sass_a) | set(sass_b))} kernels differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
