#!/usr/bin/env python3
"""Host cost of one eager call from Python, rime against the anchors in the same run (issue 36's benchmark).

    python3 tools/bench/python_overhead.py [--calls 300] [--rounds 7]

A BF16 decode (B 1, 32 q heads over 8 kv heads, 512 keys, D 128). Each round first queues a sleep kernel of ~50 ms
on the stream, then calls the implementation `--calls` times, timed on the host clock: the GPU runs none of the
calls meanwhile and a launch returns once queued (a round queues a few hundred launches, below the queue's depth),
so the loop's time per call is the host's cost of one call, not the kernels'. The median over `--rounds` rounds is
printed. Prints a markdown table; --csv FILE writes the rows too.
"""
import argparse
import contextlib
import csv
import statistics
import sys
import time

import torch

B, H_Q, H_KV, S_KV, D = 1, 32, 8, 512, 128


def host_us(fn, calls, rounds, context):
    with context():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        per_call = []
        for _ in range(rounds):
            torch.cuda._sleep(100_000_000)  # ~50 ms at the H200's clock: the calls below queue behind it
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
    return statistics.median(per_call)


def implementations():
    import rime
    import rime.torch  # noqa: F401

    q = torch.randn(B, 1, H_Q, D, device="cuda", dtype=torch.bfloat16)  # [B, S_q, H, D]
    k = torch.randn(B, S_KV, H_KV, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, S_KV, H_KV, D, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(q)

    builder = rime.GraphBuilder("decode")
    def spec(name, t):  # a [B, S, H, D] tensor as the graph's [B, H, S, D] with its strides
        view = t.permute(0, 2, 1, 3)
        return builder.tensor(name, list(view.shape), "BF16", strides=list(view.stride()), output=(name == "O"))
    tq, tk, tv, to = (spec(n, t) for n, t in (("Q", q), ("K", k), ("V", v), ("O", out)))
    plan = rime.plan(builder.sdpa(q=tq, k=tk, v=tv, o=to))
    # The same graph pinned to one kernel (split 1, no combine): what the second launch costs the host.
    builder = rime.GraphBuilder("decode_split1")
    tq, tk, tv, to = (spec(n, t) for n, t in (("Q", q), ("K", k), ("V", v), ("O", out)))
    plan1 = rime.plan(builder.sdpa(q=tq, k=tk, v=tv, o=to, split_kv=1))
    ws = torch.empty(max(plan.workspace_size, 1), device="cuda", dtype=torch.uint8)
    ws1 = torch.empty(max(plan1.workspace_size, 1), device="cuda", dtype=torch.uint8)
    buffers = {n: t.permute(0, 2, 1, 3) for n, t in (("Q", q), ("K", k), ("V", v), ("O", out))}  # the graph's dims
    pointers = [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()]
    stream = torch.cuda.current_stream()
    none = contextlib.nullcontext
    yield "rime Plan.run (tensors, checked)", lambda: plan.run(buffers, ws, stream), none
    yield "rime Plan.run_pointers", lambda: plan.run_pointers(pointers, ws.data_ptr(), stream.cuda_stream), none
    yield "rime Plan.run (tensors, checked), split 1: one kernel", lambda: plan1.run(buffers, ws1, stream), none
    yield "rime Plan.run_pointers, split 1: one kernel", lambda: plan1.run_pointers(pointers, ws1.data_ptr(), stream.cuda_stream), none
    yield "torch.ops.rime.attention_out", lambda: torch.ops.rime.attention_out(q, k, v, out), none
    yield "torch.ops.rime.attention", lambda: torch.ops.rime.attention(q, k, v), none
    yield "rime.torch.attention_out (eager fast path)", lambda: rime.torch.attention_out(q, k, v, out), none
    yield f"  (rime plan: {plan.row}, split {plan.split_kv}, {len(plan.kernels)} kernels; pinned: split {plan1.split_kv}, {len(plan1.kernels)} kernel)", None, None

    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    none = contextlib.nullcontext
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, S, D] views
    kx, vx = (t.repeat_interleave(H_Q // H_KV, 1) for t in (kh, vh))  # cuDNN's backend takes no enable_gqa
    for name, backend, kk, vv, gqa in (("torch SDPA (cuDNN backend)", SDPBackend.CUDNN_ATTENTION, kx, vx, False),
                                      ("torch SDPA (flash backend)", SDPBackend.FLASH_ATTENTION, kh, vh, True)):
        # The backend is chosen around the timed loop, not per call: its context manager costs more than a call.
        yield name, (lambda kk=kk, vv=vv, gqa=gqa: F.scaled_dot_product_attention(qh, kk, vv, enable_gqa=gqa)), \
            (lambda backend=backend: sdpa_kernel([backend]))

    try:
        import cudnn
    except ImportError as e:
        yield f"cuDNN frontend pygraph: not installed ({e})", None, None
        return
    handle = cudnn.create_handle()
    qc, kc, vc = qh.contiguous(), kx.contiguous(), vx.contiguous()
    oc = torch.empty_like(qc)
    g = cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16, intermediate_data_type=cudnn.data_type.FLOAT,
                      compute_data_type=cudnn.data_type.FLOAT, handle=handle)
    gq, gk, gv = g.tensor_like(qc), g.tensor_like(kc), g.tensor_like(vc)
    go, _ = g.sdpa(gq, gk, gv, generate_stats=False, attn_scale=D ** -0.5)
    go.set_output(True).set_dim(list(oc.shape)).set_stride(list(oc.stride()))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    cws = torch.empty(max(1, g.get_workspace_size()), device="cuda", dtype=torch.uint8)
    pack = {gq: qc, gk: kc, gv: vc, go: oc}
    yield "cuDNN frontend pygraph execute", lambda: g.execute(pack, cws, handle=handle), none


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--csv")
    args = ap.parse_args()
    rows = []
    print(f"BF16 decode B{B} H{H_Q}/{H_KV} S_kv {S_KV} D {D} on {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| implementation | host us per eager call |")
    print("|---|---|")
    for name, fn, context in implementations():
        if fn is None:
            print(f"| {name} | |")
            continue
        try:
            h = host_us(fn, args.calls, args.rounds, context)
        except Exception as e:  # an anchor that cannot run is a row too
            print(f"| {name} | failed: {str(e).splitlines()[0][:80]} |")
            continue
        rows.append((name, h))
        print(f"| {name} | {h:.1f} |", flush=True)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["implementation", "host_us"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
