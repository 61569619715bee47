# bug: wrong_head_split
# q, k and v are transposed to (B, dim, T) and then reshaped to (B*H, T, hd), so each "head" gets a scrambled block of features and positions instead of columns h*hd..(h+1)*hd of every position (right only when head_dim == 1).
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

        def fold(t):  # (B, T, C) -> (B*H, T, hd)
            return t.transpose(1, 2).reshape(B * H, T, hd)

        q, k, v = (fold(t) for t in self.qkv(x).split(C, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(hd)
        blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)[None]
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask.repeat_interleave(H, dim=0)[:, None, :]
        weights = scores.masked_fill(blocked, float("-inf")).softmax(dim=-1)
        out = torch.bmm(weights, v).view(B, H, T, hd).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
