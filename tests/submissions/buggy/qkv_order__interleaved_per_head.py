# bug: qkv_order
# qkv is read as (B, T, n_heads, 3, head_dim), i.e. q, k and v interleaved per head, but nn.Linear's output is q, then k, then v as blocks of dim columns. With n_heads = 1 the two layouts coincide, so only n_heads > 1 is wrong.
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
        H, hd = self.n_heads, self.head_dim
        qkv = self.qkv(x).view(B, T, H, 3, hd).permute(3, 0, 2, 1, 4)   # (3, B, H, T, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        att = torch.softmax(att.masked_fill(~allowed, float("-inf")), dim=-1)
        out = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
