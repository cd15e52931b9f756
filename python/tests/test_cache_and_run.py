"""The core package without a GPU and without torch: the cache calls of `rime cache`, the log lines in Python's
logging, devices, and what Plan.run checks on a tensor before anything runs."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import rime
from conftest import ROOT, example

PLAN_ANY = "import rime, sys; g = rime.Graph.from_json(open(sys.argv[1]).read())"


def run_python(code, cache_dir, *args):
    env = {**os.environ, "RIME_CACHE_DIR": str(cache_dir)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                          text=True, env=env, check=True)


def test_cache_calls_do_what_the_cli_does(tmp_path):
    cache = tmp_path / "cache"
    out = run_python("""
        import json, rime, sys
        g = rime.Graph.from_json(open(sys.argv[1]).read())
        warmed = rime.cache.warm([g])
        entries = rime.cache.ls()
        first = rime.cache.show(entries[0]["key"][:8])
        stats = rime.cache.stats()
        verified = rime.cache.verify()
        kept = rime.cache.prune("1G")
        evicted = rime.cache.prune(0)
        print(json.dumps(dict(warmed=warmed, entries=entries, first=first, stats=stats, verified=verified,
                              kept=kept, evicted=evicted, cleared=rime.cache.clear(), after=rime.cache.ls())))
    """, cache, ROOT / "examples" / "fp8_decode_gqa.json")
    r = json.loads(out.stdout)
    assert [w["origin"] for w in r["warmed"]] == ["compiled", "compiled"]  # attention and combine
    assert {e["name"][:-17] for e in r["entries"]} == {"sdpa_sm90", "combine"}
    assert {e["name"][-16:] for e in r["entries"]} == {w["digest"] for w in r["warmed"]}
    assert len(r["entries"]) == 2 and all(e["valid"] for e in r["entries"])
    assert r["first"]["name"] == r["entries"][0]["name"]
    assert r["stats"]["entries"] == 2 and r["stats"]["invalid"] == 0 and r["stats"]["dir"] == str(cache)
    assert r["verified"]["checked"] == 2 and r["verified"]["quarantined"] == []
    assert r["kept"]["evicted"] == [] and r["kept"]["max_bytes"] == 1 << 30
    assert len(r["evicted"]["evicted"]) == 2
    assert r["cleared"] == 0 and r["after"] == []


def test_prune_names_a_bad_size():
    with pytest.raises(rime.InvalidArgumentError) as e:
        rime.cache.prune("1.5G")
    assert "max_bytes '1.5G'" in e.value.message


def test_four_processes_warming_one_graph_compile_each_kernel_once(tmp_path):
    cache = tmp_path / "cache"
    code = """
        import json, rime, sys
        g = rime.Graph.from_json(open(sys.argv[1]).read())
        print(json.dumps(rime.cache.warm([g], arch="sm_90a", sms=132)))
    """
    env = {**os.environ, "RIME_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(ROOT / "examples" / "fp8_prefill.json")],
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    origins = [json.loads(p.communicate()[0])[0]["origin"] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(origins) == ["compiled", "disk", "disk", "disk"], origins


def test_every_compile_is_logged_before_it_starts_and_with_its_time(tmp_path):
    out = run_python("""
        import logging, rime, sys
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s", stream=sys.stdout)
        g = rime.Graph.from_json(open(sys.argv[1]).read())
        print("planning")
        rime.plan(g, arch="sm_90a", sms=132)
    """, tmp_path / "cache", ROOT / "examples" / "bf16_causal_sink.json")
    lines = out.stdout.splitlines()
    assert lines[0] == "planning"
    assert lines[1].startswith("rime INFO compiling sdpa_sm90 [rime_dev::sdpa_sm90_fwd<") and "for sm_90a" in lines[1]
    assert lines[2].startswith("rime INFO compiled sdpa_sm90 [") and " ms for sm_90a" in lines[2]
    assert out.stderr == ""  # into logging, not onto stderr


def test_a_device_is_an_ordinal_a_cuda_name_or_a_torch_device():
    g = rime.Graph.from_json(example("fp8_prefill"))
    for bad in ("cpu", "cuda:x", 1.5):
        with pytest.raises(rime.InvalidArgumentError):
            rime.plan(g, device=bad)

    class Device:  # a torch.device's attributes
        type, index = "mps", 0
    with pytest.raises(rime.InvalidArgumentError) as e:
        rime.plan(g, device=Device())
    assert "'mps:0'" in e.value.message
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        has_driver = True
    except OSError:
        has_driver = False
    if not has_driver:
        with pytest.raises(rime.CudaError):  # a GPU was asked for by name: no falling back to the H200 defaults
            rime.plan(g, device="cuda:0")
    else:
        with pytest.raises(rime.InvalidArgumentError) as e:
            rime.plan(g, device=4096)
        assert "device 4096 does not exist" in e.value.message


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name


class FakeTensor:
    """What run() reads off a torch tensor, with no torch: data_ptr(), shape, stride(), dtype, get_device()."""
    dtypes = {}

    def __init__(self, shape, stride, dtype, device=0, ptr=1 << 20):
        self.shape, self._stride, self._device, self._ptr = tuple(shape), tuple(stride), device, ptr
        self.dtype = FakeTensor.dtypes.setdefault(dtype, FakeDtype(dtype))

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride

    def get_device(self):
        return self._device


def fp8_prefill_tensors(**change):
    # examples/fp8_prefill.json: Q, K, V [2, 8, 1024, 128] FP8 (BHSD), its scales and outputs
    doc = json.loads(example("fp8_prefill"))
    out = {}
    for i, t in enumerate(doc["tensors"]):
        dtype = {"FP8_E4M3": "torch.float8_e4m3fn", "FP32": "torch.float32", "BF16": "torch.bfloat16"}[t["dtype"]]
        out[t["name"]] = FakeTensor(t["dims"], t["strides"], dtype, ptr=(i + 1) << 24)
    out.update(change)
    return out


def test_run_checks_each_tensor_against_the_graph_and_names_both_values():
    g = rime.Graph.from_json(example("fp8_prefill"))
    p = rime.plan(g, arch="sm_90a", sms=132)
    q = g.tensors[0]
    dims, strides = q["dims"], q["strides"]
    show = lambda v: "[" + ", ".join(map(str, v)) + "]"
    cases = [
        (FakeTensor(dims, strides, "torch.bfloat16"),
         "dtype torch.bfloat16 differs from the graph's FP8_E4M3 (or raw bytes: uint8, int8)"),
        (FakeTensor(dims[:3] + [64], strides, "torch.float8_e4m3fn"),
         f"shape {show(dims[:3] + [64])} differs from the graph's {show(dims)}"),
        (FakeTensor(dims, [dims[1] * dims[2] * 128, 128, dims[1] * 128, 1], "torch.float8_e4m3fn"),  # BSHD
         f"strides {show([dims[1] * dims[2] * 128, 128, dims[1] * 128, 1])} differ from the graph's {show(strides)}"),
        (FakeTensor(dims, strides, "torch.float8_e4m3fn", -1),
         "the buffer is on a device other than CUDA"),
    ]
    for bad, message in cases:
        with pytest.raises(rime.InvalidArgumentError) as e:
            p.run(fp8_prefill_tensors(Q=bad))
        assert e.value.message.startswith("run(): Q: " + message), e.value.message
    with pytest.raises(rime.InvalidArgumentError, match=r"run\(\): Q.shape: 9 dims; rime tensors have at most 8"):
        p.run(fp8_prefill_tensors(Q=FakeTensor([1] * 9, [1] * 9, "torch.float8_e4m3fn")))
    with pytest.raises(rime.InvalidArgumentError, match="the graph has no tensor named 'q'"):
        p.run({"q": 0})
    with pytest.raises(rime.InvalidArgumentError, match="a key is neither a tensor name"):
        p.run({1.5: 0})
    # Raw bytes are an FP8 tensor's bytes; a [1] scale binds a [1, 1, 1, 1] one: past the checks, only the missing GPU.
    good = fp8_prefill_tensors(Q=FakeTensor(q["dims"], q["strides"], "torch.uint8"),
                               descale_q=FakeTensor([1], [1], "torch.float32"))
    if not p.prepared:
        with pytest.raises(rime.CudaError):
            p.run(good)


def test_run_pointers_takes_one_pointer_per_tensor_in_uid_order():
    p = rime.plan(rime.Graph.from_json(example("fp8_prefill")), arch="sm_90a", sms=132)
    assert p.uids == [t["uid"] for t in p.graph.tensors]
    with pytest.raises(rime.InvalidArgumentError) as e:
        p.run_pointers([1, 2, 3])
    assert "3 pointers for the graph's 13 tensors" in e.value.message


def test_tune_refuses_a_graph_that_pins_its_knobs_and_plans_take_use_tuned():
    doc = json.loads(example("fp8_decode_gqa"))
    doc["op"]["knobs"] = {"split_kv": 2}
    with pytest.raises(rime.InvalidArgumentError, match="pins split_kv or tile"):
        rime.tune(rime.Graph.from_json(json.dumps(doc)))
    g = rime.Graph.from_json(example("fp8_decode_gqa"))
    assert rime.plan(g, arch="sm_90a", sms=132, use_tuned=False).row == "sdpa_sm90_fp8"
    assert "rows:" in rime.explain(g, arch="sm_90a", use_tuned=False)
    assert isinstance(rime.cache.clear(tuned=True), int)
