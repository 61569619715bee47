# bug: fixed_max_length
# An additive -inf mask is precomputed for 32 positions and sliced [:T, :T], so adding it to the scores fails for T > 32.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, context=32):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("causal_bias", torch.full((context, context), float("-inf")).triu(1))

    def forward(self, x, key_padding_mask=None):
        b, t, c = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.reshape(b, t, h, c // h).permute(0, 2, 1, 3)
        k = k.reshape(b, t, h, c // h).permute(0, 2, 1, 3)
        v = v.reshape(b, t, h, c // h).permute(0, 2, 1, 3)

        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(c // h)
        scores = scores + self.causal_bias[:t, :t].to(scores.dtype)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(b, t, c)
        return self.proj(out)
