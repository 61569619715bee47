# bug: nondeterministic_dropout
# nn.Dropout2d(0.1) on the (B, H, T, T) weights drops whole attention maps per (sequence, head) in training mode (DropHead), rescaling the rest by 1/0.9.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.head_drop = nn.Dropout2d(p=0.1)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            keep = keep & key_padding_mask[:, None, None, :]
        att = att.masked_fill(~keep, float("-inf"))
        att = self.head_drop(att.softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
