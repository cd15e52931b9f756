"""The four operator families of rime.torch, each one table (Family): its parameters, its tensors' layouts, how a
call becomes a graph, and how the functional form allocates its outputs."""
import torch

from ..errors import InvalidArgumentError
from ._family import Family
from ._plans import constant

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_SF_DTYPE = {"nvfp4": torch.float8_e4m3fn, "mxfp8": getattr(torch, "float8_e8m0fnu", torch.uint8)}
_BLOCK = {"nvfp4": 16, "mxfp8": 32}

_SCALES = "Tensor? descale_q=None, Tensor? descale_k=None, Tensor? descale_v=None, Tensor? scale_o=None"
_MASK = ("bool causal=False, int window_left=-1, float? softmax_scale=None, float? softcap=None, "
         "str? q_quantization=None")
_ALLOCATING = "ScalarType? out_dtype=None, bool return_lse=False"
_DENSE_LAYOUTS = {"q": "B S_q H_q D_qk", "k": "B S_kv H_kv D_qk", "v": "B S_kv H_kv D_v"}


# ---- the pieces the families share ------------------------------------------------------------------------------

def _bshd(t):
    """Logical [B, H, S, D] dims and strides of a [B, S, H, D] tensor."""
    s = t.stride()
    return (t.shape[0], t.shape[2], t.shape[1], t.shape[3]), (s[0], s[2], s[1], s[3])


def _thd(t):
    """Logical [1, H, T, D] dims and strides of a token-major [T, H, D] tensor."""
    s = t.stride()
    return (1, t.shape[1], t.shape[0], t.shape[2]), (t.shape[0] * s[0], s[1], s[0], s[2])


def _attributes(c):
    a = {}
    if c.causal:
        a["causal"] = True
        a["alignment"] = "bottom_right"
    if c.window_left is not None and c.window_left >= 0:
        a["window_left"] = c.window_left
        a["alignment"] = "bottom_right"
    if c.softmax_scale is not None:
        a["attn_scale"] = c.softmax_scale
    if c.softcap:  # FlashAttention's softcap: 0 and None are no capping
        a["logit_softcap"] = c.softcap
    if c.q_quantization is not None and c.q_quantization != "none":
        a["q_quantization"] = c.q_quantization
    return a


def _inputs(g, c, names, views, batch, device):
    """Q, K, V (the call's tensors `names`, as the graph's logical `views`), the FP8 scales and the sink of a call of
    `batch` sequences: returns the op kind, sdpa or sdpa_fp8. descale_q / k / v are one float32, or one per
    (sequence, kv head): [B, H_kv] (FA3's shape) or [B, H_kv, 1, 1]."""
    q, k = getattr(c, names[0]), getattr(c, names[1])
    for role, name, (dims, strides) in zip(("Q", "K", "V"), names, views):
        g.tensor(role, name, dims, strides, getattr(c, name).dtype)
    kv_heads = views[1][0][1]
    scale_names = ("descale_q", "descale_k", "descale_v", "scale_o")
    scales = [getattr(c, n) for n in scale_names]
    fp8 = k.dtype in _FP8
    if not fp8:
        given = [n for n, t in zip(scale_names, scales) if t is not None]
        if given:
            raise InvalidArgumentError(f"{', '.join(given)}: given for {k.dtype} K and V, which take no scales")
        if q.dtype in _FP8:
            raise InvalidArgumentError(f"q is {q.dtype} over {k.dtype} K and V: an FP8 Q needs FP8 K and V")
    else:
        for n, t in zip(scale_names, scales):
            needed = n in ("descale_k", "descale_v") or (n == "descale_q" and q.dtype in _FP8)
            if t is None and needed:
                raise InvalidArgumentError(f"{n}: FP8 K and V (and an FP8 Q) need their descales, as one-element "
                                           "float32 device tensors")
            per_head = (batch, kv_heads)
            shape_ok = t is not None and (t.numel() == 1 or (
                n != "scale_o" and tuple(t.shape) in (per_head, per_head + (1, 1))))
            if t is not None and (t.dtype != torch.float32 or not shape_ok):
                raise InvalidArgumentError(
                    f"{n}: {t.dtype} of shape {tuple(t.shape)}; a scale is one float32 on the device" +
                    ("" if n == "scale_o" else f", or one per (sequence, kv head): {per_head} or {per_head + (1, 1)}"))
        # A 16-bit Q without descale_q, and the scales of S that rime's kernels do not need, bind a constant 1.
        for n, t in zip(scale_names[:3], scales[:3]):
            if t is not None and t.numel() > 1:
                g.tensor(n, n, [batch, kv_heads, 1, 1], [t.stride(0), t.stride(1), 1, 1], torch.float32)
            else:
                g.scalar(n, n, 1.0, device, t is not None)
        g.scalar("descale_s", None, 1.0, device, False)
        g.scalar("scale_s", None, 1.0, device, False)
        g.scalar("scale_o", "scale_o", 1.0, device, scales[3] is not None)
    sink = getattr(c, "sink", None)
    if sink is not None:
        heads = views[0][0][1]
        if sink.dtype != torch.float32 or sink.numel() != heads or not sink.is_contiguous():
            raise InvalidArgumentError(f"sink: {sink.dtype} of shape {tuple(sink.shape)}; expected float32, contiguous, "
                                       f"with one logit per q head ({heads})")
        g.tensor("sink", "sink", [1, heads, 1, 1], [heads, 1, 1, 1], torch.float32)
    return "sdpa_fp8" if fp8 else "sdpa"


def _bshd_outputs(g, c):
    """O [B, S_q, H_q, D_v] and, when given, LSE [B, H_q, S_q] of a call."""
    od, os_ = _bshd(c.out)
    g.tensor("O", "out", od, os_, c.out.dtype, output=True)
    if c.lse is not None:
        B, H, S = c.lse.shape
        sl = c.lse.stride()
        g.tensor("Stats", "lse", [B, H, S, 1], [sl[0], sl[1], sl[2], 1], c.lse.dtype, output=True)


def _out_dtype(q, out_dtype):
    if out_dtype is not None:
        return out_dtype
    return torch.bfloat16 if q.dtype in _FP8 else q.dtype


def _bshd_allocate(q, v, out_dtype, return_lse):
    B, S, H = q.shape[0], q.shape[1], q.shape[2]
    out = q.new_empty((B, S, H, v.shape[3]), dtype=_out_dtype(q, out_dtype))
    lse = q.new_empty((B, H, S), dtype=torch.float32) if return_lse else None
    return out, lse


def _out_and_lse(q, out, lse):
    return out, (lse if lse is not None else q.new_empty((0,), dtype=torch.float32))


def _int32(c, name, layout):
    t = getattr(c, name)
    if t.dtype != torch.int32:
        raise InvalidArgumentError(f"{name}: {t.dtype} {tuple(t.shape)}; expected int32 [{layout}]")
    return t


# ---- attention: dense -----------------------------------------------------------------------------------------------

# seq_bounds' rows as graph tensors, declared in the order of the four tensors' graph (so both are one graph).
_BOUNDS = (("seq_len_q", 1), ("seq_len_kv", 3), ("seq_start_q", 0), ("seq_start_kv", 2))


def _sequences(g, c, device):
    """Per-sequence lengths and starts of a dense call (SPEC section 2): seq_lens_q / seq_lens_k [B] int32 (a padded
    batch, a static cache's filled part), seq_starts_q / seq_starts_k [B] int32 (left padding), or all four as the rows
    of seq_bounds [4, B] int32 (starts_q, lens_q, starts_k, lens_k: one tensor for the call to read instead of four,
    rime.transformers' form). A side given no lengths holds full ones, a constant of the shape class. Returns the
    graph's fields: padding_mask when any is given."""
    lens_q, lens_k, starts_q, starts_k = c.seq_lens_q, c.seq_lens_k, c.seq_starts_q, c.seq_starts_k
    bounds = c.seq_bounds
    if bounds is not None:
        given = [n for n in ("seq_lens_q", "seq_lens_k", "seq_starts_q", "seq_starts_k") if getattr(c, n) is not None]
        if given:
            raise InvalidArgumentError(f"seq_bounds: given with {', '.join(given)}; seq_bounds holds all four as rows")
        B = c.q.shape[0]
        if bounds.dtype != torch.int32 or bounds.dim() != 2 or bounds.shape[0] != 4 or bounds.shape[1] != B:
            raise InvalidArgumentError(f"seq_bounds: {bounds.dtype} {tuple(bounds.shape)}; expected int32 [4, B = {B}] "
                                       "(rows starts_q, lens_q, starts_k, lens_k)")
        for role, row in _BOUNDS:
            g.tensor(role, "seq_bounds", [B], [bounds.stride(1)], torch.int32, offset=row * bounds.stride(0) * 4)
        return {"padding_mask": True}
    if lens_q is None and lens_k is None and starts_q is None and starts_k is None:
        return {}
    for start, lens in (("seq_starts_q", "seq_lens_q"), ("seq_starts_k", "seq_lens_k")):
        if getattr(c, start) is not None and getattr(c, lens) is None:
            raise InvalidArgumentError(f"{start}: given without {lens}; sequence b's positions are [start, start + "
                                       "length)")
    B, S_q, S_kv = c.q.shape[0], c.q.shape[1], c.k.shape[1]
    for role, name, t, full in (("seq_len_q", "seq_lens_q", lens_q, S_q), ("seq_len_kv", "seq_lens_k", lens_k, S_kv),
                                ("seq_start_q", "seq_starts_q", starts_q, None),
                                ("seq_start_kv", "seq_starts_k", starts_k, None)):
        if t is not None:
            _int32(c, name, "B")
            g.tensor(role, name, t.shape, t.stride(), t.dtype)
        elif full is not None:  # the side's full length for every sequence
            g.constant(role, constant(device, "lengths", full, B), [B], "INT32")
    return {"padding_mask": True}


def _capacity_view(t, capacity):
    """Logical dims and strides of a cache's [B, S, H, D] K or V planned for `capacity` keys: packed strides in the
    order of the tensor's own (each call passes its length and strides: ExecuteOptions::kv_extent)."""
    dims, strides = _bshd(t)
    dims = (dims[0], dims[1], capacity, dims[3])
    packed, step = [0] * 4, 1
    for d in sorted(range(4), key=lambda d: (strides[d], d != 3)):
        packed[d] = step
        step *= dims[d]
    return dims, tuple(packed)


def _dense_graph(g, c, device):
    cap = getattr(c, "kv_capacity", 0)
    kv_views = (_capacity_view(c.k, cap), _capacity_view(c.v, cap)) if cap else (_bshd(c.k), _bshd(c.v))
    kind = _inputs(g, c, ("q", "k", "v"), (_bshd(c.q),) + kv_views, c.q.shape[0], device)
    _bshd_outputs(g, c)
    return kind, {**_sequences(g, c, device), **_attributes(c)}


ATTENTION = Family(
    "attention",
    inputs="Tensor q, Tensor k, Tensor v",
    outputs="Tensor out, Tensor? lse=None",
    optional=f"{_SCALES}, Tensor? sink=None, Tensor? seq_lens_q=None, Tensor? seq_lens_k=None, "
             "Tensor? seq_starts_q=None, Tensor? seq_starts_k=None, Tensor? seq_bounds=None",
    attributes=_MASK,
    allocating=_ALLOCATING,
    layouts={**_DENSE_LAYOUTS, "out": "B S_q H_q D_v", "lse": "B H_q S_q", "seq_lens_q": "B", "seq_lens_k": "B",
             "seq_starts_q": "B", "seq_starts_k": "B", "seq_bounds": "4 B"},
    qkv=("q", "k", "v"),
    graph=_dense_graph,
    allocate=(_bshd_allocate, ("q", "v", "out_dtype", "return_lse")),
    result=(_out_and_lse, ("q", "out", "lse")),
    kv_capacity=("q", "k", "v", "seq_lens_k", "seq_bounds"))


# ---- attention_varlen: ragged (THD) batches ---------------------------------------------------------------------

def _varlen_graph(g, c, device):
    kind = _inputs(g, c, ("q", "k", "v"), (_thd(c.q), _thd(c.k), _thd(c.v)), c.cu_seqlens_q.shape[0] - 1, device)
    od, os_ = _thd(c.out)
    g.tensor("O", "out", od, os_, c.out.dtype, output=True)
    if c.lse is not None:
        H, T = c.lse.shape
        sl = c.lse.stride()
        g.tensor("Stats", "lse", [1, H, T, 1], [H * T, sl[0], sl[1], 1], c.lse.dtype, output=True)
    for role, name in (("cu_seqlens_q", "cu_seqlens_q"), ("cu_seqlens_kv", "cu_seqlens_k")):
        t = _int32(c, name, "B + 1")
        g.tensor(role, name, t.shape, t.stride(), t.dtype)
    return kind, dict(padding_mask=True, max_seqlen_q=c.max_seqlen_q, max_seqlen_kv=c.max_seqlen_k, **_attributes(c))


def _varlen_allocate(q, v, out_dtype, return_lse):
    T, H = q.shape[0], q.shape[1]
    out = q.new_empty((T, H, v.shape[2]), dtype=_out_dtype(q, out_dtype))
    lse = q.new_empty((H, T), dtype=torch.float32) if return_lse else None
    return out, lse


ATTENTION_VARLEN = Family(
    "attention_varlen",
    inputs="Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
           "int max_seqlen_k",
    outputs="Tensor out, Tensor? lse=None",
    optional=f"{_SCALES}, Tensor? sink=None",
    attributes=_MASK,
    allocating=_ALLOCATING,
    layouts={"q": "T_q H_q D_qk", "k": "T_kv H_kv D_qk", "v": "T_kv H_kv D_v", "cu_seqlens_q": "B+1",
             "cu_seqlens_k": "B+1", "out": "T_q H_q D_v", "lse": "H_q T_q"},
    qkv=("q", "k", "v"),
    graph=_varlen_graph,
    allocate=(_varlen_allocate, ("q", "v", "out_dtype", "return_lse")),
    result=(_out_and_lse, ("q", "out", "lse")))


# ---- paged_attention: K/V caches read through a page table ------------------------------------------------------

def _paged_graph(g, c, device):
    kind = _inputs(g, c, ("q", "k_cache", "v_cache"), (_bshd(c.q), _bshd(c.k_cache), _bshd(c.v_cache)),
                   c.q.shape[0], device)
    _bshd_outputs(g, c)
    B, S_q = c.q.shape[0], c.q.shape[1]
    table = _int32(c, "block_table", "B, max_pages")
    lens = _int32(c, "seq_lens", "B")
    g.tensor("page_table", "block_table", table.shape, table.stride(), table.dtype)
    g.tensor("seq_len_kv", "seq_lens", lens.shape, lens.stride(), lens.dtype)
    if c.seq_lens_q is not None:
        lens_q = _int32(c, "seq_lens_q", "B")
        g.tensor("seq_len_q", "seq_lens_q", lens_q.shape, lens_q.stride(), lens_q.dtype)
    else:  # every sequence has the S_q tokens of Q: a constant of the shape class
        g.constant("seq_len_q", constant(device, "lengths", S_q, B), [B], "INT32")
    return kind, dict(padding_mask=True, **_attributes(c))


PAGED_ATTENTION = Family(
    "paged_attention",
    inputs="Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, Tensor seq_lens",
    outputs="Tensor out, Tensor? lse=None",
    optional=f"{_SCALES}, Tensor? sink=None, Tensor? seq_lens_q=None",
    attributes=_MASK.replace("causal=False", "causal=True"),
    allocating=_ALLOCATING,
    layouts={"q": "B S_q H_q D_qk", "k_cache": "pages page_size H_kv D_qk", "v_cache": "pages page_size H_kv D_v",
             "block_table": "B max_pages", "seq_lens": "B", "seq_lens_q": "B", "out": "B S_q H_q D_v",
             "lse": "B H_q S_q"},
    qkv=("q", "k_cache", "v_cache"),
    graph=_paged_graph,
    allocate=(_bshd_allocate, ("q", "v_cache", "out_dtype", "return_lse")),
    result=(_out_and_lse, ("q", "out", "lse")))


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


def _block_scaled_allocate(q, v, fmt, sf_layout):
    B, S, H, D, R, C = _sf_geometry(q, v, fmt, sf_layout)
    codes = q.new_empty((B, S, H, D // 2), dtype=torch.uint8) if fmt == "nvfp4" else \
        q.new_empty((B, S, H, D), dtype=torch.float8_e4m3fn)
    # Token-major scales: the kernel writes the rows of real tokens only; the padding rows of each batch are zeros.
    if sf_layout == "planes":
        sf = q.new_empty((B, H, R, C), dtype=_SF_DTYPE[fmt])
    else:
        sf = q.new_zeros((B, R, H, C), dtype=_SF_DTYPE[fmt])
    return codes, sf


def _codes_and_scales(codes, sf_o):
    return codes, sf_o


def _block_scaled_graph(g, c, device):
    q, k, v, codes, sf = c.q, c.k, c.v, c.codes, c.sf_o
    if q.dtype not in _FP8 or k.dtype not in _FP8:
        raise InvalidArgumentError(f"q / k / v: {q.dtype} / {k.dtype}; a block-scaled O is made from FP8 inputs")
    B, S, H, D, R, C = _sf_geometry(q, v, c.format, c.sf_layout)
    kind = _inputs(g, c, ("q", "k", "v"), (_bshd(q), _bshd(k), _bshd(v)), B, device)
    od, os_ = _bshd(codes)
    if c.format == "nvfp4":  # the codes' byte container [B, S, H, D / 2] holds the FP4 O [B, H, S, D]
        if codes.dtype != torch.uint8 or codes.shape[3] * 2 != D or codes.stride(3) != 1:
            raise InvalidArgumentError(f"codes: {codes.dtype} {tuple(codes.shape)}; NVFP4 codes are uint8 "
                                       f"[B, S_q, H_q, {D // 2}] with a unit last stride")
        od = (od[0], od[1], od[2], D)
        os_ = (os_[0] * 2, os_[1] * 2, os_[2] * 2, 1)
        g.raw("O", "codes", od, os_, "FP4_E2M1", output=True)
    else:
        g.tensor("O", "codes", od, os_, codes.dtype, output=True)
    ss = sf.stride()
    sf_dtype = "FP8_E4M3" if c.format == "nvfp4" else "FP8_E8M0"
    if c.sf_layout == "planes":  # [B, H, R, C]
        g.raw("sf_o", "sf_o", (B, H, sf.shape[2], sf.shape[3]), ss, sf_dtype, output=True)
    else:  # token-major [B, R, H, C]: logical [B, H, R, C]
        g.raw("sf_o", "sf_o", (B, H, sf.shape[1], sf.shape[3]), (ss[0], ss[2], ss[1], ss[3]), sf_dtype, output=True)
    return kind, _attributes(c)


ATTENTION_BLOCK_SCALED = Family(
    "attention_block_scaled",
    inputs="Tensor q, Tensor k, Tensor v, Tensor descale_q, Tensor descale_k, Tensor descale_v",
    outputs="Tensor codes, Tensor sf_o",
    optional="Tensor? scale_o=None",
    attributes=f'str format="nvfp4", str sf_layout="planes", {_MASK}',
    allocating="",
    layouts={**_DENSE_LAYOUTS, "codes": "B S_q H_q codes_per_row", "sf_o": "sf0 sf1 sf2 sf3"},
    qkv=("q", "k", "v"),
    graph=_block_scaled_graph,
    allocate=(_block_scaled_allocate, ("q", "v", "format", "sf_layout")),
    result=(_codes_and_scales, ("codes", "sf_o")))

FAMILIES = (ATTENTION, ATTENTION_VARLEN, PAGED_ATTENTION, ATTENTION_BLOCK_SCALED)
