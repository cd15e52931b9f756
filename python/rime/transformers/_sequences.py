"""transformers' 2D padding mask as rime's per-sequence starts and lengths (SPEC section 2), computed on the device
with no host sync: what the mask function hands the attention function in place of a mask.

The sequences of one forward are a [4, B, 1, 1] int32 tensor, rows START_Q, LEN_Q, START_KV, LEN_KV: sequence b's
queries are rows [start_q, start_q + len_q) of the dense S_q axis and its keys positions [start_kv, start_kv + len_kv)
of the K/V tensors the layer's cache hands the attention function. Its [4, B] view (bounds()) is the operator's
seq_bounds, passed to torch.ops.rime.attention_out as it is: one tensor for each layer's call to read (shape,
strides, dtype, device and pointer) instead of four, on the host that a decode step binds on. Four dims, because
transformers hands a 4D mask back unchanged as "already prepared": generate makes the mask of a compileable cache (a
StaticCache) before the forward and passes it in as the attention_mask, and a 2D tensor would be read as a padding
mask again.

The mask m [B, L] (L = tokens seen + this forward's queries) lines up with the keys the attention function gets:
position p of m is key p of a cache that keeps every token (a DynamicCache's layer, a StaticCache's buffer, whose
positions past L are its unused tail), and m's last kv_length positions are the keys of a layer that keeps a
window (kv_length is what the cache's get_mask_sizes says). In either case the queries are m's last q_length
positions. Sequence b holds the positions where m is true, assumed one run [s, e): left padding (generate's), right
padding, both, or none. Then its keys are [s, e) and its queries those of m's last q_length positions inside
[s, e). With the per-sequence bottom-right shift len_kv - len_q, query i of the sequence sees its own position's
key and those before it, as transformers' causal mask does.
"""
import torch

from .. import _rime
from ..errors import NotSupportedError

START_Q, LEN_Q, START_KV, LEN_KV = range(4)


def is_fake(t):
    """Whether t is a fake or meta tensor (warmup's fake forward, a trace): one with no data to launch a kernel on."""
    return t is not None and (t.device.type == "meta" or type(t).__name__ == "FakeTensor")


def is_sequences(mask):
    """Whether an attention function's `attention_mask` is what sequences() made."""
    return (isinstance(mask, torch.Tensor) and mask.dtype == torch.int32 and mask.dim() == 4 and mask.shape[0] == 4
            and mask.shape[2] == 1 and mask.shape[3] == 1)


def bounds(mask):
    """The [4, B] view of what sequences() made (rows start_q, len_q, start_kv, len_kv; no copy): the operator's
    seq_bounds. In eager mode sequences() keeps it beside the tensor, so that each layer's call takes it without an
    op: a decode step binds on the host (docs/perf.md, "transformers generate")."""
    if not torch.compiler.is_compiling():
        kept = getattr(mask, "_rime_bounds", None)
        if kept is not None:
            return kept
    return mask[:, :, 0, 0]


def _made(stacked):
    """The [4, B, 1, 1] sequences of a [4, B] int32 tensor, the [4, B] kept beside it in eager mode (bounds())."""
    out = stacked.view(4, -1, 1, 1)
    if not torch.compiler.is_compiling():
        out._rime_bounds = stacked
    return out


def sequences(batch_size, q_length, kv_length, q_offset, attention_mask, device):
    """The [4, B, 1, 1] int32 sequences of a forward, or None when every sequence holds every position (no mask, and the
    cache hands exactly q_offset + q_length keys). q_offset: the tokens the cache held before this forward (an int,
    or a 0-dim tensor for a StaticCache)."""
    if attention_mask is None:
        if not isinstance(q_offset, torch.Tensor) and q_offset + q_length >= kv_length:
            return None
        # A static cache without a padding mask: every sequence holds positions [0, q_offset + q_length).
        if isinstance(q_offset, torch.Tensor):
            filled = torch.clamp(q_offset.to(device) + q_length, max=kv_length).to(torch.int32)
        else:
            filled = min(q_offset + q_length, kv_length)
        zeros = torch.zeros(batch_size, dtype=torch.int32, device=device)
        return _made(torch.stack((zeros, zeros + q_length, zeros, zeros + filled)))
    m = attention_mask
    if m.dim() != 2 or m.shape[0] != batch_size:
        raise NotSupportedError(f"attention_mask: shape {tuple(m.shape)}; rime serves transformers' 2D padding mask "
                                f"[batch {batch_size}, tokens], not a prepared 4D mask")
    if (m.is_cuda and m.stride(1) == 1 and q_length <= min(kv_length, m.shape[1]) and
            not torch.compiler.is_compiling() and not is_fake(m)):
        # Eager: one launch (rime::sequences_from_padding_mask) where the torch ops below take six, each a launch
        # on the host a decode step binds on (docs/perf.md, "transformers generate").
        out = torch.empty((4, batch_size), dtype=torch.int32, device=m.device)
        _rime._padding_mask_sequences(m.data_ptr(), m.element_size(), batch_size, m.shape[1], m.stride(0),
                                      m.device.index, q_length, min(kv_length, m.shape[1]), out.data_ptr(),
                                      torch.cuda.current_stream(m.device).cuda_stream)
        return _made(out)
    if m.shape[1] > kv_length:  # a layer that keeps a window of the tokens: the mask's last kv_length positions
        m = m[:, -kv_length:]
    if m.dtype == torch.bool:  # argmax takes no bool
        m = m.to(torch.int32)
    # The queries' run read from the mask's last q_length positions directly (one run a row: their count and first
    # true position are the queries' length and start), not derived from the sequence's bounds: nine ops a forward,
    # each costing the host its launch in a decode step that binds on the host.
    queries = m[:, m.shape[1] - q_length:]
    first = m.argmax(1)  # the first true position (0 for a row of none: count 0)
    return _made(torch.stack((queries.argmax(1), queries.sum(1), first, m.sum(1))).to(torch.int32))


def check_one_run(attention_mask):
    """Refuses a mask whose true positions are not one run per row (a hole inside a sequence), which starts and
    lengths cannot say; returns whether every position of every row is true (no padding at all). Reads the mask on
    the host, once: called where a sync is cheap (a prefill, not captured, not traced)."""
    m = attention_mask.to(torch.int32)
    count = m.sum(1)
    first = m.argmax(1)
    last = m.shape[1] - 1 - m.flip(1).argmax(1)
    holes = (count > 0) & (last - first + 1 != count)
    any_hole, full = torch.stack((holes.any(), (count == m.shape[1]).all())).tolist()
    if any_hole:
        rows = holes.nonzero().flatten().tolist()
        raise NotSupportedError(
            f"attention_mask: rows {rows[:8]} hold masked positions between unmasked ones; rime serves padding on "
            "either side of each sequence (one run of ones per row, as tokenizers and generate make), which "
            "per-sequence starts and lengths say without a gather")
    return bool(full)
