# bug: fixed_max_length
# A 200x200 boolean causal mask is padded with True to fit longer inputs, so past 200 every query sees every key from 200 on.
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
        self.register_buffer("keep", torch.ones(200, 200, dtype=torch.bool).tril())

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if T > self.keep.shape[0]:
            extra = T - self.keep.shape[0]
            keep = F.pad(self.keep, (0, extra, 0, extra), value=True)
        else:
            keep = self.keep[:T, :T]
        s = s.masked_fill(~keep, float("-inf"))
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
