#!/usr/bin/env python3
"""Where the host's time goes in one decode call of transformers' attention, rime against sdpa, piece by piece: a
diagnostic beside transformers_generate.py (whose decode binds on the host; docs/perf.md, "transformers generate").

    python3 tools/bench/transformers_host_profile.py [--calls 200] [--rounds 7] [--variant MODULE]

Each piece is timed by python_overhead.py's host_us: a sleep kernel of ~50 ms first, so that the GPU runs none of
the calls while the host loops over them, and the loop's time per call is the host's cost. A round stays below the
launch queue's depth (about a thousand kernels: past it a launch waits for the sleep to end), so the mask function,
six kernels a call, loops over --calls / 6 calls a round. The shapes are the generate benchmark's decodes (32 query
heads over 8 kv heads, D 128, BF16): B 8 over 2304 keys and B 64 over 576, Q a [B, H, 1, D] view of the projection as
Llama's attention hands it, K and V a DynamicCache's [B, H_kv, S, D].
--variant MODULE: another version of rime.transformers (as transformers_generate.py takes it), its attention and
mask functions timed beside the package's.
"""
import argparse
import contextlib
import importlib
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.integrations.sdpa_attention import sdpa_attention_forward

import rime.torch
import rime.transformers as rt
from rime.transformers import _sequences

from python_overhead import host_us  # beside this file: a call's host cost, the GPU held off by a sleep kernel

H_Q, H_KV, D = 32, 8, 128


class Layer:
    """What the attention functions read of a layer."""
    is_causal, layer_idx, num_key_value_groups, config = True, 0, H_Q // H_KV, None


def pieces(B, S, other):
    q = torch.randn(B, 1, H_Q, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, H_KV, S, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, H_KV, S, D, device="cuda", dtype=torch.bfloat16)
    am = torch.ones(B, S, dtype=torch.int64, device="cuda")  # generate's mask, all ones
    layer, scale = Layer(), D ** -0.5
    seq = rt.mask(B, 1, S, S - 1, attention_mask=am)
    bounds = _sequences.bounds(seq)
    rows = bounds.unbind(0)  # start_q, len_q, start_kv, len_kv
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    yield "sdpa_attention_forward, flash backend (no mask)", lambda: sdpa_attention_forward(
        layer, q, k, v, None, scaling=scale), lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    yield "sdpa_attention_forward, cuDNN backend (no mask)", lambda: sdpa_attention_forward(
        layer, q, k, v, None, scaling=scale), lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    yield "rime.transformers.attention (its sequences)", lambda: rt.attention(
        layer, q, k, v, seq, scaling=scale), None
    yield "rime.torch.attention, transposed views, lengths", lambda: rime.torch.attention(
        qt, kt, vt, seq_lens_q=rows[1], seq_lens_k=rows[3], seq_starts_q=rows[0], seq_starts_k=rows[2],
        causal=True, softmax_scale=scale), None
    yield "rime.torch.attention, transposed views, seq_bounds", lambda: rime.torch.attention(
        qt, kt, vt, seq_bounds=bounds, causal=True, softmax_scale=scale), None
    yield "rime.torch.attention, transposed views, no lengths", lambda: rime.torch.attention(
        qt, kt, vt, causal=True, softmax_scale=scale), None
    yield "three transposes", lambda: (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)), None
    yield "bounds() of the sequences", lambda: _sequences.bounds(seq), None
    yield "torch.empty of O", lambda: torch.empty((B, 1, H_Q, D), dtype=torch.bfloat16, device="cuda"), None
    yield "rime.transformers.mask (a forward's, once)", lambda: rt.mask(B, 1, S, S - 1, attention_mask=am), None
    if other is not None:
        seq_b = other.mask(B, 1, S, S - 1, attention_mask=am)
        yield "--variant: attention (its sequences)", lambda: other.attention(
            layer, q, k, v, seq_b, scaling=scale), None
        yield "--variant: mask (a forward's, once)", lambda: other.mask(B, 1, S, S - 1, attention_mask=am), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--variant")
    a = ap.parse_args()
    other = None
    if a.variant:
        other = importlib.import_module(a.variant)
    with torch.inference_mode():
        for B, S in ((8, 2304), (64, 576)):
            print(f"\n| B{B} S_kv {S}: piece | host us a call |\n|---|---|")
            for name, fn, context in pieces(B, S, other):
                calls = a.calls // 6 if "mask" in name else a.calls  # the mask function launches six kernels a call
                try:
                    print(f"| {name} | {host_us(fn, calls, a.rounds, context or contextlib.nullcontext):.1f} |",
                          flush=True)
                except Exception as e:  # a backend that refuses the shape: said, and the rest still timed
                    print(f"| {name} | {type(e).__name__}: {str(e)[:120]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
