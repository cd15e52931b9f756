#!/usr/bin/env python3
"""End-to-end `generate` of a Llama-3-8B-shaped attention (32 query heads over 8 kv heads, head dim 128, hidden 4096)
in a few random layers, BF16, with attn_implementation rime, sdpa on torch's cuDNN and flash backends, and eager, in
one run: tokens/s, prefill time, decode time per token, and the attention's share of each (CUDA events around every
attention call). A benchmark, not a test (issue 54's table in docs/perf.md).

    python3 tools/bench/transformers_generate.py [--layers 4] [--rounds 3] [--backends rime,sdpa-flash,...]
                                                 [--variant MODULE] [--shapes 8x2048+256,...] [--csv FILE]

Shapes (--shapes): batch 8 x prompt 2048 + 256 new tokens, and batch 64 x prompt 512 + 128 new tokens; prompts of
equal length (no padding: sdpa's mask function and rime's then hand no mask, and both take their causal path).
Prefill time is a generate of one token; decode time per token is (generate of N - generate of 1) / (N - 1).
Attention's time is CUDA events around each call (where the host binds, as a decode step does, that is the host's
time between them) and the host's own time in the call. Each backend runs each shape once untimed first; then
`--rounds` rounds run every backend in turn (so that drift of clocks and host load falls on all alike), and the
medians are printed.
--backends picks some of rime, sdpa-cudnn, sdpa-flash and eager; --variant MODULE adds another version of
rime.transformers (a copy of the package's transformers/ importable as MODULE, e.g. rime.transformers_b) as the
backend "MODULE", timed in the same rounds.
"""
import argparse
import contextlib
import csv
import importlib
import statistics
import sys
import time

import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask
from transformers.models.llama.modeling_llama import eager_attention_forward

import rime.transformers as rt

SHAPES = [(8, 2048, 256), (64, 512, 128)]


class AttentionTimer:
    """Wraps an attention function: CUDA events around each call, summed after a synchronize, and the host's time in
    the call."""

    def __init__(self, fn):
        self.fn, self.events, self.host = fn, [], 0.0

    def __call__(self, *args, **kwargs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = self.fn(*args, **kwargs)
        end.record()
        self.host += time.perf_counter() - t0
        self.events.append((start, end))
        return out

    def take_ms(self):
        """(GPU ms between the events, host ms in the calls) since the last take."""
        torch.cuda.synchronize()
        ms = sum(s.elapsed_time(e) for s, e in self.events)
        host = self.host * 1e3
        self.events, self.host = [], 0.0
        return ms, host


def backends(chosen, variant):
    """name -> (registered attention implementation, its timer, a context for the run)."""
    rt.register()
    out = {}
    # Registered names without "flash": transformers routes those into FlashAttention's own code.
    table = [("rime", "timed-rime", rt.attention, rt.mask, contextlib.nullcontext),
             ("sdpa (cuDNN)", "timed-sdpa-cudnn", sdpa_attention_forward, sdpa_mask,
              lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)),
             ("sdpa (flash)", "timed-sdpa-fa2", sdpa_attention_forward, sdpa_mask,
              lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
             ("eager", "timed-eager", eager_attention_forward, eager_mask, contextlib.nullcontext)]
    table = [t for t in table if t[0].replace(" (", "-").rstrip(")").lower() in chosen]
    if variant:
        other = importlib.import_module(variant)
        table.insert(1, (variant, "timed-variant", other.attention, other.mask, contextlib.nullcontext))
    for name, impl, fn, mask, context in table:
        timer = AttentionTimer(fn)
        AttentionInterface.register(impl, timer)
        AttentionMaskInterface.register(impl, mask)
        out[name] = (impl, timer, context)
    return out


def timed_generate(model, ids, new_tokens, timer):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, do_sample=False)
    torch.cuda.synchronize()
    return ((time.perf_counter() - t0) * 1e3, *timer.take_ms())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="rime,sdpa-cudnn,sdpa-flash,eager")
    ap.add_argument("--variant")
    ap.add_argument("--shapes", default=",".join(f"{b}x{p}+{n}" for b, p, n in SHAPES))
    ap.add_argument("--csv")
    a = ap.parse_args()
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=a.layers,
                                      num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                                      pad_token_id=0, max_position_embeddings=8192)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    model = model.cuda().eval()
    rows, table = [], backends(a.backends.split(","), a.variant)
    shapes = [tuple(int(x) for x in t.replace("x", "+").split("+")) for t in a.shapes.split(",")]
    for B, P, N in shapes:
        ids = torch.randint(1, config.vocab_size, (B, P), device="cuda")
        runs = {}
        for r in range(a.rounds + 1):
            for name, (impl, timer, context) in table.items():
                model.set_attn_implementation(impl)
                with context():
                    if r == 0:
                        timed_generate(model, ids, N, timer)  # compiles, plans, autotunes: untimed
                        continue
                    one, total = timed_generate(model, ids, 1, timer), timed_generate(model, ids, N, timer)
                runs.setdefault(name, []).append(one + total)
        for name, times in runs.items():
            prefill_ms, prefill_attn, prefill_host, total_ms, total_attn, total_host = (
                statistics.median(t[i] for t in times) for i in range(6))
            decode_ms = (total_ms - prefill_ms) / (N - 1)
            decode_attn = (total_attn - prefill_attn) / (N - 1)
            decode_host = (total_host - prefill_host) / (N - 1)
            rows.append(dict(backend=name, batch=B, prompt=P, new=N, tokens_per_s=B * N / total_ms * 1e3,
                             prefill_ms=prefill_ms, prefill_attention_ms=prefill_attn, decode_ms_per_token=decode_ms,
                             decode_attention_ms_per_token=decode_attn,
                             decode_attention_host_ms_per_token=decode_host))
            print(f"{name:19s} B{B:<3d} P{P:<5d} +{N:<4d} {rows[-1]['tokens_per_s']:9.1f} tok/s  prefill "
                  f"{prefill_ms:8.2f} ms (attention {prefill_attn:7.2f})  decode {decode_ms:6.3f} ms/token "
                  f"(attention {decode_attn:6.3f}, its host {decode_host:6.3f})", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
