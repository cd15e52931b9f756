"""rime.transformers without a GPU (skipped, with the reason, without torch or transformers): the mask as starts and
lengths, the registration, models from random configs on the meta device running through rime's attention function
(the operators' fake kernels), the refusals that name a config field, what warmup would plan, and check()'s verdict
for each model family, explained for sm_90a."""
import types

import pytest

import rime

torch = pytest.importorskip("torch", reason="rime.transformers' tests need torch")
pytest.importorskip("transformers", reason="rime.transformers' tests need transformers")
import transformers  # noqa: E402
from transformers import AttentionInterface  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface  # noqa: E402

import rime.transformers as rt  # noqa: E402
from rime.transformers import _attention  # noqa: E402
from rime.transformers._sequences import check_one_run, sequences  # noqa: E402
from rime.transformers._sequences import bounds as sequence_bounds  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

rt.register()


def rows(t):
    return [r.flatten().tolist() for r in t]


# ---- the mask as per-sequence starts and lengths --------------------------------------------------------------

def test_a_left_padded_prefill_places_each_sequence_at_its_first_token():
    m = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=torch.bool)
    s = sequences(3, 5, 5, 0, m, "cpu")
    assert s.dtype == torch.int32 and s.shape == (4, 3, 1, 1)
    # start_q, len_q, start_kv, len_kv: the padded queries are rows outside [start_q, start_q + len_q)
    assert rows(s) == [[2, 0, 4], [3, 5, 1], [2, 0, 4], [3, 5, 1]]


def test_a_decode_step_sees_every_key_of_its_sequence_and_nothing_before_its_start():
    m = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)  # 5 seen + this token
    s = sequences(2, 1, 6, 5, m, "cpu")
    assert rows(s) == [[0, 0], [1, 1], [2, 0], [4, 6]]


def test_right_padding_ends_each_sequence_at_its_last_token():
    m = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert rows(sequences(2, 5, 5, 0, m, "cpu")) == [[0, 0], [3, 5], [0, 0], [3, 5]]


def test_a_static_cache_masks_its_unused_tail():
    # The cache hands its whole buffer (kv_length = max_cache_len 16); the mask covers the tokens seen so far.
    m = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)  # 4 seen + this token
    assert rows(sequences(2, 1, 16, torch.tensor(4), m, "cpu")) == [[0, 0], [1, 1], [1, 0], [4, 5]]
    # No mask: every sequence holds the positions seen, from a tensor offset (a StaticCache's) without a sync.
    assert rows(sequences(2, 1, 16, torch.tensor(4), None, "cpu")) == [[0, 0], [1, 1], [0, 0], [5, 5]]
    # A cache that hands exactly the tokens seen, unpadded: nothing to say.
    assert sequences(2, 1, 5, 4, None, "cpu") is None


def test_a_layer_that_keeps_a_window_reads_the_masks_last_positions():
    # DynamicSlidingWindowLayer at window 4: the keys handed are the last 3 seen + this token; the first sequence's
    # padding has scrolled out of them, the second's has not.
    m = torch.tensor([[0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1]], dtype=torch.bool)
    assert rows(sequences(2, 1, 4, 6, m, "cpu")) == [[0, 0], [1, 1], [0, 1], [4, 3]]


def test_a_chunked_prefill_over_a_cache_sees_the_cached_tokens():
    # 3 cached tokens (the first padding), 2 new queries: both queries are real, their keys are positions 1..4.
    m = torch.tensor([[0, 1, 1, 1, 1]], dtype=torch.bool)
    assert rows(sequences(1, 2, 5, 3, m, "cpu")) == [[0], [2], [1], [4]]


class CountOps(TorchDispatchMode):
    """The torch ops run inside it: a decode step binds on the host, where each op costs its launch (docs/perf.md,
    "transformers generate")."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_a_decode_forwards_sequences_take_eight_ops_and_each_layers_bounds_none():
    m = torch.ones(3, 40, dtype=torch.long)
    m[1, :7] = 0
    with CountOps() as made:
        s = _attention.mask(3, 1, 40, q_offset=39, attention_mask=m)
    assert len(made.ops) <= 8, made.ops  # slice, argmax x2, sum x2, stack, cast, view
    with CountOps() as taken:
        for _ in range(4):
            b = sequence_bounds(s)
    assert taken.ops == [], taken.ops
    got = b.tolist()
    assert b.shape == (4, 3) and got == [[0, 0, 0], [1, 1, 1], [0, 7, 0], [40, 33, 40]]
    # Without the kept view (a mask made under torch.compile, or handed on by a model), the same rows by indexing.
    bare = s.clone()
    assert sequence_bounds(bare).tolist() == got


def test_a_decode_layers_attention_call_is_five_ops():
    # Its output's allocation, three views ([B, H, S, D] as the operator's [B, S, H, D]) and the operator's _out
    # form (the functional one would allocate an empty LSE as well).
    B, S = 3, 40
    q = torch.empty(B, 1, 8, 64, dtype=torch.bfloat16, device="meta").transpose(1, 2)
    k = torch.empty(B, 2, S, 64, dtype=torch.bfloat16, device="meta")
    s = _attention.mask(B, 1, S, q_offset=S - 1, attention_mask=torch.ones(B, S, dtype=torch.long, device="meta"))
    layer = types.SimpleNamespace(is_causal=True)
    with torch.no_grad(), CountOps() as called:
        out, weights = _attention.attention(layer, q, k, k, s, scaling=0.125)
    assert sorted(called.ops) == sorted(["aten.new_empty.default"] + ["aten.transpose.int"] * 3 +
                                        ["rime.attention_out.default"]), called.ops
    assert out.shape == (B, 1, 8, 64) and weights is None


def test_a_mask_with_a_hole_inside_a_sequence_is_refused_by_name():
    assert check_one_run(torch.tensor([[0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)) is False
    assert check_one_run(torch.ones(2, 4, dtype=torch.bool)) is True
    with pytest.raises(rime.NotSupportedError, match=r"attention_mask: rows \[1\] hold masked positions between"):
        check_one_run(torch.tensor([[0, 1, 1, 1], [1, 0, 1, 1]], dtype=torch.bool))


def test_a_prefill_mask_with_no_padding_plans_as_no_mask_and_a_decode_keeps_its_lengths():
    full = torch.ones(2, 5, dtype=torch.long)
    assert _attention.mask(2, 5, 5, attention_mask=full) is None  # read on the host: the plain causal plan
    padded = full.clone()
    padded[0, 0] = 0
    assert rows(_attention.mask(2, 5, 5, attention_mask=padded)) == [[1, 0], [4, 5], [1, 0], [4, 5]]
    # A decode step reads no mask on the host: its lengths go to the plan made for the cache's capacity.
    grown = torch.ones(2, 6, dtype=torch.long)
    assert rows(_attention.mask(2, 1, 6, q_offset=5, attention_mask=grown)) == [[0, 0], [1, 1], [0, 0], [6, 6]]
    # A static cache's buffer past the tokens seen: its lengths, on the mask's device, even with no padding.
    assert rows(_attention.mask(2, 5, 16, q_offset=0, attention_mask=full)) == [[0, 0], [5, 5], [0, 0], [5, 5]]


# ---- registration and models -------------------------------------------------------------------------------------

def test_register_puts_one_backend_named_rime_in_both_registries_and_is_idempotent():
    rt.register()
    rt.register()
    assert AttentionInterface._global_mapping["rime"] is rt.attention
    assert AttentionMaskInterface._global_mapping["rime"] is rt.mask
    assert "flash" not in rt.NAME  # transformers routes "flash" names into FlashAttention's own code


def llama(**overrides):
    config = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
                  num_key_value_heads=2, head_dim=64, vocab_size=1000)
    config.update(overrides)
    return transformers.LlamaConfig(**config)


def model_of(config, dtype=torch.bfloat16, attn="rime"):
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=dtype)
    return model.eval()


class Recorded:
    """Records every call of the operator that rime's attention function makes."""

    def __enter__(self):
        self.calls = []
        _attention.recorder = lambda module, query, call: self.calls.append(call)
        return self

    def __exit__(self, *exc):
        _attention.recorder = None


def test_a_left_padded_batch_runs_every_layer_through_rime_with_its_starts_and_lengths():
    model = model_of(llama())
    ids = torch.zeros(2, 7, dtype=torch.long, device="meta")
    mask = torch.ones(2, 7, dtype=torch.long, device="meta")
    with torch.no_grad(), Recorded() as r:
        logits = model(input_ids=ids, attention_mask=mask).logits
    assert logits.shape == (2, 7, 1000)
    assert len(r.calls) == 2  # one per layer
    c = r.calls[0]
    # K and V as the layer holds them: [B, S, H_kv, D] views of [B, H_kv, S, D], not repeated to the 8 q heads.
    assert c["k"].shape == (2, 7, 2, 64) and c["k"].stride() == (7 * 2 * 64, 64, 7 * 64, 1)
    assert c["q"].shape == (2, 7, 8, 64)
    # Starts and lengths as the rows of one [4, B] tensor (seq_bounds), not four tensors.
    assert c["seq_bounds"].shape == (4, 2) and c["seq_bounds"].dtype == torch.int32
    assert all(n not in c for n in ("seq_lens_q", "seq_lens_k", "seq_starts_q", "seq_starts_k"))
    assert c["causal"] and c["window_left"] == -1 and c["softmax_scale"] == pytest.approx(64 ** -0.5)


def test_a_mask_made_before_the_forward_reaches_the_attention_function_unchanged():
    # generate makes a StaticCache's mask before the forward (create_masks_for_generate) and passes it in as the
    # attention_mask; transformers hands a 4D mask on as "prepared", so every layer reads these very rows.
    model = model_of(llama())
    made = sequences(2, 7, 7, 0, torch.ones(2, 7, dtype=torch.bool, device="meta"), "meta")
    with torch.no_grad(), Recorded() as r:
        model(input_ids=torch.zeros(2, 7, dtype=torch.long, device="meta"), attention_mask=made)
    assert len(r.calls) == 2
    base = made if made._base is None else made._base  # views share their base
    assert all(c["seq_bounds"] is base or c["seq_bounds"]._base is base for c in r.calls)


def test_a_model_switched_to_rime_after_loading_uses_it():
    model = model_of(llama(), attn="sdpa")
    model.set_attn_implementation("rime")
    with torch.no_grad(), Recorded() as r:
        model(input_ids=torch.zeros(1, 3, dtype=torch.long, device="meta"))
    assert len(r.calls) == 2


def test_what_rime_does_not_serve_is_refused_naming_the_config_field():
    ids = torch.zeros(1, 4, dtype=torch.long, device="meta")
    with pytest.raises(rime.NotSupportedError, match=r"LlamaAttention \(layer 0\).*activations in torch.float32"):
        with torch.no_grad():
            model_of(llama(), dtype=torch.float32)(input_ids=ids)
    with pytest.raises(rime.NotSupportedError, match=r"dropout 0.1 \(config.attention_dropout"):
        with torch.no_grad():
            model_of(llama(attention_dropout=0.1)).train()(input_ids=ids)
    with pytest.raises(rime.NotSupportedError, match="autograd: rime has no backward pass"):
        model_of(llama())(input_ids=ids)
    with pytest.raises(rime.NotSupportedError, match="not a prepared mask"):
        with torch.no_grad():
            model_of(llama())(input_ids=ids, attention_mask=torch.ones(1, 1, 4, 4, dtype=torch.bool, device="meta"))


def test_torch_compile_traces_the_model_without_a_graph_break():
    # fullgraph=True fails on any graph break: the mask function (starts and lengths on the device, no host read)
    # and the attention function trace whole. A padded prefill without a cache, then a StaticCache's decode step (the
    # path transformers compiles: a DynamicCache's first update makes tensors inside the graph, which dynamo refuses
    # whatever the backend).
    model = model_of(llama())
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    ids = torch.zeros(2, 5, dtype=torch.long, device="meta")
    mask = torch.ones(2, 5, dtype=torch.long, device="meta")
    with torch.no_grad():
        assert compiled(input_ids=ids, attention_mask=mask, use_cache=False).logits.shape == (2, 5, 1000)
        cache = transformers.StaticCache(config=model.config, max_cache_len=16)
        model(input_ids=ids, attention_mask=mask, past_key_values=cache)  # the prefill, eager
        mask = torch.ones(2, 6, dtype=torch.long, device="meta")
        out = compiled(input_ids=ids[:, :1], attention_mask=mask, past_key_values=cache)
        assert out.logits.shape == (2, 1, 1000)


# ---- what warmup plans, and check() ------------------------------------------------------------------------------

def test_a_static_cache_needs_two_plans_per_batch_size_and_a_dynamic_one_a_plan_per_length():
    model = model_of(llama())
    static = rt.calls(model, batch_sizes=(1, 4), prompt_lengths=(16,), max_new_tokens=32, cache="static")
    assert len(static) == 4  # (prefill, decode) x 2 batch sizes: the decode's K/V are the 48-token buffer
    assert {c.kwargs["k"].shape[1] for c in static} == {48}
    dynamic = rt.calls(model, batch_sizes=(1,), prompt_lengths=(16,), max_new_tokens=32, cache="dynamic")
    # Two prefills (a padded batch's, with lengths, and an unpadded one's, without), then decode steps over 17 .. 47
    # keys: DynamicCache's keys grow by one a step.
    assert sorted(c.kwargs["k"].shape[1] for c in dynamic) == [16, 16] + list(range(17, 48))
    assert sorted(c.kwargs["seq_bounds"] is None for c in dynamic if c.kwargs["k"].shape[1] == 16) == [False, True]
    with pytest.raises(rime.InvalidArgumentError, match="attn_implementation='rime'"):
        rt.calls(model_of(llama(), attn="sdpa"))


def test_a_sliding_window_layer_stops_growing_at_its_window():
    config = transformers.Qwen2Config(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=8, num_key_value_heads=2, vocab_size=1000,
                                      use_sliding_window=True, sliding_window=24, max_window_layers=1,
                                      layer_types=["full_attention", "sliding_attention"])
    model = model_of(config)
    found = rt.calls(model, batch_sizes=(1,), prompt_lengths=(16,), max_new_tokens=32)
    sliding = sorted({c.kwargs["k"].shape[1] for c in found if c.kwargs["window_left"] == 24})
    full = sorted({c.kwargs["k"].shape[1] for c in found if c.kwargs["window_left"] == -1})
    assert full == list(range(16, 48))
    assert max(sliding) == 24  # window - 1 kept + this token


def test_check_explains_each_model_family_for_the_arch():
    lines = rt.check(model_of(llama()), arch="sm_90a")
    assert any("row sdpa_sm90_f16" in line for line in lines)
    # Gemma 2 caps its logits (served, prefill and decode at D 256); Phi-3 has head dim 96 and Phi-2 80 (both on the
    # Hopper engine); a head dim no row serves is refused with the field, before any GPU work.
    gemma2 = transformers.Gemma2Config(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=256, vocab_size=1000)
    lines = rt.check(model_of(gemma2), arch="sm_90a")
    assert all("attn_logit_softcapping 50.0" in line for line in lines) and len(lines) >= 2
    phi3 = transformers.Phi3Config(hidden_size=384, intermediate_size=512, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, vocab_size=1000, pad_token_id=0)
    assert all("row sdpa_sm90_f16" in line for line in rt.check(model_of(phi3), arch="sm_90a"))
    phi2 = transformers.PhiConfig(hidden_size=320, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=4, vocab_size=1000, pad_token_id=0)
    assert all("row sdpa_sm90_f16" in line for line in rt.check(model_of(phi2), arch="sm_90a"))
    with pytest.raises(rime.NotSupportedError, match=r"(?s)head_dim 40.*D_qk 40 not in"):
        rt.check(model_of(llama(head_dim=40)), arch="sm_90a")


def test_gpt_oss_sinks_reach_the_operator_as_float32_once_per_parameter_version():
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.bfloat16))
    first = _attention._sink(p)
    assert first.dtype == torch.float32 and first.is_contiguous()
    assert _attention._sink(p) is first  # no conversion per call
    with torch.no_grad():
        p.add_(1)
    assert _attention._sink(p) is not first and torch.equal(_attention._sink(p), p.detach().float())


def test_the_mask_function_serves_the_patterns_starts_and_lengths_say_and_refuses_the_others():
    from transformers import masking_utils as mu
    m = torch.tensor([[0, 1, 1, 1]], dtype=torch.bool)
    for fn in (mu.causal_mask_function, mu.bidirectional_mask_function, mu.sliding_window_causal_mask_function(3),
               mu.sliding_window_bidirectional_mask_function(3)):
        assert rows(rt.mask(1, 4, 4, 0, 0, mask_function=fn, attention_mask=m, device="cpu")) == [[1], [3], [1], [3]]
    chunked = mu.chunked_causal_mask_function(2, torch.zeros(1, dtype=torch.long))
    with pytest.raises(rime.NotSupportedError, match="the model's mask combines chunked_overlay"):
        rt.mask(1, 4, 4, 0, 0, mask_function=chunked, attention_mask=m, device="cpu")
    with pytest.raises(rime.NotSupportedError, match=r"attention_mask: rows \[0\] hold masked positions"):
        rt.mask(1, 4, 4, 0, 0, mask_function=mu.causal_mask_function,
                attention_mask=torch.tensor([[1, 0, 1, 1]], dtype=torch.bool), device="cpu")
