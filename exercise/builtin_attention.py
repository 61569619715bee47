"""PyTorch's own attention, the parts an attention exercise refuses in the student's process
(sandbox.audit makes each refuse in place, and its source unreadable there). One list for every
attention exercise, so each gets every route that one of them found; an exercise adds what it
forbids besides (the single-head exercise: SDPA, which the multi-head one allows).
"""
from __future__ import annotations

# nn.MultiheadAttention and what implements it: the functional, its projection helpers, the fused
# native operators of its fast path and of the transformer layers, the transformer layers, and
# torch.ao's pure-Python copies (quantizable, quantized); flex_attention's public module.
MULTI_HEAD = (
    "torch.nn.functional.multi_head_attention_forward", "torch.nn.functional._in_projection_packed",
    "torch.nn.functional._in_projection",
    "torch.nn.MultiheadAttention", "torch.ao.nn.quantizable.MultiheadAttention",
    "torch.ao.nn.quantized.MultiheadAttention",
    "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerDecoderLayer", "torch.nn.TransformerEncoder",
    "torch.nn.TransformerDecoder", "torch.nn.Transformer",
    "torch._native_multi_head_attention", "torch._transformer_encoder_layer_fwd",
    "torch.nn.attention.flex_attention",
)

# scaled dot-product attention, every route to it: the functional, its CPU kernels called directly,
# the Python decomposition of the flash kernel, and flex attention's own implementation.
SCALED_DOT_PRODUCT = (
    "torch.nn.functional.scaled_dot_product_attention", "torch._scaled_dot_product_flash_attention_for_cpu",
    "torch._scaled_dot_product_attention_math", "torch._scaled_dot_product_flash_attention",
    "torch._decomp.decompositions.scaled_dot_product_flash_attention_for_cpu",
    "torch._higher_order_ops.flex_attention",
)
