#!/usr/bin/env python3
"""docs/perf.md's tables, generated from the newest anchored run kept in docs/bench/latest/ (bench.csv, as
tools/bench/table.py writes it from one tools/bench/run.sh run).

  tools/bench/perf_table.py docs/bench/latest/bench.csv                       prints the tables
  tools/bench/perf_table.py docs/bench/latest/bench.csv --update docs/perf.md replaces the generated part
  tools/bench/perf_table.py docs/bench/latest/bench.csv --check docs/perf.md  exit 1 when it is stale

Three tables: prefill against its anchor (cuDNN FP8 for FP8, torch SDPA's cuDNN backend for BF16), decode against a
copy of the same bytes, and the rows whose anchor is another rime plan of the same run (paged and ragged prefill
against the dense causal prefill, per-(batch, kv head) descales against per-tensor ones, a BF16 Q over FP8 K/V
against the FP8 Q plan and torch's cuDNN on all-BF16 tensors). Every figure comes from
the CSV: a new anchored run replaces bench/latest/ and one --update replaces the tables.
"""
import argparse
import csv
import re
import sys

from generated_doc import emit

ANCHOR_NAMES = {"cudnn_fp8": "cuDNN FP8", "torch_cudnn_bf16": "torch cuDNN", "torch_flash_bf16": "torch flash",
                "copy_fp8": "copy", "copy_bf16": "copy", "rime_dense_causal": "dense causal prefill",
                "rime_padded": "padded twin", "rime_per_tensor": "per-tensor descales", "rime_fp8_q": "FP8 Q plan",
                "rime_exact_q": "exact BF16 Q plan", "rime_uncapped": "the uncapped plan", "rime_d128": "the D 128 plan"}
CONSUMERS = {"one_consumer": 1, "two_consumers": 2, "three_consumers": 3}


def label(graph):
    """fp8_b4_h32_s4096_d128_causal -> 'FP8 B4 H32 S4096 d128 causal' (and the decode / serving spellings)."""
    words = []
    for tok in graph.split("_"):
        m = re.fullmatch(r"h(\d+)g(\d+)", tok)
        if tok in ("fp8", "bf16"):
            words.append(tok.upper())
        elif m:  # hHgG: H query heads over G kv heads, except G = H: a group of H over one kv head (MLA decode)
            h, g = int(m.group(1)), int(m.group(2))
            words.append(f"H{h}/{1 if g == h else g}")
        elif re.fullmatch(r"[bh]\d+", tok):
            words.append(tok.upper())
        elif re.fullmatch(r"skv\d+", tok):
            words.append(f"S_kv {tok[3:]}")
        elif re.fullmatch(r"s\d+", tok):
            words.append(tok.upper())
        elif re.fullmatch(r"dqk\d+", tok):
            words.append(f"D_qk {tok[3:]} /")
        elif re.fullmatch(r"dv\d+", tok):
            words.append(f"D_v {tok[2:]}")
        elif re.fullmatch(r"p\d+", tok):
            words.append(f"pages of {tok[1:]}")
        elif re.fullmatch(r"q\d+", tok):
            words.append(f"({tok[1:]} tokens)")
        elif tok == "bf16q":
            words.append("BF16 Q")
        elif tok == "e4m3q":
            words.append("rounded to E4M3 per row")
        elif tok == "perhead":
            words.append("per-head descales")
        else:
            words.append(tok)
    return " ".join(words)


def plan_text(plan):
    """'sdpa_sm90 e4m3 fp32 128 128 stats | split | mask one_consumer' -> 'sdpa_sm90, one consumer'."""
    words = plan.split()
    engine = words[0]
    for name, n in CONSUMERS.items():
        if name in words:
            return f"{engine}, {['one consumer', 'two consumers', 'three consumers'][n - 1]}"
    return engine


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    by_graph = {}
    for r in rows:
        by_graph.setdefault(r["graph"], {"plan": r["plan"], "tflops": float(r["tflops"]), "anchors": {}})
        if r["anchor_value"] not in ("", "None") and r["ratio"] not in ("", "None"):
            by_graph[r["graph"]]["anchors"][r["anchor"]] = (float(r["anchor_value"]), float(r["ratio"]))
    return by_graph


def ratio_text(r):
    return f"**{r:.2f}x**" if r >= 1.1 else f"{r:.2f}x"


def tables(by_graph):
    out = ["Prefill against its anchor (FP8: cuDNN FP8; BF16: torch SDPA's cuDNN backend, and its flash backend "
           "beside it). Consumers: the Hopper engine's consumer warpgroups (`rime plan --explain` says why).", "",
           "| graph | consumers | ours (TFLOP/s) | anchor in the same run | ours / anchor | torch flash |",
           "|---|---|---|---|---|---|"]
    decode, own, anchored = [], [], set()
    for graph in sorted(by_graph, key=lambda g: (not g.startswith("fp8"), g)):
        g = by_graph[graph]
        a = g["anchors"]
        if any(k.startswith("copy_") for k in a):
            decode.append(graph)
            continue
        if any(k.startswith("rime_") for k in a):
            own.append(graph)
        main = "cudnn_fp8" if graph.startswith("fp8") else "torch_cudnn_bf16"
        if main not in a:
            continue
        anchored.add(graph)
        consumers = next((str(n) for name, n in CONSUMERS.items() if name in g["plan"].split()), "-")
        flash = f"{a['torch_flash_bf16'][1]:.2f}x" if "torch_flash_bf16" in a else "-"
        out.append(f"| {label(graph)} | {consumers} | {g['tflops']:.1f} | {ANCHOR_NAMES[main]} {a[main][0]:.1f} | "
                   f"{ratio_text(a[main][1])} | {flash} |")
    out += ["", "Decode against a device-to-device copy of the same bytes in the same run (GB/s over the copy's "
            "GB/s; paged rows: B 64 with lengths drawn in 1k-32k, the keys held counted):", "",
            "| graph | plan | GB/s | copy GB/s | of copy |", "|---|---|---|---|---|"]
    for graph in decode:
        g = by_graph[graph]
        copy = next(v for k, v in g["anchors"].items() if k.startswith("copy_"))
        gbps = copy[0] * copy[1]
        out.append(f"| {label(graph)} | {plan_text(g['plan'])} | {gbps:.0f} | {copy[0]:.0f} | {copy[1]:.2f}x |")
    out += ["", "Rows whose anchor is another rime plan of the same run (paged and ragged prefill: TFLOP/s over the "
            "dense causal prefill's; per-head descales: the per-tensor plan's time over theirs; a BF16 Q over FP8 "
            "K/V: its speed over the FP8 Q plan's and over torch's cuDNN with Q, K and V all in BF16; soft-capped "
            "logits: TFLOP/s over the same graph uncapped):", "",
            "| graph | plan | against | ratio |", "|---|---|---|---|"]
    for graph in own:
        g = by_graph[graph]
        for k, (_, r) in sorted(g["anchors"].items()):
            if graph in anchored and not k.startswith("rime_"):
                continue  # in the prefill table above
            name = ANCHOR_NAMES[k] + (", all BF16" if k == "torch_cudnn_bf16" else "")
            out.append(f"| {label(graph)} | {plan_text(g['plan'])} | {name} | {r:.3f}x |")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_csv")
    ap.add_argument("--update", metavar="DOC", help="replace the generated part of DOC (docs/perf.md)")
    ap.add_argument("--check", metavar="DOC", help="exit 1 when the generated part of DOC differs")
    args = ap.parse_args(argv)
    return emit(tables(load(args.bench_csv)), args.update, args.check, "perf_table.py",
                f"tools/bench/perf_table.py {args.bench_csv} --update {{doc}}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
