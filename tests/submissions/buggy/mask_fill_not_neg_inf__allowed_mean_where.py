# bug: mask_fill_not_neg_inf
# Blocked scores are set to the mean of the row's allowed scores (a "neutral" value) instead of -inf, so blocked keys still get an average weight.
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        allowed = torch.tril(torch.ones(T, T, device=x.device)).bool()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        allowed = allowed.expand_as(scores)
        a = allowed.to(scores.dtype)
        mean_allowed = (scores * a).sum(-1, keepdim=True) / a.sum(-1, keepdim=True)
        scores = torch.where(allowed, scores, mean_allowed)
        weights = torch.softmax(scores, dim=-1)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
