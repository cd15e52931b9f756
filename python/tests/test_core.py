"""The core package without a GPU and without torch: graphs, validation, explanations, plans and the cache."""
import json
import subprocess
import sys
import threading
import time

import pytest

import rime
from conftest import CACHE_DIR, ROOT, example, examples, rime_cli


def test_import_needs_no_torch():
    out = subprocess.run([sys.executable, "-c", "import sys, rime; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", examples())
def test_graph_hash_matches_the_cli(name):
    g = rime.Graph.from_json(example(name))
    assert g.name == json.loads(example(name))["name"]
    cli = rime_cli()
    if cli is None:
        pytest.skip("no build/rime to compare with (scripts/test.sh builds it)")
    out = subprocess.run([str(cli), "validate", str(ROOT / "examples" / f"{name}.json"), "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["hash"] == g.hash
    # The canonical form round-trips to the same graph.
    assert rime.Graph.from_json(g.to_json()).hash == g.hash


def test_a_bad_graph_raises_invalid_graph_with_its_pointer():
    doc = json.loads(example("fp8_prefill"))
    doc["tensors"][1]["dims"][3] = 64
    with pytest.raises(rime.InvalidGraphError) as e:
        rime.Graph.from_json(json.dumps(doc))
    assert e.value.location == "/tensors/1/dims"
    assert e.value.code == "InvalidGraph"
    assert "do not match Q's head dim 128" in e.value.message
    assert isinstance(e.value, rime.RimeError)


def test_a_malformed_document_raises_invalid_json():
    with pytest.raises(rime.InvalidJsonError) as e:
        rime.Graph.from_json('{"rime_graph": 1, "name": "x", "tensors": [{"bogus": 1}]}')
    assert e.value.location.startswith("/tensors/0")


def test_not_supported_lists_every_rows_reason():
    doc = json.loads(example("fp8_prefill"))
    for i in (0, 1, 2, 9):
        doc["tensors"][i]["dims"][3] = 80  # no FP8 row serves head dim 80
        doc["tensors"][i].pop("strides", None)
    g = rime.Graph.from_json(json.dumps(doc))
    with pytest.raises(rime.NotSupportedError) as e:
        rime.plan(g, arch="sm_90a", sms=132)
    assert any("row sdpa_sm90_fp8: D_qk 80 not in" in r for r in e.value.reasons)
    assert any(r.startswith("row sdpa_mma_fp8:") for r in e.value.reasons)
    # explain() works for such a graph too: the same verdicts.
    assert "declined  row sdpa_sm90_fp8: D_qk 80" in rime.explain(g, arch="sm_90a", sms=132)


@pytest.mark.parametrize("name", examples())
def test_explain_is_the_text_of_rime_plan_explain(name):
    golden = (ROOT / "tests" / "golden" / f"{name}.explain.txt").read_text()
    g = rime.Graph.from_json(example(name))
    assert rime.explain(g, arch="sm_90a", sms=132) == golden
    as_dict = rime.explain(g, arch="sm_90a", sms=132, json=True)
    assert as_dict["graph"]["rime_graph"] == 1 and as_dict["decision"]["row"].startswith("sdpa_")


def test_a_plan_compiles_into_the_cache_that_rime_cache_ls_lists():
    g = rime.Graph.from_json(example("fp8_decode_gqa"))
    p = rime.plan(g, arch="sm_90a", sms=132)
    assert p.row == "sdpa_sm90_fp8"
    assert p.consumer_warpgroups == 1
    assert p.split_kv > 1 and p.workspace_size > 0
    assert [k["role"] for k in p.kernels] == ["attention", "combine"]
    assert p.explain() == rime.explain(g, arch="sm_90a", sms=132)
    assert rime.cache_dir() == CACHE_DIR
    names = {e["name"] for e in rime.cache_entries()}
    assert {f'{k["engine"]}.{k["key"][:16]}' for k in p.kernels} <= names
    cli = rime_cli()
    if cli is not None:
        out = subprocess.run([str(cli), "cache", "ls", "--json"], capture_output=True, text=True, check=True,
                             env={"RIME_CACHE_DIR": CACHE_DIR, "PATH": "/usr/bin:/bin"})
        assert {e["name"] for e in json.loads(out.stdout)} == names
    # The artifact round-trips.
    loaded = rime.Plan.load(p.to_json())
    assert loaded.to_json() == p.to_json()


@pytest.mark.parametrize("lead", ["é", "日", "😀"])  # a 2-, 3- and 4-byte UTF-8 sequence
def test_a_non_ascii_document_that_does_not_parse_raises_invalid_json(lead):
    # The parser quotes the bytes it read last, here the first byte of a character it cannot start a value with: the
    # message keeps every whole character and writes a cut one's bytes as \xNN, so that Python decodes it.
    with pytest.raises(rime.InvalidJsonError) as e:
        rime.Graph.from_json(lead * 5 + "{")
    assert "syntax error at byte 1" in e.value.message
    assert f"last read: '\\x{lead.encode()[0]:02X}'" in e.value.message


def test_a_cache_dir_holding_a_nul_byte_is_refused_by_name():
    # A C string ends at the NUL: accepting the path would put the cache in the part before it.
    with pytest.raises(rime.InvalidArgumentError) as e:
        rime.set_cache_dir("cache\x00dir")
    assert e.value.message.startswith("dir: ") and "NUL byte at offset 5" in e.value.message
    assert rime.cache_dir() != "cache"


def test_set_cache_dir_after_the_first_plan_is_refused():
    rime.plan(rime.Graph.from_json(example("fp8_prefill")), arch="sm_90a", sms=132)
    with pytest.raises(rime.InvalidArgumentError) as e:
        rime.set_cache_dir("/tmp")
    assert "already in use" in e.value.message


def test_another_thread_runs_while_a_plan_compiles():
    # A graph whose kernels nothing else compiles: a cold NVRTC compile of several hundred milliseconds.
    doc = json.loads(example("fp16_window_padding"))
    doc["name"] = "gil_check"
    doc["op"]["attributes"]["generate_stats"] = False
    doc["tensors"] = [t for t in doc["tensors"] if t["name"] != "Stats"]
    doc["op"]["outputs"].pop("Stats", None)
    g = rime.Graph.from_json(json.dumps(doc))
    ticks = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.monotonic()
    p = rime.plan(g, arch="sm_89", sms=128)
    elapsed = time.monotonic() - start
    stop.set()
    t.join()
    assert p.kernels[0]["origin"] == "compiled"
    # The counting thread ran during the compile: at least a quarter of the ticks a free thread gets.
    assert ticks[0] >= 0.25 * elapsed / 0.0015, (ticks[0], elapsed)


def test_run_without_a_gpu_is_a_cuda_error_and_bad_buffers_are_named():
    p = rime.plan(rime.Graph.from_json(example("fp8_prefill")), arch="sm_90a", sms=132)
    with pytest.raises(rime.InvalidArgumentError) as e:
        p.run({"nope": 0})
    assert "no tensor named 'nope'" in e.value.message
    with pytest.raises(rime.InvalidArgumentError):
        p.run({"Q": "not a pointer"})
    if not p.prepared:
        with pytest.raises(rime.CudaError):
            p.run({"Q": 0})


@pytest.mark.parametrize("name", examples())
def test_a_graph_built_in_python_validates_to_the_examples_hash(name):
    # Every example rebuilt through GraphBuilder from its own fields: the same canonical graph, the same hash.
    doc = json.loads(example(name))
    b = rime.GraphBuilder(doc["name"])
    by_uid = {}
    for t in doc["tensors"]:
        by_uid[t["uid"]] = b.tensor(t["name"], t["dims"], t["dtype"], strides=t.get("strides"),
                                    output=t.get("output", False), uid=t["uid"])
    op = doc["op"]
    fields = {role.lower(): by_uid[uid] for role, uid in {**op["inputs"], **op["outputs"]}.items()}
    fields.update(op.get("attributes", {}))
    fields.update(op.get("knobs", {}))
    g = getattr(b, op["kind"])(op_name=op.get("name", "sdpa"), **fields)
    assert g.hash == rime.Graph.from_json(example(name)).hash


def test_the_builder_names_what_it_does_not_know():
    b = rime.GraphBuilder("x")
    with pytest.raises(TypeError) as e:
        b.sdpa(q=b.tensor("Q", [1, 1, 64, 64], "BF16"), causal_mask=True)
    assert "unknown keyword 'causal_mask'" in str(e.value)


def test_a_left_padded_graph_is_valid_explained_and_planned_with_the_kernels_for_starts():
    b = rime.GraphBuilder("left_padded")
    q = b.tensor("Q", [2, 8, 64, 128], "BF16")
    k, v = (b.tensor(n, [2, 2, 256, 128], "BF16") for n in ("K", "V"))
    o = b.output("O", [2, 8, 64, 128], "BF16")
    lens = {n: b.tensor(n, [2], "INT32") for n in ("seq_len_q", "seq_len_kv", "seq_start_q", "seq_start_kv")}
    g = b.sdpa(q=q, k=k, v=v, o=o, padding_mask=True, causal=True, alignment="bottom_right", **lens)
    assert "starts    Q rows from seq_start_q, K/V positions from seq_start_kv" in rime.explain(g)
    e = rime.explain(g, arch="sm_90a", json=True)
    assert e["decision"]["row"] == "sdpa_sm90_f16"
    assert "starts" in e["derived"]["stages"][0]["name_expression"]
    with pytest.raises(rime.InvalidGraphError, match="seq_start_kv .* needs seq_len_kv"):
        b = rime.GraphBuilder("no_length")
        q = b.tensor("Q", [2, 8, 64, 128], "BF16")
        k, v = (b.tensor(n, [2, 2, 256, 128], "BF16") for n in ("K", "V"))
        b.sdpa(q=q, k=k, v=v, o=b.output("O", [2, 8, 64, 128], "BF16"), padding_mask=True,
               seq_len_q=b.tensor("seq_len_q", [2], "INT32"), seq_start_kv=b.tensor("seq_start_kv", [2], "INT32"))


def test_a_builder_graph_plans_with_pins():
    b = rime.GraphBuilder("pinned")
    q = b.tensor("Q", [1, 8, 256, 64], "BF16")
    k = b.tensor("K", [1, 2, 1024, 64], "BF16")
    v = b.tensor("V", [1, 2, 1024, 64], "BF16")
    o = b.output("O", [1, 8, 256, 64], "BF16")
    st = b.output("Stats", [1, 8, 256, 1], "FP32")
    g = b.sdpa(q=q, k=k, v=v, o=o, stats=st, causal=True, alignment="bottom_right", tile=(192, 128))
    p = rime.plan(g, arch="sm_90a", sms=132)
    assert (p.row, p.tile, p.consumer_warpgroups) == ("sdpa_sm90_f16", [192, 128], 3)
    # A tile the row lists for other head dims is declined by the matcher, and the mma.sync row has no such tile.
    g2 = b.sdpa(q=q, k=k, v=v, o=o, stats=st, causal=True, tile=(192, 64))
    with pytest.raises(rime.NotSupportedError) as e:
        rime.plan(g2, arch="sm_90a", sms=132)
    assert any("tile 192x64 not in {64x128, 128x128, 192x128} for head dims (64, 64)" in r for r in e.value.reasons)


def test_context_parallel_plans_a_ranks_shard_and_refuses_what_it_cannot_serve():
    # context_parallel=(comm, rank, world): comm is the address of the caller's ncclComm_t. Planned for sm_89 so that
    # no GPU loads the plan here (loading checks the communicator, which these tests do not make).
    g = rime.Graph.from_json(example("fp8_decode_gqa"))
    text = rime.explain(g, arch="sm_90a", sms=132, context_parallel=(0, 1, 2))
    assert "context   parallel: rank 1 of 2, K/V sharded by sequence" in text
    assert rime.explain(g, arch="sm_90a", sms=132, json=True, context_parallel=(0, 1, 2))["facts"][
        "context_parallel"] == {"rank": 1, "world": 2}
    p = rime.plan(g, arch="sm_89", sms=128, context_parallel=(0, 1, 2))
    assert "context   parallel: rank 1 of 2" in p.explain()
    with pytest.raises(rime.InvalidArgumentError, match="rank 2 of world 2"):
        rime.explain(g, arch="sm_90a", sms=132, context_parallel=(0, 2, 2))
    prefill = rime.Graph.from_json(example("bf16_causal_sink"))
    with pytest.raises(rime.NotSupportedError, match="needs the keys' global positions"):
        rime.explain(prefill, arch="sm_90a", sms=132, context_parallel=(0, 0, 2))


def test_ring_plan_plans_a_ranks_part_of_the_prefill_ring_and_refuses_what_it_cannot_serve():
    # The B4 H32 S4096 causal prefill as rank 1's shard of a ring of 2: its two chunks of 2048 rows are chunks 1 and
    # 2 of the sequence's 4. comm 0: planned without loading (loading checks the communicator).
    g = rime.Graph.from_json((ROOT / "tools/bench/graphs/bf16_b4_h32_s4096_d128_causal.json").read_text())
    ring = rime.ring_plan(g, 0, 1, 2, arch="sm_90a", sms=132)
    assert isinstance(ring, rime.RingPlan)
    text = ring.explain()
    assert "rank 1 of 2: Q, K and V chunks 1 and 2 of the sequence's 4 (2048 rows each, 8192 in all)" in text
    assert "step 0 (K/V of rank 1): Q1 x KV1 (diagonal) Q2 x KV1+KV2 (diagonal)" in text
    assert "step 1 (K/V of rank 0): Q1 x KV0 Q2 x KV0" in text
    assert not ring.prepared
    passes = ring.pass_plans
    assert len(passes) == 3  # step 0: one chunk and two; step 1: one chunk in full
    assert all(p.split_kv == 1 for p in passes)
    assert ring.workspace_size >= 2 * passes[0].workspace_size
    with pytest.raises(rime.InvalidArgumentError, match="rank 2 of world 2"):
        rime.ring_plan(g, 0, 2, 2, arch="sm_90a", sms=132)
    with pytest.raises(rime.NotSupportedError, match="ring: Amax_S"):
        rime.ring_plan(rime.Graph.from_json(example("fp8_prefill")), 0, 0, 2, arch="sm_90a", sms=132)


def test_nccl_ids_for_communicators_made_here():
    # rime.torch.NcclCommunicator's two steps: the unique id one rank makes, and the init every rank runs. Without
    # NCCL the id is a CudaError naming where rime looked.
    try:
        uid = rime._rime._nccl_unique_id()
    except rime.CudaError as e:
        assert "RIME_NCCL_LIBRARY" in str(e)
        return
    assert isinstance(uid, bytes) and len(uid) == 128
    with pytest.raises(rime.InvalidArgumentError, match="an NCCL unique id is 128 bytes, not 3"):
        rime._rime._nccl_comm_init_rank(b"abc", 1, 0, 0)
