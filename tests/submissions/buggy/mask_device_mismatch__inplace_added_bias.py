# bug: mask_device_mismatch
# A -inf bias from torch.full((T, T), -inf) with no device= is added in place to the scores, so it stays on the CPU.
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
        att = q @ k.transpose(-1, -2) / math.sqrt(d)
        att += torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)
        if key_padding_mask is not None:
            att = att.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, self.dim))
