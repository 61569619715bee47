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
        H = self.n_heads
        hd = self.dim // H
        q, k, v = self.qkv(x).split(self.dim, dim=-1)
        q = q.reshape(B, T, H, hd).transpose(1, 2)
        k = k.reshape(B, T, H, hd).transpose(1, 2)
        v = v.reshape(B, T, H, hd).transpose(1, 2)

        mask = torch.ones(B, 1, T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.reshape(B, 1, 1, T)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        # a row with no key left would be NaN: give it zero weight instead
        has_key = mask.any(dim=-1, keepdim=True)
        probs = torch.where(has_key, probs, torch.zeros_like(probs))
        out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, self.dim)
        return self.proj(out)
