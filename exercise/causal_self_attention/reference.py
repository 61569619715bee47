"""The reference: `nn.MultiheadAttention` with the student's layer layout, always in float64.

Facts it relies on (measured with torch 2.13, see the project's research notes):
- `in_proj_weight` rows [0:dim], [dim:2dim], [2dim:3dim] are Wq, Wk, Wv, so it *is* `qkv.weight`;
  head h uses columns h*hd:(h+1)*hd of q, k and v, exactly as the exercise says.
- MHA's boolean `attn_mask` and `key_padding_mask` mean True = NOT allowed, the opposite of the
  exercise's mask (True = real token).
- It runs `F.multi_head_attention_forward`, the function `nn.MultiheadAttention.forward` calls, on
  (T, B, dim) inputs (the module's default layout), without building a module for every call.
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

PARAM_NAMES = ("qkv.weight", "qkv.bias", "proj.weight", "proj.bias")


def random_weights(dim: int, *, seed: int, dtype: torch.dtype = torch.float64) -> dict[str, torch.Tensor]:
    """Weights drawn like nn.Linear's default init, reproducible from the seed."""
    g = torch.Generator().manual_seed(seed)
    bound = 1 / math.sqrt(dim)

    def uniform(*shape):
        return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound).to(dtype)

    return {"qkv.weight": uniform(3 * dim, dim), "qkv.bias": uniform(3 * dim),
            "proj.weight": uniform(dim, dim), "proj.bias": uniform(dim)}


def attention(weights: dict[str, torch.Tensor], n_heads: int, x: torch.Tensor,
              key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The correct output for input x (B, T, dim), in float64; padded query positions included."""
    B, T = x.shape[:2]
    x = x.double().transpose(0, 1)                                                # (T, B, dim)
    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)                          # (T, T) True = future
    if key_padding_mask is not None:  # merged as MHA merges it; its own key_padding_mask check imports sympy
        ignore = ~key_padding_mask.bool()                                         # (B, T) True = padding
        blocked = (blocked[None] | ignore[:, None, :]).repeat_interleave(n_heads, 0)  # (B * heads, T, T)
    with torch.no_grad():  # nn.MultiheadAttention's own computation, without building a module per call
        out, _ = F.multi_head_attention_forward(
            x, x, x, x.shape[-1], n_heads, weights["qkv.weight"], weights["qkv.bias"], None, None, False, 0.0,
            weights["proj.weight"], weights["proj.bias"], training=False, need_weights=False, attn_mask=blocked)
    return out.transpose(0, 1)                                                    # (B, T, dim)


def right_padding(lengths: list[int], T: int) -> torch.Tensor:
    """The exercise's mask for sequences of these real lengths: (B, T), True = real token."""
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
