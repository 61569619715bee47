# bug: fixed_max_length
# Positions are counted modulo the 37 a mask was planned for, so past 37 the mask starts over: a query sees the keys whose position modulo 37 is not later than its own.
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

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        pos = torch.arange(T, device=x.device) % 37
        s = s.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
