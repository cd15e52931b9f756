"""Building graphs in Python: tensors and one sdpa op, written as the graph document (docs/graph-json.md) that
rime.Graph.from_json validates. Every role and attribute of the format has a keyword here, under its JSON name.

    b = rime.GraphBuilder("decode")
    q = b.tensor("Q", [8, 32, 1, 128], "FP8_E4M3")
    ...
    graph = b.sdpa_fp8(q=q, k=k, v=v, o=o, descale_q=dq, ..., causal=True, alignment="bottom_right")
"""
import json

from ._rime import Graph

_INPUTS = ("Q", "K", "V", "descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o", "sink",
           "seq_len_q", "seq_len_kv", "seq_start_q", "seq_start_kv", "SF_Q", "SF_K", "SF_V", "page_table",
           "cu_seqlens_q", "cu_seqlens_kv")
_OUTPUTS = ("O", "Stats", "Amax_S", "Amax_O", "sf_o")
_ATTRIBUTES = ("attn_scale", "logit_softcap", "q_quantization", "generate_stats", "stats_log2", "causal", "alignment",
               "window_left", "band_right", "padding_mask", "max_seqlen_q", "max_seqlen_kv")
_KNOBS = ("split_kv", "tile")
# Keyword spellings of the roles (Python names are lower case): q -> Q, sf_q -> SF_Q, amax_o -> Amax_O.
_ROLE_OF = {r.lower(): r for r in _INPUTS + _OUTPUTS}


class Tensor:
    """A tensor of a GraphBuilder: its uid is what Plan.run binds a buffer to (or its name)."""

    def __init__(self, name, uid, dims, strides, dtype, output):
        self.name, self.uid, self.dims, self.strides, self.dtype, self.output = name, uid, dims, strides, dtype, output

    def to_dict(self):
        d = {"name": self.name, "uid": self.uid, "dims": list(self.dims), "dtype": self.dtype}
        if self.strides is not None:
            d["strides"] = list(self.strides)
        if self.output:
            d["output"] = True
        return d


class GraphBuilder:
    def __init__(self, name="graph"):
        self.name = name
        self._tensors = []

    def tensor(self, name, dims, dtype, strides=None, output=False, uid=None):
        """A tensor: logical dims, a dtype name (FP8_E4M3, BF16, ...), strides in elements (default packed)."""
        uid = uid if uid is not None else len(self._tensors) + 1
        t = Tensor(name, uid, dims, strides, dtype, output)
        self._tensors.append(t)
        return t

    def output(self, name, dims, dtype, strides=None, uid=None):
        return self.tensor(name, dims, dtype, strides, output=True, uid=uid)

    def document(self, kind, op_name="attn", **fields):
        """The graph document of one op of `kind` (sdpa, sdpa_fp8, sdpa_mxfp8) with these roles, attributes and
        knobs (keywords as in the JSON format; roles in lower case: q, k, v, sf_q, amax_o, ...)."""
        op = {"kind": kind, "name": op_name, "inputs": {}, "outputs": {}}
        attributes, knobs = {}, {}
        for key, value in fields.items():
            if value is None:
                continue
            if key in _ROLE_OF:
                role = _ROLE_OF[key]
                side = "outputs" if role in _OUTPUTS else "inputs"
                op[side][role] = value.uid if isinstance(value, Tensor) else value
            elif key in _ATTRIBUTES:
                attributes[key] = value
            elif key in _KNOBS:
                knobs[key] = {"q": value[0], "kv": value[1]} if key == "tile" and not isinstance(value, dict) else value
            else:
                raise TypeError(f"{kind}(): unknown keyword '{key}' (roles: {', '.join(sorted(_ROLE_OF))}; "
                                f"attributes: {', '.join(_ATTRIBUTES)}; knobs: {', '.join(_KNOBS)})")
        if "Stats" in op["outputs"] and "generate_stats" not in attributes:
            attributes["generate_stats"] = True
        if attributes:
            op["attributes"] = attributes
        if knobs:
            op["knobs"] = knobs
        return {"rime_graph": 1, "name": self.name, "tensors": [t.to_dict() for t in self._tensors], "op": op}

    def build(self, kind, **fields):
        """The validated Graph (InvalidGraphError / InvalidJsonError name the field at fault)."""
        return Graph.from_json(json.dumps(self.document(kind, **fields)))

    def sdpa(self, **fields):
        return self.build("sdpa", **fields)

    def sdpa_fp8(self, **fields):
        return self.build("sdpa_fp8", **fields)

    def sdpa_mxfp8(self, **fields):
        return self.build("sdpa_mxfp8", **fields)
