#!/usr/bin/env python3
"""FP8 attention writing an NVFP4 O (E2M1 codes with one E4M3 scale per 16 values, in the F8_128x4 order a
block-scaled GEMM reads) that feeds the next layer: here the output projection, computed from the dequantized codes
and compared with the same projection of a BF16-O attention.

    python3 examples/python/block_scaled_consumer.py      # needs torch and a Hopper GPU
"""
import sys

import torch

import rime.torch  # noqa: F401

B, S, H, D = 1, 1024, 16, 128
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_nvfp4(codes, sf, scale_o):
    """[B, S, H, D] float32 from uint8 codes [B, S, H, D / 2] (low nibble first) and per-(b, h) scale planes
    [B, H, R, C] in F8_128x4 order: byte (r, c) at (r/128)*128*C + (c/4)*512 + (r%32)*16 + ((r/32)%4)*4 + c%4."""
    Bn, Hn, R, C = sf.shape
    r = torch.arange(R, device=sf.device)[:, None]
    c = torch.arange(C, device=sf.device)[None, :]
    offset = (r // 128) * 128 * C + (c // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + (c % 4)
    scales = sf.view(torch.uint8).reshape(Bn, Hn, R * C)[:, :, offset].view(torch.float8_e4m3fn).float()
    scales = scales[:, :, :codes.shape[1], :D // 16].permute(0, 2, 1, 3).repeat_interleave(16, -1)
    table = torch.tensor(E2M1, device=codes.device)
    values = table[torch.stack((codes & 15, codes >> 4), -1).long()].reshape(*codes.shape[:3], D)
    return values * scales / scale_o


def main():
    fp8 = torch.float8_e4m3fn
    q, k, v = ((torch.randn(B, S, H, D, device="cuda") * 2).to(fp8) for _ in range(3))
    one = torch.ones(1, device="cuda")
    scale_o = torch.tensor([4.0], device="cuda")  # the NVFP4 global scale
    codes, sf = torch.ops.rime.attention_block_scaled(q, k, v, one, one, one, scale_o, format="nvfp4", causal=True)
    print(f"codes {tuple(codes.shape)} {codes.dtype}, sf_o {tuple(sf.shape)} {sf.dtype}")
    o = dequantize_nvfp4(codes, sf, scale_o.item()).reshape(B * S, H * D)
    o_bf16, _ = torch.ops.rime.attention(q, k, v, one, one, one, causal=True)
    w = torch.randn(H * D, H * D, device="cuda") / (H * D) ** 0.5
    y, y_ref = o @ w, o_bf16.float().reshape(B * S, H * D) @ w
    err = ((y - y_ref).norm() / y_ref.norm()).item()
    print(f"o_proj of the NVFP4 O against the BF16 O's: relative L2 {err:.4f} (bound 0.12: E2M1 holds 3 bits)")
    return 0 if err < 0.12 else 1


if __name__ == "__main__":
    sys.exit(main())
