# bug: mask_fill_not_neg_inf
# Blocked scores are replaced with torch.where by the row's amin (the smallest score of the row) instead of -inf, so future and padding keys keep a data-dependent weight.
import math

import torch
import torch.nn as nn


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
        q, k, v = (t.unflatten(-1, (self.n_heads, hd)).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        floor = s.amin(dim=-1, keepdim=True)
        s = torch.where(allowed, s, floor)
        out = torch.softmax(s, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
