# bug: mask_device_mismatch
# scores.masked_fill_ is given a causal mask made with torch.ones(T, T) and no device=, so the mask is on the CPU while the scores are on the input's device.
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
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)          # no device=x.device
        scores.masked_fill_(future, float("-inf"))
        if key_padding_mask is not None:
            scores.masked_fill_(~key_padding_mask[:, None, None, :], float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
