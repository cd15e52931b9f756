#!/usr/bin/env python3
"""What a 16-bit Q over FP8 K/V loses when the kernel holds Q in one E4M3 term instead of two (CPU, float64).

The Hopper engine runs a BF16/FP16 Q over FP8 K/V on its FP8 kernel with each Q row on a power-of-two scale 2^e
(the row's largest magnitude times 2^e in (224, 448]) split into hi = e4m3(q 2^e) and lo = e4m3(q 2^e - hi): two
Q.K^T per tile (engines/sdpa_sm90/consumer.cuh, load_q_split). One term (hi alone, FlashAttention 3's way: Q
quantized to FP8) would halve that Q.K^T's tensor work. This prints, for uniform inputs of growing range (the larger
the range, the more peaked the softmax, as in trained models), the relative L2 error of O against attention on the
16-bit Q itself, with P exact (so only Q's rounding is measured; P's E4M3 rounding adds to both). SPEC section 10
bounds a 16-bit O of an FP8 graph at relative L2 3e-2.

    python3 tools/bench/q16_terms.py        # needs torch (CPU is enough)
"""
import torch


def e4m3(x):
    return x.to(torch.float8_e4m3fn).to(torch.float64)


def o_rel_l2(d, s_kv, value_range, terms, rows=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    uniform = lambda *shape: (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * value_range
    q = uniform(rows, d).to(torch.bfloat16).to(torch.float64)
    k, v = e4m3(uniform(s_kv, d)), e4m3(uniform(s_kv, d) / value_range)

    def attention(qq):
        return torch.softmax(qq @ k.T * d ** -0.5, -1) @ v

    e = torch.floor(torch.log2(448 / q.abs().amax(1, keepdim=True)))
    hi = e4m3(q * 2 ** e)
    held = hi if terms == 1 else hi + e4m3(q * 2 ** e - hi)
    want = attention(q)
    return ((attention(held / 2 ** e) - want).norm() / want.norm()).item()


def main():
    print("| D | S_kv | Q and K in | O rel L2, Q in one E4M3 term | two terms |")
    print("|---|---|---|---|---|")
    for d in (64, 128):
        for value_range in (1, 2, 4, 8):
            one, two = (o_rel_l2(d, 1000, value_range, terms) for terms in (1, 2))
            print(f"| {d} | 1000 | [-{value_range}, {value_range}] | {one:.4f} | {two:.1e} |")


if __name__ == "__main__":
    main()
