# bug: wrong_head_merge
# The heads are joined with permute(2, 0, 1, 3), i.e. (T, B, H, hd), before reshaping to (B, T, dim), which mixes positions of different sequences: right for B = 1, wrong for B > 1.
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
        q = q.view(B, T, H, C // H).permute(0, 2, 1, 3)
        k = k.view(B, T, H, C // H).permute(0, 2, 1, 3)
        v = v.view(B, T, H, C // H).permute(0, 2, 1, 3)

        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            causal = causal & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)     # (B, H, T, hd)
        y = y.permute(2, 0, 1, 3).reshape(B, T, C)
        return self.proj(y)
