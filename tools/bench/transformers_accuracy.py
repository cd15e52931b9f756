#!/usr/bin/env python3
"""How far rime's attention inside transformers models is from exact attention, against torch's own backends, on the
GPU: a measurement, not a test (it prints numbers and asserts nothing).

1. The next-token logits of examples/python/transformers_generate.py's model (Llama-shaped: 32 query heads over 8,
   head dim 128, 4 layers, BF16, left-padded prompts) with attention by sdpa, eager and rime, each against the same
   model with float32 attention (python/tests/test_transformers_gpu.py's float32_attention: the eager math in
   float32 on the layers' BF16 inputs): whether rime's distance to sdpa is rime's error or both backends' rounding.
2. Greedy generate of a left-padded batch against each prompt run alone (the GPU test's check), per attention
   backend, for gpt-oss (sinks, sliding windows) and Llama: the first new token that differs, the largest rel L2 of
   the logits up to it and the alone run's top-2 margin there (a near-tie after close logits is rounding; a
   difference from the first tokens on is not).

    python3 tools/bench/transformers_accuracy.py        # needs torch, transformers, the rime package and a GPU
"""
import importlib.util
import pathlib

import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The reference attention, the small configs and the left-padded prompts of the GPU tests (which register
# "float32_reference" and rime's backend on import).
_spec = importlib.util.spec_from_file_location("transformers_gpu_tests", ROOT / "python/tests/test_transformers_gpu.py")
tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tests)


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def logits_against_float32():
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=4,
                                      num_attention_heads=32, num_key_value_heads=8, vocab_size=32000,
                                      pad_token_id=0, initializer_range=0.05)
    prompts = [512, 480, 301, 512, 17, 250, 512, 99]  # the example's
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=torch.bfloat16)
    model = model.cuda().eval()
    ids, mask = tests.left_padded(prompts, vocab=config.vocab_size)
    logits = {}
    for attn in ("float32_reference", "sdpa", "eager", "rime"):
        model.set_attn_implementation(attn)
        with torch.no_grad():
            logits[attn] = model(input_ids=ids, attention_mask=mask).logits[:, -1].float()
    exact = logits["float32_reference"]
    for b, n in enumerate(prompts):
        errors = ", ".join(f"{a} {rel_l2(logits[a][b], exact[b]):.4f}" for a in ("sdpa", "eager", "rime"))
        print(f"Llama row {b} (prompt {n:3d}): next-token logits, rel L2 to float32 attention: {errors}; rime to sdpa "
              f"{rel_l2(logits['rime'][b], logits['sdpa'][b]):.4f}", flush=True)


def batch_against_alone(kind, attn, lengths=(57, 20, 3), new=32):
    model = tests.model_of(tests.small(kind), attn)
    ids, mask = tests.left_padded(list(lengths))
    with torch.no_grad():
        batch = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                               output_scores=True, return_dict_in_generate=True)
        for b, n in enumerate(lengths):
            alone = model.generate(input_ids=ids[b:b + 1, -n:], attention_mask=mask[b:b + 1, -n:], max_new_tokens=new,
                                   do_sample=False, output_scores=True, return_dict_in_generate=True)
            differs = (batch.sequences[b, -new:] != alone.sequences[0, -new:]).nonzero()
            if len(differs) == 0:
                worst = max(rel_l2(batch.scores[i][b], alone.scores[i][0]) for i in range(new))
                print(f"{kind} with {attn}: row {b} (prompt {n}): all {new} new tokens equal; largest logits rel L2 "
                      f"{worst:.2e}", flush=True)
                continue
            k = int(differs[0])
            worst = max(rel_l2(batch.scores[i][b], alone.scores[i][0]) for i in range(k + 1))
            top2 = alone.scores[k][0].float().topk(2).values
            print(f"{kind} with {attn}: row {b} (prompt {n}): new token {k} of {new} is the first to differ; largest "
                  f"logits rel L2 up to it {worst:.2e}; alone's top-2 margin there {(top2[0] - top2[1]).item():.4f}",
                  flush=True)


def main():
    logits_against_float32()
    for kind, backends in (("gpt-oss", ("eager", "float32_reference", "rime")), ("llama-d128", ("sdpa", "rime"))):
        for attn in backends:
            batch_against_alone(kind, attn)


if __name__ == "__main__":
    main()
