# bug: padding_inverted
# A float padding bias of -1e4 is built where the mask is True (the real tokens) instead of where it is False, and added to the scores.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        d = C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.reshape(B, T, self.heads, d).permute(0, 2, 1, 3)
        k = k.reshape(B, T, self.heads, d).permute(0, 2, 1, 3)
        v = v.reshape(B, T, self.heads, d).permute(0, 2, 1, 3)
        bias = torch.zeros(T, T, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        bias = bias[None, None]
        if key_padding_mask is not None:
            pad_bias = torch.where(key_padding_mask, -1e4, 0.0).to(x.dtype)    # True is a real token
            bias = bias + pad_bias[:, None, None, :]
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d) + bias, dim=-1)
        return self.proj((w @ v).permute(0, 2, 1, 3).reshape(B, T, C))
