# bug: fixed_max_length
# A 24x24 causal mask is tiled (repeat) to cover longer inputs, which repeats the triangle in every block: later blocks let a query see keys ahead of it.
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
        self.register_buffer("tri", torch.ones(24, 24).tril())

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        reps = -(-T // 24)
        tri = self.tri.repeat(reps, reps)[:T, :T]
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(hd)
        s = s.masked_fill(tri == 0, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
