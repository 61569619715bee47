import torch
import torch.nn as nn
import math


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.head_dim = dim // n_heads
        self.n_heads = n_heads

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd, H = self.head_dim, self.n_heads
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is None:
            keep = causal
        else:
            keep = causal[None, None] & key_padding_mask[:, None, None, :].to(torch.bool)
        q, k, v = self.qkv(x).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)
        probs = (q @ k.mT * hd ** -0.5).masked_fill(keep.logical_not(), -math.inf).softmax(dim=-1)
        return self.proj((probs @ v).permute(0, 2, 1, 3).reshape(B, T, C))
