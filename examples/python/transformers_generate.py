#!/usr/bin/env python3
"""A Llama-shaped model from a random config (no download: 32 query heads over 8 kv heads, head dim 128, a few
layers) generating with attn_implementation="rime" and with "sdpa", the same weights and left-padded prompts. Each
row's next-token logits after the prompt are measured against the same model with float32 attention (rel L2): four
random layers carry one BF16 rounding of an attention output to ~2e-2 in the logits, for sdpa as for rime, so the
example exits 1 where rime's worst row is more than 1.25x sdpa's. The greedy tokens of the two generates are compared
row by row (printed: how many of each row's new tokens agree; random weights give near-ties, where BF16 rounding may
pick another token, after which the rows go apart), and the tokens/s of each printed.

    python3 examples/python/transformers_generate.py     # needs torch, transformers and a GPU rime serves
"""
import sys
import time

import torch
import transformers

import rime.transformers

BATCH, NEW_TOKENS, LAYERS = 8, 64, 4
PROMPTS = [512, 480, 301, 512, 17, 250, 512, 99]  # left-padded to 512, as a tokenizer with padding_side="left" does


def generate(model, ids, mask):
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                             min_new_tokens=NEW_TOKENS)
    torch.cuda.synchronize()
    return out[:, ids.shape[1]:], time.perf_counter() - start


def next_token_logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits[:, -1].float()


def float32_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """The reference: a causal (or masked) softmax attention in float32 on the layer's BF16 inputs, rounded once."""
    q, k, v = query.float(), key.float(), value.float()
    groups = q.shape[1] // k.shape[1]
    s = q @ k.repeat_interleave(groups, 1).transpose(-1, -2) * scaling
    if attention_mask is None:  # sdpa's mask skipped: causal, nothing padded
        attention_mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(s.shape[-1] - s.shape[-2])
    p = torch.softmax(s.masked_fill(~attention_mask, float("-inf")), -1).nan_to_num(0.0)
    return (p @ v.repeat_interleave(groups, 1)).transpose(1, 2).to(query.dtype).contiguous(), None


def main():
    rime.transformers.register()
    transformers.AttentionInterface.register("float32", float32_attention)
    transformers.masking_utils.AttentionMaskInterface.register("float32", transformers.masking_utils.sdpa_mask)
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=LAYERS,
                                      num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                                      pad_token_id=0, initializer_range=0.05)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    model = model.cuda().eval()
    total = max(PROMPTS)
    ids = torch.zeros(BATCH, total, dtype=torch.long)
    mask = torch.zeros(BATCH, total, dtype=torch.long)
    g = torch.Generator().manual_seed(1)
    for b, n in enumerate(PROMPTS):
        ids[b, total - n:] = torch.randint(1, config.vocab_size, (n,), generator=g)
        mask[b, total - n:] = 1
    ids, mask = ids.cuda(), mask.cuda()

    generate(model, ids, mask)  # the first run of each backend pays its one-time costs
    sdpa_tokens, sdpa_s = generate(model, ids, mask)
    sdpa_logits = next_token_logits(model, ids, mask)
    model.set_attn_implementation("rime")
    rime.transformers.warmup(model, batch_sizes=[BATCH], prompt_lengths=[total], max_new_tokens=NEW_TOKENS)
    rime_tokens, rime_s = generate(model, ids, mask)
    rime_logits = next_token_logits(model, ids, mask)
    model.set_attn_implementation("float32")
    exact = next_token_logits(model, ids, mask)

    new = BATCH * NEW_TOKENS
    print(f"sdpa: {new / sdpa_s:8.1f} tokens/s ({sdpa_s * 1e3:.1f} ms)")
    print(f"rime: {new / rime_s:8.1f} tokens/s ({rime_s * 1e3:.1f} ms)")

    def error(logits, b):
        return ((logits[b] - exact[b]).norm() / exact[b].norm()).item()

    for b in range(BATCH):
        top2 = sdpa_logits[b].topk(2).values
        same = int((rime_tokens[b] == sdpa_tokens[b]).cumprod(0).sum())
        print(f"row {b} (prompt {PROMPTS[b]:3d}): next-token logits rel L2 to float32 attention: rime "
              f"{error(rime_logits, b):.4f}, sdpa {error(sdpa_logits, b):.4f} (sdpa's top-2 margin "
              f"{(top2[0] - top2[1]).item():.3f}); the first {same} of {NEW_TOKENS} new tokens agree")
    rime_worst, sdpa_worst = (max(error(logits, b) for b in range(BATCH)) for logits in (rime_logits, sdpa_logits))
    print(f"worst next-token logits rel L2 to float32 attention: rime {rime_worst:.4f}, sdpa {sdpa_worst:.4f} "
          f"(bound: 1.25x sdpa's)")
    return 0 if rime_worst <= 1.25 * sdpa_worst else 1


if __name__ == "__main__":
    sys.exit(main())
