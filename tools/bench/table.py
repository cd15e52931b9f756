#!/usr/bin/env python3
"""Joins our plans' timings (ours.csv from tools/bench/run.sh) with the anchors (anchors.csv from anchor.py):
prints a markdown table with TFLOP/s, GB/s and our ratio to cuDNN FP8 (FP8 rows) or torch's BF16 backends
(BF16 rows), and writes bench.csv and bench.png (when matplotlib is present) into OUTDIR."""
import csv
import sys


ANCHOR_IMPLS = ("copy_fp8", "copy_bf16", "cudnn_fp8", "torch_cudnn_bf16", "torch_flash_bf16", "rime_padded",
                "rime_dense_causal", "rime_per_tensor", "rime_fp8_q", "rime_exact_q", "rime_uncapped", "rime_d128",
                "rime_plain")


def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main(ours_csv, anchors_csv, outdir):
    ours, anchors = load(ours_csv), load(anchors_csv)
    anchor = {(a["shape"], a["impl"]): a for a in anchors}
    # A ragged prefill row's anchors are our own plans in the same run: the padded twin of the same sequences
    # (graphs/<prec>_padded_<rest>, the same pairs counted) and the dense causal prefill (B4 H32 S4096 D128), whose
    # TFLOP/s the issue holds the ragged batch to (within 10%). Their ratio is of TFLOP/s, the work differing. A
    # paged prefill row (the same causal prefill, K/V through a page table) has the dense causal row as anchor. A
    # <graph>_perhead row (descales per (batch, kv head)) has <graph> (per-tensor descales) as anchor: their cost.
    # A prefill <graph>_bf16q row (a BF16 Q over the FP8 K/V of <graph>) has <graph> (the FP8 Q plan) and torch's
    # cuDNN on the same shape with every tensor in BF16 (what the model would run without an FP8 cache).
    # A <graph>_bf16q_e4m3q row (that BF16 Q rounded to E4M3 per row, q_quantization) has the same two and
    # <graph>_bf16q (the exact 16-bit Q plan): the rounding's speed over the FP8 Q and over the exact Q.
    # A <graph>_softcap row (logits capped) has <graph> (the same graph uncapped) as anchor: the cap's cost.
    # A decode <graph>_capacity row (K/V planned for a capacity, the sequences' starts and lengths read at run time,
    # as rime.torch plans a growing cache; its .args pins the lengths to <graph>'s S_kv) has <graph>'s anchors (the
    # same bytes) and <graph> itself (the plain plan of the same step).
    # A head dim 96 or 80 row (<graph> with _d96 / _d80 for _d128, or appended to a decode graph's name) has the
    # D 128 row of the same shape too: TFLOP/s over its TFLOP/s (decode: GB/s over its GB/s).
    # Our own plans as anchors are keyed by the whole graph name (its precision included): the BF16 and FP8 rows of
    # one shape each have their own D 128, uncapped or dense twin.
    by_graph, own = {o["graph"]: o for o in ours}, {}
    for o in ours:
        for d in ("_d96", "_d80"):
            if d in o["graph"]:
                base = o["graph"].replace(d, "_d128") if "decode" not in o["graph"] else o["graph"].replace(d, "")
                if base in by_graph:
                    own[(o["graph"], "rime_d128")] = by_graph[base]
        if o["graph"].endswith("_softcap") and o["graph"][:-len("_softcap")] in by_graph:
            own[(o["graph"], "rime_uncapped")] = by_graph[o["graph"][:-len("_softcap")]]
        if o["graph"].endswith("_capacity") and "decode" in o["graph"]:
            base = o["graph"][:-len("_capacity")]
            if base in by_graph:
                own[(o["graph"], "rime_plain")] = by_graph[base]
            for impl in ("copy_bf16", "copy_fp8", "torch_cudnn_bf16", "torch_flash_bf16"):
                if (base.split("_", 1)[1], impl) in anchor:
                    anchor[(o["graph"].split("_", 1)[1], impl)] = anchor[(base.split("_", 1)[1], impl)]
        if o["graph"].endswith("_perhead") and o["graph"][:-len("_perhead")] in by_graph:
            own[(o["graph"], "rime_per_tensor")] = by_graph[o["graph"][:-len("_perhead")]]
        if o["graph"].endswith("_bf16q_e4m3q") and o["graph"][:-len("_e4m3q")] in by_graph:
            own[(o["graph"], "rime_exact_q")] = by_graph[o["graph"][:-len("_e4m3q")]]
        if o["graph"].endswith(("_bf16q", "_bf16q_e4m3q")) and "decode" not in o["graph"]:
            base = o["graph"][:o["graph"].rindex("_bf16q")]
            shape = o["graph"].split("_", 1)[1]
            if base in by_graph:
                own[(o["graph"], "rime_fp8_q")] = by_graph[base]
            if (base.split("_", 1)[1], "torch_cudnn_bf16") in anchor:
                anchor[(shape, "torch_cudnn_bf16")] = anchor[(base.split("_", 1)[1], "torch_cudnn_bf16")]
        prec, shape = o["graph"].split("_", 1)
        if shape.startswith("padded_prefill_"):
            own[(prec + "_" + shape.replace("padded_", "ragged_", 1), "rime_padded")] = o
        if shape == "b4_h32_s4096_d128_causal":
            for r in ours:
                if r["graph"].startswith((prec + "_ragged_prefill_", prec + "_paged_prefill_")):
                    own[(r["graph"], "rime_dense_causal")] = o
    rows = []
    for o in ours:
        prec, shape = o["graph"].split("_", 1)
        decode = "decode" in shape  # decode_..., paged_decode_...
        ref_impls = ["cudnn_fp8"] if prec == "fp8" else ["torch_cudnn_bf16", "torch_flash_bf16"]
        ragged = shape.startswith("ragged_")
        if ragged:
            ref_impls = ["rime_padded", "rime_dense_causal"]
        if shape.startswith("paged_prefill_"):
            ref_impls = ["rime_dense_causal"]
        if decode:  # decode is bandwidth: against a copy of the same bytes first
            ref_impls = [f"copy_{prec}"] + ref_impls
        if shape.endswith("_perhead"):
            ref_impls = ["rime_per_tensor"]
        if shape.endswith("_bf16q") and not decode:
            ref_impls = ["rime_fp8_q", "torch_cudnn_bf16"]
        if shape.endswith("_bf16q_e4m3q") and not decode:
            ref_impls = ["rime_fp8_q", "rime_exact_q", "torch_cudnn_bf16"]
        if shape.endswith("_softcap"):
            ref_impls = ["rime_uncapped"]
        if shape.endswith("_capacity") and decode:
            ref_impls = ref_impls + ["rime_plain"]
        if "_d96" in shape or "_d80" in shape:
            ref_impls = ref_impls + ["rime_d128"]
        row = {"graph": o["graph"], "plan": o["plan"], "ms": float(o["ms"]), "tflops": float(o["tflops"]),
               "gbps": float(o["gbps"])}
        for impl in ref_impls:
            a = own.get((o["graph"], impl)) if impl.startswith("rime_") else anchor.get((shape, impl))
            if a and a["ms"]:
                row[impl] = float(a["tflops"]) if not decode else float(a["gbps"])
                # Speed ratio; for the copy, our GB/s over its GB/s (the fraction of copy bandwidth reached); for
                # our own rows, TFLOP/s over TFLOP/s.
                row[impl + "_ratio"] = (row["gbps"] / float(a["gbps"]) if impl.startswith("copy")
                                        or (decode and impl == "rime_d128")
                                        else row["tflops"] / float(a["tflops"]) if impl.startswith("rime_")
                                        and impl != "rime_per_tensor" else float(a["ms"]) / row["ms"])
            else:
                row[impl] = None
                row[impl + "_note"] = (a or {}).get("note", "not measured")
        rows.append(row)
    print("| graph | plan | ms | TFLOP/s | GB/s | anchor | anchor TFLOP/s (GB/s for decode) | ours / anchor (speed; "
          "for a copy: our GB/s / its GB/s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        impls = [k for k in ANCHOR_IMPLS if k in r]
        for i, impl in enumerate(impls):
            head = (f"| {r['graph']} | {r['plan']} | {r['ms']:.4f} | {r['tflops']:.1f} | {r['gbps']:.1f} "
                    if i == 0 else "| | | | | ")
            if r[impl] is None:
                print(head + f"| {impl} | - | {r.get(impl + '_note', '')[:60]} |")
            else:
                digits = 3 if impl == "rime_per_tensor" else 2  # a cost of ~1% needs the third digit
                print(head + f"| {impl} | {r[impl]:.1f} | {r[impl + '_ratio']:.{digits}f}x |")
    with open(f"{outdir}/bench.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["graph", "plan", "ms", "tflops", "gbps", "anchor", "anchor_value", "ratio"])
        for r in rows:
            for impl in ANCHOR_IMPLS:
                if impl in r:
                    w.writerow([r["graph"], r["plan"], r["ms"], r["tflops"], r["gbps"], impl, r[impl],
                                r.get(impl + "_ratio")])
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        shown = [r for r in rows if not r["graph"].endswith("_perhead")]  # cost rows: in the table only
        prefill = [r for r in shown if "_decode_" not in r["graph"]]
        decode = [r for r in shown if "_decode_" in r["graph"]]
        fig, (ax, ax_d) = plt.subplots(2, 1, figsize=(10, 9), gridspec_kw={"height_ratios": [max(1, len(prefill)),
                                                                                           max(1, len(decode))]})
        ax.barh([r["graph"] for r in prefill], [r["tflops"] for r in prefill])
        ax.set_xlabel("prefill: rime TFLOP/s (H200); label: speed ratio to cuDNN in the same run")
        for i, r in enumerate(prefill):
            cudnn = "cudnn_fp8" if r["graph"].startswith("fp8") else "torch_cudnn_bf16"
            if "_ragged_" in r["graph"]:
                ratio = r.get("rime_dense_causal_ratio")
                ax.text(r["tflops"], i, f" {ratio:.2f}x our dense causal" if ratio else "", va="center", fontsize=8)
                continue
            ratio = r.get(cudnn + "_ratio")
            ax.text(r["tflops"], i, f" {ratio:.2f}x cuDNN" if ratio else " cuDNN: no plan", va="center", fontsize=8)
        ax_d.barh([r["graph"] for r in decode], [r["gbps"] for r in decode])
        ax_d.set_xlabel("decode: rime GB/s (H200); label: fraction of a copy of the same bytes in the same run")
        for i, r in enumerate(decode):
            copy = "copy_fp8" if r["graph"].startswith("fp8") else "copy_bf16"
            ratio = r.get(copy + "_ratio")
            ax_d.text(r["gbps"], i, f" {ratio:.0%} of copy" if ratio else " copy: not measured", va="center",
                      fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{outdir}/bench.png", dpi=110)
    except ImportError:
        pass


if __name__ == "__main__":
    main(*sys.argv[1:4])
