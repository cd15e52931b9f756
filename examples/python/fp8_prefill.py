#!/usr/bin/env python3
"""Dense FP8 prefill through torch.ops.rime.attention: FP8 E4M3 Q, K, V with per-tensor descales held on the device,
BF16 O, causal; checked against float32 attention of the dequantized tensors, then timed.

    python3 examples/python/fp8_prefill.py        # needs torch and a Hopper GPU
"""
import math
import sys

import torch

import rime.torch  # noqa: F401  (registers torch.ops.rime.*)

B, S, H, D = 2, 4096, 32, 128


def main():
    fp8 = torch.float8_e4m3fn
    # Quantize BF16 activations per tensor, as a serving stack does: codes and a descale (amax / 448) on the device.
    x = [torch.randn(B, S, H, D, device="cuda") for _ in range(3)]
    descales = [t.abs().amax().reshape(1) / 448.0 for t in x]
    q, k, v = ((t / d).to(fp8) for t, d in zip(x, descales))
    out, lse = torch.ops.rime.attention(q, k, v, *descales, causal=True, return_lse=True)

    # Reference: float32 attention of the dequantized codes, for the first batch.
    deq = [c[:1].float() * d for c, d in zip((q, k, v), descales)]
    ref = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in deq), is_causal=True)
    err = ((out[:1].float() - ref.transpose(1, 2)).norm() / ref.norm()).item()
    print(f"FP8 causal prefill B{B} S{S} H{H} D{D}: O relative L2 error {err:.4f} (bound 0.03), LSE {tuple(lse.shape)}")

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        torch.ops.rime.attention(q, k, v, *descales, causal=True)
    start.record()
    for _ in range(10):
        torch.ops.rime.attention(q, k, v, *descales, causal=True)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / 10
    flops = B * H * S * (S + 1) / 2 * 2 * 2 * D
    print(f"{ms:.3f} ms per call, {flops / ms / 1e9:.0f} TFLOP/s")
    return 0 if err < 0.03 and math.isfinite(err) else 1


if __name__ == "__main__":
    sys.exit(main())
