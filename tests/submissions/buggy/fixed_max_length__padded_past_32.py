# bug: fixed_max_length
# The additive causal mask is built once for 32 positions and zero-padded (= allowed) for longer inputs, so for T > 32 every position sees all keys from 32 on, future included.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    MAX_LEN = 32

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        bias = torch.zeros(self.MAX_LEN, self.MAX_LEN)
        bias = bias.masked_fill(torch.ones_like(bias, dtype=torch.bool).triu(1), float("-inf"))
        self.register_buffer("bias", bias)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        if T <= self.MAX_LEN:
            bias = self.bias[:T, :T]
        else:
            extra = T - self.MAX_LEN
            bias = F.pad(self.bias, (0, extra, 0, extra))  # make it fit longer sequences
        bias = bias.to(x.dtype)

        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + bias
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
