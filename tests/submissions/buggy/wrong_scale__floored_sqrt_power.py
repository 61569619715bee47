# bug: wrong_scale
# The scale is computed as head_dim ** 0.5 // 1, which floors the square root (2.0 for head_dim 6 or 8): exact only when head_dim is a perfect square.
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.denom = self.head_dim ** 0.5 // 1

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / self.denom
        ok = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        att = torch.where(ok, att, torch.full_like(att, float("-inf")))
        out = att.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
