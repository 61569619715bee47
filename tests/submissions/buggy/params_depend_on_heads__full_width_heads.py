# bug: params_depend_on_heads
# Every head gets queries, keys and values of the full width dim (qkv is nn.Linear(dim, 3 * n_heads * dim), proj nn.Linear(n_heads * dim, dim)), so the parameter count grows with n_heads.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        # each head attends in the full model dimension
        self.qkv = nn.Linear(dim, 3 * n_heads * dim)
        self.proj = nn.Linear(n_heads * dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(H * C, dim=-1)
        q = q.view(B, T, H, C).transpose(1, 2)
        k = k.view(B, T, H, C).transpose(1, 2)
        v = v.view(B, T, H, C).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(C)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * C)
        return self.proj(y)
