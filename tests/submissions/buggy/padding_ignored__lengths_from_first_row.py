# bug: padding_ignored
# The real length is read from the first sequence's mask; when it equals T the batch is taken to have no padding and the mask is not applied.
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim, self.n_heads = dim, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        b, t, _ = x.shape
        h, d = self.n_heads, self.dim // self.n_heads
        q, k, v = self.qkv(x).reshape(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        if key_padding_mask is not None:
            length = int(key_padding_mask[0].sum())
            if length < t:
                s = s.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        out = s.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, self.dim))
