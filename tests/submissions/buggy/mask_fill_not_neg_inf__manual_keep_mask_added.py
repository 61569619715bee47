# bug: mask_fill_not_neg_inf
# The 0/1 keep-mask is added to the scores (as an additive mask would be) instead of selecting keys, so blocked keys keep almost all their weight.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        mask = torch.ones(T, T, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            mask = mask * key_padding_mask[:, None, None, :].to(mask.dtype)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) + mask.to(x.dtype)
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
