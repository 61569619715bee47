# bug: padding_ignored
# Padding is looked for in the last sequence only (sorted batches were assumed to be longest-first), so the mask is dropped whenever the last sequence is full.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        d = C // self.heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.heads, d).transpose(1, 2)
        k = k.view(B, T, self.heads, d).transpose(1, 2)
        v = v.view(B, T, self.heads, d).transpose(1, 2)
        padded = key_padding_mask is not None and int(key_padding_mask[-1].sum()) < T
        if padded:
            keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril() & key_padding_mask[:, None, None, :]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
