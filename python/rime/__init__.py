"""rime: scaled-dot-product-attention graphs compiled into cached GPU plans.

    import rime
    g = rime.Graph.from_json(open("examples/fp8_prefill.json").read())
    plan = rime.plan(g)                 # validate, match the rows, choose, NVRTC compile through the plan cache
    print(plan.explain())               # the text of `rime plan --explain`
    plan.run({"Q": q, "K": k, ...}, workspace=ws, stream=stream)   # tensors (checked) or device pointers

`import rime` needs no torch; `rime.torch` is the torch layer (torch.ops.rime.*). docs/python.md is the guide.
"""
import atexit as _atexit
import os as _os


def _nvrtc_from_wheel():
    """NVRTC of the `nvidia-cuda-nvrtc` wheel, when one is installed and RIME_NVRTC_LIBRARY is not set: rime opens
    NVRTC at run time (the toolkit's is found by the loader or in /usr/local/cuda), so a pip environment needs no
    toolkit."""
    if _os.environ.get("RIME_NVRTC_LIBRARY"):
        return
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "cuda_nvrtc/lib"):
            for name in ("libnvrtc.so.13", "libnvrtc.so.12"):
                path = _os.path.join(base, sub, name)
                if _os.path.isfile(path):
                    _os.environ["RIME_NVRTC_LIBRARY"] = path
                    return


_nvrtc_from_wheel()

from . import _rime
from ._rime import (Graph, Plan, RingPlan, __version__, cache_dir, explain, plan, ring_plan, set_cache_dir, tune,
                    validate)
from . import cache
from .builder import GraphBuilder, Tensor
from .errors import (CacheCorruptError, CompileFailedError, CudaError, InternalError, InvalidArgumentError,
                     InvalidGraphError, InvalidJsonError, NotSupportedError, PlanNotReadyError, RimeError)

# The library logs into logging.getLogger("rime") (each compile at INFO before it starts and with its time); at exit
# its lines go back to stderr, so that no thread calls into Python during the interpreter's teardown.
_atexit.register(_rime._stop_logging)


def cache_entries():
    """The plan cache's entries, as `rime cache ls --json` lists them (rime.cache.ls())."""
    return cache.ls()


def warmup(what, *args, device=None, **kwargs):
    """What a server calls before CUDA-graph capture, so that no plan is made while capturing: compiles what the plan
    cache does not hold, logged, and loads the kernels on `device` (None: the current GPU).

        rime.warmup([graph, ...])                                  # Graphs: their plans, returned
        rime.warmup(torch.ops.rime.paged_attention_out, *args)     # an operator and its arguments (rime.torch.warmup)
    """
    if isinstance(what, Graph):
        what = [what]
    if isinstance(what, (list, tuple)) and all(isinstance(g, Graph) for g in what):
        if args or kwargs:
            raise TypeError("warmup(graphs, device=None) takes no other arguments")
        return [plan(g, device=device) for g in what]
    from . import torch as rime_torch  # an operator of torch.ops.rime, or its name
    return rime_torch.warmup(what, *args, device=device, **kwargs)


__all__ = ["Graph", "GraphBuilder", "Tensor", "Plan", "plan", "RingPlan", "ring_plan", "explain", "tune", "validate",
           "warmup", "set_cache_dir", "cache_dir", "cache_entries", "cache",
           "RimeError", "InvalidGraphError", "InvalidJsonError", "NotSupportedError", "CompileFailedError",
           "CacheCorruptError", "CudaError", "InternalError", "InvalidArgumentError", "PlanNotReadyError",
           "__version__"]
