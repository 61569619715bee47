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
        B, T, _ = x.shape
        hd = self.dim // self.n_heads
        q, k, v = [
            t.reshape(B, T, self.n_heads, hd).transpose(1, 2)
            for t in self.qkv(x).split(self.dim, dim=-1)
        ]
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(hd))

        rows = torch.arange(T, device=x.device).view(T, 1)
        cols = torch.arange(T, device=x.device).view(1, T)
        ok = (cols <= rows).view(1, 1, T, T)
        if key_padding_mask is not None:
            ok = torch.logical_and(ok, key_padding_mask.view(B, 1, 1, T))

        minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
        scores = torch.where(ok, scores, minus_inf)
        probs = scores.softmax(-1)
        out = torch.matmul(probs, v)
        out = out.transpose(1, 2).reshape(B, T, self.dim)
        return self.proj(out)
