"""The functions rime registers in transformers' two registries: the attention function every layer calls, and the
mask function the model calls once per forward (and per mask kind: full, sliding)."""
import weakref

import torch

from .. import torch as rime_torch
from ..errors import NotSupportedError
from ._sequences import bounds, check_one_run, is_fake, is_sequences, sequences

# transformers' mask patterns that starts and lengths plus the attention function's own attributes (is_causal,
# sliding_window) say: any other (chunked attention, packed sequences, a model's own and_mask / or_mask overlays)
# is refused by name.
_PATTERNS = {"causal_mask_function", "bidirectional_mask_function", "sliding_window_overlay.<locals>.inner_mask",
             "sliding_window_bidirectional_overlay.<locals>.inner_mask"}


def _pattern_names(fn):
    """The names of the mask functions that `fn` (transformers' mask pattern) combines."""
    name = getattr(fn, "__qualname__", repr(fn))
    if name.startswith("and_masks."):
        inner = next((c.cell_contents for c in fn.__closure__ or () if isinstance(c.cell_contents, tuple)), ())
        return [n for f in inner for n in _pattern_names(f)]
    return [name]


def mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None, attention_mask=None,
         device=None, **kwargs):
    """transformers' mask interface for "rime": the forward's per-sequence starts and lengths ([4, B, 1, 1] int32, see
    _sequences), or None when no sequence is padded and the cache hands exactly the tokens seen."""
    eager = not torch.compiler.is_compiling() and not is_fake(attention_mask)
    if eager and mask_function is not None:
        unknown = [n for n in _pattern_names(mask_function) if n not in _PATTERNS]
        if unknown:
            raise NotSupportedError(
                f"the model's mask combines {', '.join(unknown)}: rime serves causal and bidirectional attention, "
                "sliding windows and padding (chunked attention, packed sequences and a model's own mask overlays "
                "are not)")
    if device is None and attention_mask is not None:
        device = attention_mask.device
    if attention_mask is not None and eager and q_length > 1 and not (
            attention_mask.is_cuda and torch.cuda.is_current_stream_capturing()):
        # A prefill's mask is read on the host anyway: one with no padding at all then plans as no mask does (no
        # per-sequence bounds: the plain causal plan, three consumers where the padded one takes two, as sdpa's
        # mask function then hands no mask to its causal path). A decode keeps its lengths without a sync: they
        # let a growing cache reuse one plan per capacity.
        if check_one_run(attention_mask):
            attention_mask = None
    return sequences(batch_size, q_length, kv_length, q_offset, attention_mask, device)


# ---- the attention function ----------------------------------------------------------------------------------

# rime.transformers.calls(): a function that records each call of the operator (while a fake forward runs), else None.
recorder = None

# id of a sink Parameter -> (a weak reference to it, its version, its float32 copy); the entry goes with the parameter.
# (Keyed by id: a tensor's == is elementwise, so tensors cannot be dictionary keys.)
_sinks = {}


def _sink(s_aux):
    """gpt-oss's sinks (a Parameter of one logit per q head in the model's dtype) as the float32 [H_q] the operator
    takes: converted once per version of the parameter, not per call (traced, the conversion is part of the graph)."""
    if s_aux is None or s_aux.dtype == torch.float32 and s_aux.is_contiguous():
        return s_aux
    if torch.compiler.is_compiling() or not isinstance(s_aux, torch.nn.Parameter):
        return s_aux.float().contiguous()
    key = id(s_aux)
    held = _sinks.get(key)
    if held is None or held[0]() is not s_aux or held[1] != s_aux._version:
        ref = weakref.ref(s_aux, lambda _, key=key: _sinks.pop(key, None))
        held = _sinks[key] = (ref, s_aux._version, s_aux.detach().float().contiguous())
    return held[2]


def describe(module, query, key, window, softcap, sink):
    """The layer as its model's config names it, for a refusal."""
    config = getattr(module, "config", None)
    name = type(module).__name__
    layer = getattr(module, "layer_idx", None)
    fields = [f"head_dim {query.shape[-1]}" + (f" (V {key.shape[-1]})" if key.shape[-1] != query.shape[-1] else ""),
              f"num_attention_heads {query.shape[1]}", f"num_key_value_heads {key.shape[1]}",
              f"dtype {str(query.dtype).replace('torch.', '')}"]
    if window:
        fields.append(f"sliding_window {window}")
    if softcap:
        fields.append(f"attn_logit_softcapping {softcap}")
    if sink is not None:
        fields.append("sinks")
    where = f"{name}" + (f" (layer {layer})" if layer is not None else "")
    model = f"{type(config).__name__}: " if config is not None else ""
    return f"{model}{where}, {', '.join(fields)}"


def _refuse(module, query, key, dropout, window, softcap, sink, what):
    raise NotSupportedError(f"{describe(module, query, key, window, softcap, sink)}: {what}")


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention interface for "rime": query [B, H_q, S_q, D], key / value [B, H_kv, S_kv, D] (not
    repeated to H_q) as they come, read through strides (no copy); returns ([B, S_q, H_q, D_v], None). A decode step
    binds on the host (docs/perf.md, "transformers generate"), so the call makes as few torch ops as it can: three
    views, the output's allocation and the operator (its `_out` form, which allocates no empty LSE)."""
    window = kwargs.get("sliding_window") or None
    softcap = kwargs.get("softcap") or None
    s_aux = kwargs.get("s_aux")
    if (query.dtype not in _SERVED or dropout or kwargs.get("output_attentions") or
            (torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad))):
        _refuse_inputs(module, query, key, dropout, window, softcap, s_aux, kwargs)
    causal = kwargs.get("is_causal")
    if causal is None:
        causal = getattr(module, "is_causal", True)
    seq_bounds = None
    if attention_mask is not None:
        if not is_sequences(attention_mask):
            _refuse(module, query, key, dropout, window, softcap, s_aux,
                    f"attention_mask of shape {tuple(attention_mask.shape)} and dtype {attention_mask.dtype}: rime "
                    "serves the padding that its own mask function (registered with the backend) describes, not a "
                    "prepared mask")
        seq_bounds = bounds(attention_mask)
    B, H_q, S_q, _ = query.shape
    out = query.new_empty((B, S_q, H_q, value.shape[3]))
    call = dict(q=query.transpose(1, 2), k=key.transpose(1, 2), v=value.transpose(1, 2), out=out, sink=_sink(s_aux),
                seq_bounds=seq_bounds, causal=bool(causal), window_left=int(window) if window else -1,
                softmax_scale=scaling, softcap=softcap)
    if recorder is not None:
        recorder(module, query, call)
    try:
        rime_torch.attention_out(**call)
    except NotSupportedError as e:
        raise NotSupportedError(f"{describe(module, query, key, window, softcap, s_aux)}: no rime plan serves this "
                                f"layer: {e.message}") from None
    return out, None


_SERVED = (torch.bfloat16, torch.float16)


def _refuse_inputs(module, query, key, dropout, window, softcap, s_aux, kwargs):
    """Refuses what the attention function does not serve, by name: the first of the inputs' dtype, dropout,
    output_attentions and autograd that it meets."""
    if query.dtype not in _SERVED:
        _refuse(module, query, key, dropout, window, softcap, s_aux,
                f"activations in {query.dtype}: rime serves bfloat16 and float16 (load the model with "
                "dtype=torch.bfloat16)")
    if dropout:
        _refuse(module, query, key, dropout, window, softcap, s_aux,
                f"dropout {dropout} (config.attention_dropout, in training mode): rime serves inference; call "
                "model.eval()")
    if kwargs.get("output_attentions"):
        _refuse(module, query, key, dropout, window, softcap, s_aux,
                "output_attentions: rime never forms the attention weights; use attn_implementation='eager' for them")
    _refuse(module, query, key, dropout, window, softcap, s_aux,
            "autograd: rime has no backward pass; run the model under torch.no_grad() or torch.inference_mode() "
            "(generate does)")
