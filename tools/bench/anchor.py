#!/usr/bin/env python3
"""Anchors for tools/bench, measured in the same run as our plans: cuDNN FP8 SDPA forward (through the cuDNN
frontend's Python graph API), torch SDPA in BF16 (flash and cuDNN backends), and for decode shapes a
device-to-device copy of the bytes our FP8 and BF16 decode plans move. Prints CSV rows
`shape,impl,ms,tflops,gbps,note` on stdout. Shapes mirror tools/bench/graphs/*.json."""
import math
import os
import sys
import traceback

import torch

SHAPES = [
    # name, B, H_q, H_kv, S_q, S_kv, D (D_qk), causal, D_v
    ("b4_h32_s4096_d128", 4, 32, 32, 4096, 4096, 128, False, 128),
    ("b4_h32_s4096_d128_causal", 4, 32, 32, 4096, 4096, 128, True, 128),
    ("b1_h32_s16384_d128", 1, 32, 32, 16384, 16384, 128, False, 128),
    ("b2_h40_s2100_d128", 2, 40, 40, 2100, 2100, 128, False, 128),
    ("b1_h40_s7800_d128", 1, 40, 40, 7800, 7800, 128, False, 128),
    ("b2_h32_s8192_d64", 2, 32, 32, 8192, 8192, 64, False, 64),
    ("b2_h16_s8192_d256", 2, 16, 16, 8192, 8192, 256, False, 256),
    ("b1_h64g8_s8192_d128", 1, 64, 8, 8192, 8192, 128, False, 128),
    # A short causal prefill of many sequences: transformers' generate benchmark's B64 P512 (docs/perf.md).
    ("b64_h32g8_s512_d128_causal", 64, 32, 8, 512, 512, 128, True, 128),
    # MLA-style prefill (DeepSeek): D_qk 192 (128 + 64 rope dims), D_v 128.
    ("b4_h32_s4096_dqk192_dv128", 4, 32, 32, 4096, 4096, 192, False, 128),
    # Head dims 96 (Phi-3) and 80 (Phi-2; no FP8 row serves it), against the D 128 rows of the same shape.
    ("b4_h32_s4096_d96", 4, 32, 32, 4096, 4096, 96, False, 96),
    ("b4_h32_s4096_d96_causal", 4, 32, 32, 4096, 4096, 96, True, 96),
    ("b4_h32_s4096_d80", 4, 32, 32, 4096, 4096, 80, False, 80),
    ("b4_h32_s4096_d80_causal", 4, 32, 32, 4096, 4096, 80, True, 80),
    # Decode: S_q = 1 with bottom-right causal is no mask at all.
    ("decode_b8_h32g8_skv32768", 8, 32, 8, 1, 32768, 128, False, 128),
    ("decode_b1_h32g8_skv131072", 1, 32, 8, 1, 131072, 128, False, 128),
    ("decode_b8_h32g8_skv32768_d96", 8, 32, 8, 1, 32768, 96, False, 96),
    # transformers' generate benchmark's decode steps (docs/perf.md) halfway through: B64 prompts of 512 + 128 new
    # tokens, B8 of 2048 + 256; the DynamicCache's K/V are BHSD.
    ("decode_b64_h32g8_skv576", 64, 32, 8, 1, 576, 128, False, 128),
    ("decode_b8_h32g8_skv2176", 8, 32, 8, 1, 2176, 128, False, 128),
    # Gemma-shaped decodes at head dim 256: 8 query heads over 1 kv head, and 16 over 8.
    ("decode_b8_h8g1_skv8192_d256", 8, 8, 1, 1, 8192, 256, False, 256),
    ("decode_b8_h8g1_skv32768_d256", 8, 8, 1, 1, 32768, 256, False, 256),
    ("decode_b8_h16g8_skv8192_d256", 8, 16, 8, 1, 8192, 256, False, 256),
    ("decode_b8_h16g8_skv32768_d256", 8, 16, 8, 1, 32768, 256, False, 256),
    ("decode_b8_h32g8_skv32768_d80", 8, 32, 8, 1, 32768, 80, False, 80),
    ("decode_b8_h32g8_skv32768_d64", 8, 32, 8, 1, 32768, 64, False, 64),
    # MLA-style decode: 16 q heads over one kv head, D_qk 192 / D_v 128 (16 packed rows).
    ("decode_b8_h16g16_skv32768_dqk192_dv128", 8, 16, 1, 1, 32768, 192, False, 128),
]


# Paged FP8 decode (tools/bench/graphs/fp8_paged_decode_*, run with the --kv-lengths LO:HI of their .args file):
# only the copy anchor (cuDNN FP8 has no decode plan on Hopper). Its byte count is the expected one of the length
# mix -- the mean length (LO + HI) / 2 x B x H_kv x (D_qk + D_v) -- plus Q and O; rime counts the keys its inputs
# drew (testing::bytes_moved), within a few percent of it, and a copy's bandwidth does not depend on the size there.
PAGED_SHAPES = [
    # name, B, H_q, H_kv, S_q, D
    ("paged_decode_b64_h32g8_p16", 64, 32, 8, 1, 128),
    ("paged_decode_b64_h32g8_p64", 64, 32, 8, 1, 128),
    ("paged_decode_b64_h32g8_p16_q2", 64, 32, 8, 2, 128),
    ("paged_decode_b64_h32g8_p16_q4", 64, 32, 8, 4, 128),
    ("paged_decode_b64_h32g8_p16_q8", 64, 32, 8, 8, 128),
    ("paged_decode_b64_h32g8_p64_q2", 64, 32, 8, 2, 128),
    ("paged_decode_b64_h32g8_p64_q4", 64, 32, 8, 4, 128),
    ("paged_decode_b64_h32g8_p64_q8", 64, 32, 8, 8, 128),
    # A BF16 Q over the same FP8 cache (q16_over_fp8_kv); Q is counted as FP8 bytes here (0.5 MB of 2.2 GB).
    ("paged_decode_b64_h32g8_p16_bf16q", 64, 32, 8, 1, 128),
    ("paged_decode_b64_h32g8_p64_bf16q", 64, 32, 8, 1, 128),
]
GRAPHS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graphs")


def mean_kv_length(name):
    """The mean of the --kv-lengths LO:HI range in graphs/fp8_<name>.args."""
    args = open(os.path.join(GRAPHS, f"fp8_{name}.args")).read().split()
    lo, hi = (int(x) for x in args[args.index("--kv-lengths") + 1].split(":"))
    return (lo + hi) // 2


def flops(B, Hq, Sq, Skv, D, causal, Dv):
    pairs = Sq * (Sq + 1) / 2 if causal else Sq * Skv
    return pairs * B * Hq * 2 * (D + Dv)


def time_ms(fn, iters=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def cudnn_fp8(B, Hq, Hkv, Sq, Skv, D, causal, out_bf16, Dv):
    import cudnn

    handle = cudnn.create_handle()
    fp8 = torch.float8_e4m3fn
    q = (torch.rand(B, Hq, Sq, D, device="cuda") * 4 - 2).to(fp8)
    k = (torch.rand(B, Hkv, Skv, D, device="cuda") * 4 - 2).to(fp8)
    v = (torch.rand(B, Hkv, Skv, Dv, device="cuda") * 4 - 2).to(fp8)
    one = lambda: torch.ones(1, 1, 1, 1, device="cuda", dtype=torch.float32)
    scalars = [one() for _ in range(6)]
    amax_s_t, amax_o_t = one(), one()
    o_dtype = torch.bfloat16 if out_bf16 else fp8
    o = torch.empty(B, Hq, Sq, Dv, device="cuda", dtype=o_dtype)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    tq, tk, tv = g.tensor_like(q), g.tensor_like(k), g.tensor_like(v)
    ts = [g.tensor_like(s) for s in scalars]
    outs = g.sdpa_fp8(tq, tk, tv, *ts, generate_stats=False, attn_scale=1.0 / math.sqrt(D),
                      use_causal_mask=causal)
    to, _, tas, tao = outs
    to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride())).set_data_type(
        cudnn.data_type.BFLOAT16 if out_bf16 else cudnn.data_type.FP8_E4M3)
    tas.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    tao.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(cudnn.data_type.FLOAT)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    ws = torch.empty(max(1, g.get_workspace_size()), device="cuda", dtype=torch.uint8)
    pack = {tq: q, tk: k, tv: v, to: o, tas: amax_s_t, tao: amax_o_t}
    for t, s in zip(ts, scalars):
        pack[t] = s
    return time_ms(lambda: g.execute(pack, ws, handle=handle))


def torch_bf16(B, Hq, Hkv, Sq, Skv, D, causal, backend, Dv):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    q = torch.randn(B, Hq, Sq, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, Hkv, Skv, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, Hkv, Skv, Dv, device="cuda", dtype=torch.bfloat16)
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    gqa = Hq != Hkv
    if gqa and backend == "cudnn":
        # Expand K/V: torch's cuDNN backend takes no enable_gqa; the copy is outside the timed region.
        k = k.repeat_interleave(Hq // Hkv, dim=1)
        v = v.repeat_interleave(Hq // Hkv, dim=1)
        gqa = False
    with sdpa_kernel([be]):
        return time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa))


def copy_bytes(nbytes):
    """A device-to-device copy of nbytes: the bandwidth a decode, which reads each byte once, is held to."""
    src = torch.empty(nbytes, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    return time_ms(lambda: dst.copy_(src))


def main():
    # RIME_ANCHOR_ONLY=SUBSTRING times only the shapes whose name contains it (a focused device run).
    only = os.environ.get("RIME_ANCHOR_ONLY", "")
    print("shape,impl,ms,tflops,gbps,note")
    for name, B, Hq, Hkv, Sq, Skv, D, causal, Dv in SHAPES:
        if only not in name:
            continue
        decode = Sq == 1
        f = flops(B, Hq, Sq, Skv, D, causal, Dv)
        fp8_bytes = B * (Hq * Sq * D + Hkv * Skv * (D + Dv)) + B * Hq * Sq * Dv * (2 if decode else 1)
        bf16_bytes = 2 * B * (Hq * Sq * (D + Dv) + Hkv * Skv * (D + Dv))
        runs = [("cudnn_fp8", fp8_bytes, lambda: cudnn_fp8(B, Hq, Hkv, Sq, Skv, D, causal, decode, Dv)),
                ("torch_flash_bf16", bf16_bytes, lambda: torch_bf16(B, Hq, Hkv, Sq, Skv, D, causal, "flash", Dv)),
                ("torch_cudnn_bf16", bf16_bytes, lambda: torch_bf16(B, Hq, Hkv, Sq, Skv, D, causal, "cudnn", Dv))]
        if decode:
            # A copy of the byte counts our FP8 and BF16 decode plans move; its bandwidth counts what it reads and
            # what it writes (2x the bytes), the usual copy-bandwidth figure, which a decode that reads each byte
            # once is held to.
            runs += [("copy_fp8", 2 * fp8_bytes, lambda: copy_bytes(fp8_bytes)),
                     ("copy_bf16", 2 * bf16_bytes, lambda: copy_bytes(bf16_bytes))]
        for impl, nbytes, fn in runs:
            try:
                ms = fn()
                print(f"{name},{impl},{ms:.4f},{f / ms / 1e9:.1f},{nbytes / ms / 1e6:.1f},", flush=True)
            except Exception as e:  # a missing plan is a result too (cuDNN FP8 has none for decode)
                msg = str(e).replace(",", ";").replace("\n", " ")[:160]
                print(f"{name},{impl},,,,{msg}", flush=True)
                traceback.print_exc(file=sys.stderr)
            torch.cuda.empty_cache()
    for name, B, Hq, Hkv, Sq, D in PAGED_SHAPES:
        if only not in name:
            continue
        try:
            nbytes = B * mean_kv_length(name) * Hkv * 2 * D + B * Hq * Sq * D * 3  # K, V keys; Q (FP8), O (BF16)
            ms = copy_bytes(nbytes)
            print(f"{name},copy_fp8,{ms:.4f},,{2 * nbytes / ms / 1e6:.1f},", flush=True)
        except Exception as e:
            msg = str(e).replace(",", ";").replace("\n", " ")[:160]
            print(f"{name},copy_fp8,,,,{msg}", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
