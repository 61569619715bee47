# unknown: a hand-written softmax divides by e.sum(-1) without keepdim=True, so in the per-head (B, T, T) loop each column is divided by another row's sum; it runs silently only when B == 1 (or B == T) and raises for other batch sizes
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        Q, K, V = self.qkv(x).split(self.dim, dim=2)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None]   # (1, T, T)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, :]                         # (B, T, T)
        heads = []
        for h in range(self.n_heads):
            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)
            s = Q[:, :, cols] @ K[:, :, cols].transpose(1, 2) / math.sqrt(self.head_dim)
            s = s.masked_fill(~allowed, float("-inf"))
            e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
            p = e / e.sum(dim=-1)
            heads.append(p @ V[:, :, cols])
        return self.proj(torch.cat(heads, dim=-1))
