import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """Written the way generation works: one query position at a time, against the keys so far."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q = q.view(B, T, self.n_heads, self.head_dim)
        k = k.view(B, T, self.n_heads, self.head_dim)
        v = v.view(B, T, self.n_heads, self.head_dim)

        outputs = []
        for t in range(T):
            # keys 0..t only: the causal mask is the slice itself
            past_k = k[:, : t + 1]                                   # (B, t+1, H, hd)
            past_v = v[:, : t + 1]
            scores = torch.einsum("bhd,bshd->bhs", q[:, t], past_k) / math.sqrt(self.head_dim)
            if key_padding_mask is not None:
                real = key_padding_mask[:, None, : t + 1]            # (B, 1, t+1)
                scores = scores.masked_fill(~real, float("-inf"))
            weights = F.softmax(scores, dim=-1)                      # (B, H, t+1)
            outputs.append(torch.einsum("bhs,bshd->bhd", weights, past_v).reshape(B, self.dim))
        return self.proj(torch.stack(outputs, dim=1))
