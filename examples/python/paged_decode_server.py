#!/usr/bin/env python3
"""A vLLM-shaped decode step on rime: an FP8 paged K/V cache (vLLM's NHD layout, pages of 16), a block table per
batch slot, BF16 queries; plans warmed up for every batch size before CUDA-graph capture, one graph per batch size,
replayed with new block tables, lengths and KV scales without re-planning. Each replay is checked against the eager
call and a float32 reference gathered from the pages.

    python3 examples/python/paged_decode_server.py      # needs torch and a Hopper GPU
"""
import sys

import torch

import rime.torch

H_Q, H_KV, D, PAGE, PAGES, MAX_PAGES = 32, 8, 128, 16, 8192, 128
BATCH_SIZES = (1, 4, 16, 64)


def reference(q, k_cache, v_cache, table, lens, k_scale, v_scale):
    outs = []
    for b in range(q.shape[0]):
        n = int(lens[b])
        pages = table[b, :(n + PAGE - 1) // PAGE].long()
        k = k_cache[pages].float().reshape(-1, H_KV, D)[:n] * k_scale
        v = v_cache[pages].float().reshape(-1, H_KV, D)[:n] * v_scale
        qb = q[b, 0].float().reshape(H_KV, H_Q // H_KV, D)
        p = torch.softmax(torch.einsum("hgd,nhd->hgn", qb, k) / D ** 0.5, -1)
        outs.append(torch.einsum("hgn,nhd->hgd", p, v).reshape(1, 1, H_Q, D))
    return torch.cat(outs)


def main():
    fp8 = torch.float8_e4m3fn
    k_cache = (torch.randn(PAGES, PAGE, H_KV, D, device="cuda") * 2).to(fp8)
    v_cache = (torch.randn(PAGES, PAGE, H_KV, D, device="cuda") * 2).to(fp8)
    k_scale = torch.tensor([0.5], device="cuda")
    v_scale = torch.tensor([1.0], device="cuda")
    # The server's persistent buffers, sliced per batch size (as vLLM's CUDA-graph runner does).
    q_buf = torch.empty(max(BATCH_SIZES), 1, H_Q, D, device="cuda", dtype=torch.bfloat16)
    table_buf = torch.zeros(max(BATCH_SIZES), MAX_PAGES, device="cuda", dtype=torch.int32)
    lens_buf = torch.ones(max(BATCH_SIZES), device="cuda", dtype=torch.int32)
    out_buf = torch.empty_like(q_buf)

    def step(B):
        torch.ops.rime.paged_attention_out(q_buf[:B], k_cache, v_cache, table_buf[:B], lens_buf[:B], out_buf[:B],
                                           None, None, k_scale, v_scale)

    for B in BATCH_SIZES:  # before any capture: plans made (compiled once, then from the plan cache), logged
        plan = rime.torch.warmup(torch.ops.rime.paged_attention_out, q_buf[:B], k_cache, v_cache, table_buf[:B],
                                 lens_buf[:B], out_buf[:B], None, None, k_scale, v_scale)
        print(f"batch {B:3d}: {plan.row}, split {plan.split_kv}, workspace {plan.workspace_size} bytes")
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    for B in BATCH_SIZES:
        graphs[B] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[B], pool=pool, stream=stream):
            step(B)
    plans = rime.torch.plan_count()

    worst = 0.0
    for it in range(6):  # a serving loop: each step new sequences, lengths and scales
        B = BATCH_SIZES[it % len(BATCH_SIZES)]
        lens = torch.randint(1, MAX_PAGES * PAGE, (B,), device="cuda", dtype=torch.int32)
        table = torch.randperm(PAGES, device="cuda", dtype=torch.int32)[:B * MAX_PAGES].view(B, MAX_PAGES)
        q_buf[:B].copy_(torch.randn(B, 1, H_Q, D, device="cuda"))
        table_buf[:B].copy_(table)
        lens_buf[:B].copy_(lens)
        k_scale.fill_(0.25 + 0.5 * torch.rand(1).item())
        graphs[B].replay()
        replayed = out_buf[:B].clone()
        step(B)  # eager, the same buffers
        ref = reference(q_buf[:B], k_cache, v_cache, table, lens, k_scale.item(), v_scale.item())
        err = ((replayed.float() - ref).norm() / ref.norm()).item()
        same = torch.equal(replayed, out_buf[:B])
        worst = max(worst, err if same else float("inf"))
        print(f"step {it}: batch {B:3d}, replay == eager: {same}, relative L2 to the reference {err:.4f}")
    assert rime.torch.plan_count() == plans, "a replay or an eager step made a plan"
    print(f"worst error {worst:.4f} (bound 0.03); plans made: {plans}, none during capture or replay")
    return 0 if worst < 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
