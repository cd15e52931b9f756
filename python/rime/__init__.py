"""rime: scaled-dot-product-attention graphs compiled into cached GPU plans.

    import rime
    g = rime.Graph.from_json(open("examples/fp8_prefill.json").read())
    plan = rime.plan(g)                 # validate, match the rows, choose, NVRTC compile through the plan cache
    print(plan.explain())               # the text of `rime plan --explain`
    plan.run({"Q": q_ptr, ...}, workspace=ws_ptr, stream=stream)   # device pointers or objects with data_ptr()

`import rime` needs no torch; docs/python.md is the guide.
"""
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

from ._rime import Graph, Plan, __version__, cache_dir, cache_entries, explain, plan, set_cache_dir, validate
from .builder import GraphBuilder, Tensor
from .errors import (CacheCorruptError, CompileFailedError, CudaError, InternalError, InvalidArgumentError,
                     InvalidGraphError, InvalidJsonError, NotSupportedError, RimeError)

__all__ = ["Graph", "GraphBuilder", "Tensor", "Plan", "plan", "explain", "validate", "set_cache_dir", "cache_dir",
           "cache_entries",
           "RimeError", "InvalidGraphError", "InvalidJsonError", "NotSupportedError", "CompileFailedError",
           "CacheCorruptError", "CudaError", "InternalError", "InvalidArgumentError", "__version__"]
