# bug: no_causal_mask
# The causal masked_fill's result is never assigned (masked_fill is not in place), so no causal mask is applied; the padding masked_fill is assigned and works.
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
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)

        scores = q @ k.transpose(-2, -1) * (C // H) ** -0.5
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        scores.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        weights = F.softmax(scores, dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
