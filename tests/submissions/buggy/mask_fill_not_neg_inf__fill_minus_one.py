# bug: mask_fill_not_neg_inf
# Masked scores (future and padding) are set to -1 instead of -inf, so masked keys still get weight exp(-1) relative to a score of 0.
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
        hd = self.dim // self.n_heads
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)

        mask = torch.tril(torch.ones(T, T, device=x.device)).bool()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, -1)  # negative = not attended
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, self.dim)
        return self.proj(y)
