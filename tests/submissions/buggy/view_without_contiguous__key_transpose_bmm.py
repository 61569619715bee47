# bug: view_without_contiguous
# The transposed keys are folded to (B*H, hd, T) with .view for torch.bmm, which the transposed tensor's strides do not allow: it raises whenever n_heads > 1 and B > 1, and runs (correctly) for n_heads = 1 or B = 1.
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
        q = q.reshape(B, T, H, hd).transpose(1, 2).reshape(B * H, T, hd)
        v = v.reshape(B, T, H, hd).transpose(1, 2).reshape(B * H, T, hd)
        k_t = k.view(B, T, H, hd).transpose(1, 2).transpose(2, 3).view(B * H, hd, T)

        scores = torch.bmm(q, k_t) / math.sqrt(hd)                      # (B*H, T, T)
        scores = scores.view(B, H, T, T)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~allowed, float("-inf")).view(B * H, T, T)
        out = torch.bmm(scores.softmax(dim=-1), v)                       # (B*H, T, hd)
        out = out.reshape(B, H, T, hd).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
