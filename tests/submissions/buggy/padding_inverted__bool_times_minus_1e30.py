# bug: padding_inverted
# The boolean keep-mask times -1e30 is added to the scores, so the penalty lands on the real keys and only the padding keeps its scores.
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
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, hs).permute(2, 0, 3, 1, 4)   # (3, B, H, T, hs)
        scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(hs))
        future = torch.triu(torch.ones(T, T, device=x.device), 1).bool()
        scores = scores.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            scores = scores + key_padding_mask[:, None, None, :] * -1e30
        y = F.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
