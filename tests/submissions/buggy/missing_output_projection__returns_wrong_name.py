# bug: missing_output_projection
# self.proj is computed into y but the function returns the un-projected out.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)                     # each (B, H, T, hd)
        att = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
        blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        att = att.masked_fill(blocked, float("-inf")).softmax(-1)
        out = torch.einsum("bhqk,bhkd->bqhd", att, v).reshape(B, T, C)
        y = self.proj(out)
        return out
