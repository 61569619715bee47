# bug: fixed_max_length
# An additive mask of 12 positions is written into a T x T mask of -inf whose diagonal is then zeroed: past 12 each position attends only to itself.
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
        self.register_buffer("bias", torch.full((12, 12), float("-inf")).triu(1))

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        n = min(T, self.bias.shape[0])
        bias = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device)
        bias[:n, :n] = self.bias[:n, :n]
        bias.fill_diagonal_(0.0)
        att = (q @ k.transpose(-2, -1)) * hd ** -0.5 + bias
        if key_padding_mask is not None:
            att = att.masked_fill(~key_padding_mask.view(B, 1, 1, T), float("-inf"))
        out = F.softmax(att, dim=-1) @ v
        return self.proj(out.transpose(1, 2).contiguous().view(B, T, C))
