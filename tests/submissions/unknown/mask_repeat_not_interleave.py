# unknown: in the (B*H, T, T) layout the padding mask is tiled with repeat(H, 1) (batch-major) while the scores are ordered head-within-batch, so sequences get each other's masks: wrong only when B > 1, n_heads > 1 and the lengths differ (real positions too)
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
        q, k, v = (t.reshape(B, T, H, hd).transpose(1, 2).reshape(B * H, T, hd)
                   for t in self.qkv(x).split(C, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(hd)        # (B*H, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril().expand(B * H, T, T)
        if key_padding_mask is not None:
            keys = key_padding_mask.repeat(H, 1)                       # (B*H, T)
            allowed = allowed & keys[:, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        out = torch.bmm(weights, v).reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
