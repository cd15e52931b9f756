#!/usr/bin/env python3
"""Where a decode step's time goes in transformers, rime against sdpa (cuDNN): a decode loop of forwards over a
DynamicCache without generate (so without its per-step sync), the host and GPU time per step, the host's time per
attention call and per mask call, the plans made during the loop, and the profiler's table of one loop's kernels.
A diagnostic beside transformers_generate.py (docs/perf.md, "transformers generate").

    python3 tools/bench/transformers_decode_loop.py OUTDIR      # writes OUTDIR/diag.txt
"""
import sys
import time

import torch
import transformers
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

import rime.torch
import rime.transformers as rt

out = sys.argv[1]
config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=4,
                                  num_attention_heads=32, num_key_value_heads=8, vocab_size=32000, pad_token_id=0,
                                  max_position_embeddings=8192)
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
model = model.cuda().eval()
rt.register()
log = open(f"{out}/diag.txt", "w")


def say(*a):
    print(*a, flush=True)
    print(*a, file=log, flush=True)


class HostTimer:
    """Wraps a registered function: the host's time in its calls while `on`."""

    def __init__(self, fn):
        self.fn, self.t, self.n, self.on = fn, 0.0, 0, False

    def __call__(self, *a, **k):
        t0 = time.perf_counter()
        r = self.fn(*a, **k)
        if self.on:
            self.t += time.perf_counter() - t0
            self.n += 1
        return r


def decode(B, P, n, mask, timers=()):
    ids = torch.randint(1, config.vocab_size, (B, P), device="cuda")
    with torch.no_grad():
        am = torch.ones_like(ids) if mask else None
        o = model(input_ids=ids, attention_mask=am, use_cache=True)
        cache, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        for x in timers:
            x.on, x.t, x.n = True, 0.0, 0
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        e0.record()
        for _ in range(n):
            if mask:
                am = torch.cat((am, am[:, -1:]), 1)
            o = model(input_ids=tok, attention_mask=am, past_key_values=cache, use_cache=True)
            tok = o.logits[:, -1:].argmax(-1)
        e1.record()
        host = (time.perf_counter() - t0) / n * 1e3
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / n * 1e3
        for x in timers:
            x.on = False
    return host, wall, e0.elapsed_time(e1) / n


for name, fn, mfn, ctx in (("rime", rt.attention, rt.mask, torch.no_grad),
                           ("sdpa-cudnn", sdpa_attention_forward, sdpa_mask,
                            lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION))):
    at, mt = HostTimer(fn), HostTimer(mfn)
    AttentionInterface.register("d-" + name, at)
    AttentionMaskInterface.register("d-" + name, mt)
    model.set_attn_implementation("d-" + name)
    with ctx():
        for B, P in ((64, 512), (8, 2048)):
            for mask in (True, False):
                decode(B, P, 8, mask)
                plans0 = rime.torch.plan_count()
                host, wall, gpu = decode(B, P, 32, mask, (at, mt))
                say(f"{name} B{B} P{P} mask={mask}: per step host {host:.2f} ms, wall {wall:.2f} ms, GPU (events) "
                    f"{gpu:.2f} ms; attention host {at.t / max(at.n, 1) * 1e6:.1f} us a call ({at.n}); mask host "
                    f"{mt.t / max(mt.n, 1) * 1e6:.1f} us a call ({mt.n}); plans made {rime.torch.plan_count() - plans0}")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA,
                                                torch.profiler.ProfilerActivity.CPU]) as prof:
            decode(64, 512, 8, True)
        say(f"== {name} B64 P512: profiler (prefill included), by CUDA time")
        say(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
