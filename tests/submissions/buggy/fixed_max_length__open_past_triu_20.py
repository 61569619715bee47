# bug: fixed_max_length
# The future is marked in a 20x20 triu(1) buffer, padded with False (not future) for longer inputs: every key from 20 on is seen by every query.
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
        future = torch.ones(20, 20, dtype=torch.bool).triu(1)
        self.register_buffer("future", future)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        pad = max(T - 20, 0)
        future = F.pad(self.future, (0, pad, 0, pad))[:T, :T]
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
        s = s.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
