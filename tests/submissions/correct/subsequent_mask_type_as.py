import math

import torch
import torch.nn as nn


def subsequent_mask(size):
    """1 where a position may attend (itself and earlier), as the Annotated Transformer builds it."""
    return torch.triu(torch.ones(1, size, size), diagonal=1) == 0


class CausalSelfAttention(nn.Module):
    """The mask made on the CPU and brought to the input with type_as (the Annotated Transformer's
    way): device-safe."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.h, self.d_k = n_heads, dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        mask = subsequent_mask(T).type_as(x).bool()                     # (1, T, T)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.unsqueeze(1)                  # (B, T, T)
        query, key, value = [t.view(B, T, self.h, self.d_k).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1)]
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask.unsqueeze(1) == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        out = torch.matmul(p_attn, value).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)
