"""An operator family as one parameter list: the schemas of its functional operator and its `_out` form, their CUDA
kernels, their fake kernels and warmup's binding are all generated from it, so that a new keyword is one entry of one
list (python/rime/torch/_families.py holds the four families).

The parameters of a family, in the `_out` form's order (the order of `Family.names`, every value of a call):
  inputs      required, positional (q, k, v, ...)
  outputs     the tensors the operator writes: arguments of the `_out` form (Tensor(a!) ...), allocated by the
              functional form, which returns them
  optional    positional with a default (descales, sink, ...)
  attributes  keyword-only (causal, window_left, softmax_scale, ...); with the inputs that are not tensors they
              make the head of the shape-class key
  allocating  keyword-only, functional form only: how it allocates its outputs (out_dtype, return_lse)
"""
import ast
import types

import torch

from ..errors import InvalidArgumentError
from ._plans import GraphOfCall

_QKV_DTYPES = (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2)


class Param:
    """One schema parameter, parsed from its schema text: "Tensor? sink=None", "int window_left=-1"."""
    __slots__ = ("type", "name", "default", "default_text")

    def __init__(self, text):
        decl, eq, default = text.partition("=")
        self.type, self.name = decl.split()
        self.default_text = default if eq else None
        self.default = ast.literal_eval(default) if eq else None

    @property
    def is_tensor(self):
        return self.type.startswith("Tensor")

    def schema(self, alias=None):
        """The parameter in a torch schema; `alias` marks an output the `_out` form writes (Tensor(a!))."""
        t = self.type if alias is None else self.type.replace("Tensor", f"Tensor({alias}!)", 1)
        return f"{t} {self.name}" + ("" if self.default_text is None else f"={self.default_text}")

    def python(self):
        return self.name if self.default_text is None else f"{self.name}={self.default!r}"


def _params(text):
    return [Param(p.strip()) for p in text.split(",") if p.strip()]


class Family:
    """An operator family (see the module's text). `layouts`: per tensor, the names of its dims; a name shared by
    several tensors must have one extent in a call (B, H_kv, D_qk, ...). `qkv`: the names of Q, K and V. `graph(g, c,
    device) -> (kind, fields)` builds the call's graph into g (a GraphOfCall); `allocate` and `result`: (function,
    names of the parameters it takes) for the functional form's outputs and its return value. `kv_capacity`: the
    names of Q, K, V and of the tensors that may hold the key lengths (seq_lens_k, seq_bounds) of a family that plans
    a cache's K/V for a capacity."""

    def __init__(self, name, *, inputs, outputs, optional, attributes, allocating, layouts, qkv, graph, allocate,
                 result, kv_capacity=None):
        self.name = name
        self.inputs, self.outputs, self.optional = _params(inputs), _params(outputs), _params(optional)
        self.attributes, self.allocating = _params(attributes), _params(allocating)
        canonical = self.inputs + self.outputs + self.optional + self.attributes
        self.names = tuple(p.name for p in canonical)
        self.tensor_names = tuple(p.name for p in canonical if p.is_tensor)
        self.scalar_names = tuple(p.name for p in canonical if not p.is_tensor)
        self.output_names = tuple(p.name for p in self.outputs)
        self.slot = {n: i for i, n in enumerate(self.tensor_names)}  # a tensor's index in the call's tensors
        self.layouts = {n: tuple(dims.split()) for n, dims in layouts.items()}
        self.qkv = qkv
        self.make_graph = graph
        self.allocate, self.allocate_names = allocate
        self.result, self.result_names = result
        # kv_capacity (q, k, v and the two tensors that may hold the key lengths): the family plans a cache's K/V for
        # a capacity (_rime._kv_capacity), and its key and binding carry their indices in the call's tensors.
        self.kv = tuple(self.slot[n] for n in kv_capacity) if kv_capacity else None

    def ops(self):
        """The operators' names: the functional one and the `_out` form."""
        return self.name, self.name + "_out"

    def parameters(self, out_form):
        """The parameters of a form in schema order, None standing for the keyword-only marker."""
        ps = list(self.inputs)
        if out_form:
            ps += self.outputs
        ps += self.optional
        ps.append(None)
        ps += self.attributes
        if not out_form:
            ps += self.allocating
        return ps

    def schema(self, out_form):
        aliases = {p.name: a for p, a in zip(self.outputs, "abcdefgh")} if out_form else {}
        args = ", ".join("*" if p is None else p.schema(aliases.get(p.name)) for p in self.parameters(out_form))
        returns = "()" if out_form else "(" + ", ".join("Tensor" for _ in self.outputs) + ")"
        return f"{self.ops()[out_form]}({args}) -> {returns}"

    def call(self, values):
        """A call's values (in the order of `names`) by name."""
        return types.SimpleNamespace(**dict(zip(self.names, values)))

    def tensors(self, c):
        return tuple(getattr(c, n) for n in self.tensor_names)

    def head(self, op, c):
        """The head of the shape-class key: the operator and the values that are not tensors."""
        return (op,) + tuple(getattr(c, n) for n in self.scalar_names)

    def check(self, op, c):
        """What the fake kernel and the real one both refuse before a graph is built, named by argument: a rank or
        a dim that disagrees with the family's layouts, Q, K, V of a type rime does not take, H_q not a multiple of
        H_kv. Symbolic sizes (torch.compile's dynamic shapes) are compared as torch compares them: with guards."""
        seen = {}
        for name, dims in self.layouts.items():
            t = getattr(c, name)
            if t is None:
                continue
            if t.dim() != len(dims):
                raise InvalidArgumentError(f"{name}: {t.dim()} dims {tuple(t.shape)}; {op} takes {name} as "
                                           f"[{', '.join(dims)}]")
            for i, (dim, extent) in enumerate(zip(dims, t.shape)):
                first = seen.setdefault(dim, (name, extent))
                if first[1] != extent:
                    raise InvalidArgumentError(f"{name}: dim {i} ({dim}) is {extent}, {first[0]}'s is {first[1]} "
                                               f"({op} takes {name} as [{', '.join(dims)}])")
        for name in self.qkv:
            t = getattr(c, name)
            if t.dtype not in _QKV_DTYPES:
                raise InvalidArgumentError(f"{name}: {t.dtype}; rime takes Q, K and V as bfloat16, float16, "
                                           "float8_e4m3fn or float8_e5m2")
        h_q, h_kv = seen.get("H_q"), seen.get("H_kv")
        if h_q and h_kv and h_kv[1] and h_q[1] % h_kv[1] != 0:
            raise InvalidArgumentError(f"{h_q[0]}: {h_q[1]} heads over {h_kv[0]}'s {h_kv[1]}: the query heads must be a "
                                       "multiple of the kv heads")

    def graph(self, op, c, device):
        """(Graph, slots, constants) of a call: the validated graph (InvalidGraphError names the field) and how the
        plan binds the call's tensors."""
        g = GraphOfCall(op, self.slot)
        kind, fields = self.make_graph(g, c, device)
        return g.build(kind, **fields), g.slots, g.keep

    def source(self, out_form, fake):
        """The Python source of one form's kernel (the CUDA kernel, or with `fake` the fake kernel), with the form's
        own signature: Python binds the arguments (0.13 us a call on a 2-core CPU machine), where binding them through
        inspect.Signature took 12.5 us, about an eager call's whole host cost (docs/python.md)."""
        op = self.ops()[out_form]
        signature = ", ".join("*" if p is None else p.python() for p in self.parameters(out_form))
        values = ", ".join(self.names) + ","
        lines = [f"def {op}{'_fake' if fake else ''}({signature}):"]
        if not out_form:
            # An IndexError of the allocation (a tensor of too few dims) becomes check()'s message naming the argument.
            unallocated = ", ".join("None" if n in self.output_names else n for n in self.names) + ","
            lines += ["    try:",
                      f"        {', '.join(self.output_names)}, = allocate({', '.join(self.allocate_names)})",
                      "    except IndexError:",
                      f"        family.check({op!r}, family.call(({unallocated})))",
                      "        raise"]
        if fake:
            lines.append(f"    check(family, {op!r}, ({values}))")
        else:
            lines += [f"    tensors = ({', '.join(self.tensor_names)},)",
                      f"    key = call_key(({op!r}, {''.join(n + ', ' for n in self.scalar_names)}), tensors, None, "
                      f"{self.kv!r})",
                      "    e = plans.get(key)",
                      "    if e is None:",
                      f"        e = plan_call(family, {op!r}, key, ({values}))",
                      "    launch(e, tensors)"]
        if not out_form:
            lines.append(f"    return result({', '.join(self.result_names)})")
        return "\n".join(lines) + "\n"

    def kernel(self, out_form, fake, namespace):
        """One form's kernel, compiled from source() over `namespace` (the plan store's functions)."""
        scope = dict(namespace, family=self, allocate=self.allocate, result=self.result)
        exec(compile(self.source(out_form, fake), f"<rime.torch {self.ops()[out_form]}>", "exec"), scope)
        return scope[self.ops()[out_form] + ("_fake" if fake else "")]
