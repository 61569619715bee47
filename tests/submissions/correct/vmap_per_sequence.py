import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import vmap


class CausalSelfAttention(nn.Module):
    """Attention written for one sequence (T, dim), batched with torch.func.vmap."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def one_sequence(self, x, real):
        T = x.shape[0]
        hd = self.dim // self.n_heads
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q, k, v = (t.view(T, self.n_heads, hd).transpose(0, 1) for t in (q, k, v))   # (H, T, hd)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril() & real[None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v                                             # (H, T, hd)
        return self.proj(out.transpose(0, 1).reshape(T, self.dim))

    def forward(self, x, key_padding_mask=None):
        if key_padding_mask is None:
            key_padding_mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        return vmap(self.one_sequence)(x, key_padding_mask)
