"""The package on a GPU with torch tensors (skipped, with the reason, without either): plans run on torch's device
memory and streams, against a torch reference computed in the test from the same (dequantized) tensors."""
import pytest

import rime

torch = pytest.importorskip("torch", reason="the GPU tests of the package compare with torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def attention_reference(q, k, v, causal):
    """float32 SDPA with GQA (each kv head serves H_q / H_kv q heads), top-left causal."""
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k, v, is_causal=causal)


def rel_l2(got, want):
    return ((got.float() - want.float()).norm() / want.float().norm()).item()


def bf16_graph(B=2, H_q=8, H_kv=2, S=256, D=64):
    b = rime.GraphBuilder("bf16_causal")
    q = b.tensor("Q", [B, H_q, S, D], "BF16")
    k = b.tensor("K", [B, H_kv, S, D], "BF16")
    v = b.tensor("V", [B, H_kv, S, D], "BF16")
    o = b.output("O", [B, H_q, S, D], "BF16")
    return b.sdpa(q=q, k=k, v=v, o=o, causal=True)


def test_bf16_causal_prefill_on_a_side_stream():
    g = bf16_graph()
    plan = rime.plan(g)
    assert plan.prepared
    q = torch.randn(2, 8, 256, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, 2, 256, 64, device="cuda", dtype=torch.bfloat16)
    o = torch.full_like(q, float("nan"))
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan.run({"Q": q, "K": k, "V": v, "O": o}, workspace=ws, stream=side.cuda_stream)
    side.synchronize()
    assert not torch.isnan(o).any()
    assert rel_l2(o, attention_reference(q, k, v, True)) < 1e-2


def test_fp8_prefill_against_the_dequantized_reference():
    B, H, S, D = 1, 4, 384, 128
    b = rime.GraphBuilder("fp8_prefill")
    q, k, v = (b.tensor(n, [B, H, S, D], "FP8_E4M3") for n in ("Q", "K", "V"))
    scalars = {n: b.tensor(n, [1, 1, 1, 1], "FP32")
               for n in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")}
    o = b.output("O", [B, H, S, D], "BF16")
    g = b.sdpa_fp8(q=q, k=k, v=v, o=o, **scalars)
    plan = rime.plan(g)
    data = {n: (torch.randn(B, H, S, D, device="cuda") * 2).to(torch.float8_e4m3fn) for n in ("Q", "K", "V")}
    # Scales are device tensors: a replay reads their current values.
    scale = {"descale_q": 0.5, "descale_k": 0.25, "descale_v": 2.0, "descale_s": 1.0, "scale_s": 1.0, "scale_o": 1.0}
    dev_scales = {n: torch.tensor([[[[s]]]], device="cuda", dtype=torch.float32) for n, s in scale.items()}
    out = torch.empty(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    plan.run({**data, **dev_scales, "O": out}, workspace=ws, stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    want = attention_reference(data["Q"].float() * 0.5, data["K"].float() * 0.25, data["V"].float() * 2.0, False)
    assert rel_l2(out, want) < 3e-2  # SPEC section 10: a 16-bit O of an FP8 graph (P held in E4M3)


def test_cuda_graph_capture_replays_on_new_inputs():
    g = bf16_graph(B=1, H_q=4, H_kv=4, S=128, D=64)
    plan = rime.plan(g)
    shape = (1, 4, 128, 64)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        plan.run({"Q": q, "K": k, "V": v, "O": o}, workspace=ws, stream=s.cuda_stream)
    for _ in range(2):  # new inputs in the same buffers, then replay
        for t in (q, k, v):
            t.copy_(torch.randn(shape, device="cuda", dtype=torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_l2(o, attention_reference(q, k, v, True)) < 1e-2


def test_tune_records_the_fastest_which_plans_then_use_explain_and_list():
    # A BF16 decode (B 2, 32 q heads over 8 kv heads, 8192 keys): splits and tiles to choose among.
    b = rime.GraphBuilder("tune_decode")
    q = b.tensor("Q", [2, 32, 1, 128], "BF16")
    k = b.tensor("K", [2, 8, 8192, 128], "BF16")
    v = b.tensor("V", [2, 8, 8192, 128], "BF16")
    o = b.output("O", [2, 32, 1, 128], "BF16")
    g = b.sdpa(q=q, k=k, v=v, o=o)
    rime.cache.clear(tuned=True)
    report = rime.tune(g, iterations=10)
    assert report["recorded"] and len(report["candidates"]) > 3
    assert report["candidates"][0]["heuristic"]
    timed = [c["ms"] for c in report["candidates"] if not c["error"]]
    assert report["winner_ms"] == min(timed) <= report["heuristic_ms"]
    winner = report["winner"]
    plan = rime.plan(g)
    assert (plan.row, plan.split_kv) == (winner["row"], winner["split_kv"])
    assert tuple(plan.tile) == tuple(winner["tile"])
    assert "tuned     tuned " in plan.explain()
    assert "tuned" not in rime.explain(g, use_tuned=False).split("rows:")[1]
    listed = [e for e in rime.cache.ls() if e.get("kind") == "tuned"]
    assert any(e["tuned"]["key"] == report["key"] for e in listed)
    assert rime.cache.show("tuned/" + report["key"][:16] + ".json")["tuned"]["graph_name"] == "tune_decode"
    assert rime.cache.clear(tuned=True) >= 1
    assert "tuned     " not in rime.plan(g).explain()
