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
        # (B, T, 3*C) -> (B, T, 3, H, hd) -> (3, B, H, T, hd)
        qkv = self.qkv(x).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)

        scores = q @ k.transpose(-2, -1) * hd ** -0.5       # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is None:
            keep = causal
        else:
            keep = causal[None, None] & key_padding_mask[:, None, None, :].to(torch.bool)
        scores = scores.masked_fill(keep.logical_not(), -math.inf)
        probs = scores.softmax(dim=-1)

        out = probs @ v                                      # (B, H, T, hd)
        out = out.permute(0, 2, 1, 3).reshape(B, T, C)
        return self.proj(out)
