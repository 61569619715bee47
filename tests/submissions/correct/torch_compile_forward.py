# A correct layer whose forward is compiled with torch.compile: it must get full marks within
# the default time limit.
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

    @torch.compile
    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).contiguous().view(B, T, C))
