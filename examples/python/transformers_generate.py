#!/usr/bin/env python3
"""A Llama-shaped model from a random config (no download: 32 query heads over 8 kv heads, head dim 128, a few
layers) generating with attn_implementation="rime" and with "sdpa", the same weights and left-padded prompts: each
row's next-token logits after the prompt are compared (rel L2, exits 1 above 2e-2), the greedy tokens of the two
generates row by row (printed: how many of each row's new tokens agree; random weights give near-ties, where BF16
rounding may pick another token, after which the rows go apart), and the tokens/s of each printed.

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


def main():
    rime.transformers.register()
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

    new = BATCH * NEW_TOKENS
    print(f"sdpa: {new / sdpa_s:8.1f} tokens/s ({sdpa_s * 1e3:.1f} ms)")
    print(f"rime: {new / rime_s:8.1f} tokens/s ({rime_s * 1e3:.1f} ms)")
    worst = 0.0
    for b in range(BATCH):
        error = ((rime_logits[b] - sdpa_logits[b]).norm() / sdpa_logits[b].norm()).item()
        top2 = sdpa_logits[b].topk(2).values
        same = int((rime_tokens[b] == sdpa_tokens[b]).cumprod(0).sum())
        print(f"row {b} (prompt {PROMPTS[b]:3d}): next-token logits rel L2 {error:.4f} (sdpa's top-2 margin "
              f"{(top2[0] - top2[1]).item():.3f}); the first {same} of {NEW_TOKENS} new tokens agree")
        worst = max(worst, error)
    print(f"worst next-token logits rel L2 {worst:.4f} (bound 0.02)")
    return 0 if worst <= 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
