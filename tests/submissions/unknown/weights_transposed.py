# unknown: the attention matrix is transposed before it multiplies v (weights.transpose(-2, -1) @ v), so position t collects from the queries that attend to it, later ones included
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        attn = q @ k.transpose(-2, -1) / math.sqrt(hd)                  # (B, H, T_q, T_k)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        attn = attn.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        out = attn.transpose(-2, -1) @ v                                # "keys x values"
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
