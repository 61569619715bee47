# bug: fixed_max_length
# The mask is looked up in a 100x100 buffer at positions clamped to its size: past 100 all positions share the last row and column, so queries from 99 on see the whole sequence.
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
        self.register_buffer("causal", torch.ones(100, 100, dtype=torch.bool).tril())

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        idx = torch.arange(T, device=x.device).clamp(max=self.causal.shape[0] - 1)
        allowed = self.causal[idx][:, idx]
        s = s.masked_fill(~allowed, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
