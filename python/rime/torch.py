"""The torch layer: rime plans as torch operators, `torch.ops.rime.*`, with fake kernels, so that torch.compile traces
them without a graph break and CUDA graphs capture them.

    import rime.torch                      # registers the operators (needs torch; `import rime` alone does not)
    out, lse = torch.ops.rime.attention(q, k, v, causal=True)                     # q [B, S_q, H_q, D] BF16 / FP16
    out, _ = torch.ops.rime.attention(q8, k8, v8, dq, dk, dv, out_dtype=torch.bfloat16)   # FP8 with device descales
    torch.ops.rime.paged_attention_out(q, k_cache, v_cache, block_table, seq_lens, out=out)  # vLLM's pattern

Operators (each functional form allocates its outputs; each `_out` form writes into the caller's and returns
nothing):
- attention / attention_out: dense Q [B, S_q, H_q, D_qk], K [B, S_kv, H_kv, D_qk], V [B, S_kv, H_kv, D_v] (any
  strides with a unit last one: views such as q.transpose(1, 2) of a [B, H, S, D] tensor are taken as they are).
- attention_varlen / attention_varlen_out: ragged batches, Q [T_q, H_q, D], K and V [T_kv, H_kv, D] with int32
  cu_seqlens_q / cu_seqlens_k [B + 1] (FlashAttention's varlen form).
- paged_attention / paged_attention_out: K and V caches [num_pages, page_size, H_kv, D] (vLLM's NHD; an HND cache
  [num_pages, H_kv, page_size, D] is passed as cache.transpose(1, 2), a view) read through block_table [B, max_pages]
  int32 (vLLM's block_table, FA3's page_table) and seq_lens [B] int32; Q [B, S_q, H_q, D], S_q 1..8 for decode.
- attention_block_scaled / attention_block_scaled_out: FP8 Q, K, V to a block-scaled O, returned as (codes, sf_o):
  NVFP4 (uint8 codes [B, S_q, H_q, D_v / 2], two E2M1 per byte, low nibble first; float8_e4m3fn scales) or MXFP8
  (float8_e4m3fn codes [B, S_q, H_q, D_v]; float8_e8m0fnu scales), sf_o in the F8_128x4 order (SPEC section 5) as
  per-(b, h) planes [B, H_q, R, C] or token-major [B, R, H_q, C] (R = S_q rounded up to 128).

FP8 inputs (float8_e4m3fn / float8_e5m2) take descale_q / descale_k / descale_v as one-element float32 device tensors
(never Python floats: a CUDA-graph replay reads their current values); a BF16 / FP16 Q over an FP8 K/V cache takes
descale_k / descale_v. scale_o scales an FP8 O. causal is bottom-right aligned (the last query sees the last key, as
FlashAttention and vLLM align it); window_left w keeps the w keys up to and including the diagonal (FlashAttention's
window_size=(w - 1, 0)). softmax_scale defaults to 1 / sqrt(D_qk).

Plans are made per shape class (dtypes, shapes, strides, attributes, device) on first use, compiled through the plan
cache shared with the CLI, and kept; a shape first met while the stream captures a CUDA graph raises
PlanNotReadyError naming it (planning may compile): warm up first, with warmup(op, *args) or one eager call. The
operators never copy, cast, synchronize or make a tensor contiguous; an unsupported layout or dtype raises the
library's error naming the tensor.
"""
import math
import threading
from collections import OrderedDict

import torch

from . import _rime
from .builder import GraphBuilder
from .errors import InvalidArgumentError, PlanNotReadyError

__all__ = ["warmup", "plan_count", "clear_plans", "attention", "attention_out", "attention_varlen",
           "attention_varlen_out", "paged_attention", "paged_attention_out", "attention_block_scaled",
           "attention_block_scaled_out", "NcclCommunicator"]

_RIME_DTYPE = {
    torch.float32: "FP32", torch.float16: "FP16", torch.bfloat16: "BF16", torch.float8_e4m3fn: "FP8_E4M3",
    torch.float8_e5m2: "FP8_E5M2", torch.int32: "INT32", torch.int64: "INT64",
}
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_SF_DTYPE = {"nvfp4": torch.float8_e4m3fn, "mxfp8": getattr(torch, "float8_e8m0fnu", torch.uint8)}
_BLOCK = {"nvfp4": 16, "mxfp8": 32}

# ---- plans per shape class ----------------------------------------------------------------------------------------

# (op, shapes, strides, dtypes, attributes, device) -> _Entry. Bounded: a server's shape classes are few, but a
# ragged prefill's token count makes one per batch; the least recently made go first.
_MAX_PLANS = 4096
_plans = OrderedDict()
_plans_lock = threading.Lock()
_constants = {}  # (device, kind, value, n) -> tensor the plans bind where the caller gave none (descale_s, seq_len_q)


def plan_count():
    """How many shape classes have a plan in this process."""
    return len(_plans)


def clear_plans():
    """Forgets every plan made by the operators (their kernels stay in the plan cache)."""
    with _plans_lock:
        _plans.clear()


class _Entry:
    """A plan and how a call's tensors bind to its graph (`binding`: per graph tensor in declaration order, the index
    of the call's tensor, or a constant's pointer). `workspaces`: the plan's workspace per stream, for eager calls
    (below)."""
    __slots__ = ("plan", "binding", "device", "workspace", "keep", "workspaces")

    def __init__(self, plan, slots, keep):
        self.plan = plan
        # A warmup for an arch binds nothing (slots None), even where the GPU of that arch loaded the plan.
        self.binding = _rime._CallBinding(plan, slots) if slots is not None and plan.prepared else None
        self.device = plan.device
        self.workspace = plan.workspace_size
        self.keep = keep  # the constant tensors the slots point into
        self.workspaces = {}


def _constant(device, kind, value, n=1):
    """A constant tensor on GPU `device` (None when planning for an arch without a GPU: nothing to bind)."""
    if device is None:
        return None
    key = (device, kind, value, n)
    t = _constants.get(key)
    if t is None:
        dtype = torch.float32 if kind == "scale" else torch.int32
        t = _constants[key] = torch.full((n,), value, dtype=dtype, device=torch.device("cuda", device))
    return t


def _describe(shape, key):
    return f"{key[0][0]} with {', '.join(f'{n} {tuple(s)}' for n, s in shape)}"


def _entry(key, tensors, names, device, make, shape, arch=None):
    """The plan of a shape class that has none yet, made by make(device) -> (graph, tensor slots, constants). A call
    (device None) first checks that every tensor is on q's GPU: the key holds each tensor's device, so that a later
    call with the same key passed this check. With `arch` (warmup without a GPU): a plan for that arch, compiled into
    the plan cache and not kept."""
    if arch is not None:
        graph, _, _ = make(None)
        return _Entry(_rime.plan(graph, arch=arch), None, [])
    if device is None:
        device = tensors[0].get_device()
        _check_devices(device, names, tensors[1:])
    if torch.cuda.is_current_stream_capturing():
        raise PlanNotReadyError(
            f"torch.ops.rime.{_describe(shape, key)}: no plan for this shape class, and the stream is capturing a "
            "CUDA graph, where a plan cannot be made (it may compile); call rime.torch.warmup(...) with these "
            "shapes, or the op once, before the capture")
    with _plans_lock:
        e = _plans.get(key)
        if e is None:
            graph, slots, keep = make(device)
            plan = _rime.plan(graph, device=device)
            e = _Entry(plan, slots, keep)
            _plans[key] = e
            while len(_plans) > _MAX_PLANS:
                _plans.popitem(last=False)
    return e


def _launch(e, tensors):
    device = e.device
    stream = torch._C._cuda_getCurrentRawStream(device)
    ws = 0
    if e.workspace:
        # Eager calls on one stream run one after the other, so each (plan, stream) keeps one workspace: an allocation
        # per call cost several microseconds of a decode's host time. Under capture the workspace comes from the
        # caching allocator, hence from the graph's private pool: each captured graph owns its own.
        if torch._C._cuda_isCurrentStreamCapturing():
            buf = torch.empty(e.workspace, dtype=torch.uint8, device=torch.device("cuda", device))
        else:
            buf = e.workspaces.get(stream)
            if buf is None:
                buf = e.workspaces[stream] = torch.empty(e.workspace, dtype=torch.uint8,
                                                         device=torch.device("cuda", device))
        ws = buf.data_ptr()
    e.binding.run(tensors, ws, stream)


def _check_devices(device, names, tensors):
    for n, t in zip(names, tensors):
        if t is not None and t.get_device() != device:
            raise InvalidArgumentError(f"{n} is on {t.device}, q on cuda:{device}: every tensor of one call must be "
                                       "on one GPU")


# ---- building the graph of a call ---------------------------------------------------------------------------------

class _GraphOfCall:
    """A GraphBuilder plus the binding of its tensors to the call's tensors (by index) or to constants."""

    def __init__(self, name):
        self.b = GraphBuilder(name)
        self.slots = []
        self.keep = []
        self.roles = {}

    def _dtype(self, name, dtype):
        d = _RIME_DTYPE.get(dtype)
        if d is None:
            raise InvalidArgumentError(f"{name}: dtype {dtype} is not one rime takes (float32, float16, bfloat16, "
                                       "float8_e4m3fn, float8_e5m2, int32)")
        return d

    def tensor(self, role, index, dims, strides, dtype, output=False):
        """A tensor of the call (tensors[index]) with the graph's logical dims and strides, its torch dtype's."""
        return self.raw(role, index, dims, strides, self._dtype(role, dtype), output)

    def raw(self, role, index, dims, strides, rime_dtype, output=False):
        """The same with the graph's dtype named (FP4 codes held as bytes, E8M0 scales)."""
        t = self.b.tensor(role, list(dims), rime_dtype, strides=list(strides), output=output)
        self.slots.append((index, 0))
        self.roles[role.lower()] = t
        return t

    def constant(self, role, tensor, dims, rime_dtype):
        t = self.b.tensor(role, list(dims), rime_dtype, strides=[1] * len(dims))
        self.slots.append((-1, 0 if tensor is None else tensor.data_ptr()))
        self.keep.append(tensor)
        self.roles[role.lower()] = t
        return t

    def scalar(self, role, index, value, device, given):
        """A one-element FP32 scale: the call's tensor when given, else a constant of `value`."""
        if given:
            return self.tensor(role, index, [1, 1, 1, 1], [1, 1, 1, 1], torch.float32)
        return self.constant(role, _constant(device, "scale", value), [1, 1, 1, 1], "FP32")

    def build(self, kind, **fields):
        return self.b.build(kind, **self.roles, **{k: v for k, v in fields.items() if v is not None})


def _bshd(t):
    """Logical [B, H, S, D] dims and strides of a [B, S, H, D] tensor."""
    s = t.stride()
    return (t.shape[0], t.shape[2], t.shape[1], t.shape[3]), (s[0], s[2], s[1], s[3])


def _thd(t):
    """Logical [1, H, T, D] dims and strides of a token-major [T, H, D] tensor."""
    s = t.stride()
    return (1, t.shape[1], t.shape[0], t.shape[2]), (t.shape[0] * s[0], s[1], s[0], s[2])


def _bshd_outputs(g, out, lse):
    """O [B, S_q, H_q, D_v] (slot 8) and, when given, LSE [B, H_q, S_q] (slot 9) of a call."""
    od, os_ = _bshd(out)
    g.tensor("O", 8, od, os_, out.dtype, output=True)
    if lse is not None:
        B, H, S = lse.shape
        sl = lse.stride()
        g.tensor("Stats", 9, [B, H, S, 1], [sl[0], sl[1], sl[2], 1], torch.float32, output=True)


def _out_dtype(q, out_dtype):
    if out_dtype is not None:
        return out_dtype
    return torch.bfloat16 if q.dtype in _FP8 else q.dtype


def _attributes(causal, window_left, softmax_scale):
    a = {}
    if causal:
        a["causal"] = True
        a["alignment"] = "bottom_right"
    if window_left is not None and window_left >= 0:
        a["window_left"] = window_left
        a["alignment"] = "bottom_right"
    if softmax_scale is not None:
        a["attn_scale"] = softmax_scale
    return a


def _inputs(g, q, k, v, scales, sink, device, qkv_dims, batch):
    """Q, K, V (slots 0-2), the FP8 scales (descale_q, descale_k, descale_v, scale_o: slots 3-6) and the sink (slot 7)
    of a call of `batch` sequences: returns the op kind, sdpa or sdpa_fp8. descale_q / k / v are one float32, or one
    per (sequence, kv head): [B, H_kv] (FA3's shape) or [B, H_kv, 1, 1]."""
    (qd, qs), (kd, ks), (vd, vs) = qkv_dims
    g.tensor("Q", 0, qd, qs, q.dtype)
    g.tensor("K", 1, kd, ks, k.dtype)
    g.tensor("V", 2, vd, vs, v.dtype)
    names = ("descale_q", "descale_k", "descale_v", "scale_o")
    fp8 = k.dtype in _FP8
    if not fp8:
        given = [n for n, t in zip(names, scales) if t is not None]
        if given:
            raise InvalidArgumentError(f"{', '.join(given)}: given for {k.dtype} K and V, which take no scales")
        if q.dtype in _FP8:
            raise InvalidArgumentError(f"q is {q.dtype} over {k.dtype} K and V: an FP8 Q needs FP8 K and V")
    else:
        for n, t in zip(names, scales):
            needed = n in ("descale_k", "descale_v") or (n == "descale_q" and q.dtype in _FP8)
            if t is None and needed:
                raise InvalidArgumentError(f"{n}: FP8 K and V (and an FP8 Q) need their descales, as one-element "
                                           "float32 device tensors")
            per_head = (batch, kd[1])
            shape_ok = t is not None and (t.numel() == 1 or (
                n != "scale_o" and tuple(t.shape) in (per_head, per_head + (1, 1))))
            if t is not None and (t.dtype != torch.float32 or not shape_ok):
                raise InvalidArgumentError(
                    f"{n}: {t.dtype} of shape {tuple(t.shape)}; a scale is one float32 on the device" +
                    ("" if n == "scale_o" else f", or one per (sequence, kv head): {per_head} or {per_head + (1, 1)}"))
        # A 16-bit Q without descale_q, and the scales of S that rime's kernels do not need, bind a constant 1.
        for n, index, t in (("descale_q", 3, scales[0]), ("descale_k", 4, scales[1]), ("descale_v", 5, scales[2])):
            if t is not None and t.numel() > 1:
                g.tensor(n, index, [batch, kd[1], 1, 1], [t.stride(0), t.stride(1), 1, 1], torch.float32)
            else:
                g.scalar(n, index, 1.0, device, t is not None)
        g.scalar("descale_s", -1, 1.0, device, False)
        g.scalar("scale_s", -1, 1.0, device, False)
        g.scalar("scale_o", 6, 1.0, device, scales[3] is not None)
    if sink is not None:
        if sink.dtype != torch.float32 or sink.numel() != qd[1] or not sink.is_contiguous():
            raise InvalidArgumentError(f"sink: {sink.dtype} of shape {tuple(sink.shape)}; expected float32, contiguous, "
                                       f"with one logit per q head ({qd[1]})")
        g.tensor("sink", 7, [1, qd[1], 1, 1], [qd[1], 1, 1, 1], torch.float32)
    return "sdpa_fp8" if fp8 else "sdpa"


def _key(head, tensors, device):
    """The shape class of a call: `head` (the operator and its attributes), then every tensor's shape, strides, dtype
    and device (`device` for all when given: a warmup's meta tensors), four Nones where absent. Built in C++."""
    return _rime._call_key(head, tensors, device)


# ---- attention: dense -----------------------------------------------------------------------------------------------

def _attention_make(name, q, k, v, dq, dk, dv, so, sink, out, lse, causal, window_left, softmax_scale):
    def make(device):
        g = _GraphOfCall(name)
        kind = _inputs(g, q, k, v, (dq, dk, dv, so), sink, device, (_bshd(q), _bshd(k), _bshd(v)), q.shape[0])
        _bshd_outputs(g, out, lse)
        return g.build(kind, **_attributes(causal, window_left, softmax_scale)), g.slots, g.keep
    return make


def _attention_run(op, q, k, v, dq, dk, dv, so, sink, out, lse, causal, window_left, softmax_scale, device=None,
                   arch=None):
    tensors = (q, k, v, dq, dk, dv, so, sink, out, lse)
    key = _key((op, causal, window_left, softmax_scale), tensors, device)
    e = _plans.get(key) if arch is None else None
    if e is None:
        e = _entry(key, tensors, ("k", "v", "descale_q", "descale_k", "descale_v", "scale_o", "sink", "out", "lse"),
                   device, _attention_make(op, *tensors, causal, window_left, softmax_scale),
                   (("q", q.shape), ("k", k.shape), ("v", v.shape)), arch)
    return e, tensors


def _attention_outputs(q, v, out_dtype, return_lse):
    B, S, H = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((B, S, H, v.shape[3]), dtype=_out_dtype(q, out_dtype))
    lse = q.new_empty((B, H, S), dtype=torch.float32) if return_lse else None
    return out, lse


def _attention(q, k, v, descale_q=None, descale_k=None, descale_v=None, scale_o=None, sink=None, causal=False,
               window_left=-1, softmax_scale=None, out_dtype=None, return_lse=False):
    out, lse = _attention_outputs(q, v, out_dtype, return_lse)
    e, tensors = _attention_run("attention", q, k, v, descale_q, descale_k, descale_v, scale_o, sink, out, lse, causal,
                                window_left, softmax_scale)
    _launch(e, tensors)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _attention_fake(q, k, v, descale_q=None, descale_k=None, descale_v=None, scale_o=None, sink=None, causal=False,
                    window_left=-1, softmax_scale=None, out_dtype=None, return_lse=False):
    out, lse = _attention_outputs(q, v, out_dtype, return_lse)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _attention_out(q, k, v, out, lse=None, descale_q=None, descale_k=None, descale_v=None, scale_o=None, sink=None,
                   causal=False, window_left=-1, softmax_scale=None):
    e, tensors = _attention_run("attention_out", q, k, v, descale_q, descale_k, descale_v, scale_o, sink, out, lse,
                                causal, window_left, softmax_scale)
    _launch(e, tensors)


# ---- attention_varlen: ragged (THD) batches ---------------------------------------------------------------------

def _varlen_make(name, q, k, v, cu_q, cu_k, dq, dk, dv, so, sink, out, lse, max_q, max_k, causal, window_left,
                 softmax_scale):
    def make(device):
        g = _GraphOfCall(name)
        kind = _inputs(g, q, k, v, (dq, dk, dv, so), sink, device, (_thd(q), _thd(k), _thd(v)), cu_q.shape[0] - 1)
        od, os_ = _thd(out)
        g.tensor("O", 8, od, os_, out.dtype, output=True)
        if lse is not None:
            H, T = lse.shape
            sl = lse.stride()
            g.tensor("Stats", 9, [1, H, T, 1], [H * T, sl[0], sl[1], 1], torch.float32, output=True)
        for role, idx, t in (("cu_seqlens_q", 10, cu_q), ("cu_seqlens_kv", 11, cu_k)):
            if t.dtype != torch.int32 or t.dim() != 1:
                raise InvalidArgumentError(f"{role}: {t.dtype} {tuple(t.shape)}; expected int32 [B + 1]")
            g.tensor(role, idx, t.shape, t.stride(), t.dtype)
        attrs = _attributes(causal, window_left, softmax_scale)
        return (g.build(kind, padding_mask=True, max_seqlen_q=max_q, max_seqlen_kv=max_k, **attrs), g.slots,
                g.keep)
    return make


def _varlen_run(op, q, k, v, cu_q, cu_k, max_q, max_k, dq, dk, dv, so, sink, out, lse, causal, window_left,
                softmax_scale, device=None, arch=None):
    tensors = (q, k, v, dq, dk, dv, so, sink, out, lse, cu_q, cu_k)
    key = _key((op, max_q, max_k, causal, window_left, softmax_scale), tensors, device)
    e = _plans.get(key) if arch is None else None
    if e is None:
        e = _entry(key, tensors, ("k", "v", "descale_q", "descale_k", "descale_v", "scale_o", "sink", "out", "lse",
                                  "cu_seqlens_q", "cu_seqlens_k"), device,
                   _varlen_make(op, q, k, v, cu_q, cu_k, dq, dk, dv, so, sink, out, lse, max_q, max_k, causal,
                                window_left, softmax_scale),
                   (("q", q.shape), ("k", k.shape), ("v", v.shape), ("cu_seqlens_q", cu_q.shape)), arch)
    return e, tensors


def _varlen_outputs(q, v, out_dtype, return_lse):
    T, H = q.shape[0], q.shape[1]
    out = q.new_empty((T, H, v.shape[2]), dtype=_out_dtype(q, out_dtype))
    lse = q.new_empty((H, T), dtype=torch.float32) if return_lse else None
    return out, lse


def _attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, descale_q=None,
                      descale_k=None, descale_v=None, scale_o=None, sink=None, causal=False, window_left=-1,
                      softmax_scale=None, out_dtype=None, return_lse=False):
    out, lse = _varlen_outputs(q, v, out_dtype, return_lse)
    e, tensors = _varlen_run("attention_varlen", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             descale_q, descale_k, descale_v, scale_o, sink, out, lse, causal, window_left,
                             softmax_scale)
    _launch(e, tensors)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, descale_q=None,
                           descale_k=None, descale_v=None, scale_o=None, sink=None, causal=False, window_left=-1,
                           softmax_scale=None, out_dtype=None, return_lse=False):
    out, lse = _varlen_outputs(q, v, out_dtype, return_lse)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _attention_varlen_out(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out, lse=None,
                          descale_q=None, descale_k=None, descale_v=None, scale_o=None, sink=None, causal=False,
                          window_left=-1, softmax_scale=None):
    e, tensors = _varlen_run("attention_varlen_out", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             descale_q, descale_k, descale_v, scale_o, sink, out, lse, causal, window_left,
                             softmax_scale)
    _launch(e, tensors)


# ---- paged_attention: K/V caches read through a page table ------------------------------------------------------

def _paged_make(name, q, kc, vc, table, lens, lens_q, dq, dk, dv, so, sink, out, lse, causal, window_left,
                softmax_scale):
    def make(device):
        g = _GraphOfCall(name)
        kind = _inputs(g, q, kc, vc, (dq, dk, dv, so), sink, device, (_bshd(q), _bshd(kc), _bshd(vc)), q.shape[0])
        _bshd_outputs(g, out, lse)
        B, S_q = q.shape[0], q.shape[1]
        for role, t, dims in (("page_table", table, 2), ("seq_len_kv", lens, 1)):
            if t.dtype != torch.int32 or t.dim() != dims:
                raise InvalidArgumentError(f"{'block_table' if role == 'page_table' else 'seq_lens'}: {t.dtype} "
                                           f"{tuple(t.shape)}; expected int32 [{'B, max_pages' if dims == 2 else 'B'}]")
        g.tensor("page_table", 10, table.shape, table.stride(), table.dtype)
        g.tensor("seq_len_kv", 11, lens.shape, lens.stride(), lens.dtype)
        if lens_q is not None:
            g.tensor("seq_len_q", 12, lens_q.shape, lens_q.stride(), lens_q.dtype)
        else:  # every sequence has the S_q tokens of Q: a constant of the shape class
            g.constant("seq_len_q", _constant(device, "lengths", S_q, B), [B], "INT32")
        attrs = _attributes(causal, window_left, softmax_scale)
        return g.build(kind, padding_mask=True, **attrs), g.slots, g.keep
    return make


def _paged_run(op, q, kc, vc, table, lens, lens_q, dq, dk, dv, so, sink, out, lse, causal, window_left,
               softmax_scale, device=None, arch=None):
    tensors = (q, kc, vc, dq, dk, dv, so, sink, out, lse, table, lens, lens_q)
    key = _key((op, causal, window_left, softmax_scale), tensors, device)
    e = _plans.get(key) if arch is None else None
    if e is None:
        e = _entry(key, tensors, ("k_cache", "v_cache", "descale_q", "descale_k", "descale_v", "scale_o", "sink",
                                  "out", "lse", "block_table", "seq_lens", "seq_lens_q"), device,
                   _paged_make(op, q, kc, vc, table, lens, lens_q, dq, dk, dv, so, sink, out, lse, causal,
                               window_left, softmax_scale),
                   (("q", q.shape), ("k_cache", kc.shape), ("block_table", table.shape)), arch)
    return e, tensors


def _paged_attention(q, k_cache, v_cache, block_table, seq_lens, descale_q=None, descale_k=None, descale_v=None,
                     scale_o=None, sink=None, seq_lens_q=None, causal=True, window_left=-1, softmax_scale=None,
                     out_dtype=None, return_lse=False):
    out, lse = _attention_outputs(q, v_cache, out_dtype, return_lse)
    e, tensors = _paged_run("paged_attention", q, k_cache, v_cache, block_table, seq_lens, seq_lens_q, descale_q,
                            descale_k, descale_v, scale_o, sink, out, lse, causal, window_left, softmax_scale)
    _launch(e, tensors)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _paged_attention_fake(q, k_cache, v_cache, block_table, seq_lens, descale_q=None, descale_k=None, descale_v=None,
                          scale_o=None, sink=None, seq_lens_q=None, causal=True, window_left=-1, softmax_scale=None,
                          out_dtype=None, return_lse=False):
    out, lse = _attention_outputs(q, v_cache, out_dtype, return_lse)
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _paged_attention_out(q, k_cache, v_cache, block_table, seq_lens, out, lse=None, descale_q=None, descale_k=None,
                         descale_v=None, scale_o=None, sink=None, seq_lens_q=None, causal=True, window_left=-1,
                         softmax_scale=None):
    e, tensors = _paged_run("paged_attention_out", q, k_cache, v_cache, block_table, seq_lens, seq_lens_q, descale_q,
                            descale_k, descale_v, scale_o, sink, out, lse, causal, window_left, softmax_scale)
    _launch(e, tensors)


# ---- attention_block_scaled: NVFP4 / MXFP8 outputs ---------------------------------------------------------------

def _sf_geometry(q, v, fmt, sf_layout):
    if fmt not in _BLOCK:
        raise InvalidArgumentError(f"format {fmt!r}: 'nvfp4' or 'mxfp8'")
    if sf_layout not in ("planes", "token_major"):
        raise InvalidArgumentError(f"sf_layout {sf_layout!r}: 'planes' or 'token_major'")
    B, S, H, D = q.shape[0], q.shape[1], q.shape[2], v.shape[3]
    R = (S + 127) // 128 * 128
    C = (D // _BLOCK[fmt] + 3) // 4 * 4
    return B, S, H, D, R, C


def _block_scaled_outputs(q, v, fmt, sf_layout):
    B, S, H, D, R, C = _sf_geometry(q, v, fmt, sf_layout)
    codes = q.new_empty((B, S, H, D // 2), dtype=torch.uint8) if fmt == "nvfp4" else \
        q.new_empty((B, S, H, D), dtype=torch.float8_e4m3fn)
    # Token-major scales: the kernel writes the rows of real tokens only; the padding rows of each batch are zeros.
    if sf_layout == "planes":
        sf = q.new_empty((B, H, R, C), dtype=_SF_DTYPE[fmt])
    else:
        sf = q.new_zeros((B, R, H, C), dtype=_SF_DTYPE[fmt])
    return codes, sf


def _block_scaled_make(name, q, k, v, dq, dk, dv, so, codes, sf, fmt, sf_layout, causal, window_left, softmax_scale):
    def make(device):
        if q.dtype not in _FP8 or k.dtype not in _FP8:
            raise InvalidArgumentError(f"q / k / v: {q.dtype} / {k.dtype}; a block-scaled O is made from FP8 inputs")
        B, S, H, D, R, C = _sf_geometry(q, v, fmt, sf_layout)
        g = _GraphOfCall(name)
        kind = _inputs(g, q, k, v, (dq, dk, dv, so), None, device, (_bshd(q), _bshd(k), _bshd(v)), q.shape[0])
        od, os_ = _bshd(codes)
        if fmt == "nvfp4":  # the codes' byte container [B, S, H, D / 2] holds the FP4 O [B, H, S, D]
            if codes.dtype != torch.uint8 or codes.shape[3] * 2 != D or codes.stride(3) != 1:
                raise InvalidArgumentError(f"codes: {codes.dtype} {tuple(codes.shape)}; NVFP4 codes are uint8 "
                                           f"[B, S_q, H_q, {D // 2}] with a unit last stride")
            od = (od[0], od[1], od[2], D)
            os_ = (os_[0] * 2, os_[1] * 2, os_[2] * 2, 1)
            g.raw("O", 8, od, os_, "FP4_E2M1", output=True)
        else:
            g.tensor("O", 8, od, os_, codes.dtype, output=True)
        ss = sf.stride()
        sf_dtype = "FP8_E4M3" if fmt == "nvfp4" else "FP8_E8M0"
        if sf_layout == "planes":  # [B, H, R, C]
            g.raw("sf_o", 9, (B, H, sf.shape[2], sf.shape[3]), ss, sf_dtype, output=True)
        else:  # token-major [B, R, H, C]: logical [B, H, R, C]
            g.raw("sf_o", 9, (B, H, sf.shape[1], sf.shape[3]), (ss[0], ss[2], ss[1], ss[3]), sf_dtype, output=True)
        return g.build(kind, **_attributes(causal, window_left, softmax_scale)), g.slots, g.keep
    return make


def _block_scaled_run(op, q, k, v, dq, dk, dv, so, codes, sf, fmt, sf_layout, causal, window_left, softmax_scale,
                      device=None, arch=None):
    tensors = (q, k, v, dq, dk, dv, so, None, codes, sf)
    key = _key((op, fmt, sf_layout, causal, window_left, softmax_scale), tensors, device)
    e = _plans.get(key) if arch is None else None
    if e is None:
        e = _entry(key, tensors, ("k", "v", "descale_q", "descale_k", "descale_v", "scale_o", "sink", "codes",
                                  "sf_o"), device,
                   _block_scaled_make(op, q, k, v, dq, dk, dv, so, codes, sf, fmt, sf_layout, causal, window_left,
                                      softmax_scale),
                   (("q", q.shape), ("k", k.shape), ("v", v.shape)), arch)
    return e, tensors


def _attention_block_scaled(q, k, v, descale_q, descale_k, descale_v, scale_o=None, format="nvfp4",
                            sf_layout="planes", causal=False, window_left=-1, softmax_scale=None):
    codes, sf = _block_scaled_outputs(q, v, format, sf_layout)
    e, tensors = _block_scaled_run("attention_block_scaled", q, k, v, descale_q, descale_k, descale_v, scale_o, codes,
                                   sf, format, sf_layout, causal, window_left, softmax_scale)
    _launch(e, tensors)
    return codes, sf


def _attention_block_scaled_fake(q, k, v, descale_q, descale_k, descale_v, scale_o=None, format="nvfp4",
                                 sf_layout="planes", causal=False, window_left=-1, softmax_scale=None):
    return _block_scaled_outputs(q, v, format, sf_layout)


def _attention_block_scaled_out(q, k, v, descale_q, descale_k, descale_v, codes, sf_o, scale_o=None, format="nvfp4",
                                sf_layout="planes", causal=False, window_left=-1, softmax_scale=None):
    e, tensors = _block_scaled_run("attention_block_scaled_out", q, k, v, descale_q, descale_k, descale_v, scale_o,
                                   codes, sf_o, format, sf_layout, causal, window_left, softmax_scale)
    _launch(e, tensors)


# ---- registration ------------------------------------------------------------------------------------------------

_COMMON = "float? softmax_scale=None"
_SCALES = "Tensor? descale_q=None, Tensor? descale_k=None, Tensor? descale_v=None, Tensor? scale_o=None"
_SCHEMAS = {
    "attention": (
        f"attention(Tensor q, Tensor k, Tensor v, {_SCALES}, Tensor? sink=None, *, bool causal=False, "
        f"int window_left=-1, {_COMMON}, ScalarType? out_dtype=None, bool return_lse=False) -> (Tensor, Tensor)",
        _attention, _attention_fake),
    "attention_out": (
        f"attention_out(Tensor q, Tensor k, Tensor v, Tensor(a!) out, Tensor(b!)? lse=None, {_SCALES}, "
        f"Tensor? sink=None, *, bool causal=False, int window_left=-1, {_COMMON}) -> ()",
        _attention_out, None),
    "attention_varlen": (
        f"attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
        f"int max_seqlen_q, int max_seqlen_k, {_SCALES}, Tensor? sink=None, *, bool causal=False, "
        f"int window_left=-1, {_COMMON}, ScalarType? out_dtype=None, bool return_lse=False) -> (Tensor, Tensor)",
        _attention_varlen, _attention_varlen_fake),
    "attention_varlen_out": (
        f"attention_varlen_out(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
        f"int max_seqlen_q, int max_seqlen_k, Tensor(a!) out, Tensor(b!)? lse=None, {_SCALES}, Tensor? sink=None, *, "
        f"bool causal=False, int window_left=-1, {_COMMON}) -> ()",
        _attention_varlen_out, None),
    "paged_attention": (
        f"paged_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, {_SCALES}, "
        f"Tensor? sink=None, Tensor? seq_lens_q=None, *, bool causal=True, int window_left=-1, {_COMMON}, "
        f"ScalarType? out_dtype=None, bool return_lse=False) -> (Tensor, Tensor)",
        _paged_attention, _paged_attention_fake),
    "paged_attention_out": (
        f"paged_attention_out(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens, "
        f"Tensor(a!) out, Tensor(b!)? lse=None, {_SCALES}, Tensor? sink=None, Tensor? seq_lens_q=None, *, "
        f"bool causal=True, int window_left=-1, {_COMMON}) -> ()",
        _paged_attention_out, None),
    "attention_block_scaled": (
        f"attention_block_scaled(Tensor q, Tensor k, Tensor v, Tensor descale_q, Tensor descale_k, Tensor descale_v, "
        f"Tensor? scale_o=None, *, str format=\"nvfp4\", str sf_layout=\"planes\", bool causal=False, "
        f"int window_left=-1, {_COMMON}) -> (Tensor, Tensor)",
        _attention_block_scaled, _attention_block_scaled_fake),
    "attention_block_scaled_out": (
        f"attention_block_scaled_out(Tensor q, Tensor k, Tensor v, Tensor descale_q, Tensor descale_k, "
        f"Tensor descale_v, Tensor(a!) codes, Tensor(b!) sf_o, Tensor? scale_o=None, *, str format=\"nvfp4\", "
        f"str sf_layout=\"planes\", bool causal=False, int window_left=-1, {_COMMON}) -> ()",
        _attention_block_scaled_out, None),
}

# Library + impl + register_fake (vLLM's direct registration: less dispatch overhead than torch.library.custom_op).
_lib = torch.library.Library("rime", "DEF")
for _name, (_schema, _impl, _fake) in _SCHEMAS.items():
    _lib.define(_schema)
    _lib.impl(_name, _impl, "CUDA")
    torch.library.register_fake(f"rime::{_name}", _fake if _fake is not None else (lambda *a, **k: None), lib=_lib)


# ---- eager fast path -------------------------------------------------------------------------------------------

def _direct(name, impl):
    """rime.torch.<name>: torch.ops.rime.<name>, except that an eager call on plain CUDA tensors runs the operator's
    kernel without torch's dispatcher (about 2 us of a call's host cost). Traced (torch.compile), on fake or meta
    tensors, or under any tensor subclass, it is the operator itself."""
    op = getattr(torch.ops.rime, name)

    def call(*args, **kwargs):
        q = args[0] if args else kwargs["q"]
        if type(q) is torch.Tensor and q.is_cuda and not torch.compiler.is_compiling():
            return impl(*args, **kwargs)
        return op(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"torch.ops.rime.{name}, called directly in eager mode: {_SCHEMAS[name][0]}"
    return call


attention = _direct("attention", _attention)
attention_out = _direct("attention_out", _attention_out)
attention_varlen = _direct("attention_varlen", _attention_varlen)
attention_varlen_out = _direct("attention_varlen_out", _attention_varlen_out)
paged_attention = _direct("paged_attention", _paged_attention)
paged_attention_out = _direct("paged_attention_out", _paged_attention_out)
attention_block_scaled = _direct("attention_block_scaled", _attention_block_scaled)
attention_block_scaled_out = _direct("attention_block_scaled_out", _attention_block_scaled_out)


# ---- warmup ------------------------------------------------------------------------------------------------------

def warmup(op, *args, device=None, arch=None, **kwargs):
    """Makes the plan of `op` for these arguments' shape class without running it (compiling what the plan cache
    lacks, logged), so that a later call, also one captured in a CUDA graph, finds it. `op` is an operator of
    torch.ops.rime or its name; the arguments are the operator's, as CUDA tensors or as meta tensors of the same
    shapes, strides and dtypes (then `device`, default the current CUDA device, is the GPU to plan for). With `arch`
    ('sm_90a'), it compiles that arch's kernels into the plan cache without a GPU (`rime cache warm` for the
    operators' shapes) and keeps no plan. Returns the rime Plan.

        for B in (1, 2, 4, 8, 16, 32):        # a decode server's batch sizes, before capturing its CUDA graphs
            rime.torch.warmup(torch.ops.rime.paged_attention_out, q[:B], k_cache, v_cache, block_table[:B],
                              seq_lens[:B], out[:B])
    """
    name = op if isinstance(op, str) else getattr(op, "_qualified_op_name", None) or getattr(op, "name", str)()
    name = name.split("::")[-1].split(".")[0]
    if name not in _SCHEMAS:
        raise InvalidArgumentError(f"warmup: {op!r} is not an operator of torch.ops.rime ({', '.join(_SCHEMAS)})")
    schema = getattr(torch.ops.rime, name).default._schema
    b = {}
    for a, value in zip([a for a in schema.arguments if not a.kwarg_only], args):
        b[a.name] = value
    b.update(kwargs)
    for a in schema.arguments:
        if a.name not in b:
            if not a.has_default_value():
                raise InvalidArgumentError(f"warmup: {name} needs its argument {a.name}")
            b[a.name] = a.default_value
    q = b["q"]
    if arch is not None:
        dev = None
    elif q.device.type == "cuda":
        dev = q.get_device()
    else:
        dev = torch.cuda.current_device() if device is None else torch.device("cuda", torch.device(device).index or 0
                                                                               ).index
    common = dict(device=dev, arch=arch)
    if name in ("attention", "attention_out"):
        out, lse = (_attention_outputs(q, b["v"], b["out_dtype"], b["return_lse"])
                    if name == "attention" else (b["out"], b["lse"]))
        e, _ = _attention_run(name, q, b["k"], b["v"], b["descale_q"], b["descale_k"], b["descale_v"], b["scale_o"],
                              b["sink"], out, lse, b["causal"], b["window_left"], b["softmax_scale"], **common)
    elif name in ("attention_varlen", "attention_varlen_out"):
        out, lse = (_varlen_outputs(q, b["v"], b["out_dtype"], b["return_lse"])
                    if name == "attention_varlen" else (b["out"], b["lse"]))
        e, _ = _varlen_run(name, q, b["k"], b["v"], b["cu_seqlens_q"], b["cu_seqlens_k"], b["max_seqlen_q"],
                           b["max_seqlen_k"], b["descale_q"], b["descale_k"], b["descale_v"], b["scale_o"], b["sink"],
                           out, lse, b["causal"], b["window_left"], b["softmax_scale"], **common)
    elif name in ("paged_attention", "paged_attention_out"):
        out, lse = (_attention_outputs(q, b["v_cache"], b["out_dtype"], b["return_lse"])
                    if name == "paged_attention" else (b["out"], b["lse"]))
        e, _ = _paged_run(name, q, b["k_cache"], b["v_cache"], b["block_table"], b["seq_lens"], b["seq_lens_q"],
                          b["descale_q"], b["descale_k"], b["descale_v"], b["scale_o"], b["sink"], out, lse,
                          b["causal"], b["window_left"], b["softmax_scale"], **common)
    else:
        codes, sf = (_block_scaled_outputs(q, b["v"], b["format"], b["sf_layout"])
                     if name == "attention_block_scaled" else (b["codes"], b["sf_o"]))
        e, _ = _block_scaled_run(name, q, b["k"], b["v"], b["descale_q"], b["descale_k"], b["descale_v"],
                                 b["scale_o"], codes, sf, b["format"], b["sf_layout"], b["causal"], b["window_left"],
                                 b["softmax_scale"], **common)
    return e.plan


# ---- context parallelism: an NCCL communicator over a torch.distributed group -------------------------------------

class NcclCommunicator:
    """An NCCL communicator over the ranks of a torch.distributed group, for rime.plan(..., context_parallel=(comm.ptr,
    comm.rank, comm.world)) and rime.ring_plan(shard, comm.ptr, comm.rank, comm.world) (docs/context-parallel.md).

        comm = rime.torch.NcclCommunicator(group)    # every rank of the group, together: the init is collective
        ring = rime.ring_plan(shard, comm.ptr, comm.rank, comm.world)
        ...
        comm.close()                                 # or `with rime.torch.NcclCommunicator(group) as comm:`

    torch.distributed exposes no group's own communicator, so this makes one of rime's, as vLLM's NCCL wrapper does:
    the group's first rank makes NCCL's unique id, torch.distributed broadcasts it over the group (any backend), and
    every rank joins on its GPU (`device`: default torch.cuda.current_device()).
    """

    def __init__(self, group=None, device=None):
        import torch.distributed as dist
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        if device is None:
            self.device = torch.cuda.current_device()
        elif isinstance(device, int):
            self.device = device
        else:
            self.device = torch.device(device).index or 0
        first = dist.get_global_rank(group, 0) if group is not None else 0
        box = [_rime._nccl_unique_id() if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=first, group=group)
        self.ptr = _rime._nccl_comm_init_rank(box[0], self.world, self.rank, self.device)

    def close(self):
        if self.ptr:
            _rime._nccl_comm_destroy(self.ptr)
            self.ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
