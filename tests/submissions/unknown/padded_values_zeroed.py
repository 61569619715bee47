# unknown: instead of masking the padding keys, the padded values are zeroed (v * mask), so padding keys still take softmax weight away from the real ones at padded query positions (real positions are right)
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        if key_padding_mask is not None:
            v = v * key_padding_mask[:, :, None].to(v.dtype)   # padding contributes nothing
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
