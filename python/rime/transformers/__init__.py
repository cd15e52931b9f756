"""rime as an attention backend of Hugging Face transformers (5.x): `attn_implementation="rime"`.

    import rime.transformers
    rime.transformers.register()                       # once: the backend "rime" in both of transformers' registries
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16, attn_implementation="rime").cuda()
    rime.transformers.warmup(model, batch_sizes=[1, 8], prompt_lengths=[512], max_new_tokens=256)
    out = model.generate(**tokenizer(prompts, return_tensors="pt", padding=True).to("cuda"), max_new_tokens=256)

Every layer's attention runs as torch.ops.rime.attention_out over the tensors transformers hands it (K and V as the
cache holds them: not repeated to the query heads, not copied). Padding on either side of each sequence, a
StaticCache's unused tail and a sliding-window layer's cache reach the operator as per-sequence starts and lengths
that rime's mask function computes on the device once per forward (no gather, no host sync). What rime does not
serve (FP32 activations, dropout, autograd, attention weights, a head dim or feature no capability row serves) is
refused with NotSupportedError naming the layer and its config fields, never run on another kernel.
docs/transformers.md is the guide. Importing this module needs transformers; `import rime` and `import rime.torch`
do not.
"""
from transformers import AttentionInterface  # ImportError here: this module needs transformers
from transformers.masking_utils import AttentionMaskInterface

from ._attention import attention, mask
from ._warmup import calls, check, warmup

NAME = "rime"

__all__ = ["register", "warmup", "check", "calls", "attention", "mask", "NAME"]


def register():
    """Puts rime's attention function and mask function into transformers' AttentionInterface and
    AttentionMaskInterface under "rime" (no "flash" in the name: transformers routes those into FlashAttention's own
    code). Idempotent. Then from_pretrained / from_config(..., attn_implementation="rime") and
    model.set_attn_implementation("rime") select it."""
    AttentionInterface.register(NAME, attention)
    AttentionMaskInterface.register(NAME, mask)
