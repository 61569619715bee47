# unknown: the padding mask of the first sequence (key_padding_mask[0]) is used for every sequence of the batch, so other sequences mask the wrong keys (shows when B > 1 and the lengths differ)
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        hd = self.dim // self.n_heads
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)

        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[0]       # (T,) broadcasts over the keys
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, self.dim)
        return self.proj(y)
