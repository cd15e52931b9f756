"""rime: scaled-dot-product-attention graphs compiled into cached GPU plans.

    import rime
    g = rime.Graph.from_json(open("examples/fp8_prefill.json").read())
    plan = rime.plan(g)                 # validate, match the rows, choose, NVRTC compile through the plan cache
    print(plan.explain())               # the text of `rime plan --explain`
    plan.run({"Q": q_ptr, ...}, workspace=ws_ptr, stream=stream)   # device pointers or objects with data_ptr()

`import rime` needs no torch; docs/python.md is the guide.
"""
from ._rime import Graph, Plan, __version__, cache_dir, cache_entries, explain, plan, set_cache_dir, validate
from .builder import GraphBuilder, Tensor
from .errors import (CacheCorruptError, CompileFailedError, CudaError, InternalError, InvalidArgumentError,
                     InvalidGraphError, InvalidJsonError, NotSupportedError, RimeError)

__all__ = ["Graph", "GraphBuilder", "Tensor", "Plan", "plan", "explain", "validate", "set_cache_dir", "cache_dir", "cache_entries",
           "RimeError", "InvalidGraphError", "InvalidJsonError", "NotSupportedError", "CompileFailedError",
           "CacheCorruptError", "CudaError", "InternalError", "InvalidArgumentError", "__version__"]
