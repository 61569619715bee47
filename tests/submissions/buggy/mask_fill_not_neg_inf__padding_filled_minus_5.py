# bug: mask_fill_not_neg_inf
# The causal mask is applied with torch.where and -inf, the padding with masked_fill(-5.0): padding keys keep some weight.
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
        h = self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3 * h, C // h).transpose(1, 2).split(h, dim=1)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // h)
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask.view(B, 1, 1, T), -5.0)
        lower = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        s = torch.where(lower, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
        y = torch.matmul(s.softmax(-1), v)
        return self.proj(y.transpose(1, 2).flatten(2))
