"""The torch operators on the GPU (skipped, with the reason, without torch or a GPU): each against a float32 torch
reference written here from the dequantized tensors, on fresh random inputs with poisoned outputs; side streams,
CUDA-graph capture and replay with new page tables, lengths and scales, torch.compile(fullgraph=True), opcheck."""
import math

import pytest

import rime

torch = pytest.importorskip("torch", reason="the torch layer's tests need torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
import rime.torch  # noqa: E402

F8 = torch.float8_e4m3fn
DEV = "cuda"


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def fp8(shape, amplitude=2.0):
    """Fresh FP8 codes (never zeros) and their float32 values."""
    codes = (torch.randn(shape, device=DEV) * amplitude).to(F8)
    return codes, codes.float()


def scalar(v):
    return torch.tensor([v], device=DEV, dtype=torch.float32)


def reference(q, k, v, causal=False, scale=None, window_left=-1):
    """float32 attention of one batch of [B, S, H, D] tensors (GQA by repeating kv heads), bottom-right aligned masks:
    O [B, S_q, H_q, D_v] and LSE [B, H_q, S_q]."""
    B, S_q, H_q, D = q.shape
    S_kv, H_kv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qf = q.float().permute(0, 2, 1, 3)
    kf = k.float().permute(0, 2, 1, 3).repeat_interleave(H_q // H_kv, 1)
    vf = v.float().permute(0, 2, 1, 3).repeat_interleave(H_q // H_kv, 1)
    s = qf @ kf.transpose(-1, -2) * scale
    i = torch.arange(S_q, device=DEV)[:, None] + (S_kv - S_q)
    j = torch.arange(S_kv, device=DEV)[None, :]
    masked = torch.zeros(S_q, S_kv, dtype=torch.bool, device=DEV)
    if causal:
        masked |= j > i
    if window_left > 0:
        masked |= j < i - (window_left - 1)
    s = s.masked_fill(masked, float("-inf"))
    # SPEC section 2: a row that sees no key writes O = 0 and LSE = -inf (softmax of all -inf would be NaN).
    o = torch.softmax(s, -1).nan_to_num(0.0) @ vf
    return o.permute(0, 2, 1, 3), torch.logsumexp(s, -1)


def poisoned(shape, dtype):
    return torch.full(shape, float("nan"), device=DEV).to(dtype) if dtype.is_floating_point and dtype.itemsize > 1 \
        else torch.full(shape, 0x7F, device=DEV, dtype=torch.uint8).view(dtype)


# ---- dense ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_bf16_attention_with_gqa_and_lse(causal):
    q = torch.randn(2, 300, 8, 64, device=DEV, dtype=torch.bfloat16)
    k = torch.randn(2, 300, 2, 64, device=DEV, dtype=torch.bfloat16)
    v = torch.randn(2, 300, 2, 64, device=DEV, dtype=torch.bfloat16)
    out, lse = torch.ops.rime.attention(q, k, v, causal=causal, return_lse=True)
    want, want_lse = reference(q, k, v, causal)
    assert rel_l2(out, want) < 1e-2
    assert torch.allclose(lse, want_lse, atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("d,s_q", [(80, 300), (96, 300), (96, 1), (80, 1)])
def test_head_dims_80_and_96_with_gqa_and_lse(d, s_q):
    # Phi-2's and Phi-3's head dims (the mma.sync engine, 16 bits): prefill, and a decode that splits over 2000 keys.
    q = torch.randn(2, s_q, 8, d, device=DEV, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 2000, 2, d, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    out, lse = torch.ops.rime.attention(q, k, v, causal=True, return_lse=True)
    want, want_lse = reference(q, k, v, True)
    assert rel_l2(out, want) < 1e-2
    assert torch.allclose(lse, want_lse, atol=2e-3, rtol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_fp8_attention_against_the_dequantized_reference(causal):
    (q, qf), (k, kf), (v, vf) = fp8((1, 512, 8, 128)), fp8((1, 640, 8, 128)), fp8((1, 640, 8, 128))
    dq, dk, dv = scalar(0.5), scalar(0.25), scalar(2.0)
    out, _ = torch.ops.rime.attention(q, k, v, dq, dk, dv, causal=causal)
    assert out.dtype == torch.bfloat16
    want, _ = reference(qf * 0.5, kf * 0.25, vf * 2.0, causal)
    assert rel_l2(out, want) < 3e-2  # SPEC section 10: a 16-bit O of an FP8 graph (P held in E4M3)
    # An FP8 O with its scale, into the caller's buffer (out= form), on a [B, H, S, D] tensor's transposed view.
    o8 = poisoned((1, 8, 512, 128), F8).transpose(1, 2)
    torch.ops.rime.attention_out(q, k, v, o8, None, dq, dk, dv, scalar(4.0), causal=causal)
    assert torch.isfinite(o8.float()).all()
    assert rel_l2(o8.float() / 4.0, want) < 6e-2


def test_the_eager_fast_path_is_the_operator():
    q, k, v = (torch.randn(1, 256, 4, 128, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    want, want_lse = torch.ops.rime.attention(q, k, v, causal=True, return_lse=True)
    got, got_lse = rime.torch.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(got, want) and torch.equal(got_lse, want_lse)
    out = torch.full_like(q, float("nan"))
    rime.torch.attention_out(q, k, v, out, causal=True)
    assert torch.equal(out, want)


def test_a_tensor_on_another_device_is_refused_after_its_shape_class_ran():
    # The shape-class key holds every tensor's device: a call whose K is on the CPU never finds the plan of the same
    # shapes on the GPU, and is refused naming k (the check runs when a key has no plan).
    q, k, v = (torch.randn(1, 128, 4, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    out = torch.empty_like(q)
    for attempt in range(2):
        rime.torch.attention_out(q, k, v, out)
        with pytest.raises(rime.InvalidArgumentError, match="k is on cpu"):
            rime.torch.attention_out(q, k.cpu(), v, out)


def test_a_side_stream_is_the_current_stream_of_the_call():
    q, k, v = (torch.randn(1, 256, 4, 128, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    want, _ = torch.ops.rime.attention(q, k, v)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = torch.empty_like(q).fill_(float("nan"))
        torch.ops.rime.attention_out(q, k, v, out)
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(out, want)


@pytest.mark.parametrize("causal", [False, True])
def test_dense_attention_with_per_sequence_lengths(causal):
    # A right-padded batch: sequence b is rows [0, seq_lens_q[b]) of Q and [0, seq_lens_k[b]) of K and V; each
    # sequence against the reference of its own rows (bottom-right causal per sequence), rows past a length O = 0.
    lens_q, lens_k = [300, 17, 0, 256], [300, 200, 64, 1]
    q = torch.randn(4, 300, 8, 128, device=DEV, dtype=torch.bfloat16)
    k, v = (torch.randn(4, 300, 2, 128, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    sq, sk = (torch.tensor(x, device=DEV, dtype=torch.int32) for x in (lens_q, lens_k))
    out = poisoned((4, 300, 8, 128), torch.bfloat16)
    torch.ops.rime.attention_out(q, k, v, out, seq_lens_q=sq, seq_lens_k=sk, causal=causal)
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        assert torch.equal(out[b, lq:], torch.zeros_like(out[b, lq:])), b
        if lq:
            want, _ = reference(q[b:b + 1, :lq], k[b:b + 1, :lk], v[b:b + 1, :lk], causal)
            assert rel_l2(out[b:b + 1, :lq], want) < 1e-2, b


@pytest.mark.parametrize("dtype,causal,window,s_q", [(torch.bfloat16, True, -1, 300), (torch.bfloat16, False, -1, 300),
                                                     (torch.bfloat16, True, 64, 300), (torch.bfloat16, True, -1, 1),
                                                     (F8, True, -1, 300), (F8, True, -1, 1)])
def test_dense_attention_with_per_sequence_starts(dtype, causal, window, s_q):
    # A left-padded batch (generate's): sequence b is rows [start_q, start_q + len_q) of Q and O and keys
    # [start_k, start_k + len_k) of K and V; each against the reference of its own rows, every row outside the
    # sequence O = 0 (rows before the start included). S_q 1: a decode step over a left-padded cache (split-KV).
    S_kv = 1000
    lens_k = [1000, 613, 0, 77]
    starts_k = [0, 387, 500, 923]
    lens_q = [min(s_q, n) for n in lens_k]
    starts_q = [s_q - n for n in lens_q]  # right-aligned: the last query is the last key's row
    if dtype == F8:
        (q, qf), (k, kf), (v, vf) = fp8((4, s_q, 8, 128)), fp8((4, S_kv, 2, 128)), fp8((4, S_kv, 2, 128))
        scales = dict(descale_q=scalar(0.5), descale_k=scalar(0.5), descale_v=scalar(1.0))
        tol = 3e-2
    else:
        q = torch.randn(4, s_q, 8, 128, device=DEV, dtype=dtype)
        k, v = (torch.randn(4, S_kv, 2, 128, device=DEV, dtype=dtype) for _ in range(2))
        qf, kf, vf = q, k, v
        scales = {}
        tol = 1e-2
    t = [torch.tensor(x, device=DEV, dtype=torch.int32) for x in (lens_q, lens_k, starts_q, starts_k)]
    out = poisoned((4, s_q, 8, 128), torch.bfloat16)
    torch.ops.rime.attention_out(q, k, v, out, **scales, seq_lens_q=t[0], seq_lens_k=t[1], seq_starts_q=t[2],
                                 seq_starts_k=t[3], causal=causal, window_left=window)
    for b in range(4):
        sq, lq, sk, lk = starts_q[b], lens_q[b], starts_k[b], lens_k[b]
        outside = torch.cat((out[b, :sq], out[b, sq + lq:]))
        assert torch.equal(outside, torch.zeros_like(outside)), b
        if lq:
            d = (0.5, 0.5, 1.0) if dtype == F8 else (1.0, 1.0, 1.0)  # the dequantized tensors are the reference's
            want, _ = reference(qf[b:b + 1, sq:sq + lq] * d[0], kf[b:b + 1, sk:sk + lk] * d[1],
                                vf[b:b + 1, sk:sk + lk] * d[2], causal, window_left=window)
            assert rel_l2(out[b:b + 1, sq:sq + lq], want) < tol, b
    # The same bounds as the rows of one [4, B] tensor (seq_bounds, rime.transformers' form), through the eager fast
    # path: the same kernel on the same pointers, so the same bytes.
    bounds = torch.stack((t[2], t[0], t[3], t[1]))
    again = poisoned((4, s_q, 8, 128), torch.bfloat16)
    rime.torch.attention_out(q, k, v, again, **scales, seq_bounds=bounds, causal=causal, window_left=window)
    assert torch.equal(again, out)


def test_a_growing_cache_decodes_every_length_up_to_its_capacity_with_one_plan():
    # A DynamicCache's K/V: a new [B, H_kv, S, D] tensor every step, one key longer. With per-sequence key lengths
    # the operator plans for a capacity (S rounded up to a power of two) and each call passes its own length and
    # strides: one plan for S 300 .. 511, each step against the reference of its own keys.
    B = 2
    q = torch.randn(B, 1, 8, 128, device=DEV, dtype=torch.bfloat16)
    full_k, full_v = (torch.randn(B, 2, 511, 128, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    plans = None
    for s in (300, 301, 377, 511):
        k, v = full_k[:, :, :s].contiguous().transpose(1, 2), full_v[:, :, :s].contiguous().transpose(1, 2)
        lens = torch.tensor([s, s - 40], device=DEV, dtype=torch.int32)
        out = poisoned((B, 1, 8, 128), torch.bfloat16)
        rime.torch.attention_out(q, k, v, out, seq_lens_k=lens, causal=True)
        plans = plans if plans is not None else rime.torch.plan_count()
        for b, n in enumerate(lens.tolist()):
            want, _ = reference(q[b:b + 1], k[b:b + 1, :n], v[b:b + 1, :n], True)
            assert rel_l2(out[b:b + 1], want) < 1e-2, (s, b)
        # The key lengths as seq_bounds' last row (starts 0, one query each; the plan of starts): one plan for every
        # length too.
        zeros, ones = torch.zeros_like(lens), torch.ones_like(lens)
        again = poisoned((B, 1, 8, 128), torch.bfloat16)
        rime.torch.attention_out(q, k, v, again, seq_bounds=torch.stack((zeros, ones, zeros, lens)), causal=True)
        assert rel_l2(again, out) < 1e-2, s
    assert rime.torch.plan_count() == plans + 1


def test_a_static_cache_decodes_every_step_with_one_plan_and_replays_new_lengths():
    # A fixed-capacity cache (transformers' StaticCache): K/V [B, capacity, H_kv, D], seq_lens_k the filled part.
    # Every step is one shape class (one plan), and a captured CUDA graph replays new lengths from the same buffer.
    B, cap = 3, 1024
    kc, vc = (torch.randn(B, cap, 2, 128, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    q = torch.randn(B, 1, 8, 128, device=DEV, dtype=torch.bfloat16)
    lens = torch.tensor([1, 500, cap], device=DEV, dtype=torch.int32)
    out = torch.empty(B, 1, 8, 128, device=DEV, dtype=torch.bfloat16)
    rime.torch.attention_out(q, kc, vc, out, seq_lens_k=lens, causal=True)
    plans = rime.torch.plan_count()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        torch.ops.rime.attention_out(q, kc, vc, out, seq_lens_k=lens, causal=True)
    for step in range(4):
        lens.copy_(torch.randint(1, cap + 1, (B,), device=DEV, dtype=torch.int32))
        q.copy_(torch.randn_like(q))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        for b, lk in enumerate(lens.tolist()):
            want, _ = reference(q[b:b + 1], kc[b:b + 1, :lk], vc[b:b + 1, :lk], True)
            assert rel_l2(out[b:b + 1], want) < 1e-2, (step, b)
        eager = torch.empty_like(out)
        rime.torch.attention_out(q, kc, vc, eager, seq_lens_k=lens, causal=True)
        assert torch.equal(out, eager)
    assert rime.torch.plan_count() == plans


# ---- ragged -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.bfloat16, F8])
def test_varlen_attention_per_sequence(dtype):
    lens_q, lens_k = [100, 37, 300, 1], [180, 37, 300, 64]
    cu_q = torch.tensor([0] + torch.tensor(lens_q).cumsum(0).tolist(), device=DEV, dtype=torch.int32)
    cu_k = torch.tensor([0] + torch.tensor(lens_k).cumsum(0).tolist(), device=DEV, dtype=torch.int32)
    T_q, T_k = sum(lens_q), sum(lens_k)
    if dtype == F8:
        (q, qf), (k, kf), (v, vf) = fp8((T_q, 8, 128)), fp8((T_k, 2, 128)), fp8((T_k, 2, 128))
        scales = (scalar(0.5), scalar(0.5), scalar(1.0))
    else:
        q, k, v = (torch.randn(t, h, 128, device=DEV, dtype=dtype) for t, h in ((T_q, 8), (T_k, 2), (T_k, 2)))
        qf, kf, vf = q.float(), k.float(), v.float()
        scales = (None, None, None)
    out, lse = torch.ops.rime.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), *scales, causal=True,
                                               return_lse=True)
    s = [0.5, 0.5, 1.0] if dtype == F8 else [1.0, 1.0, 1.0]
    for b in range(4):
        rq, rk = slice(cu_q[b].item(), cu_q[b + 1].item()), slice(cu_k[b].item(), cu_k[b + 1].item())
        want, want_lse = reference(qf[rq][None] * s[0], kf[rk][None] * s[1], vf[rk][None] * s[2], causal=True)
        assert rel_l2(out[rq], want[0]) < (3e-2 if dtype == F8 else 1e-2), b
        assert torch.allclose(lse[:, rq], want_lse[0], atol=2e-2), b


# ---- paged --------------------------------------------------------------------------------------------------------

def paged_case(B, S_q, page, H_q=32, H_kv=8, D=128, pages=400, hnd=False, q_dtype=F8):
    """A paged FP8 cache (NHD, or HND passed as its NHD view), a random block table over distinct pages, lengths."""
    shape = (pages, H_kv, page, D) if hnd else (pages, page, H_kv, D)
    (kc, kf), (vc, vf) = fp8(shape), fp8(shape)
    if hnd:
        kc, kf, vc, vf = (t.transpose(1, 2) for t in (kc, kf, vc, vf))
    lens = torch.randint(S_q, 40 * page // 2, (B,), device=DEV, dtype=torch.int32)
    max_pages = 40 * page // 2 // page + 1
    table = torch.randperm(pages, device=DEV, dtype=torch.int32)[:B * max_pages].view(B, max_pages).contiguous()
    if q_dtype == F8:
        q, qf = fp8((B, S_q, H_q, D))
    else:
        q = torch.randn(B, S_q, H_q, D, device=DEV, dtype=q_dtype)
        qf = q.float()
    return q, qf, kc, kf, vc, vf, table, lens


def paged_reference(qf, kf, vf, table, lens, dq, dk, dv):
    outs = []
    page = kf.shape[1]
    for b in range(qf.shape[0]):
        n = lens[b].item()
        pages = table[b, :(n + page - 1) // page].long()
        k = kf[pages].reshape(-1, kf.shape[2], kf.shape[3])[:n][None]
        v = vf[pages].reshape(-1, vf.shape[2], vf.shape[3])[:n][None]
        outs.append(reference(qf[b:b + 1] * dq, k * dk, v * dv, causal=True)[0])
    return torch.cat(outs)


@pytest.mark.parametrize("S_q,page,hnd", [(1, 16, False), (2, 64, True), (4, 16, True), (8, 64, False)])
def test_paged_decode_against_the_gathered_reference(S_q, page, hnd):
    q, qf, kc, kf, vc, vf, table, lens = paged_case(6, S_q, page, hnd=hnd)
    dq, dk, dv = scalar(0.5), scalar(0.5), scalar(1.5)
    out = poisoned((6, S_q, 32, 128), torch.bfloat16)
    torch.ops.rime.paged_attention_out(q, kc, vc, table, lens, out, None, dq, dk, dv)
    assert rel_l2(out, paged_reference(qf, kf, vf, table, lens, 0.5, 0.5, 1.5)) < 3e-2


def test_a_bf16_q_over_a_paged_fp8_cache():
    q, qf, kc, kf, vc, vf, table, lens = paged_case(4, 1, 16, q_dtype=torch.bfloat16)
    out, _ = torch.ops.rime.paged_attention(q, kc, vc, table, lens, None, scalar(0.5), scalar(2.0))
    assert rel_l2(out, paged_reference(qf, kf, vf, table, lens, 1.0, 0.5, 2.0)) < 3e-2


def test_per_head_descales_dense_and_paged():
    # descale_q / k / v per (sequence, kv head), FA3's [B, H_kv]: each kv head's K and V (and its q heads) dequantized
    # by their own entry. Dense FP8 prefill (GQA 4), and a paged decode with a BF16 Q over an FP8 cache.
    (q, qf), (k, kf), (v, vf) = fp8((2, 300, 8, 128)), fp8((2, 400, 2, 128)), fp8((2, 400, 2, 128))
    dq, dk, dv = (torch.rand(2, 2, device=DEV) + 0.5 for _ in range(3))
    out, _ = torch.ops.rime.attention(q, k, v, dq, dk, dv[..., None, None], causal=True)
    per_q_head = lambda d: d.repeat_interleave(4, 1)[:, None, :, None]  # [B, 1, H_q, 1] over [B, S, H_q, D]
    per_kv_head = lambda d: d[:, None, :, None]
    want, _ = reference(qf * per_q_head(dq), kf * per_kv_head(dk), vf * per_kv_head(dv), causal=True)
    assert rel_l2(out, want) < 3e-2
    flat, _ = torch.ops.rime.attention(q, k, v, scalar(1.0), scalar(1.0), scalar(1.0), causal=True)
    assert rel_l2(flat, want) > 0.05  # the scales matter: a per-tensor 1 is not the answer

    q, qf, kc, kf, vc, vf, table, lens = paged_case(4, 1, 16, q_dtype=torch.bfloat16)
    H_kv = kc.shape[2]
    dk, dv = torch.rand(4, H_kv, device=DEV) + 0.5, torch.rand(4, H_kv, device=DEV) + 0.5
    out, _ = torch.ops.rime.paged_attention(q, kc, vc, table, lens, None, dk, dv)
    want = torch.cat([paged_reference(qf[b:b + 1], kf * dk[b][None, None, :, None], vf * dv[b][None, None, :, None],
                                      table[b:b + 1], lens[b:b + 1], 1.0, 1.0, 1.0) for b in range(4)])
    assert rel_l2(out, want) < 3e-2


def test_cuda_graph_capture_replays_with_new_tables_lengths_and_scales():
    q, qf, kc, kf, vc, vf, table, lens = paged_case(4, 1, 16)
    dq, dk, dv = scalar(0.5), scalar(0.5), scalar(1.0)
    out = torch.empty(4, 1, 32, 128, device=DEV, dtype=torch.bfloat16)
    args = (q, kc, vc, table, lens, out, None, dq, dk, dv)
    rime.torch.warmup(torch.ops.rime.paged_attention_out, *args)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        torch.ops.rime.paged_attention_out(*args)
    for _ in range(3):  # new page tables, lengths, scales and queries in the same buffers, then replay
        _, _, _, _, _, _, new_table, new_lens = paged_case(4, 1, 16)
        table.copy_(new_table)
        lens.copy_(new_lens)
        new_q, new_qf = fp8(q.shape)
        q.copy_(new_q)
        qf = new_qf
        d = torch.rand(3).tolist()
        for t, x in zip((dq, dk, dv), d):
            t.fill_(0.25 + x)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        eager, _ = torch.ops.rime.paged_attention(q, kc, vc, table, lens, dq, dk, dv)
        assert torch.equal(out, eager)
        assert rel_l2(out, paged_reference(qf, kf, vf, table, lens, *(0.25 + x for x in d))) < 3e-2


def test_a_shape_first_met_under_capture_is_refused_by_name():
    q, _, kc, _, vc, _, table, lens = paged_case(3, 1, 16, pages=123)
    one = scalar(1.0)
    out = torch.empty(3, 1, 32, 128, device=DEV, dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(rime.PlanNotReadyError) as e:
        with torch.cuda.graph(graph, stream=s):
            torch.ops.rime.paged_attention_out(q, kc, vc, table, lens, out, None, one, one, one)
    assert "paged_attention_out" in e.value.message and "(3, 1, 32, 128)" in e.value.message
    assert "warmup" in e.value.message


# ---- block-scaled O -------------------------------------------------------------------------------------------------

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def sf_matrix(sf, layout):
    """The logical scale matrix [B, H, R, C] (bytes) of an sf_o in F8_128x4 order (SPEC section 5)."""
    sf = sf.view(torch.uint8)
    if layout == "planes":
        B, H, R, C = sf.shape
        planes = sf.reshape(B, H, R * C)
    else:
        B, R, H, C = sf.shape
        planes = None
    r = torch.arange(R, device=DEV)[:, None]
    c = torch.arange(C, device=DEV)[None, :]
    offset = (r // 128) * 128 * C + (c // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + (c % 4)
    if planes is not None:
        return planes[:, :, offset]
    # token-major: one [B * R, H * C] matrix in the same order, row = b * R + r, column = h * C + c
    M = sf.reshape(B * R, H * C)
    rows = torch.arange(B * R, device=DEV)[:, None]
    cols = torch.arange(H * C, device=DEV)[None, :]
    off = (rows // 128) * 128 * (H * C) + (cols // 4) * 512 + (rows % 32) * 16 + ((rows // 32) % 4) * 4 + (cols % 4)
    logical = M.reshape(-1)[off]
    return logical.view(B, R, H, C).permute(0, 2, 1, 3)


@pytest.mark.parametrize("fmt,layout", [("nvfp4", "planes"), ("mxfp8", "token_major")])
def test_block_scaled_outputs_decode_to_the_reference(fmt, layout):
    B, S, H, D = 2, 200, 8, 128
    (q, qf), (k, kf), (v, vf) = fp8((B, S, H, D)), fp8((B, S, H, D)), fp8((B, S, H, D))
    codes, sf = torch.ops.rime.attention_block_scaled(q, k, v, scalar(0.5), scalar(0.5), scalar(1.0), scalar(2.0),
                                                      format=fmt, sf_layout=layout, causal=True)
    want, _ = reference(qf * 0.5, kf * 0.5, vf, causal=True)
    scales = sf_matrix(sf, layout)[:, :, :S]  # [B, H, S, C]
    block = 16 if fmt == "nvfp4" else 32
    if fmt == "nvfp4":
        assert sf_matrix(sf, layout)[:, :, S:].eq(0).all()  # the pad rows of planes read zero
        lo, hi = (codes & 0xF).long(), (codes >> 4).long()
        nib = torch.stack((lo, hi), -1).reshape(B, S, H, D)
        table = torch.tensor(E2M1 + [-x for x in E2M1], device=DEV)
        values = table[nib]
        dec = scales.view(F8).float()[..., :D // block]
    else:
        values = codes.float()
        dec = torch.exp2(scales.float()[..., :D // block] - 127)
    dec = dec.permute(0, 2, 1, 3).repeat_interleave(block, -1)  # [B, S, H, D]
    scale_o = 2.0
    got = values * dec / scale_o
    # SPEC section 10: FP8 atol 0.08 and rtol 0.2, with atol raised to 3 quantization steps of the block (the step
    # at its largest code: 2 of E2M1's units, 32 of E4M3's between 256 and 448), at most 1e-5 of elements outside.
    step = dec * (2.0 if fmt == "nvfp4" else 32.0) / scale_o
    tolerance = torch.clamp(3 * step, min=0.08) + 0.2 * want.abs()
    outside = ((got - want).abs() > tolerance).float().mean().item()
    assert outside <= 1e-5, (outside, (got - want).abs().max().item())
    assert rel_l2(got, want) < (0.12 if fmt == "nvfp4" else 0.05)


# ---- torch.compile and opcheck ----------------------------------------------------------------------------------

class Attention(torch.nn.Module):
    def __init__(self, dim=512, heads=8):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, dtype=torch.bfloat16, device=DEV)
        self.proj = torch.nn.Linear(dim, dim, dtype=torch.bfloat16, device=DEV)

    def forward(self, x):
        B, S, dim = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.heads, dim // self.heads).unbind(2)
        o, _ = torch.ops.rime.attention(q, k, v, causal=True)
        return self.proj(o.reshape(B, S, dim))


def test_torch_compile_fullgraph_has_no_graph_break_and_matches_eager():
    import torch._dynamo
    torch._dynamo.reset()
    m = Attention()
    x = torch.randn(2, 256, 512, device=DEV, dtype=torch.bfloat16)
    with torch.no_grad():
        eager = m(x)
        explanation = torch._dynamo.explain(m)(x)
        assert explanation.graph_break_count == 0 and explanation.graph_count == 1
        compiled = torch.compile(m, fullgraph=True)(x)
    assert rel_l2(compiled, eager) < 1e-2


def opcheck_cases():
    q, k, v = (torch.randn(1, 128, 4, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    (q8, _), (k8, _), (v8, _) = fp8((1, 256, 4, 128)), fp8((1, 256, 4, 128)), fp8((1, 256, 4, 128))
    s = scalar(0.5)
    cu = torch.tensor([0, 100, 128], device=DEV, dtype=torch.int32)
    tq = torch.randn(128, 4, 64, device=DEV, dtype=torch.bfloat16)
    pq, _, kc, _, vc, _, table, lens = paged_case(2, 2, 16, pages=100)
    return [
        ("attention", (q, k, v), dict(causal=True, return_lse=True)),
        ("attention_out", (q8, k8, v8, torch.empty(1, 256, 4, 128, device=DEV, dtype=torch.bfloat16), None, s, s, s),
         dict()),
        ("attention_varlen", (tq, tq, tq, cu, cu, 100, 100), dict(causal=True)),
        ("attention_varlen_out", (tq, tq, tq, cu, cu, 100, 100, torch.empty_like(tq)), dict()),
        ("paged_attention", (pq, kc, vc, table, lens, s, s, s), dict(return_lse=True)),
        ("paged_attention_out", (pq, kc, vc, table, lens, torch.empty(2, 2, 32, 128, device=DEV,
                                                                      dtype=torch.bfloat16), None, s, s, s), dict()),
        ("attention_block_scaled", (q8, k8, v8, s, s, s), dict()),
        ("attention_block_scaled_out", (q8, k8, v8, s, s, s, torch.empty(1, 256, 4, 64, device=DEV, dtype=torch.uint8),
                                        torch.empty(1, 4, 256, 8, device=DEV, dtype=F8)), dict()),
    ]


OPS = ["attention", "attention_out", "attention_varlen", "attention_varlen_out", "paged_attention",
       "paged_attention_out", "attention_block_scaled", "attention_block_scaled_out"]


@pytest.mark.parametrize("name", OPS)
def test_opcheck(name):
    cases = {c[0]: c for c in opcheck_cases()}
    _, args, kwargs = cases[name]
    op = getattr(torch.ops.rime, name).default
    tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
    if not any(t.dtype in (F8, torch.float8_e8m0fnu) for t in tensors):
        torch.library.opcheck(op, args, kwargs)
        return
    # opcheck's schema test compares tensors with arithmetic torch lacks for FP8 ("mul_cuda" not implemented for
    # Float8_e4m3fn): the other tests run, and the schema's mutation contract is checked here on the bytes.
    torch.library.opcheck(op, args, kwargs,
                          test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))
    mutable = {a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    names = [a.name for a in op._schema.arguments]
    bound = dict(zip(names, args), **kwargs)
    before = {n: t.view(torch.uint8).clone() for n, t in bound.items() if isinstance(t, torch.Tensor)}
    for n in mutable:
        if isinstance(bound.get(n), torch.Tensor):
            bound[n].view(torch.uint8).fill_(0x7F)  # poisoned: the call must write it
            before[n] = bound[n].view(torch.uint8).clone()
    op(*args, **kwargs)
    torch.cuda.synchronize()
    for n, b in before.items():
        changed = not torch.equal(bound[n].view(torch.uint8), b)
        assert changed == (n in mutable), (n, "written" if changed else "not written")


# ---- the core API on torch tensors --------------------------------------------------------------------------------

def test_plan_run_refuses_a_tensor_unlike_the_graphs_by_name():
    b = rime.GraphBuilder("checked")
    q = b.tensor("Q", [1, 4, 128, 64], "BF16")
    k = b.tensor("K", [1, 4, 128, 64], "BF16")
    v = b.tensor("V", [1, 4, 128, 64], "BF16")
    o = b.output("O", [1, 4, 128, 64], "BF16")
    plan = rime.plan(b.sdpa(q=q, k=k, v=v, o=o), device=torch.device("cuda", 0))
    assert plan.device == 0
    t = {n: torch.randn(1, 4, 128, 64, device=DEV, dtype=torch.bfloat16) for n in "QKVO"}
    plan.run(t, stream=torch.cuda.current_stream())
    with pytest.raises(rime.InvalidArgumentError, match="run\\(\\): K: dtype torch.float16 differs"):
        plan.run({**t, "K": t["K"].half()})
    with pytest.raises(rime.InvalidArgumentError, match="run\\(\\): V: strides"):
        plan.run({**t, "V": torch.randn(1, 128, 4, 64, device=DEV, dtype=torch.bfloat16).transpose(1, 2)})
    with pytest.raises(rime.InvalidArgumentError, match="run\\(\\): O: the buffer is on a device other than CUDA"):
        plan.run({**t, "O": t["O"].cpu()})
    with pytest.raises(rime.InvalidArgumentError, match="device 64 does not exist"):
        rime.plan(b.sdpa(q=q, k=k, v=v, o=o), device=64)


def test_a_ring_of_one_rank_over_a_torch_distributed_group():
    # A world-1 torch.distributed group (gloo over loopback), rime.torch.NcclCommunicator over it, and the prefill ring
    # of one rank (chunks 0 and 1 of a causal BF16 prefill, [B, S, H, D] storage) against the float32 reference.
    import socket

    import torch.distributed as dist
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        with rime.torch.NcclCommunicator() as comm:
            assert (comm.rank, comm.world) == (0, 1) and comm.ptr
            B, S, H, H_kv, D = 2, 384, 8, 2, 128
            q = torch.randn(B, S, H, D, device=DEV).to(torch.bfloat16)
            k = torch.randn(B, S, H_kv, D, device=DEV).to(torch.bfloat16)
            v = torch.randn(B, S, H_kv, D, device=DEV).to(torch.bfloat16)
            out = torch.full((B, S, H, D), float("nan"), device=DEV, dtype=torch.bfloat16)
            b = rime.GraphBuilder("ring shard")

            def bshd(name, t, output=False):
                dims = [t.shape[0], t.shape[2], t.shape[1], t.shape[3]]
                strides = [t.stride(0), t.stride(2), t.stride(1), t.stride(3)]
                return b.tensor(name, dims, "BF16", strides=strides, output=output)

            g = b.sdpa(q=bshd("Q", q), k=bshd("K", k), v=bshd("V", v), o=bshd("O", out, True), causal=True)
            ring = rime.ring_plan(g, comm.ptr, comm.rank, comm.world)
            assert ring.prepared
            ws = torch.empty(ring.workspace_size, device=DEV, dtype=torch.uint8)
            # The graph's dims are [B, H, S, D]: the tensors as [B, H, S, D] views of their [B, S, H, D] storage.
            views = {name: t.transpose(1, 2) for name, t in (("Q", q), ("K", k), ("V", v), ("O", out))}
            ring.run(views, ws, torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            assert ring.transfer_times() == {"transfers": 0, "transfer_ms": 0.0, "exposed_ms": 0.0}
            want, _ = reference(q, k, v, causal=True)
            assert rel_l2(out, want) < 0.01
    finally:
        dist.destroy_process_group()
