# bug: nondeterministic_dropout
# In training mode whole output rows of each head (one position of one head) are dropped with p = 0.05 by nn.Dropout2d-style masking, the rest rescaled.
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
        self.p = 0.05

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)    # (B, H, T, hd)
        if self.training:
            rows = torch.bernoulli(torch.full((B, self.n_heads, T, 1), 1 - self.p, dtype=y.dtype, device=y.device))
            y = y * rows / (1 - self.p)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
