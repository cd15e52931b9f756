"""The torch layer: rime plans as torch operators, `torch.ops.rime.*`, with fake kernels, so that torch.compile traces
them without a graph break and CUDA graphs capture them.

    import rime.torch                      # registers the operators (needs torch; `import rime` alone does not)
    out, lse = torch.ops.rime.attention(q, k, v, causal=True)                     # q [B, S_q, H_q, D] BF16 / FP16
    out, _ = torch.ops.rime.attention(q8, k8, v8, dq, dk, dv, out_dtype=torch.bfloat16)   # FP8 with device descales
    torch.ops.rime.paged_attention_out(q, k_cache, v_cache, block_table, seq_lens, out=out)  # vLLM's pattern

Operators (each functional form allocates its outputs; each `_out` form writes into the caller's and returns
nothing):
- attention / attention_out: dense Q [B, S_q, H_q, D_qk], K [B, S_kv, H_kv, D_qk], V [B, S_kv, H_kv, D_v] (any
  strides with a unit last one: views such as q.transpose(1, 2) of a [B, H, S, D] tensor are taken as they are);
  optional int32 [B] seq_lens_q / seq_lens_k (a padded batch, a static cache's filled part) and seq_starts_q /
  seq_starts_k (left padding), or all four as the rows of one int32 [4, B] seq_bounds (starts_q, lens_q, starts_k,
  lens_k: one tensor for a call to read instead of four, as rime.transformers passes them).
- attention_varlen / attention_varlen_out: ragged batches, Q [T_q, H_q, D], K and V [T_kv, H_kv, D] with int32
  cu_seqlens_q / cu_seqlens_k [B + 1] (FlashAttention's varlen form).
- paged_attention / paged_attention_out: K and V caches [num_pages, page_size, H_kv, D] (vLLM's NHD; an HND cache
  [num_pages, H_kv, page_size, D] is passed as cache.transpose(1, 2), a view) read through block_table [B, max_pages]
  int32 (vLLM's block_table, FA3's page_table) and seq_lens [B] int32; Q [B, S_q, H_q, D], S_q 1..8 for decode.
- attention_block_scaled / attention_block_scaled_out: FP8 Q, K, V to a block-scaled O, returned as (codes, sf_o):
  NVFP4 (uint8 codes [B, S_q, H_q, D_v / 2], two E2M1 per byte, low nibble first; float8_e4m3fn scales) or MXFP8
  (float8_e4m3fn codes [B, S_q, H_q, D_v]; float8_e8m0fnu scales), sf_o in the F8_128x4 order (SPEC section 5) as
  per-(b, h) planes [B, H_q, R, C] or token-major [B, R, H_q, C] (R = S_q rounded up to 128).

FP8 inputs (float8_e4m3fn / float8_e5m2) take descale_q / descale_k / descale_v as one-element float32 device tensors
(never Python floats: a CUDA-graph replay reads their current values); a BF16 / FP16 Q over an FP8 K/V cache takes
descale_k / descale_v. scale_o scales an FP8 O. causal is bottom-right aligned (the last query sees the last key, as
FlashAttention and vLLM align it); window_left w keeps the w keys up to and including the diagonal (FlashAttention's
window_size=(w - 1, 0)). softmax_scale defaults to 1 / sqrt(D_qk). softcap c caps each logit to c * tanh(s / c).
q_quantization="e4m3_per_row" (a BF16 / FP16 Q over FP8 K/V only) rounds each Q row to E4M3 on its own power-of-two
scale before Q.K^T, as FlashAttention 3 quantizes Q: the FP8 kernel's speed for about 2^-4 of each value
(docs/graph-json.md, "q_quantization").

How the operators are made: python/rime/torch/_families.py holds one table per family, from which _family.py
generates the schemas, the CUDA and fake kernels and warmup's binding; _plans.py keeps the plans and launches them.

Plans are made per shape class (dtypes, shapes, strides, attributes, device) on first use, compiled through the plan
cache shared with the CLI, and kept; a shape first met while the stream captures a CUDA graph raises
PlanNotReadyError naming it (planning may compile): warm up first, with warmup(op, *args) or one eager call. The
operators never copy, cast, synchronize or make a tensor contiguous; an unsupported layout or dtype raises the
library's error naming the tensor.
"""

import torch

from .. import _rime
from ..errors import InvalidArgumentError
from . import _plans
from ._families import FAMILIES
from ._plans import clear_plans, plan_count

__all__ = ["warmup", "graph", "plan_count", "clear_plans", "attention", "attention_out", "attention_varlen",
           "attention_varlen_out", "paged_attention", "paged_attention_out", "attention_block_scaled",
           "attention_block_scaled_out", "NcclCommunicator"]

# ---- registration: each family's two operators, generated from its table ------------------------------------------

_NAMESPACE = dict(call_key=_plans.call_key, plans=_plans.plans, plan_call=_plans.plan_call, launch=_plans.launch,
                  check=_plans.check)
_FAMILY_OF = {}  # operator name -> (family, out_form)
_KERNELS = {}    # operator name -> its CUDA kernel (a Python function with the schema's signature)

# Library + impl + register_fake (vLLM's direct registration: less dispatch overhead than torch.library.custom_op).
_lib = torch.library.Library("rime", "DEF")
for _family in FAMILIES:
    for _out_form, _name in enumerate(_family.ops()):
        _FAMILY_OF[_name] = (_family, bool(_out_form))
        _KERNELS[_name] = _family.kernel(_out_form, False, _NAMESPACE)
        _lib.define(_family.schema(_out_form))
        _lib.impl(_name, _KERNELS[_name], "CUDA")
        torch.library.register_fake(f"rime::{_name}", _family.kernel(_out_form, True, _NAMESPACE), lib=_lib)


# The shape class of a call (the operator and its values that are not tensors, then every tensor's shape, strides,
# dtype and device), built in C++.
_key = _plans.call_key


# ---- eager fast path -------------------------------------------------------------------------------------------

def _direct(name):
    """rime.torch.<name>: torch.ops.rime.<name>, except that an eager call on plain CUDA tensors runs the operator's
    kernel without torch's dispatcher (about 2 us of a call's host cost). Traced (torch.compile), on fake or meta
    tensors, or under any tensor subclass, it is the operator itself."""
    op = getattr(torch.ops.rime, name)
    impl = _KERNELS[name]

    def call(*args, **kwargs):
        q = args[0] if args else kwargs["q"]
        if type(q) is torch.Tensor and q.is_cuda and not torch.compiler.is_compiling():
            return impl(*args, **kwargs)
        return op(*args, **kwargs)

    family, out_form = _FAMILY_OF[name]
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"torch.ops.rime.{name}, called directly in eager mode: {family.schema(out_form)}"
    return call


attention = _direct("attention")
attention_out = _direct("attention_out")
attention_varlen = _direct("attention_varlen")
attention_varlen_out = _direct("attention_varlen_out")
paged_attention = _direct("paged_attention")
paged_attention_out = _direct("paged_attention_out")
attention_block_scaled = _direct("attention_block_scaled")
attention_block_scaled_out = _direct("attention_block_scaled_out")


# ---- warmup ------------------------------------------------------------------------------------------------------

def _bind(what, op, args, kwargs):
    """(family, operator name, the call's values) of `op` called with these arguments, outputs allocated (on the
    inputs' device, meta included) where the functional form would."""
    name = op if isinstance(op, str) else getattr(op, "_qualified_op_name", None) or getattr(op, "name", str)()
    name = name.split("::")[-1].split(".")[0]
    if name not in _FAMILY_OF:
        raise InvalidArgumentError(f"{what}: {op!r} is not an operator of torch.ops.rime ({', '.join(_FAMILY_OF)})")
    family, out_form = _FAMILY_OF[name]
    params = [p for p in family.parameters(out_form) if p is not None]
    positional = [p for p in params if p in family.inputs or p in family.optional or (out_form and p in family.outputs)]
    if len(args) > len(positional):
        raise InvalidArgumentError(f"{what}: {name} takes {len(positional)} positional arguments, not {len(args)}")
    b = {p.name: value for p, value in zip(positional, args)}
    for k in kwargs:
        if k in b or k not in {p.name for p in params}:
            raise InvalidArgumentError(f"{what}: {name} has no argument {k!r}, or it was given twice")
    b.update(kwargs)
    for p in params:
        if p.name not in b:
            if p.default_text is None:
                raise InvalidArgumentError(f"{what}: {name} needs its argument {p.name}")
            b[p.name] = p.default
    if not out_form:
        family.check(name, family.call(tuple(b.get(n) for n in family.names)))  # before allocate indexes the dims
        b.update(zip(family.output_names, family.allocate(*(b[n] for n in family.allocate_names))))
    return family, name, tuple(b[n] for n in family.names)


def warmup(op, *args, device=None, arch=None, **kwargs):
    """Makes the plan of `op` for these arguments' shape class without running it (compiling what the plan cache
    lacks, logged), so that a later call, also one captured in a CUDA graph, finds it. `op` is an operator of
    torch.ops.rime or its name; the arguments are the operator's, as CUDA tensors or as meta tensors of the same
    shapes, strides and dtypes (then `device`, default the current CUDA device, is the GPU to plan for). With `arch`
    ('sm_90a'), it compiles that arch's kernels into the plan cache without a GPU (`rime cache warm` for the
    operators' shapes) and keeps no plan. Returns the rime Plan.

        for B in (1, 2, 4, 8, 16, 32):        # a decode server's batch sizes, before capturing its CUDA graphs
            rime.torch.warmup(torch.ops.rime.paged_attention_out, q[:B], k_cache, v_cache, block_table[:B],
                              seq_lens[:B], out[:B])
    """
    family, name, values = _bind("warmup", op, args, kwargs)
    q = values[family.names.index("q")]
    if arch is not None:
        dev = None
    elif q.device.type == "cuda":
        dev = q.get_device()
    elif device is None:
        dev = torch.cuda.current_device()
    else:
        dev = torch.device(device).index or 0 if not isinstance(device, int) else device
    c = family.call(values)
    key = None if arch is not None else _plans.call_key(family.head(name, c), family.tensors(c), dev, family.kv)
    e = _plans.plans.get(key) if key is not None else None
    if e is None:
        e = _plans.plan_call(family, name, key, values, device=dev, arch=arch)
    return e.plan


def graph(op, *args, **kwargs):
    """The rime Graph that a call of `op` with these arguments (CUDA or meta tensors) plans, checked as the
    operator checks it, without planning: for rime.explain(graph, arch="sm_90a") on a machine without a GPU."""
    family, name, values = _bind("graph", op, args, kwargs)
    c = family.call(values)
    family.check(name, c)
    c.kv_capacity = _rime._kv_capacity(family.tensors(c), family.kv) if family.kv else 0
    return family.graph(name, c, None)[0]


# ---- context parallelism: an NCCL communicator over a torch.distributed group -------------------------------------

class NcclCommunicator:
    """An NCCL communicator over the ranks of a torch.distributed group, for rime.plan(..., context_parallel=(comm.ptr,
    comm.rank, comm.world)) and rime.ring_plan(shard, comm.ptr, comm.rank, comm.world) (docs/context-parallel.md).

        comm = rime.torch.NcclCommunicator(group)    # every rank of the group, together: the init is collective
        ring = rime.ring_plan(shard, comm.ptr, comm.rank, comm.world)
        ...
        comm.close()                                 # or `with rime.torch.NcclCommunicator(group) as comm:`

    torch.distributed exposes no group's own communicator, so this makes one of rime's, as vLLM's NCCL wrapper does:
    the group's first rank makes NCCL's unique id, torch.distributed broadcasts it over the group (any backend), and
    every rank joins on its GPU (`device`: default torch.cuda.current_device()).
    """

    def __init__(self, group=None, device=None):
        import torch.distributed as dist
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        if device is None:
            self.device = torch.cuda.current_device()
        elif isinstance(device, int):
            self.device = device
        else:
            self.device = torch.device(device).index or 0
        first = dist.get_global_rank(group, 0) if group is not None else 0
        box = [_rime._nccl_unique_id() if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=first, group=group)
        self.ptr = _rime._nccl_comm_init_rank(box[0], self.world, self.rank, self.device)

    def close(self):
        if self.ptr:
            _rime._nccl_comm_destroy(self.ptr)
            self.ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
