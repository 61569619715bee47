# bug: padding_inverted
# The padding bias is key_padding_mask * -65504 (float16's most negative number): it lands on the real tokens instead of the padding, and in float32 it also rounds their scores.
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
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(hd)
        s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        if key_padding_mask is not None:
            s = s + key_padding_mask[:, None, None, :].to(s.dtype) * torch.finfo(torch.float16).min
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
