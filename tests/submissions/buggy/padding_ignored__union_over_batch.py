# bug: padding_ignored
# The (B, T) padding mask is reduced over the batch with .any(0) to one (T,) mask, so a key is dropped only where every sequence is padded; a full sequence in the batch disables it for all.
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
        H = self.n_heads
        d = C // H
        q, k, v = self.qkv(x).chunk(3, dim=2)
        q = q.reshape(B, T, H, d)
        k = k.reshape(B, T, H, d)
        v = v.reshape(B, T, H, d)
        s = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.any(dim=0)[None, :]     # (T, T) shared by the batch
        s = s.masked_fill(~keep, float("-inf"))
        a = s.softmax(-1)
        y = torch.einsum("bhts,bshd->bthd", a, v).reshape(B, T, C)
        return self.proj(y)
