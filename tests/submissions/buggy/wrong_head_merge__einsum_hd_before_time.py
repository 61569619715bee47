# bug: wrong_head_merge
# The einsum that applies the weights writes its output as (B, head_dim, T, n_heads) and it is reshaped straight to (B, T, dim).
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim, self.n_heads = dim, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, _ = x.shape
        h, d = self.n_heads, self.dim // self.n_heads
        q, k, v = self.qkv(x).reshape(b, t, 3, h, d).unbind(dim=2)       # (b, t, h, d) each
        s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d)
        allowed = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        w = torch.where(allowed, s, torch.full_like(s, float("-inf"))).softmax(-1)
        out = torch.einsum("bhij,bjhd->bdih", w, v)                       # (b, d, t, h)
        return self.proj(out.reshape(b, t, self.dim))
