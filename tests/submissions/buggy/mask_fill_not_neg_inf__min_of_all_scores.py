# bug: mask_fill_not_neg_inf
# masked_fill with scores.min(), the smallest score in the whole batch, instead of -inf.
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

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)
        att = q @ k.transpose(-2, -1) * hs ** -0.5
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril().view(1, 1, T, T)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.view(B, 1, 1, T)
        att = att.masked_fill(~mask, att.min().item())
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
