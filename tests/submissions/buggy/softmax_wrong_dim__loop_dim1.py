# bug: softmax_wrong_dim
# In the (B, T, T) per-head scores F.softmax(att, dim=1) normalises over queries instead of keys.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        Q, K, V = self.qkv(x).split(self.dim, dim=2)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)

        outputs = []
        for h in range(self.n_heads):
            lo, hi = h * self.head_dim, (h + 1) * self.head_dim
            q, k, v = Q[:, :, lo:hi], K[:, :, lo:hi], V[:, :, lo:hi]  # (B, T, hd)
            att = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)  # (B, T, T)
            att = att.masked_fill(future, float("-inf"))
            if key_padding_mask is not None:
                att = att.masked_fill(~key_padding_mask[:, None, :], float("-inf"))
            att = F.softmax(att, dim=1)
            outputs.append(att @ v)
        return self.proj(torch.cat(outputs, dim=-1))
