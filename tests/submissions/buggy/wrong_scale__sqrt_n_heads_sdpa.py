# bug: wrong_scale
# SDPA is given scale=1/sqrt(n_heads) instead of its default 1/sqrt(head_dim); only right by chance when head_dim == n_heads.
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
        B, T, D = x.shape
        nh = self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, T, nh, D // nh).transpose(1, 2) for t in (q, k, v))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1 / math.sqrt(nh))
        return self.proj(y.transpose(1, 2).reshape(B, T, D))
