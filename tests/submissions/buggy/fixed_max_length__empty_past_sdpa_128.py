# bug: fixed_max_length
# SDPA gets a 128x128 mask padded with False past its size, so every position from 128 on is left with no key.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("tril", torch.tril(torch.ones(128, 128, dtype=torch.bool)))

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        extra = max(0, T - 128)
        mask = F.pad(self.tril, (0, extra, 0, extra))[:T, :T][None, None]
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
