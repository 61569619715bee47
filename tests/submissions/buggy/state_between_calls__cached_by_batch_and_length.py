# bug: state_between_calls
"""Causal multi-head self-attention, with a mistake: the combined mask cached by the batch size and length.

A reference answer for the exercise: one fused q/k/v projection, a causal mask
combined with an optional key padding mask, and an output projection.
"""
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"dim ({dim}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        # One matmul computes q, k and v for every head; the output splits as [q | k | v].
        self.qkv = nn.Linear(dim, 3 * dim)
        # Mixes the concatenated head outputs back into the model dimension.
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        """x: (B, T, dim). key_padding_mask: optional (B, T) bool, True = real token."""
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim

        q, k, v = self.qkv(x).split(C, dim=-1)            # 3 x (B, T, C)
        # Head h owns columns h*hd:(h+1)*hd, so split the last axis into (H, hd)
        # and then move the head axis in front of time.
        q = q.view(B, T, H, hd).transpose(1, 2)           # (B, H, T, hd)
        k = k.view(B, T, H, hd).transpose(1, 2)           # (B, H, T, hd)
        v = v.view(B, T, H, hd).transpose(1, 2)           # (B, H, T, hd)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)  # (B, H, T, T)

        # allowed[t, s] is True when query t may look at key s: only s <= t.
        key = (B, T)
        cache = self.__dict__.setdefault("mask_cache", {})
        if key not in cache:
            causal = torch.tril(torch.ones(T, T, device=x.device)).bool()
            cache[key] = causal if key_padding_mask is None else causal & key_padding_mask.view(B, 1, 1, T)
        allowed = cache[key]

        # Mask BEFORE the softmax with -inf, so masked keys get exactly zero weight
        # and each row still sums to one.
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.softmax(dim=-1)                  # (B, H, T, T)

        out = weights @ v                                 # (B, H, T, hd)
        # Undo the head split: back to (B, T, H, hd), then join the heads.
        # reshape (not view) because the transpose made the tensor non-contiguous.
        out = out.transpose(1, 2).reshape(B, T, C)        # (B, T, C)
        return self.proj(out)
