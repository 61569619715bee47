# unknown: the scores are q @ q^T (a typo for q @ k^T), so the keys part of qkv is never used
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        H = self.n_heads
        hd = self.dim // H
        q, k, v = self.qkv(x).split(self.dim, dim=2)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(torch.tril(torch.ones(T, T, device=x.device)) == 0, float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(~key_padding_mask.view(B, 1, 1, T), float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.dim)
        return self.proj(y)
