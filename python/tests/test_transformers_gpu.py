"""rime.transformers on the GPU (skipped, with the reason, without torch, transformers or a GPU): small models from
random configs (no downloads) run with attn_implementation="rime" against sdpa (or eager, for gpt-oss, which has no
sdpa path) in the same process: every layer's hidden states of a left-padded batch, greedy generate of left-padded
prompts against each prompt alone and a StaticCache under torch.compile(mode="reduce-overhead") against eager (their
logits step by step up to the first token that parts, which only a near-tie may), and the plans a generate makes."""
import pytest

import rime

torch = pytest.importorskip("torch", reason="rime.transformers' tests need torch")
transformers = pytest.importorskip("transformers", reason="rime.transformers' tests need transformers")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
import rime.torch  # noqa: E402
import rime.transformers as rt  # noqa: E402

rt.register()
DEV = "cuda"


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def small(kind):
    """A config of `kind` with a few small layers (the family's attention as it is: heads, head dim, windows,
    sinks)."""
    common = dict(hidden_size=512, intermediate_size=1024, num_hidden_layers=3, vocab_size=2048, pad_token_id=0,
                  initializer_range=0.05)
    if kind == "llama-d64":
        return transformers.LlamaConfig(num_attention_heads=16, num_key_value_heads=4, head_dim=64, **common)
    if kind == "llama-d128":
        return transformers.LlamaConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=128, **common)
    if kind == "qwen2-sliding":
        return transformers.Qwen2Config(num_attention_heads=8, num_key_value_heads=2, use_sliding_window=True,
                                        sliding_window=48, max_window_layers=1,
                                        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
                                        **common)
    if kind == "mistral":
        return transformers.MistralConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                                          sliding_window=40, **common)
    if kind == "gpt-oss":
        # Every token through all 4 experts: top-2 routing is discontinuous, so a rounding difference anywhere
        # (another batch shape's matmuls) flips an expert and a greedy token; with all 4 the model is continuous.
        return transformers.GptOssConfig(num_attention_heads=8, num_key_value_heads=2, head_dim=64, sliding_window=32,
                                         num_local_experts=4, num_experts_per_tok=4,
                                         layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                         **common)
    raise KeyError(kind)


def float32_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """A reference attention function: the eager math (scores, soft cap, mask, sinks, softmax, P.V) in float32 on the
    layer's BF16 inputs, rounded to BF16 once at the end. gpt-oss's own eager path forms its logits and softmax in
    BF16, whose rounding of the scores (2^-9 relative) is a larger error than the kernel under test makes."""
    q, k, v = query.float(), key.float(), value.float()
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    s = q @ k.transpose(-1, -2) * scaling
    if kwargs.get("softcap"):
        s = torch.tanh(s / kwargs["softcap"]) * kwargs["softcap"]
    if attention_mask is None:  # transformers' sdpa mask skipped: causal, bottom-right, nothing padded
        attention_mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(s.shape[-1] - s.shape[-2])
    s = s.masked_fill(~attention_mask, float("-inf"))
    if kwargs.get("s_aux") is not None:
        sink = kwargs["s_aux"].float().reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)
        p = torch.softmax(torch.cat((s, sink), -1), -1)[..., :-1]
    else:
        p = torch.softmax(s, -1)
    o = p.nan_to_num(0.0) @ v  # padded queries see no key
    return o.transpose(1, 2).to(query.dtype).contiguous(), None


transformers.AttentionInterface.register("float32_reference", float32_attention)
transformers.masking_utils.AttentionMaskInterface.register("float32_reference", transformers.masking_utils.sdpa_mask)


def model_of(config, attn):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch.bfloat16)
    return model.to(DEV).eval()


def left_padded(lengths, total=None, vocab=2048, seed=1):
    """input_ids and attention_mask of prompts of `lengths`, padded on the left (generate's padding)."""
    g = torch.Generator().manual_seed(seed)
    total = total or max(lengths)
    ids = torch.zeros(len(lengths), total, dtype=torch.long)
    mask = torch.zeros(len(lengths), total, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, total - n:] = torch.randint(1, vocab, (n,), generator=g)
        mask[b, total - n:] = 1
    return ids.to(DEV), mask.to(DEV)


def assert_layers_match(config, reference, lengths):
    """One model, its attention switched from `reference` to rime: every layer's hidden states at the real (unpadded)
    positions of a batch of prompts of `lengths`, padded on the left, within rel L2 2e-2 (BF16)."""
    model = model_of(config, reference)
    ids, mask = left_padded(lengths)
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        model.set_attn_implementation("rime")
        got = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    real = mask.bool()
    for layer, (g, w) in enumerate(zip(got, want)):
        assert rel_l2(g[real], w[real]) <= 2e-2, (type(config).__name__, layer)


FAMILIES = ["llama-d64", "llama-d128", "qwen2-sliding", "mistral", "gpt-oss"]


def test_the_mask_kernel_reads_a_mask_as_the_torch_ops_do():
    """The eager mask function's one launch (rime::sequences_from_padding_mask) against the torch ops it replaces
    (run on the CPU): random one-run rows (left, right, both, none, empty) in bool, int32 and int64, a window of the
    last positions, a static cache's tail past the mask, one query and a chunk."""
    from rime.transformers._sequences import sequences

    gen = torch.Generator().manual_seed(7)
    for dtype in (torch.bool, torch.int32, torch.int64):
        for batch, length, q_length, kv_length in [(3, 5, 5, 5), (5, 40, 1, 40), (4, 40, 1, 16), (4, 10, 1, 64),
                                                   (6, 33, 7, 33), (2, 300, 3, 300)]:
            m = torch.zeros(batch, length, dtype=dtype)
            for b in range(batch):
                s, e = sorted(torch.randint(0, length + 1, (2,), generator=gen).tolist())
                s, e = [(s, length), (0, e), (s, e), (0, length), (s, s)][b % 5]
                m[b, s:e] = 1
            want = sequences(batch, q_length, kv_length, length - q_length, m, "cpu")
            got = sequences(batch, q_length, kv_length, length - q_length, m.to(DEV), DEV)
            assert got.device.type == "cuda"
            assert torch.equal(got.cpu(), want), (dtype, batch, length, q_length, kv_length)


@pytest.mark.parametrize("kind", FAMILIES)
def test_every_layers_hidden_states_match_the_reference_backend(kind):
    # One model, its attention switched between rime and the reference (sdpa; for gpt-oss, which has no sdpa path,
    # the eager math in float32): every layer's hidden states at the real (unpadded) positions of a left-padded
    # batch, rel L2 <= 2e-2 in BF16.
    assert_layers_match(small(kind), "float32_reference" if kind == "gpt-oss" else "sdpa", [70, 33, 1, 64])


@pytest.mark.parametrize("kind", ["llama-d128", "qwen2-sliding", "gpt-oss"])
def test_a_batch_with_no_padding_plans_without_lengths_and_matches_the_reference(kind):
    # Prompts of one length: the mask function reads the prefill's mask on the host, finds no padding and hands no
    # mask on, so the layers run the plain causal (or windowed) plan, as sdpa then takes its causal path.
    rime.torch.clear_plans()
    assert_layers_match(small(kind), "float32_reference" if kind == "gpt-oss" else "sdpa", [57, 57, 57])
    assert rime.torch.plan_count() > 0
    kernels = [k for e in rime.torch._plans.plans.values() for k in e.plan.kernels]
    assert kernels and not [k["name"] for k in kernels if "padding" in k["name"]], [k["name"] for k in kernels]


def test_gpt_oss_eager_path_is_further_from_float32_than_rime():
    # Why gpt-oss is checked against float32 math and not its eager path: that path rounds scores and
    # probabilities to BF16. Measured per layer against the float32 reference, rime's error is the smaller.
    config, ids_mask = small("gpt-oss"), left_padded([70, 33, 1, 64])
    model = model_of(config, "float32_reference")
    real = ids_mask[1].bool()
    states = {}
    with torch.no_grad():
        for attn in ("float32_reference", "eager", "rime"):
            model.set_attn_implementation(attn)
            states[attn] = model(input_ids=ids_mask[0], attention_mask=ids_mask[1],
                                 output_hidden_states=True).hidden_states
    for layer in range(1, len(states["rime"])):
        want = states["float32_reference"][layer][real]
        rime_error, eager_error = (rel_l2(states[a][layer][real], want) for a in ("rime", "eager"))
        print(f"gpt-oss layer {layer}: rel L2 to float32 math: rime {rime_error:.4f}, eager {eager_error:.4f}")
        assert rime_error <= eager_error, layer


def assert_greedy_runs_agree(got, want, what):
    """Two greedy generates of one prompt, each given as (logits of every step, the new tokens): at every step up to
    and including the first new token that differs, the logits agree within rel L2 2e-2; after it the runs continue
    from different tokens and are not compared. Runs that differ only in how their matmuls round (another batch
    shape, compiled kernels) part at BF16 near-ties of random weights: measured on gpt-oss batch against alone, with
    float32 attention too, at top-2 margins of 0 and 2^-6 (docs/testing.md)."""
    (got_logits, got_tokens), (want_logits, want_tokens) = got, want
    for step in range(min(len(got_tokens), len(want_tokens))):
        g, w = got_logits[step].float(), want_logits[step].float()
        error = rel_l2(g, w)
        assert error <= 2e-2, (what, step, error)
        if got_tokens[step] != want_tokens[step]:
            top2 = w.topk(2).values
            print(f"{what}: new token {step} differs; logits rel L2 {error:.2e}, top-2 margin "
                  f"{(top2[0] - top2[1]).item():.4f}")
            return


def new_of(out, row, prompt_length):
    """A return_dict_in_generate output's row as (logits of every step, the new tokens)."""
    return [step[row] for step in out.logits], out.sequences[row, prompt_length:]


@pytest.mark.parametrize("kind", ["llama-d128", "qwen2-sliding", "gpt-oss"])
def test_greedy_generate_of_left_padded_prompts_agrees_with_each_prompt_alone(kind):
    model = model_of(small(kind), "rime")
    lengths = [57, 20, 3]
    ids, mask = left_padded(lengths)
    greedy = dict(max_new_tokens=32, do_sample=False, output_logits=True, return_dict_in_generate=True)
    with torch.no_grad():
        batch = model.generate(input_ids=ids, attention_mask=mask, **greedy)
        for b, n in enumerate(lengths):
            alone = model.generate(input_ids=ids[b:b + 1, -n:], attention_mask=mask[b:b + 1, -n:], **greedy)
            assert_greedy_runs_agree(new_of(batch, b, ids.shape[1]), new_of(alone, 0, n),
                                     f"{kind} row {b}, batch against alone")


def test_right_padding_gives_each_sequence_its_own_logits():
    model = model_of(small("llama-d128"), "rime")
    ids, _ = left_padded([40, 40], seed=3)
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0  # the second sequence is its first 25 tokens, padded on the right
    with torch.no_grad():
        both = model(input_ids=ids, attention_mask=mask).logits
        alone = model(input_ids=ids[1:, :25]).logits
    assert rel_l2(both[1, :25], alone[0]) <= 2e-2


def test_a_static_cache_under_cuda_graphs_decodes_as_eager_with_constant_plans():
    # generate compiles the decode step of a StaticCache itself (compile_config, mode "reduce-overhead": CUDA graphs)
    # and runs the prefill eagerly; disable_compile keeps every step eager. (A model.forward compiled by hand compiles
    # the prefill too, whose cache tensors are then a CUDA graph's outputs: transformers' StaticLayer warns against
    # it, and torch's cudagraph trees refuse the next step's in-place update of them.)
    config = small("llama-d128")
    model = model_of(config, "rime")
    ids, mask = left_padded([45, 12])
    rt.warmup(model, batch_sizes=[2], prompt_lengths=[45], max_new_tokens=24, cache="static")
    plans_after_warmup = rime.torch.plan_count()
    greedy = dict(max_new_tokens=24, do_sample=False, cache_implementation="static", output_logits=True,
                  return_dict_in_generate=True)
    with torch.no_grad():
        eager = model.generate(input_ids=ids, attention_mask=mask, disable_compile=True, **greedy)
        compiled = model.generate(input_ids=ids, attention_mask=mask, **greedy,
                                  compile_config=transformers.CompileConfig(fullgraph=True, mode="reduce-overhead"))
    assert getattr(model, "_compiled_call", None) is not None  # the decode steps ran compiled
    # Inductor fuses and reorders the rest of the model (norms, rotary, MLP), so its BF16 rounding is not eager's:
    # the runs agree to a near-tie, not token for token.
    for b in range(2):
        assert_greedy_runs_agree(new_of(compiled, b, ids.shape[1]), new_of(eager, b, ids.shape[1]),
                                 f"row {b}, compiled static cache against eager")
    assert rime.torch.plan_count() == plans_after_warmup  # warmup made every plan the two generates used


def test_plans_of_a_decode_loop_stay_constant():
    # A StaticCache: one decode plan for every step. A DynamicCache: K/V planned for a capacity (256 keys here), so
    # one decode plan for every step too (docs/transformers.md).
    model = model_of(small("llama-d64"), "rime")
    ids, mask = left_padded([30, 9])
    for cache in ("static", "dynamic"):
        rime.torch.clear_plans()
        kv = transformers.StaticCache(config=model.config, max_cache_len=64) if cache == "static" else \
            transformers.DynamicCache(config=model.config)
        counts = []
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, past_key_values=kv)
            token = out.logits[:, -1:].argmax(-1)
            for _ in range(16):
                mask = torch.cat((mask, torch.ones_like(mask[:, :1])), dim=1)
                out = model(input_ids=token, attention_mask=mask, past_key_values=kv)
                token = out.logits[:, -1:].argmax(-1)
                counts.append(rime.torch.plan_count())
        assert counts[-1] == counts[0], (cache, counts)


def test_gemma2_and_phi3_match_their_reference_backends():
    # Gemma 2 (logits capped at 50, D 256, alternating sliding windows) against eager; Phi-3 (head dim 96, on the
    # Hopper engine) against sdpa.
    gemma2 = transformers.Gemma2Config(hidden_size=512, intermediate_size=1024, num_hidden_layers=3,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=256, vocab_size=2048,
                                       sliding_window=48, pad_token_id=0)
    assert_layers_match(gemma2, "eager", [70, 33, 64])
    phi3 = transformers.Phi3Config(hidden_size=384, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=4, vocab_size=2048, pad_token_id=0)
    assert_layers_match(phi3, "sdpa", [70, 33, 64])
