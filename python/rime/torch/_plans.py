"""The operators' plans per shape class, how a call's tensors bind to a plan, and the launch.

A shape class is the operator, its values that are not tensors, and every tensor's shape, strides, dtype and device
(the key is built in C++: _rime._call_key). Its plan is made on first use (validate, match, choose, compile through
the plan cache, load) and kept; later calls look it up and launch.
"""
import sys
import threading
from collections import OrderedDict

import torch

from .. import _rime
from ..builder import GraphBuilder
from ..errors import InvalidArgumentError, PlanNotReadyError

_RIME_DTYPE = {
    torch.float32: "FP32", torch.float16: "FP16", torch.bfloat16: "BF16", torch.float8_e4m3fn: "FP8_E4M3",
    torch.float8_e5m2: "FP8_E5M2", torch.int32: "INT32", torch.int64: "INT64",
}

# key -> Entry. Bounded: a server's shape classes are few, but a ragged prefill's token count makes one per batch; the
# least recently made go first.
MAX_PLANS = 4096
plans = OrderedDict()
_plans_lock = threading.Lock()
_constants = {}  # (device, kind, value, n) -> tensor the plans bind where the caller gave none (descale_s, seq_len_q)
_validated = set()  # keys of the shape classes the fake kernels checked (on device -1: validity is device-blind)
call_key = _rime._call_key


class Entry:
    """A plan and how a call's tensors bind to its graph (`binding`: per graph tensor in declaration order, the index
    of the call's tensor and a byte offset into it, or -1 and a constant's pointer). `workspaces`: the plan's
    workspace per stream, for eager calls (launch)."""
    __slots__ = ("plan", "binding", "device", "workspace", "keep", "workspaces")

    def __init__(self, plan, slots, keep, kv=None):
        self.plan = plan
        # A warmup for an arch binds nothing (slots None), even where the GPU of that arch loaded the plan. `kv`: the
        # indices of K and V in a call's tensors, for a plan made for a K/V capacity (each run passes their extent).
        self.binding = _rime._CallBinding(plan, slots, kv) if slots is not None and plan.prepared else None
        self.device = plan.device
        self.workspace = plan.workspace_size
        self.keep = keep  # the constant tensors the slots point into
        self.workspaces = {}


def constant(device, kind, value, n=1):
    """A constant tensor on GPU `device` (None when planning for an arch without a GPU: nothing to bind)."""
    if device is None:
        return None
    key = (device, kind, value, n)
    t = _constants.get(key)
    if t is None:
        dtype = torch.float32 if kind == "scale" else torch.int32
        t = _constants[key] = torch.full((n,), value, dtype=dtype, device=torch.device("cuda", device))
    return t


class GraphOfCall:
    """A GraphBuilder plus the binding of its tensors to the call's tensors (by the family's slot names) or to
    constants."""

    def __init__(self, name, slot):
        self.b = GraphBuilder(name)
        self.slot = slot
        self.slots = []
        self.keep = []
        self.roles = {}

    def tensor(self, role, name, dims, strides, dtype, output=False, offset=0):
        """The call's tensor `name` as the graph's `role`, with the graph's logical dims and strides and its torch
        dtype's rime type; `offset`: bytes past its data_ptr() (a row of seq_bounds)."""
        d = _RIME_DTYPE.get(dtype)
        if d is None:
            raise InvalidArgumentError(f"{name}: dtype {dtype} is not one rime takes (float32, float16, bfloat16, "
                                       "float8_e4m3fn, float8_e5m2, int32)")
        return self.raw(role, name, dims, strides, d, output, offset)

    def raw(self, role, name, dims, strides, rime_dtype, output=False, offset=0):
        """The same with the graph's dtype named (FP4 codes held as bytes, E8M0 scales)."""
        t = self.b.tensor(role, list(dims), rime_dtype, strides=list(strides), output=output)
        self.slots.append((self.slot[name], offset))
        self.roles[role.lower()] = t
        return t

    def constant(self, role, tensor, dims, rime_dtype):
        t = self.b.tensor(role, list(dims), rime_dtype, strides=[1] * len(dims))
        self.slots.append((-1, 0 if tensor is None else tensor.data_ptr()))
        self.keep.append(tensor)
        self.roles[role.lower()] = t
        return t

    def scalar(self, role, name, value, device, given):
        """A one-element FP32 scale: the call's tensor `name` when given, else a constant of `value`."""
        if given:
            return self.tensor(role, name, [1, 1, 1, 1], [1, 1, 1, 1], torch.float32)
        return self.constant(role, constant(device, "scale", value), [1, 1, 1, 1], "FP32")

    def build(self, kind, **fields):
        return self.b.build(kind, **self.roles, **{k: v for k, v in fields.items() if v is not None})


def _describe(family, op, c):
    shapes = ", ".join(f"{p.name} {tuple(getattr(c, p.name).shape)}" for p in family.inputs if p.is_tensor)
    return f"{op} with {shapes}"


def plan_call(family, op, key, values, device=None, arch=None):
    """The plan of a shape class that has none yet. A call (device None) first checks that every tensor is on q's GPU:
    the key holds each tensor's device, so that a later call with the same key passed this check. A warmup names
    the device its meta tensors stand for; with `arch` (warmup without a GPU) it makes a plan for that arch, compiled
    into the plan cache and not kept."""
    c = family.call(values)
    family.check(op, c)
    c.kv_capacity = _rime._kv_capacity(family.tensors(c), family.kv) if family.kv else 0
    if arch is not None:
        graph, _, _ = family.graph(op, c, None)
        return Entry(_rime.plan(graph, arch=arch), None, [])
    if device is None:
        device = c.q.get_device()
        for n, t in zip(family.tensor_names, family.tensors(c)):
            if t is not None and t.get_device() != device:
                raise InvalidArgumentError(f"{n} is on {t.device}, q on cuda:{device}: every tensor of one call must "
                                           "be on one GPU")
    if torch.cuda.is_current_stream_capturing():
        raise PlanNotReadyError(
            f"torch.ops.rime.{_describe(family, op, c)}: no plan for this shape class, and the stream is capturing a "
            "CUDA graph, where a plan cannot be made (it may compile); call rime.torch.warmup(...) with these "
            "shapes, or the op once, before the capture")
    with _plans_lock:
        e = plans.get(key)
        if e is None:
            graph, slots, keep = family.graph(op, c, device)
            kv = (family.kv[1], family.kv[2]) if c.kv_capacity else None
            e = Entry(_rime.plan(graph, device=device), slots, keep, kv)
            plans[key] = e
            while len(plans) > MAX_PLANS:
                plans.popitem(last=False)
    return e


def _concrete(tensors):
    return all(type(d) is int for t in tensors if t is not None for d in (*t.shape, *t.stride()))


def check(family, op, values):
    """The fake kernel's check: what the real kernel refuses before it plans, with the same messages (Family.check,
    then the call's graph, validated by the library), once per shape class. Under symbolic shapes only Family.check
    runs: the graph needs concrete extents, and the real kernel validates it when it plans."""
    c = family.call(values)
    tensors = family.tensors(c)
    if not _concrete(tensors):
        family.check(op, c)
        return
    key = call_key(family.head(op, c), tensors, -1)
    if key in _validated:
        return
    family.check(op, c)
    family.graph(op, c, None)
    if len(_validated) >= MAX_PLANS:  # bounded as the plans are; a forgotten key is only checked again
        _validated.clear()
    _validated.add(key)


def _in_cudagraph_warmup(device, stream):
    """Whether this call runs in torch.compile's CUDA-graph warmup: cudagraph trees run a graph's first calls eagerly
    on their manager's stream, with every allocation of the thread routed to the graph's private pool, which may hold
    nothing past the run (torch/_inductor/cudagraph_trees.py clears cuBLAS's cached workspaces around it for the same
    reason). Read from torch's internals only when a workspace is not cached yet."""
    trees = sys.modules.get("torch._inductor.cudagraph_trees")
    if trees is None:
        return False
    manager = trees.get_manager(device, create_if_none_exists=False)
    return manager is not None and manager.stream.cuda_stream == stream


def launch(e, tensors):
    device = e.device
    stream = torch._C._cuda_getCurrentRawStream(device)
    ws = 0
    if e.workspace:
        # Eager calls on one stream run one after the other, so each (plan, stream) keeps one workspace: an allocation
        # per call cost several microseconds of a decode's host time. Under capture the workspace comes from the
        # caching allocator, hence from the graph's private pool: each captured graph owns its own. In
        # torch.compile's CUDA-graph warmup it is the call's own too: kept, it would outlive the run in the pool.
        capturing = torch._C._cuda_isCurrentStreamCapturing()
        buf = None if capturing else e.workspaces.get(stream)
        if buf is None:
            buf = torch.empty(e.workspace, dtype=torch.uint8, device=torch.device("cuda", device))
            if not capturing and not _in_cudagraph_warmup(device, stream):
                e.workspaces[stream] = buf
        ws = buf.data_ptr()
    e.binding.run(tensors, ws, stream)


def plan_count():
    """How many shape classes have a plan in this process."""
    return len(plans)


def clear_plans():
    """Forgets every plan made by the operators (their kernels stay in the plan cache)."""
    with _plans_lock:
        plans.clear()
