import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        nb, nt, _ = x.shape
        size = self.dim // self.n_heads
        a, b, c = self.qkv(x).split(self.dim, dim=-1)
        a = a.reshape(nb, nt, self.n_heads, size).transpose(1, 2)
        b = b.reshape(nb, nt, self.n_heads, size).transpose(1, 2)
        c = c.reshape(nb, nt, self.n_heads, size).transpose(1, 2)
        s = torch.matmul(a, b.transpose(2, 3)) / math.sqrt(size)

        r = torch.arange(nt, device=x.device).view(nt, 1)
        col = torch.arange(nt, device=x.device).view(1, nt)
        allowed = (col <= r).view(1, 1, nt, nt)
        if key_padding_mask is not None:
            allowed = torch.logical_and(allowed, key_padding_mask.view(nb, 1, 1, nt))

        neg = torch.tensor(-math.inf, dtype=s.dtype, device=s.device)
        s = torch.where(allowed, s, neg)
        o = torch.matmul(s.softmax(-1), c)
        o = o.transpose(1, 2).reshape(nb, nt, self.dim)
        return self.proj(o)
