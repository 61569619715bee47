# bug: mask_fill_not_neg_inf
# The causal part is a -inf bias, but the padding mask is added as a 0/1 float (True = 1) instead of a 0/-inf bias, so padding keys are barely held back.
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
        q, k, v = self.qkv(x).split(C, -1)
        q, k, v = [t.reshape(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v)]
        bias = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)[None, None]
        if key_padding_mask is not None:
            bias = bias + key_padding_mask.to(x.dtype)[:, None, None, :]
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(hd) + bias, dim=-1)
        return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
