"""What a model will ask of rime, found before it serves: its forward run on fake tensors (no GPU work, no weights
read) records every attention layer's call of torch.ops.rime.attention_out; check() explains each distinct call for
the GPU's arch, warmup() plans (and compiles) them."""
import logging

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .. import explain as rime_explain
from .. import torch as rime_torch
from ..errors import InvalidArgumentError, NotSupportedError
from . import _attention

_log = logging.getLogger("rime")


class Call:
    """One attention layer's call of torch.ops.rime.attention_out: `layer` (its description, as a refusal names it),
    `kwargs` (the operator's arguments, tensors as meta tensors of the same shapes, strides and dtypes)."""
    __slots__ = ("layer", "layer_idx", "kwargs")

    def __init__(self, layer, layer_idx, kwargs):
        self.layer, self.layer_idx, self.kwargs = layer, layer_idx, kwargs

    def key(self):
        return tuple((k, (tuple(v.shape), tuple(v.stride()), v.dtype) if isinstance(v, torch.Tensor) else v)
                     for k, v in sorted(self.kwargs.items()))

    def with_kv_length(self, s_kv):
        """The same call over s_kv keys, K and V laid out as the cache lays them ([B, H_kv, S_kv, D] transposed)."""
        kw = dict(self.kwargs)
        for name in ("k", "v"):
            t = kw[name]
            B, _, H, D = t.shape
            kw[name] = torch.empty((B, H, s_kv, D), dtype=t.dtype, device="meta").transpose(1, 2)
        return Call(self.layer, self.layer_idx, kw)


def _meta(t):
    if not isinstance(t, torch.Tensor):
        return t
    return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")


def _record(into):
    def record(module, query, kwargs):
        layer = _attention.describe(module, query, kwargs["k"].transpose(1, 2), kwargs["window_left"] if
                                    kwargs["window_left"] > 0 else None, kwargs["softcap"], kwargs["sink"])
        into.append(Call(layer, getattr(module, "layer_idx", None), {k: _meta(v) for k, v in kwargs.items()}))
    return record


def _cache(model, kind, max_cache_len):
    from transformers import DynamicCache, StaticCache
    if kind == "dynamic":
        return DynamicCache(config=model.config)
    if kind == "static":
        return StaticCache(config=model.config, max_cache_len=max_cache_len)
    raise InvalidArgumentError(f"cache {kind!r}: 'dynamic' (DynamicCache, generate's default) or 'static'")


def _forward_calls(model, batch_size, prompt_length, cache, max_cache_len, left_padding):
    """The calls of one prefill and one decode step, on fake tensors. Returns (prefill calls, decode calls, the
    cache)."""
    device = next(model.parameters()).device
    prefill, decode = [], []
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
        kv = _cache(model, cache, max_cache_len)
        ids = torch.zeros((batch_size, prompt_length), dtype=torch.long, device=device)
        # Padded, the calls are the same whatever the padding (the starts and lengths are [B] tensors); the zeros
        # make the fake forward take transformers' padded path, as generate's padded batches do.
        attn = torch.ones((batch_size, prompt_length), dtype=torch.long, device=device)
        if left_padding and prompt_length > 1:
            attn[:, 0] = 0
        _attention.recorder = _record(prefill)
        try:
            # A prefill with no padding at all plans as no mask does (the mask function reads a real mask on the
            # host and hands none on): that prefill too, into a cache of its own.
            model(input_ids=ids, attention_mask=None, past_key_values=_cache(model, cache, max_cache_len),
                  use_cache=True)
            model(input_ids=ids, attention_mask=attn, past_key_values=kv, use_cache=True)
            _attention.recorder = _record(decode)
            attn = torch.cat((attn, attn[:, -1:]), dim=1)
            model(input_ids=ids[:, -1:], attention_mask=attn, past_key_values=kv, use_cache=True)
        finally:
            _attention.recorder = None
    return prefill, decode, kv


def calls(model, batch_sizes=(1,), prompt_lengths=(128,), max_new_tokens=1, cache="dynamic", max_cache_len=None,
          left_padding=True):
    """The distinct calls of torch.ops.rime.attention_out that `generate` makes for these batch sizes, prompt lengths
    and new tokens with a `cache` ('dynamic': DynamicCache; 'static': StaticCache of max_cache_len, default prompt +
    new tokens): the prefill's and every decode step's, found by one fake prefill and decode per (batch, prompt).
    The model's attention implementation must be "rime"."""
    impl = getattr(model.config, "_attn_implementation", None)
    if impl != "rime":
        raise InvalidArgumentError(f"model.config._attn_implementation is {impl!r}: load the model with "
                                   "attn_implementation='rime' (after rime.transformers.register())")
    found = {}
    for B in batch_sizes:
        for P in prompt_lengths:
            cap = max_cache_len or P + max_new_tokens
            prefill, decode, kv = _forward_calls(model, B, P, cache, cap, left_padding)
            steps = list(prefill) + list(decode)
            # Decode step t (1 .. max_new_tokens - 1) of a dynamic cache hands P + t keys to a layer that keeps them
            # all, and min(P + t, w) to one that keeps a window of w (transformers' DynamicSlidingWindowLayer);
            # a static cache hands its fixed buffer at every step.
            if cache == "dynamic":
                for c in decode:
                    layer = kv.layers[c.layer_idx] if c.layer_idx is not None else None
                    window = getattr(layer, "sliding_window", None) if getattr(layer, "is_sliding", False) else None
                    for t in range(2, max_new_tokens):
                        s_kv = P + t if window is None else min(P + t, window)
                        steps.append(c.with_kv_length(s_kv))
            for c in steps:
                found.setdefault(c.key(), c)
    return list(found.values())


def _layer_kinds(found):
    kinds = {}
    for c in found:
        kinds.setdefault(c.layer, []).append(c)
    return kinds


def check(model, arch=None, batch_size=1, prompt_length=16, cache="dynamic"):
    """Whether rime serves every attention layer of `model`, without a GPU: each distinct layer's prefill and decode
    call is explained for `arch` (default: the current GPU's). Raises NotSupportedError naming the first layer no row
    serves, its config fields and every row's reason; returns one line per distinct layer: the row and tile
    chosen."""
    lines = []
    for c in calls(model, (batch_size,), (prompt_length,), 2, cache):
        graph = rime_torch.graph("attention_out", **c.kwargs)
        e = rime_explain(graph, arch=arch, json=True) if arch else rime_explain(graph, json=True)
        decision = e.get("decision")
        if not decision:
            reasons = "\n".join(f"  {r['reason']}" for r in e.get("rows", []) if not r.get("accepted"))
            raise NotSupportedError(f"{c.layer}: no rime plan serves this layer:\n{reasons}")
        q = c.kwargs["q"]
        lines.append(f"{c.layer}, S_q {q.shape[1]}, S_kv {c.kwargs['k'].shape[1]}: row {decision['row']}, tile "
                     f"{decision['tile']['q']}x{decision['tile']['kv']}, split {decision['split_kv']}")
    return lines


def warmup(model, batch_sizes=(1,), prompt_lengths=(128,), max_new_tokens=128, cache="dynamic", max_cache_len=None,
           device=None, arch=None):
    """Makes every plan `generate` will use for these batch sizes, prompt lengths and new tokens (calls()), compiling
    what the plan cache lacks (each compile logged by the `rime` logger), so that the first request neither compiles
    nor plans and a CUDA-graph capture never meets a new shape. With `arch` ('sm_90a'), it compiles into the plan
    cache without a GPU and keeps no plan. Returns the plans made, one per distinct call."""
    found = calls(model, batch_sizes, prompt_lengths, max_new_tokens, cache, max_cache_len)
    plans = []
    for layer, group in _layer_kinds(found).items():
        _log.info("rime.transformers.warmup: %s: %d shape classes", layer, len(group))
        for c in group:
            plans.append(rime_torch.warmup("attention_out", device=device, arch=arch, **c.kwargs))
    return plans
