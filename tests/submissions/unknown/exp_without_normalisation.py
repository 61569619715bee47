# unknown: the weights are exp(scores) with the masked scores at -inf, but they are never divided by their sum, so the rows of attention weights do not add up to 1
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, d).transpose(1, 2)
        k = k.view(B, T, H, d).transpose(1, 2)
        v = v.view(B, T, H, d).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        weights = torch.exp(scores.masked_fill(~keep, float("-inf")))
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
