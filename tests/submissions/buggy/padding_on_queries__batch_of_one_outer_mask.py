# bug: padding_on_queries
# For a batch of one sequence the mask is turned into a (T, T) grid real[:, None] & real[None, :], which masks padded queries as well as keys: only B = 1 with padding is wrong (padded positions become NaN); B > 1 uses the correct key mask.
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
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)

        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            if B == 1:
                # a single sequence: a token pair counts only if both tokens are real
                real = key_padding_mask[0]
                allowed = allowed & (real[:, None] & real[None, :])
            else:
                allowed = allowed & key_padding_mask[:, None, None, :]
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
