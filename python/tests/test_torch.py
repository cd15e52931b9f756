"""The torch layer without a GPU (skipped, with the reason, without torch): the operators, their fake kernels under
torch.compile, warmup for an arch, and the errors that name an argument. On meta tensors: no device memory."""
import math

import pytest

import rime

torch = pytest.importorskip("torch", reason="the torch layer's tests need torch")
import rime.torch  # noqa: E402  (registers torch.ops.rime.*)

F8 = torch.float8_e4m3fn
OPS = ["attention", "attention_out", "attention_varlen", "attention_varlen_out", "paged_attention",
       "paged_attention_out", "attention_block_scaled", "attention_block_scaled_out"]


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, device="meta", dtype=dtype)


def scale():
    return meta(1, dtype=torch.float32)


# One call of each operator, as (name, args, kwargs), on meta tensors.
def calls():
    q, k = meta(2, 130, 8, 64), meta(2, 300, 2, 64)
    q8, k8 = meta(2, 130, 8, 128, dtype=F8), meta(2, 300, 2, 128, dtype=F8)
    tq, tk = meta(700, 8, 128), meta(900, 2, 128)
    cu = meta(4, dtype=torch.int32)
    pq, cache = meta(4, 2, 32, 128, dtype=F8), meta(300, 16, 8, 128, dtype=F8)
    table, lens = meta(4, 40, dtype=torch.int32), meta(4, dtype=torch.int32)
    bq = meta(2, 200, 8, 128, dtype=F8)
    return [
        ("attention", (q, k, k), dict(causal=True, return_lse=True)),
        ("attention_out", (q8, k8, k8, meta(2, 130, 8, 128), meta(2, 8, 130, dtype=torch.float32), scale(), scale(),
                           scale()), dict(causal=True)),
        ("attention_varlen", (tq, tk, tk, cu, cu, 400, 500), dict(causal=True, return_lse=True)),
        ("attention_varlen_out", (tq, tk, tk, cu, cu, 400, 500, meta(700, 8, 128)), dict()),
        ("paged_attention", (pq, cache, cache, table, lens, scale(), scale(), scale()), dict()),
        # An HND cache [pages, H_kv, page, D] as the NHD view the operator takes: strides, no copy.
        ("paged_attention_out", (meta(4, 1, 32, 128), meta(300, 8, 16, 128, dtype=F8).transpose(1, 2),
                                 meta(300, 8, 16, 128, dtype=F8).transpose(1, 2), table, lens, meta(4, 1, 32, 128)),
         dict(descale_k=scale(), descale_v=scale())),
        ("attention_block_scaled", (bq, bq, bq, scale(), scale(), scale()), dict(format="nvfp4")),
        ("attention_block_scaled_out", (bq, bq, bq, scale(), scale(), scale(), meta(2, 200, 8, 128, dtype=F8),
                                        meta(2, 256, 8, 4, dtype=torch.float8_e8m0fnu)),
         dict(format="mxfp8", sf_layout="token_major")),
    ]


def test_every_operator_is_registered():
    for name in OPS:
        schema = str(getattr(torch.ops.rime, name).default._schema)
        assert schema.startswith(f"rime::{name}(")
        assert ("Tensor(a!) " in schema) == name.endswith("_out")


def test_fake_kernels_give_the_outputs():
    out, lse = torch.ops.rime.attention(meta(2, 130, 8, 64), meta(2, 300, 2, 64), meta(2, 300, 2, 64), causal=True,
                                        return_lse=True)
    assert (out.shape, out.dtype, lse.shape, lse.dtype) == ((2, 130, 8, 64), torch.bfloat16, (2, 8, 130), torch.float32)
    out, lse = torch.ops.rime.attention(meta(1, 4, 8, 128, dtype=F8), meta(1, 4, 8, 128, dtype=F8),
                                        meta(1, 4, 8, 128, dtype=F8), scale(), scale(), scale())
    assert (out.dtype, lse.shape) == (torch.bfloat16, (0,))  # FP8 in, BF16 out by default; no LSE asked for
    out, lse = torch.ops.rime.attention_varlen(meta(700, 8, 128), meta(900, 2, 64 + 64), meta(900, 2, 128),
                                               meta(4, dtype=torch.int32), meta(4, dtype=torch.int32), 400, 500,
                                               return_lse=True)
    assert (out.shape, lse.shape) == ((700, 8, 128), (8, 700))
    codes, sf = torch.ops.rime.attention_block_scaled(*(meta(2, 200, 8, 128, dtype=F8),) * 3, scale(), scale(), scale())
    assert (codes.shape, codes.dtype, sf.shape, sf.dtype) == ((2, 200, 8, 64), torch.uint8, (2, 8, 256, 8), F8)
    codes, sf = torch.ops.rime.attention_block_scaled(*(meta(2, 200, 8, 128, dtype=F8),) * 3, scale(), scale(), scale(),
                                                      format="mxfp8", sf_layout="token_major")
    assert (codes.shape, codes.dtype, sf.shape, sf.dtype) == ((2, 200, 8, 128), F8, (2, 256, 8, 4),
                                                              torch.float8_e8m0fnu)


def test_torch_compile_traces_every_operator_without_a_graph_break():
    import torch._dynamo

    def model(*args):
        outs = []
        for name, a, kw in calls():
            r = getattr(torch.ops.rime, name)(*a, **kw)
            outs.append(r)
        return outs

    explanation = torch._dynamo.explain(model)()
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    # fullgraph=True through AOT autograd: the _out operators' writes become functional and back.
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=False)
    assert len(compiled()) == len(OPS)


@pytest.mark.parametrize("name,args,kwargs", calls(), ids=OPS)
def test_warmup_for_an_arch_compiles_the_operators_plan_without_a_gpu(name, args, kwargs):
    plan = rime.torch.warmup(getattr(torch.ops.rime, name), *args, arch="sm_90a", **kwargs)
    assert plan.kernels and all(k["arch"] == "sm_90a" for k in plan.kernels)
    listed = {e["name"] for e in rime.cache.ls()}
    assert {f'{k["engine"]}.{k["key"][:16]}' for k in plan.kernels} <= listed
    assert rime.torch.plan_count() == 0  # planned for an arch, not for a GPU of this process: nothing kept


def test_wrong_arguments_are_named():
    q8 = meta(1, 64, 8, 128, dtype=F8)
    with pytest.raises(rime.InvalidArgumentError, match="descale_q: FP8 K and V"):
        rime.torch.warmup("attention", q8, q8, q8, arch="sm_90a")
    q = meta(1, 64, 8, 128)
    with pytest.raises(rime.InvalidArgumentError, match="descale_k: given for torch.bfloat16 K and V"):
        rime.torch.warmup("attention", q, q, q, descale_k=scale(), arch="sm_90a")
    with pytest.raises(rime.InvalidArgumentError, match=r"sink: torch.float32 of shape \(4,\); expected"):
        rime.torch.warmup("attention", q, q, q, sink=meta(4, dtype=torch.float32), arch="sm_90a")
    with pytest.raises(rime.InvalidArgumentError, match="descale_q: torch.float32 of shape \\(2,\\)"):
        rime.torch.warmup("attention", q8, q8, q8, meta(2, dtype=torch.float32), scale(), scale(), arch="sm_90a")
    with pytest.raises(rime.InvalidArgumentError, match="not an operator of torch.ops.rime"):
        rime.torch.warmup("flash_attn", q, q, q, arch="sm_90a")
    # A layout rime does not take is the library's InvalidGraph naming the tensor; nothing is copied to fit.
    strided = meta(1, 64, 8, 256)[..., ::2]
    with pytest.raises(rime.InvalidGraphError) as e:
        rime.torch.warmup("attention", strided, q, q, arch="sm_90a")
    assert "Q" in e.value.message and "stride" in e.value.message


def test_the_eager_functions_are_the_operators_off_the_gpu():
    # On meta (or fake) tensors rime.torch.<op> is torch.ops.rime.<op>: the fake kernel answers.
    out, lse = rime.torch.attention(meta(1, 64, 8, 64), meta(1, 64, 8, 64), meta(1, 64, 8, 64), return_lse=True)
    assert (out.shape, lse.shape, out.device.type) == ((1, 64, 8, 64), (1, 8, 64), "meta")
    for name in OPS:
        assert getattr(rime.torch, name).__name__ == name


def test_rime_warmup_takes_an_operator_too():
    q = meta(1, 64, 8, 64)
    plan = rime.warmup(torch.ops.rime.attention, q, q, q, causal=True, arch="sm_90a")
    assert plan.row == "sdpa_sm90_f16"


def test_shape_class_key_tells_every_field_apart():
    # The key of a call (built in C++ from each tensor's dims, strides, dtype and device): equal for the same shape
    # class, different when any one field of any tensor or the attributes differ.
    key = rime.torch._key
    q, k = torch.empty(2, 5, 8, 64, dtype=torch.bfloat16), torch.empty(2, 9, 2, 64, dtype=torch.bfloat16)
    head = ("attention", False, -1, None)
    base = key(head, (q, k, k, None), None)
    assert key(head, (q.clone(), k.clone(), k, None), None) == base
    assert hash(key(head, (q.clone(), k, k, None), None)) == hash(base)
    different = [
        key(("attention", True, -1, None), (q, k, k, None), None),                        # an attribute
        key(head, (q[:1], k, k, None), None),                                             # a dim
        key(head, (q.transpose(1, 2).contiguous().transpose(1, 2), k, k, None), None),   # strides
        key(head, (q.to(torch.float16), k, k, None), None),                               # dtype
        key(head, (q, k, k, k), None),                                                    # a tensor given
        key(head, (q, k, k, None), 0),                                                    # the device (-1 here)
        key(head, (q.reshape(2, 5, 512), k, k, None), None),                              # the rank
    ]
    assert all(d != base for d in different)
    assert len(set(different)) == len(different)
    # Meta tensors stand for tensors on the GPU named: their key equals the real tensors' there.
    assert key(head, (q.to("meta"), k.to("meta"), k.to("meta"), None), -1) == base


def test_per_head_descales_plan_as_the_graphs_per_batch_and_kv_head_descales():
    # FA3's shape [B, H_kv] (and [B, H_kv, 1, 1]) for descale_q / k / v, dense, varlen and paged; planned for an arch.
    q8, k8 = meta(2, 130, 8, 128, dtype=F8), meta(2, 300, 2, 128, dtype=F8)
    per_head = meta(2, 2, dtype=torch.float32)
    plan = rime.torch.warmup("attention", q8, k8, k8, per_head, per_head, meta(2, 2, 1, 1, dtype=torch.float32),
                             arch="sm_90a")
    assert "descales  per (batch, kv head): descale_q, descale_k, descale_v" in plan.explain()
    descales = {t["name"]: t for t in plan.graph.tensors if t["name"].startswith("descale_")}
    assert descales["descale_k"]["dims"] == [2, 2, 1, 1] and descales["descale_s"]["dims"] == [1, 1, 1, 1]
    tq, tk, cu = meta(700, 8, 128, dtype=F8), meta(900, 2, 128, dtype=F8), meta(4, dtype=torch.int32)
    plan = rime.torch.warmup("attention_varlen", tq, tk, tk, cu, cu, 400, 500, scale(),
                             meta(3, 2, dtype=torch.float32), meta(3, 2, dtype=torch.float32), arch="sm_90a")
    assert "descales  per (batch, kv head): descale_k, descale_v" in plan.explain()
    pq, cache = meta(4, 1, 32, 128, dtype=torch.bfloat16), meta(300, 16, 8, 128, dtype=F8)
    table, lens = meta(4, 40, dtype=torch.int32), meta(4, dtype=torch.int32)
    kv_scales = meta(4, 8, dtype=torch.float32)
    plan = rime.torch.warmup("paged_attention", pq, cache, cache, table, lens, None, kv_scales, kv_scales,
                             arch="sm_90a")
    assert "descale_k, descale_v" in plan.explain()
    # A shape of neither kind is named with both accepted shapes; scale_o stays one value.
    with pytest.raises(rime.InvalidArgumentError, match=r"descale_k: torch.float32 of shape \(2, 8\); .* \(2, 2\)"):
        rime.torch.warmup("attention", q8, k8, k8, scale(), meta(2, 8, dtype=torch.float32), scale(), arch="sm_90a")
    with pytest.raises(rime.InvalidArgumentError, match=r"scale_o: torch.float32 of shape \(2, 2\); a scale is one"):
        rime.torch.warmup("attention", q8, k8, k8, scale(), scale(), scale(), per_head, arch="sm_90a")


def fake_refusals():
    """Calls the real operator refuses, each as (call on meta tensors, the message's pattern)."""
    ops = torch.ops.rime
    s = meta(1, dtype=torch.float32)
    q, kv = meta(1, 64, 8, 64), meta(1, 64, 2, 64)
    cu = meta(3, dtype=torch.int32)
    return [
        (lambda: ops.attention(meta(1, 64, 8, 128), kv, kv), r"k: dim 3 \(D_qk\) is 64, q's is 128"),
        (lambda: ops.attention(meta(1, 64, 6, 64), meta(1, 64, 4, 64), meta(1, 64, 4, 64)),
         "q: 6 heads over k's 4: the query heads must be a multiple of the kv heads"),
        (lambda: ops.attention(meta(1, 64, 8, 64, dtype=torch.int32), kv, kv), "q: torch.int32; rime takes Q, K and V"),
        (lambda: ops.attention(*(meta(1, 64, 8, 64, dtype=torch.float32),) * 3), "q: torch.float32; rime takes"),
        (lambda: ops.attention(meta(2, 64, 8, 64), kv, kv), r"k: dim 0 \(B\) is 1, q's is 2"),
        (lambda: ops.attention(q, kv, kv, sink=meta(4, dtype=torch.float32)), r"sink: torch.float32 of shape \(4,\)"),
        (lambda: ops.attention(*(meta(1, 64, 8, 128, dtype=F8),) * 3), "descale_q: FP8 K and V"),
        (lambda: ops.attention(meta(64, 8, 64), meta(64, 2, 64), meta(64, 2, 64)),
         r"q: 3 dims \(64, 8, 64\); attention takes q as \[B, S_q, H_q, D_qk\]"),
        (lambda: ops.attention_out(q, kv, kv, meta(1, 64, 8, 64), meta(1, 8, 64)), "Stats.*dtype BF16 must be FP32"),
        (lambda: ops.attention_out(q, kv, kv, meta(1, 64, 8, 32)), r"out: dim 3 \(D_v\) is 32, v's is 64"),
        (lambda: ops.attention_varlen(meta(1, 64, 8, 64), meta(64, 2, 64), meta(64, 2, 64), cu, cu, 64, 64),
         r"q: 4 dims .*attention_varlen takes q as \[T_q, H_q, D_qk\]"),
        (lambda: ops.attention_varlen(meta(64, 8, 64), meta(64, 2, 64), meta(64, 2, 64), cu,
                                      meta(3, dtype=torch.int64), 64, 64), "cu_seqlens_k: torch.int64"),
        (lambda: ops.paged_attention(meta(2, 1, 8, 64), meta(10, 16, 2, 64), meta(10, 16, 2, 64),
                                     meta(2, 4, dtype=torch.int32), meta(3, dtype=torch.int32)),
         r"seq_lens: dim 0 \(B\) is 3, q's is 2"),
        (lambda: ops.attention_block_scaled(q, kv, kv, s, s, s), "a block-scaled O is made from FP8 inputs"),
    ]


@pytest.mark.parametrize("case", range(len(fake_refusals())))
def test_the_fake_kernels_refuse_what_the_real_operator_refuses(case):
    # torch.compile traces through the fake kernels: a call the operator refuses on the GPU must not trace. Each is
    # refused by the code the real kernel runs before it plans, with its message, under warmup too.
    call, message = fake_refusals()[case]
    with pytest.raises((rime.InvalidArgumentError, rime.InvalidGraphError), match=message):
        call()


def test_the_fake_kernels_check_each_shape_class_once():
    from rime.torch import _plans
    q, kv = meta(1, 64, 8, 64), meta(1, 64, 2, 64)
    torch.ops.rime.attention(q, kv, kv, causal=True)
    n = len(_plans._validated)
    torch.ops.rime.attention(meta(1, 64, 8, 64), meta(1, 64, 2, 64), meta(1, 64, 2, 64), causal=True)
    assert len(_plans._validated) == n
    torch.ops.rime.attention(q, kv, kv, causal=False)
    assert len(_plans._validated) == n + 1


def test_each_schema_is_generated_from_its_familys_one_parameter_list():
    from rime.torch._families import FAMILIES
    for family in FAMILIES:
        functional, out = (getattr(torch.ops.rime, n).default._schema for n in family.ops())
        written = [a.name for a in out.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert written == [p.name for p in family.outputs]
        assert [a.name for a in out.arguments] == [p.name for p in family.parameters(True) if p is not None]
        assert [a.name for a in functional.arguments] == [p.name for p in family.parameters(False) if p is not None]
        assert len(functional.returns) == len(family.outputs) and not out.returns
        kwarg_only = {a.name for a in functional.arguments if a.kwarg_only}
        assert kwarg_only == {p.name for p in family.attributes + family.allocating}


@pytest.mark.parametrize("name,args,kwargs", calls(), ids=OPS)
def test_each_generated_cuda_kernel_binds_every_graph_tensor_to_the_call_tensor_of_its_name(name, args, kwargs):
    # The CUDA kernel a family generates, run off the GPU: planned for sm_90a instead of a device and its launch
    # recorded instead of made. Every graph tensor must bind the call's tensor of its slot (dtype and element count,
    # an FP4 O held as bytes counted in pairs), or a constant; the functional form's outputs are what it binds as
    # outputs; a second call of the shape class plans nothing.
    check_generated_binding(name, args, kwargs)


def check_generated_binding(name, args, kwargs):
    from rime.torch import _FAMILY_OF, _plans
    family, out_form = _FAMILY_OF[name]
    made, launched = [], []

    def plan_call(family, op, key, values):
        graph, slots, _ = family.graph(op, family.call(values), None)
        made.append(op)
        return (graph, slots)

    namespace = dict(call_key=_plans.call_key, plans={}, plan_call=lambda f, op, key, values:
                     namespace["plans"].setdefault(key, plan_call(f, op, key, values)),
                     launch=lambda e, tensors: launched.append((e, tensors)), check=_plans.check)
    kernel = family.kernel(out_form, False, namespace)
    result = kernel(*args, **kwargs)
    kernel(*args, **kwargs)
    assert made == [name] and len(launched) == 2
    (graph, slots), tensors = launched[0]
    bytes_of = {"FP4_E2M1": 0.5, "FP8_E4M3": 1, "FP8_E5M2": 1, "FP8_E8M0": 1, "BF16": 2, "FP16": 2, "FP32": 4,
                "INT32": 4}
    bound_outputs = []
    for t, (index, offset) in zip(graph.tensors, slots):
        if index < 0:
            assert t["name"] in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "seq_len_q")
            continue
        argument = {"Q": ("q",), "K": ("k", "k_cache"), "V": ("v", "v_cache"), "O": ("out", "codes"),
                    "Stats": ("lse",), "page_table": ("block_table",),
                    "seq_len_kv": ("seq_lens", "seq_lens_k", "seq_bounds"), "seq_len_q": ("seq_lens_q", "seq_bounds"),
                    "cu_seqlens_kv": ("cu_seqlens_k",), "seq_start_q": ("seq_starts_q", "seq_bounds"),
                    "seq_start_kv": ("seq_starts_k", "seq_bounds")}.get(t["name"], (t["name"],))
        assert family.tensor_names[index] in argument, (t["name"], family.tensor_names[index])
        x = tensors[index]
        assert x is not None, t["name"]
        if family.tensor_names[index] == "seq_bounds":  # one row each, at its byte offset
            x = x[offset // (x.stride(0) * 4)]
        assert x.numel() * x.element_size() == math.prod(t["dims"]) * bytes_of[t["dtype"]], (t, tuple(x.shape))
        if t["output"]:
            bound_outputs.append(x)
    if not out_form:
        returned = [r for r in result if r.numel()]
        assert len(returned) == len(bound_outputs) and all(r is b for r, b in zip(returned, bound_outputs))


def test_softcap_is_one_keyword_of_every_operator_and_is_planned_as_the_graphs_logit_softcap():
    # One entry of the families' shared attribute list: every schema has it. A capped graph plans the kernels'
    # specialization with the cap, never an uncapped kernel.
    for name in OPS:
        assert "float? softcap=None" in str(getattr(torch.ops.rime, name).default._schema)
    q, kv = meta(1, 64, 8, 64), meta(1, 64, 2, 64)
    e = rime.explain(rime.torch.graph("attention", q, kv, kv, causal=True, softcap=50.0), arch="sm_90a", json=True)
    assert e["facts"]["logit_softcap"] == 50.0
    assert "softcap" in e["derived"]["stages"][0]["name_expression"]  # the kernels' own specialization
    with pytest.raises(rime.InvalidGraphError, match="logit_softcap -1 must be finite and >= 0"):
        torch.ops.rime.attention(q, kv, kv, softcap=-1.0)
    assert rime.torch.warmup("attention", q, kv, kv, softcap=0.0, arch="sm_90a").row  # 0: no capping, served


def test_q_quantization_is_one_keyword_of_every_operator_and_plans_the_rounded_q_row():
    # A BF16 Q over an FP8 cache with q_quantization="e4m3_per_row" plans the row that rounds Q to E4M3 per row (the
    # FP8 kernel's 96-key tiles on three consumers), the exact Q its own row; over BF16 K/V the attribute is refused.
    for name in OPS:
        assert "str? q_quantization=None" in str(getattr(torch.ops.rime, name).default._schema)
    q, kv = meta(2, 4096, 32, 128), meta(2, 4096, 8, 128, dtype=F8)
    scales = dict(descale_k=scale(), descale_v=scale())
    rounded = rime.explain(rime.torch.graph("attention", q, kv, kv, causal=True, q_quantization="e4m3_per_row",
                                            **scales), arch="sm_90a", json=True)
    exact = rime.explain(rime.torch.graph("attention", q, kv, kv, causal=True, **scales), arch="sm_90a", json=True)
    assert rounded["facts"]["q_quantization"] == "e4m3_per_row"
    assert "q_quantization" not in exact["facts"]
    assert rounded["decision"]["row"] == "sdpa_sm90_q16_fp8kv_e4m3q"
    assert rounded["decision"]["tile"] == {"q": 192, "kv": 96}
    assert "q_e4m3_rows" in rounded["derived"]["stages"][0]["name_expression"]
    assert exact["decision"]["row"] == "sdpa_sm90_q16_fp8kv"
    with pytest.raises(rime.InvalidGraphError, match="q_quantization e4m3_per_row rounds a 16-bit Q for FP8 K/V"):
        rime.explain(rime.torch.graph("attention", q, q, q, q_quantization="e4m3_per_row"), arch="sm_90a")


def test_a_caches_decode_is_one_shape_class_for_every_length_up_to_its_capacity():
    # With per-sequence key lengths and more keys than queries, K and V enter the key as a capacity (a power of two,
    # at least 256) and their strides' order: a DynamicCache's K/V, a new tensor one key longer each step, keep one
    # plan until the length doubles. The plan's graph says the capacity; each call passes its own length.
    lens = meta(2, dtype=torch.int32)
    q = meta(2, 1, 8, 128)

    def key(s, lengths=lens, queries=q):
        k = meta(2, 2, s, 128).transpose(1, 2)  # transformers' [B, H_kv, S, D] cache, as the operator takes it
        family, name, values = rime.torch._bind("key", "attention", (queries, k, k), dict(seq_lens_k=lengths))
        c = family.call(values)
        return rime.torch._plans.call_key(family.head(name, c), family.tensors(c), 0, family.kv)

    assert key(300) == key(301) == key(512) != key(513)
    assert key(2) == key(256) != key(257)
    assert key(300, lengths=None) != key(301, lengths=None)  # without lengths: the call's own S_kv
    assert key(300, queries=meta(2, 300, 8, 128)) != key(301, queries=meta(2, 301, 8, 128))  # a prefill: its own
    graph = rime.torch.graph("attention", q, meta(2, 2, 300, 128).transpose(1, 2), meta(2, 2, 300, 128).transpose(1, 2),
                             seq_lens_k=lens, causal=True)
    k = next(t for t in graph.tensors if t["name"] == "K")
    assert k["dims"] == [2, 2, 512, 128] and k["strides"] == [2 * 512 * 128, 512 * 128, 128, 1]


def test_the_dense_operator_takes_per_sequence_lengths_and_starts():
    # A padded batch or a static cache's filled part: seq_lens_q / seq_lens_k [B] int32 on the device (a CUDA-graph
    # replay reads their current values), one plan for the shape class whatever the lengths. A side given none holds
    # its full length. Starts (left padding) need their side's lengths, and plan the kernels' specialization with
    # starts.
    q, kv = meta(2, 1, 8, 128), meta(2, 4096, 2, 128)  # a decode step over a cache of capacity 4096
    lens = meta(2, dtype=torch.int32)
    plan = rime.torch.warmup("attention", q, kv, kv, seq_lens_k=lens, causal=True, arch="sm_90a")
    assert "padding" in plan.explain()
    graph = {t["name"]: t for t in plan.graph.tensors}
    assert graph["seq_len_kv"]["dims"] == [2] and graph["seq_len_q"]["dims"] == [2]  # Q's side: full, a constant
    check_generated_binding("attention", (q, kv, kv), dict(seq_lens_q=lens, seq_lens_k=lens, causal=True))
    out, _ = torch.ops.rime.attention(q, kv, kv, seq_lens_k=lens)  # the fake kernel
    assert out.shape == (2, 1, 8, 128)
    graph = rime.torch.graph("attention", q, kv, kv, seq_lens_k=lens, seq_lens_q=lens, seq_starts_k=lens, causal=True)
    assert [t["name"] for t in graph.tensors if t["name"].startswith("seq_")] == ["seq_len_q", "seq_len_kv",
                                                                                 "seq_start_kv"]
    e = rime.explain(graph, arch="sm_90a", json=True)
    kernel = e["derived"]["stages"][0]["name_expression"]
    assert "padding" in kernel and "starts" in kernel
    with pytest.raises(rime.InvalidArgumentError, match="seq_starts_k: given without seq_lens_k"):
        torch.ops.rime.attention(q, kv, kv, seq_starts_k=lens)
    with pytest.raises(rime.InvalidArgumentError, match=r"seq_lens_k: dim 0 \(B\) is 3, q's is 2"):
        torch.ops.rime.attention(q, kv, kv, seq_lens_k=meta(3, dtype=torch.int32))
    with pytest.raises(rime.InvalidArgumentError, match="seq_lens_k: torch.int64"):
        torch.ops.rime.attention(q, kv, kv, seq_lens_k=meta(2, dtype=torch.int64))


def test_seq_bounds_are_the_four_per_sequence_tensors_as_the_rows_of_one():
    # rime.transformers' form: starts_q, lens_q, starts_k, lens_k as the rows of one [4, B] int32 tensor, which a
    # call reads once. The graph is the four tensors' graph, each row bound at its byte offset into the one tensor;
    # a cache's decode plans for its capacity as with seq_lens_k.
    q, kv = meta(2, 1, 8, 128), meta(2, 300, 2, 128)
    bounds = meta(4, 2, dtype=torch.int32)
    lens = meta(2, dtype=torch.int32)
    four = rime.torch.graph("attention", q, kv, kv, seq_starts_q=lens, seq_lens_q=lens, seq_starts_k=lens,
                            seq_lens_k=lens, causal=True)
    one = rime.torch.graph("attention", q, kv, kv, seq_bounds=bounds, causal=True)
    assert one.tensors == four.tensors and one.hash == four.hash
    check_generated_binding("attention", (q, kv, kv), dict(seq_bounds=bounds, causal=True))
    from rime.torch import _FAMILY_OF
    family, _ = _FAMILY_OF["attention"]
    graph, slots, _ = family.graph("attention", family.call(rime.torch._bind("g", "attention", (q, kv, kv),
                                                                           dict(seq_bounds=bounds))[2]), None)
    row = {t["name"]: s for t, s in zip(graph.tensors, slots)}
    i = family.tensor_names.index("seq_bounds")
    assert [row[n] for n in ("seq_start_q", "seq_len_q", "seq_start_kv", "seq_len_kv")] == [(i, 0), (i, 8), (i, 16),
                                                                                          (i, 24)]
    k = next(t for t in one.tensors if t["name"] == "K")
    assert k["dims"] == [2, 2, 512, 128]  # planned for the cache's capacity
    with pytest.raises(rime.InvalidArgumentError, match="seq_bounds: given with seq_lens_k"):
        torch.ops.rime.attention(q, kv, kv, seq_bounds=bounds, seq_lens_k=lens)
    with pytest.raises(rime.InvalidArgumentError, match=r"seq_bounds: torch.int64 \(4, 2\); expected int32"):
        torch.ops.rime.attention(q, kv, kv, seq_bounds=meta(4, 2, dtype=torch.int64))
    with pytest.raises(rime.InvalidArgumentError, match=r"seq_bounds: torch.int32 \(3, 2\)"):
        torch.ops.rime.attention(q, kv, kv, seq_bounds=meta(3, 2, dtype=torch.int32))
