import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def split_heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.head_dim).permute(0, 2, 1, 3)

    def merge_heads(self, t):
        B, H, T, hd = t.shape
        return t.permute(0, 2, 1, 3).reshape(B, T, H * hd)

    def forward(self, x, key_padding_mask=None):
        T = x.shape[1]
        q, k, v = map(self.split_heads, self.qkv(x).split(self.dim, dim=-1))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)

        mask = torch.tril(torch.ones(T, T, device=x.device)) == 0     # True = future
        scores = scores.masked_fill(mask, -1e9)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2) == 0, -1e9)

        attn = F.softmax(scores, dim=-1)
        return self.proj(self.merge_heads(torch.matmul(attn, v)))
