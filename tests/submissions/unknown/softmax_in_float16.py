# unknown: the softmax is computed in float16 (to save memory) and cast back, so the attention weights carry float16 rounding errors of about 1e-3 in every dtype; the graph stays intact
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
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = scores.half().softmax(dim=-1).to(v.dtype)   # half precision is enough for weights
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
